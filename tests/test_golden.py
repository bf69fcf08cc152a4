"""Golden outputs: what a dozen varied runs write, byte for byte, kept under tests/golden/<case>/.

Each case runs the real command (the `imreview review` CLI on a real git repository, or the
Action's entrypoint in the emulated runner of test_action_e2e) against the loopback fakes, collects
what a user reads — report.json, the job summary, the step outputs, the sticky comment, the inline
review's bodies, the annotations — passes it through `normalise_volatile` (the ONE place that
blanks what changes from run to run: temp paths, ports, timestamps, durations, nonces) and compares
it with the committed files.

A change that alters these outputs on purpose regenerates them with ONE command:

    IMREVIEW_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py

and the diff of tests/golden/ is then read like any other change (at merge, by the lead).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, cli_env, git, run_cli
from tests.factories import fake_github, model_answer
from tests.fakes import git_repo
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, status, text
from tests.test_action_e2e import (
    BASE,
    DEBUG_PATCH,
    HEAD,
    MODEL,
    OUTSIDE,
    PATCH,
    REPO,
    TOKEN,
    Run,
    Runner,
    event_payload,
    finding,
    reviewer_model,
    with_model,
)
from tests.test_incremental import APP_BASE, DIVIDE, EVAL, UTIL_BASE, Pr, consistent_reviewer

GOLDEN = ROOT / "tests" / "golden"
REGENERATE = "IMREVIEW_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py"
UPDATE = os.environ.get("IMREVIEW_UPDATE_GOLDEN") == "1"
Outputs = dict[str, str]
_DATED = {"GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"}


# --------------------------------------------------------------------------- normalisation


def normalise_volatile(text: str, *, tmp: Path, ports: Mapping[int, str]) -> str:
    """Blank what differs between two runs of the same case, and nothing else.

    - the test's temp directory (report paths, runner files) → `<tmp>`
    - the loopback servers' ports → `<github-port>` / `<model-port>`
    - ISO timestamps → `<time>`
    - durations: report.json's "…seconds…" numbers, `1.2 s` / `12 ms` / `1.2 秒` in text, and the
      seconds column (the last) of the summary's budget table → `<seconds>`
    - the sticky state's config fingerprint (it hashes the model's api_base, port included) and the
      state's MAC over it → `<config-hash>` / `<mac>`
    - the stop-commands nonce → `<nonce>`

    The nonces inside prompts are made fixed by the `world` fixture instead (they change token
    estimates, so they cannot be blanked afterwards).
    """
    out = text.replace(str(tmp.resolve()), "<tmp>").replace(str(tmp), "<tmp>")
    for port, name in ports.items():
        out = re.sub(rf"(?<=[:/]){port}\b", name, out)
    out = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?", "<time>", out)
    out = re.sub(r'("[a-z_]*seconds[a-z_]*": )-?\d+(?:\.\d+)?(?:e-?\d+)?', r"\1<seconds>", out)
    out = re.sub(r"\b\d+(?:\.\d+)? ?(?:s|ms|seconds)\b|\d+(?:\.\d+)? ?秒", "<seconds>", out)
    out = re.sub(r"(?m)^(\|(?:[^|\n]*\|){5}) \d[\d.,]* \|$", r"\1 <seconds> |", out)
    out = re.sub(r'(?<="config":")[0-9a-f]{16}(?=")', "<config-hash>", out)
    out = re.sub(r'(?<="mac":")[0-9a-f]{64}(?=")', "<mac>", out)
    out = re.sub(r"(?<=::stop-commands::)[0-9a-f]{32}|(?<=::)[0-9a-f]{32}(?=::)", "<nonce>", out)
    return out


# --------------------------------------------------------------------------- collecting a run


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def _annotations(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if re.match(r"::(warning|notice|error) ", line)]
    return "\n".join(lines) + "\n" if lines else ""


def action_outputs(run: Run, gh: FakeGitHub, numbers: tuple[int, ...] = (7,)) -> Outputs:
    """What a user sees of one Action step: report(s), summary, outputs, PR comments and reviews."""
    files: Outputs = {
        "exit_code.txt": f"{run.code}\n",
        "summary.md": run.summary,
        "outputs.txt": "".join(f"{k}={v}\n" for k, v in sorted(run.outputs.items())),
        "annotations.txt": _annotations(run.stdout),
    }
    report_path = run.outputs.get("report-path", "")
    if report_path and Path(report_path).is_file():
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
        files["report.json"] = _json(report)
        for item in report.get("reports", []) if isinstance(report.get("reports"), list) else []:
            path = item.get("report_path") if isinstance(item, dict) else None
            if isinstance(path, str) and Path(path).is_file():
                number = json.loads(Path(path).read_text(encoding="utf-8"))["snapshot"]["number"]
                files[f"report-{number}.json"] = _json(json.loads(Path(path).read_text(encoding="utf-8")))
    for number in numbers:
        for i, comment in enumerate(gh.comments(REPO, number)):
            files[f"comment-{number}-{i}.md"] = comment["body"]
        for i, review in enumerate(gh.reviews(REPO, number)):
            parts = [
                f"# review event={review.get('state')} commit={review.get('commit_id')}\n",
                review["body"],
            ]
            for c in review["comments"]:
                parts.append(
                    f"\n\n# inline {c['path']}:{c.get('line')} {c.get('side', 'RIGHT')}\n{c['body']}"
                )
            files[f"review-{number}-{i}.md"] = "".join(parts) + "\n"
    return {name: body for name, body in files.items() if body}


@dataclass
class World:
    """One case's loopback GitHub and model, its emulated runner and temp directory."""

    tmp: Path
    gh: FakeGitHub
    model: FakeModelServer
    runner: Runner

    def ports(self) -> dict[int, str]:
        return {_port(self.gh.url): "<github-port>", _port(self.model.api_base): "<model-port>"}


