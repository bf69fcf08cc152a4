"""What the model says that must never reach the PR: echoes of the prompt, foreign paths, bad items."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Repo, cli_env, run_cli
from tests.factories import model_finding, review_args
from tests.fakes.model_behaviours import echo_example
from tests.fakes.model_server import FakeModelServer, text


def _review(repo: Repo, server: FakeModelServer, tmp_path: Path, *args: str):
    report = tmp_path / "report.json"
    proc = run_cli(
        review_args(repo.path, server.api_base, "--json", str(report), *args),
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    return proc, json.loads(report.read_text())


def test_a_server_that_makes_the_model_echo_the_example_publishes_nothing(
    feature_repo: Repo, tmp_path: Path
) -> None:
    with FakeModelServer(handler=echo_example) as server:
        proc, report = _review(feature_repo, server, tmp_path, "--fail-on", "P1")
    assert server.requests, "the model was asked"
    assert proc.returncode == 0, proc.stderr
    assert report["findings"] == []
    assert report["verdict"] == "incomplete"
    assert {g["why"] for g in report["gaps"]} >= {"unparsed"}
    assert any("dropped: not in the PR" in w for w in report["warnings"])
    assert "a/b.py" not in proc.stdout.split("## Warnings")[0]
    assert "Clean" not in proc.stdout


def _finding(path: str, title: str, **extra: object) -> dict[str, object]:
    return model_finding(
        path=path,
        title=title,
        priority="P1",
        suggestion="check b",
        quote="return a / b",
        confidence=0.9,
        **extra,
    )


def test_foreign_and_malformed_findings_are_dropped_and_counted_not_the_answer(
    feature_repo: Repo, tmp_path: Path
) -> None:
    answer = {
        "findings": [
            _finding("lib/util.py", "Division by zero"),
            _finding("lib/ghost.py", "A file the PR does not have"),
            _finding("lib/util.py", "Negative line", line=-4),
        ],
        "exclusions": [],
        "signals": [],
    }
    with FakeModelServer(handler=lambda body: text(json.dumps(answer))) as server:
        proc, report = _review(feature_repo, server, tmp_path, "--language", "zh-CN")
    assert [f["title"] for f in report["findings"]] == ["Division by zero"]
    assert report["verdict"] == "findings"
    joined = "\n".join(report["warnings"])
    assert "丢弃了 1 个发现：不在本 PR 中" in joined and "lib/ghost.py" in joined
    assert "丢弃了 1 个发现：格式错误" in joined and "must not be negative" in joined
    assert "A file the PR does not have" not in proc.stdout
