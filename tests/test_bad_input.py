"""Bad input ends with a clear message naming what was wrong and where, exit 2, and nothing posted."""

from __future__ import annotations

import json
import re
import subprocess
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewer.config import parse_config_text
from reviewer.errors import ConfigError
from tests import test_action_e2e as e2e
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import fake_github
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer
from tests.inprocess import run_entrypoint


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with fake_github({e2e.TOKEN: {}}, repo=e2e.REPO) as server:
        e2e.add_pull(server)
        yield server


@pytest.fixture
def runner(gh: FakeGitHub, tmp_path: Path) -> e2e.Runner:
    return e2e.Runner(tmp_path, gh.url)


def _errors(run: e2e.Run) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith("::error ")]


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"max_cost_usd": "abc"}, "max-cost-usd"),
        ({"max_calls": "-1"}, "max-calls"),
        ({"max_concurrency": "0"}, "max-concurrency"),
        ({"fail_on": "P5"}, "fail-on"),
        ({"on_error": "explode"}, "on-error"),
        ({"language": "fr"}, "supported: en, zh-CN"),
        ({"exclude": "docs/**\n[z-a]*.py"}, "invalid glob '[z-a]*.py'"),
        ({"template_dir": ".github/no-such-templates"}, "template-dir"),
    ],
)
def test_bad_action_input_exits_2_naming_it(
    gh: FakeGitHub, runner: e2e.Runner, inputs: dict[str, str], named: str
) -> None:
    run = runner.run("pull_request", e2e.event_payload("pull_request.opened"), **inputs)
    assert run.code == 2, (run.stdout, run.stderr)
    assert _errors(run) and named in _errors(run)[0], run.stdout
    assert named.replace("*", "\\*") in run.summary
    assert "Traceback" not in run.stdout + run.stderr
    assert "/tmp" not in _errors(run)[0] and "runner_temp" not in _errors(run)[0]
    assert gh.comments(e2e.REPO, 7) == []


def _action(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_entrypoint(cwd=tmp_path, env=cli_env(tmp_path, env))


def _pull_request_job(event: Path) -> dict[str, str]:
    """The runner variables of a pull_request job reading `event`, with a GitHub nobody answers on."""
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": e2e.REPO,
        "GITHUB_API_URL": "http://127.0.0.1:9",
        "INPUT_GITHUB-TOKEN": "t",
    }


def test_malformed_event_json_names_the_file(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 7,', encoding="utf-8")
    proc = _action(tmp_path, _pull_request_job(event))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "event.json" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("missing", ["GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_EVENT_NAME"])
def test_missing_runner_variables_are_named(tmp_path: Path, missing: str) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(e2e.event_payload("pull_request.opened")), encoding="utf-8")
    env = _pull_request_job(event)
    del env[missing]
    proc = _action(tmp_path, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert missing in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_yaml_aliases_and_merge_keys_are_bounded_with_file_and_line() -> None:
    lines = ["x0: &x0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, 12)]
    merges = "a0: &a0 {k: 1}\n" + "".join(
        f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: *a{i - 1}}}\n" for i in range(1, 30)
    )
    for text in ("\n".join(lines) + "\n", merges, "a: &a [*a]\n"):
        tracemalloc.start()
        try:
            with pytest.raises(ConfigError, match=r"imreview\.yml") as caught:
                parse_config_text(text, ".github/imreview.yml")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # Expanded, the first bomb is 9**12 items; refused before expanding, it stays small.
        assert peak < 64 * 2**20, "bounded, not merely eventually refused"
        assert re.match(
            r"\.github/imreview\.yml:\d+: (the config expands|an alias refers)", str(caught.value)
        )


def test_ordinary_anchors_still_work() -> None:
    text = (
        "prices: &p\n  m/a: {input_usd_per_mtok: 1, output_usd_per_mtok: 2}\n"
        "exclude: &e [docs/**]\ninclude: *e\n"
    )
    layer = parse_config_text(text, "c.yml")
    assert layer["include"] == ("docs/**",)