def _port(url: str) -> int:
    match = re.search(r":(\d+)", url.split("//", 1)[1])
    assert match, url
    return int(match.group(1))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for name, value in _DATED.items():  # fixed commit dates: the same shas on every run
        monkeypatch.setitem(git_repo._ENV, name, value)
    # Fixed nonces (prompt delimiters, stop-commands): they change the prompts' token estimates.
    monkeypatch.setattr(secrets, "token_hex", lambda nbytes=32: ("5eed" * nbytes)[: 2 * nbytes])
    with fake_github({TOKEN: {}}, repo=REPO) as gh, FakeModelServer() as model:
        yield World(tmp_path, gh, model, Runner(tmp_path, gh.url))


# --------------------------------------------------------------------------- local cases


def _git(cwd: Path, *args: str) -> None:
    git(cwd, *args, extra_env=_DATED)  # fixed commit dates: the same shas on every run


def _local_repo(tmp: Path) -> Path:
    """A repository with fixed dates (so fixed shas): `feature` changes app.py and adds lib/util.py."""
    path = tmp / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "app.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "--no-gpg-sign", "-m", "base")
    _git(path, "checkout", "-q", "-b", "feature")
    (path / "app.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b - 1\n"
    )
    (path / "lib").mkdir()
    (path / "lib" / "util.py").write_text("def div(a, b):\n    breakpoint()\n    return a / b\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "--no-gpg-sign", "-m", "feature work")
    return path


def _local_finding() -> dict[str, Any]:
    return finding(path="lib/util.py", line=3, priority="P2", quote="return a / b", confidence=0.7)


def _local(world: World, *args: str, model: bool = True) -> Outputs:
    repo = _local_repo(world.tmp)
    out = world.tmp / "out"
    model_args = ["--model", MODEL, "--api-base", world.model.api_base] if model else []
    proc = run_cli(
        [
            "review",
            str(repo),
            "--base",
            "main",
            "--json",
            str(out / "report.json"),
            "--summary",
            str(out / "summary.md"),
            "--comment",
            str(out / "comment.md"),
            *model_args,
            *args,
        ],
        cwd=world.tmp,
        env=cli_env(world.tmp),
    )
    files = {"exit_code.txt": f"{proc.returncode}\n"}
    for name in ("report.json", "summary.md", "comment.md"):
        if (out / name).is_file():
            body = (out / name).read_text(encoding="utf-8")
            files[name] = _json(json.loads(body)) if name.endswith(".json") else body
    return files


def local_without_model(world: World) -> Outputs:
    return _local(world, model=False)


def local_with_model(world: World) -> Outputs:
    world.model.handler = reviewer_model({"lib/util.py": [_local_finding()]})
    return _local(world)


def local_zh_cn(world: World) -> Outputs:
    world.model.handler = reviewer_model({"lib/util.py": [_local_finding()]})
    return _local(world, "--language", "zh-CN")


def local_model_failure(world: World) -> Outputs:
    world.model.handler = lambda body: status(400, message="model refused the request")
    return _local(world)


# --------------------------------------------------------------------------- Action cases


def _add_pull(gh: FakeGitHub, number: int = 7, **kwargs: Any) -> None:
    defaults: dict[str, Any] = {"head_sha": HEAD, "base_sha": BASE, "files": [diff_entry("app.py", PATCH)]}
    gh.add_pull(REPO, number, **{**defaults, **kwargs})


def action_pull_request_with_model(world: World) -> Outputs:
    _add_pull(world.gh)
    moved = finding(line=1, priority="P3", title="Result name hides intent", quote="return total")
    world.model.handler = reviewer_model({"app.py": [finding(), moved, OUTSIDE]})
    run = world.runner.run(
        "pull_request",
        event_payload("pull_request.opened"),
        inline_comments="true",
        **with_model(world.model),
    )
    return action_outputs(run, world.gh)


def action_incremental_push(world: World) -> Outputs:
    """`opened`, then `synchronize` after a push touching one file: the second run is incremental."""
    pr = Pr(world.tmp, world.gh)
    world.model.handler = consistent_reviewer
    inputs = {"inline_comments": "true", **with_model(world.model)}
    h1 = pr.git.commit({"util.py": UTIL_BASE + DIVIDE, "app.py": EVAL + APP_BASE}, "feature")
    pr.open(h1)
    opened = world.runner.run(
        "pull_request", event_payload("pull_request.opened", head=h1, base=pr.base), **inputs
    )
    assert opened.code == 0, opened.stderr
    h2 = pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push")
    pr.push(h2)
    run = world.runner.run(
        "pull_request", event_payload("pull_request.synchronize", head=h2, base=pr.base), **inputs
    )
    return action_outputs(run, world.gh)


def action_rerun_same_head(world: World) -> Outputs:
    _add_pull(world.gh)
    world.model.handler = reviewer_model({"app.py": [finding()]})
    first = world.runner.run("pull_request", event_payload("pull_request.opened"), **with_model(world.model))
    assert first.code == 0, first.stderr
    run = world.runner.run(
        "pull_request", event_payload("pull_request.synchronize"), **with_model(world.model)
    )
    return action_outputs(run, world.gh)


def action_without_model(world: World) -> Outputs:
    _add_pull(world.gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    run = world.runner.run("pull_request", event_payload("pull_request.opened"), inline_comments="true")
    return action_outputs(run, world.gh)


def action_zh_cn(world: World) -> Outputs:
    _add_pull(world.gh)
    world.model.handler = reviewer_model({"app.py": [finding()]})
    run = world.runner.run(
        "pull_request", event_payload("pull_request.opened"), language="zh-CN", **with_model(world.model)
    )
    return action_outputs(run, world.gh)


def action_model_failure(world: World) -> Outputs:
    _add_pull(world.gh)
    world.model.handler = lambda body: status(400, message="model refused the request")
    run = world.runner.run("pull_request", event_payload("pull_request.opened"), **with_model(world.model))
    return action_outputs(run, world.gh)


def action_skipped_draft(world: World) -> Outputs:
    _add_pull(world.gh, draft=True)
    run = world.runner.run(
        "pull_request", event_payload("pull_request.opened.draft"), **with_model(world.model)
    )
    return action_outputs(run, world.gh)


def action_fork_read_only(world: World) -> Outputs:
    _add_pull(
        world.gh, head_repo="forker/widgets", author="forker", files=[diff_entry("app.py", DEBUG_PATCH)]
    )
    run = world.runner.run(
        "pull_request",
        event_payload("pull_request.opened.fork", head_repo="forker/widgets"),
        inline_comments="true",
    )
    return action_outputs(run, world.gh)


def action_bad_config(world: World) -> Outputs:
    _add_pull(world.gh)
    world.gh.add_content(REPO, BASE, ".github/imreview.yml", "language: en\nmax_cost: 2\n")
    run = world.runner.run("pull_request", event_payload("pull_request.opened"))
    return action_outputs(run, world.gh)


def _scan_model(body: dict[str, Any]) -> Reply:
    prompt = body["messages"][-1]["content"]
    if '"verdicts"' in prompt:
        return text('{"verdicts": []}')
    found = [finding(path="m2.py", line=2, quote="y = x * 2")] if "m2.py" in prompt else []
    return text(model_answer(*found))


def action_scan(world: World) -> Outputs:
    for n in (1, 2):
        world.gh.add_pull(
            REPO,
            n,
            head_sha=f"{n:040x}",
            base_sha=BASE,
            title=f"change {n}",
            files=[diff_entry(f"m{n}.py", f"@@ -1,2 +1,3 @@\n x = {n}\n+y = x * {n}\n z = 1")],
        )
    world.gh.add_pull(
        REPO, 3, head_sha=f"{3:040x}", base_sha=BASE, draft=True, files=[diff_entry("d.py", PATCH)]
    )
    world.model.handler = _scan_model
    run = world.runner.run("schedule", {"schedule": "17 * * * *"}, **with_model(world.model))
    return action_outputs(run, world.gh, numbers=(1, 2, 3))


CASES: dict[str, Callable[[World], Outputs]] = {
    f.__name__: f
    for f in (
        local_without_model,
        local_with_model,
        local_zh_cn,
        local_model_failure,
        action_pull_request_with_model,
        action_incremental_push,
        action_rerun_same_head,
        action_without_model,
        action_zh_cn,
        action_model_failure,
        action_skipped_draft,
        action_fork_read_only,
        action_bad_config,
        action_scan,
    )
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_match_the_committed_golden_files(world: World, case: str) -> None:
    produced = {
        name: normalise_volatile(body, tmp=world.tmp, ports=world.ports())
        for name, body in CASES[case](world).items()
    }
    where = GOLDEN / case
    if UPDATE:
        where.mkdir(parents=True, exist_ok=True)
        for stale in where.iterdir():
            if stale.name not in produced:
                stale.unlink()
        for name, body in produced.items():
            (where / name).write_bytes(body.encode("utf-8"))
        return
    committed = (
        {p.name: p.read_bytes().decode("utf-8") for p in sorted(where.iterdir())} if where.is_dir() else {}
    )
    assert sorted(produced) == sorted(committed), f"{case}: files differ; regenerate with {REGENERATE}"
    for name, body in produced.items():
        assert body == committed[name], (
            f"{case}/{name} differs from tests/golden; if on purpose, regenerate with {REGENERATE} "
            "and read the diff"
        )
