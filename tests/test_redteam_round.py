"""The adversarial round of issue 21 item 5: each test is an attack that worked before its fix.

The PR (its file names, its comments) and the model's answer are the attacker's; GitHub and the
model are the loopback servers of tests/fakes, reached through PyGithub and litellm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import test_action_e2e as e2e
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer

B_PATCH = "@@ -1,2 +1,3 @@\n x = 1\n+y = 1 / 0\n z = 2"


def _review_with_model(tmp_path: Path, files: dict[str, str], handler: Any) -> e2e.Run:
    with FakeGitHub() as gh, FakeModelServer(handler=handler) as model:
        gh.add_token(e2e.TOKEN)
        gh.add_repo(e2e.REPO)
        gh.add_pull(
            e2e.REPO,
            7,
            head_sha=e2e.HEAD,
            base_sha=e2e.BASE,
            files=[diff_entry(path, patch) for path, patch in files.items()],
        )
        for path in files:
            gh.add_content(e2e.REPO, e2e.HEAD, path, "x = 1\ny = 1 / 0\nz = 2\n")
        return e2e.Runner(tmp_path, gh.url).run(
            "pull_request", e2e.event_payload("pull_request.opened"), **e2e.with_model(model)
        )


def test_a_finding_on_a_pr_file_under_a_folder_named_b_stays_on_that_file(tmp_path: Path) -> None:
    """`b/` is git's new-side prefix, so it was taken off every path the model wrote: a finding on
    the PR's own `b/calc.py` became one on `calc.py`, another file of the PR."""

    def answer(body: dict[str, Any]) -> Any:
        if '"verdicts"' in body["messages"][-1]["content"]:
            return e2e.text('{"verdicts": []}')
        hit = e2e.finding(
            path="b/calc.py", line=2, priority="P2", title="Division by zero", quote="y = 1 / 0"
        )
        return e2e.text(e2e.answer(hit))

    run = _review_with_model(tmp_path, {"b/calc.py": B_PATCH, "calc.py": B_PATCH}, answer)
    paths = [f["path"] for f in run.report()["findings"] if f["source"] == "llm"]
    assert paths == ["b/calc.py"], paths


def test_a_b_prefix_is_still_taken_off_a_path_that_is_not_a_pr_file(tmp_path: Path) -> None:
    def answer(body: dict[str, Any]) -> Any:
        if '"verdicts"' in body["messages"][-1]["content"]:
            return e2e.text('{"verdicts": []}')
        hit = e2e.finding(
            path="b/calc.py", line=2, priority="P2", title="Division by zero", quote="y = 1 / 0"
        )
        return e2e.text(e2e.answer(hit))

    run = _review_with_model(tmp_path, {"calc.py": B_PATCH}, answer)
    assert [f["path"] for f in run.report()["findings"] if f["source"] == "llm"] == ["calc.py"]


def test_the_action_with_a_weak_state_key_stops_before_reading_the_pr(tmp_path: Path) -> None:
    """A key short enough to guess from the public MACs would let the PR author sign a state saying
    the PR was reviewed (no review) or cost nothing (no cap): the step stops with exit 2 instead."""
    with FakeGitHub() as gh:
        gh.add_token(e2e.TOKEN)
        gh.add_repo(e2e.REPO)
        e2e.add_pull(gh)
        runner = e2e.Runner(tmp_path, gh.url, extra_env={"IMREVIEW_STATE_KEY": "hunter2hunter2"})
        run = runner.run("pull_request", e2e.event_payload("pull_request.opened"))
        assert run.code == 2
        assert "IMREVIEW_STATE_KEY is too weak" in run.stdout
        assert not gh.requests, "nothing was read or written"