def test_invalid_glob_in_the_config_names_file_and_line(repo: Repo, tmp_path: Path) -> None:
    repo.commit(
        {"app.py": "x = 1\n", ".github/imreview.yml": "exclude:\n  - docs/**\n  - '[z-a]*.py'\n"}, "base"
    )
    repo.branch("feature")
    repo.commit({"app.py": "x = 2\n"}, "change")
    proc = run_cli(["review", str(repo.path), "--base", "main"], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "main:.github/imreview.yml:3: key 'exclude': item 2: invalid glob '[z-a]*.py'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_invalid_template_names_the_template_and_line(repo: Repo, tmp_path: Path) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 2\n"}, "change")
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / "summary.md.j2").write_text("# ok\n{% if %}\n", encoding="utf-8")
    proc = run_cli(
        ["review", str(repo.path), "--base", "main", "--template-dir", str(templates)],
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert proc.returncode == 2, proc.stderr
    assert "summary.md.j2:2" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- diffs we cannot review

NOT_A_DIFF = "this is not a diff\njust some text someone pasted\n"
BINARY_JUNK = bytes(range(256)).decode("latin-1").replace("\r", "") * 4
BIG_PATCH_LINES = 40_000  # 2.5 MB: over the 1 MB one file may have, small enough to stay fast


def _big_patch(lines: int) -> str:
    body = "".join(f"+generated fixture line {i:07d} of a data file nobody reviews\n" for i in range(lines))
    return f"@@ -0,0 +1,{lines} @@\n{body}"


@pytest.mark.parametrize(
    ("shape", "files", "said"),
    [
        (
            "text that is not a diff, and binary junk",
            [diff_entry("notes.py", NOT_A_DIFF), diff_entry("blob.py", BINARY_JUNK)],
            "the patch GitHub sent for this file is not a unified diff",
        ),
        (
            "a 2.5 MB patch",
            [diff_entry("data.txt", _big_patch(BIG_PATCH_LINES), status="added")],
            "the diff of this file is 2.5 MB, over the 1 MB one file may have",
        ),
        (
            "more than 3,000 files",
            [diff_entry(f"gen/f{i:04d}.py", "@@ -1 +1 @@\n-a = 1\n+a = 2") for i in range(3004)],
            "imreview read the first 300 of the 3005 changed files",
        ),
    ],
)
def test_a_diff_we_cannot_review_is_named_and_the_review_is_incomplete(
    gh: FakeGitHub, runner: e2e.Runner, shape: str, files: list[dict[str, str]], said: str
) -> None:
    """The model answers `clean` for what it sees; what it could not see makes the verdict incomplete."""
    gh.add_pull(
        e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=[diff_entry("app.py", e2e.PATCH), *files]
    )
    with FakeModelServer(handler=e2e.reviewer_model({})) as model:
        run = runner.run(
            "pull_request", e2e.event_payload("pull_request.opened"), on_error="fail", **e2e.with_model(model)
        )
    assert "Traceback" not in run.stdout + run.stderr
    assert (run.code, run.outputs["verdict"]) == (3, "incomplete"), (run.code, run.summary[:800])
    lines = [line for line in run.summary.splitlines() if said in line]
    named = [] if shape == "more than 3,000 files" else [f["filename"] for f in files]
    assert len(lines) == max(1, len(named)), lines
    for path in named:
        assert [line for line in lines if f"(`{path}`)" in line], (path, lines)
    report = run.report()
    assert any(said in gap["what"] for gap in report["gaps"])
    [comment] = gh.comments(e2e.REPO, 7)
    assert "incomplete" in comment["body"].lower() and len(comment["body"]) < 65_536
    assert gh.violations == []


def test_a_50_mb_local_diff_is_listed_not_reviewed(repo: Repo, tmp_path: Path) -> None:
    """`imreview review` on a branch that commits a 50 MB generated file: named, listed, no hang."""
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    line = "a generated fixture line that is not code at all, number %07d\n"
    with (repo.path / "data.txt").open("w", encoding="utf-8") as fh:
        fh.writelines(line % i for i in range(800_000))  # 52 MB
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "a 50 MB fixture")
    report, summary = tmp_path / "report.json", tmp_path / "s.md"
    outputs = ["--json", str(report), "--summary", str(summary)]
    proc = run_cli(
        ["review", str(repo.path), "--base", "main", *outputs], cwd=tmp_path, env=cli_env(tmp_path)
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    [gap] = [g for g in data["gaps"] if g.get("path") == "data.txt"]
    assert "the diff of this file is 52.8 MB, over the 1 MB" in gap["what"] and gap["why"] == "no_patch"
    assert [f["title"] for f in data["findings"]] and data["verdict"] == "findings", (
        "the rest is still checked"
    )
    assert "52.8 MB" in summary.read_text(encoding="utf-8")


def test_a_bad_github_timeout_is_named(gh: FakeGitHub, tmp_path: Path) -> None:
    runner = e2e.Runner(tmp_path, gh.url, extra_env={"IMREVIEW_GITHUB_TIMEOUT": "soon"})
    run = runner.run("pull_request", e2e.event_payload("pull_request.opened"))
    assert run.code == 2 and "Traceback" not in run.stdout + run.stderr
    assert "IMREVIEW_GITHUB_TIMEOUT: expected whole seconds from 1 to 600, got 'soon'" in _errors(run)[0]
    assert gh.requests == [], "nothing is read or posted with a setting that is wrong"
