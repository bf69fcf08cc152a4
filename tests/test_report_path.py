"""`report-path` resolves on the host: the runner emulated with a host ↔ container path mapping.

A Docker action sees the job's workspace at `/github/workspace` (a bind mount of the host's
GITHUB_WORKSPACE) and its own RUNNER_TEMP at `/github/runner_temp`; nothing of the container is left
when the step ends. Here the container's view is a directory whose `github/workspace` is a symlink
to the host workspace; it is deleted after the step, and a later "host step" must still open the
path the Action put in its outputs, from the host workspace as its working directory.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from reviewer.schema import load_report_schema
from tests.conftest import ROOT, cli_env
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.runner_files import runner_outputs
from tests.test_action_e2e import BASE, DEBUG_PATCH, HEAD, REPO, TOKEN, action_defaults, event_payload


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_token(TOKEN, login=None)
        for number in (7, 8):
            server.add_pull(
                REPO, number, head_sha=HEAD, base_sha=BASE, files=[diff_entry("app.py", DEBUG_PATCH)]
            )
        yield server


def run_in_container(
    tmp: Path, gh: FakeGitHub, event: str, payload: dict, *, stdout: list[str] | None = None, **inputs: str
) -> dict[str, str]:
    host_workspace = tmp / "host" / "work" / "widgets" / "widgets"
    host_workspace.mkdir(parents=True, exist_ok=True)
    container = tmp / "container"
    (container / "github").mkdir(parents=True)
    workspace = container / "github" / "workspace"
    workspace.symlink_to(host_workspace, target_is_directory=True)
    runner_temp = container / "github" / "runner_temp"
    runner_temp.mkdir()
    files = tmp / "file_commands"
    files.mkdir(exist_ok=True)
    (files / "event.json").write_text(json.dumps(payload), encoding="utf-8")
    values = {**action_defaults(), "github-token": TOKEN, **inputs}
    env = cli_env(
        tmp,
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(files / "event.json"),
            "GITHUB_STEP_SUMMARY": str(files / "summary.md"),
            "GITHUB_OUTPUT": str(files / "output"),
            "GITHUB_API_URL": gh.url,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_WORKSPACE": str(workspace),
            "RUNNER_TEMP": str(runner_temp),
            **{f"INPUT_{name.upper()}": value for name, value in values.items()},
        },
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    if stdout is not None:
        stdout.append(proc.stdout)
    shutil.rmtree(container)  # the container is gone; only the host workspace remains
    return runner_outputs((files / "output").read_text(encoding="utf-8"))


def host_step_reads(tmp: Path, path: str) -> str:
    """A later `run:` step on the host: its working directory is the host workspace."""
    host_workspace = tmp / "host" / "work" / "widgets" / "widgets"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; print(open(sys.argv[1], encoding='utf-8').read())", path],
        cwd=host_workspace,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"a later step cannot open {path!r}: {proc.stderr}"
    return proc.stdout


def test_report_path_opens_in_a_later_step_on_the_host(tmp_path: Path, gh: FakeGitHub) -> None:
    outputs = run_in_container(tmp_path, gh, "pull_request", event_payload("pull_request.opened"))
    path = outputs["report-path"]
    assert not Path(path).is_absolute(), "a container path means nothing on the host"
    report = json.loads(host_step_reads(tmp_path, path))
    jsonschema.Draft202012Validator(load_report_schema()).validate(report)
    assert report["snapshot"]["number"] == 7 and report["verdict"] == "findings"
    written = tmp_path / "host" / "work" / "widgets" / "widgets" / path
    assert written.stat().st_mode & 0o666 == 0o666, "the runner user (not root) can read and remove it"


def test_the_index_of_several_reports_resolves_on_the_host_too(tmp_path: Path, gh: FakeGitHub) -> None:
    outputs = run_in_container(
        tmp_path, gh, "workflow_dispatch", event_payload("workflow_dispatch"), **{"pr-number": "7 8"}
    )
    index = json.loads(host_step_reads(tmp_path, outputs["report-path"]))
    numbers = [
        json.loads(host_step_reads(tmp_path, e["report_path"]))["snapshot"]["number"]
        for e in index["reports"]
    ]
    assert numbers == [7, 8]


def test_in_actions_each_stage_is_a_log_group_with_its_time(tmp_path: Path, gh: FakeGitHub) -> None:
    logs: list[str] = []
    run_in_container(tmp_path, gh, "pull_request", event_payload("pull_request.opened"), stdout=logs)
    lines = logs[0].splitlines()
    opened = [line for line in lines if line.startswith("::group::")]
    assert [g.removeprefix("::group::imreview: ") for g in opened][:2] == ["deterministic checks", "plan"]
    assert len(opened) == lines.count("::endgroup::"), "every group is closed"
    for i, line in enumerate(lines):
        if line == "::endgroup::":
            assert re.fullmatch(r"imreview: .+ took \d+\.\d s", lines[i - 1]), lines[i - 1]


@pytest.mark.parametrize("planted", ["directory", "file"])
def test_a_symlink_the_pr_checked_out_is_not_followed(tmp_path: Path, gh: FakeGitHub, planted: str) -> None:
    """An earlier `actions/checkout` of the PR can put its own `.imreview` (or report name) in the
    workspace as a symlink: we run as root, so following it would overwrite and open up its target."""
    host_workspace = tmp_path / "host" / "work" / "widgets" / "widgets"
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    precious = outside / "precious.txt"
    precious.write_text("keep me\n")
    precious.chmod(0o600)
    if planted == "directory":
        host_workspace.mkdir(parents=True)
        (host_workspace / ".imreview").symlink_to(outside, target_is_directory=True)
    else:
        (host_workspace / ".imreview").mkdir(parents=True)
        (host_workspace / ".imreview" / "report-7.json").symlink_to(precious)
    outputs = run_in_container(tmp_path, gh, "pull_request", event_payload("pull_request.opened"))
    assert json.loads(host_step_reads(tmp_path, outputs["report-path"]))["snapshot"]["number"] == 7
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert precious.read_text() == "keep me\n" and precious.stat().st_mode & 0o777 == 0o600
    assert outside.stat().st_mode & 0o777 == 0o755
