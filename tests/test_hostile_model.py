"""A model that obeys an injection in the diff, or a comment built to break our parser, must not
erase what the deterministic checks found, nor end the run without a review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reviewer.incremental import unpack
from reviewer.state import parse_state
from tests import test_action_e2e as e2e
from tests.factories import fake_github
from tests.fakes.github_server import diff_entry
from tests.fakes.model_server import FakeModelServer

DEEP = "[" * 5_000 + "]" * 5_000
AWS_PATCH = "@@ -1,2 +1,3 @@\n import os\n+AWS_KEY = 'AKIAZ7QW3RTY5UIO2PLM'\n x = 1"


def _run(tmp_path: Path, patch: str, head_line: str, handler: Any, fail_on: str) -> e2e.Run:
    with fake_github({e2e.TOKEN: {}}, repo=e2e.REPO) as gh, FakeModelServer(handler=handler) as model:
        gh.add_pull(e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=[diff_entry("app.py", patch)])
        gh.add_content(e2e.REPO, e2e.HEAD, "app.py", f"x = 1\n{head_line}\ny = 2\n")
        run = e2e.Runner(tmp_path, gh.url).run(
            "pull_request", e2e.event_payload("pull_request.opened"), fail_on=fail_on, **e2e.with_model(model)
        )
        assert len(gh.comments(e2e.REPO, 7)) == 1, "the review was posted"
        return run


@pytest.mark.parametrize(
    ("line", "rule", "fail_on"),
    [
        ("breakpoint()", "rule:debugger", "P2"),
        ('db_password = "Xk9mQ2vL8pR4wZt7Yh3N"', "rule:secret", "P1"),
    ],
)
def test_a_model_copy_of_a_rule_finding_cannot_take_the_rule_finding_with_it(
    tmp_path: Path, line: str, rule: str, fail_on: str
) -> None:
    """The injected answer repeats the rule's line at a higher priority with a fix that is the code
    itself, so verification refutes it: before, the rule's copy had been dropped as its duplicate."""

    def injected(body: dict[str, Any]) -> Any:
        if '"verdicts"' in body["messages"][-1]["content"]:
            return e2e.text('{"verdicts": []}')
        harmless = e2e.finding(
            line=2, priority="P1", confidence=1.0, title="Harmless line", quote=line, suggestion=line
        )
        return e2e.text(e2e.answer(harmless))

    patch = f"@@ -1,2 +1,3 @@\n x = 1\n+{line}\n y = 2"
    run = _run(tmp_path, patch, line, injected, fail_on)
    report = run.report()
    assert [f["source"] for f in report["findings"]] and all(
        f["source"].startswith(rule) for f in report["findings"]
    ), report["findings"]
    assert report["verdict"] == "findings" and run.code == 1, "fail-on still fails the step"


def test_a_verification_answer_nested_past_the_parsers_stack_leaves_the_findings(tmp_path: Path) -> None:
    def nested_verdicts(body: dict[str, Any]) -> Any:
        if '"verdicts"' in body["messages"][-1]["content"]:
            return e2e.text('{"verdicts": ' + DEEP + "}")
        return e2e.text(e2e.answer(e2e.finding(path="app.py", line=2, priority="P2", quote="AWS_KEY = ")))

    run = _run(tmp_path, AWS_PATCH, "AWS_KEY = 'AKIAZ7QW3RTY5UIO2PLM'", nested_verdicts, "P1")
    assert "RecursionError" not in run.stdout + run.stderr
    report = run.report()
    assert any(f["source"].startswith("rule:") and f["priority"] == "P1" for f in report["findings"])
    assert run.code == 1, "the committed key still fails the step"
    assert any("verification skipped" in w for w in report["warnings"])


def test_a_state_marker_nested_past_the_parsers_stack_is_just_not_ours() -> None:
    assert parse_state("a comment\n<!-- imreview:state v1 " + DEEP + " -->") is None
    assert unpack(__import__("base64").urlsafe_b64encode(DEEP.encode()).decode()) == ((), False)
