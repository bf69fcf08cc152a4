"""Fault injection through the loopback servers (issue 10): for each GitHub or model failure, no
traceback for the user, a one-line reason in the summary, the right verdict (`incomplete` whenever
anything was not reviewed), the exit code `on-error` asks for, and nothing half-published."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import test_action_e2e as e2e
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, delayed, status, text

GOOD = json.dumps({"findings": [], "exclusions": [], "signals": []})


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_token(e2e.TOKEN)
        server.add_repo(e2e.REPO)
        server.add_pull(
            e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=[diff_entry("app.py", e2e.PATCH)]
        )
        yield server


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def _run(gh: FakeGitHub, tmp_path: Path, model: FakeModelServer | None, **inputs: str) -> e2e.Run:
    extra = e2e.with_model(model) if model is not None else {}
    return e2e.Runner(tmp_path, gh.url).run(
        "pull_request", e2e.event_payload("pull_request.opened"), **extra, **inputs
    )


def _honest(run: e2e.Run, gh: FakeGitHub, *, verdict: str, code: int) -> None:
    assert "Traceback" not in run.stdout + run.stderr + run.summary
    assert run.outputs.get("verdict") == verdict, (run.outputs, run.summary[:600])
    assert run.code == code, (run.code, run.stdout[-800:])
    assert run.summary.strip(), "the job summary is always written"
    assert len([c for c in gh.comments(e2e.REPO, 7) if e2e.MARKER in c["body"]]) <= 1
    for review in gh.reviews(e2e.REPO, 7):
        assert review["state"] == "COMMENTED"


# --------------------------------------------------------------------------- model


def _always(reply: Reply):  # type: ignore[no-untyped-def]
    return lambda body: reply


MODEL_FAULTS: dict[str, Any] = {
    "401": status(401, message="Incorrect API key provided"),
    "500": status(500),
    "empty content": text(""),
    "not JSON": text("Looks good to me, ship it."),
    "JSON with wrong types": text('{"findings": "none", "exclusions": 3, "signals": {}}'),
}


@pytest.mark.parametrize("fault", list(MODEL_FAULTS))
def test_model_fault_is_an_honest_incomplete_review(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path, fault: str
) -> None:
    model.handler = _always(MODEL_FAULTS[fault])
    run = _run(gh, tmp_path, model, on_error="fail", max_seconds="30")
    _honest(run, gh, verdict="incomplete", code=3)
    [comment] = gh.comments(e2e.REPO, 7)
    assert "incomplete" in comment["body"].lower()


def test_an_unparsable_answer_is_not_called_a_budget_stop(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    model.handler = _always(text("Looks good to me, ship it."))
    run = _run(gh, tmp_path, model, on_error="fail", max_seconds="30")
    assert "budget reached" not in run.summary.splitlines()[0]


def test_model_timeout_is_incomplete_and_warn_keeps_the_step_green(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    model.handler = _always(delayed(20))
    run = _run(gh, tmp_path, model, max_seconds="4", on_error="warn")
    _honest(run, gh, verdict="incomplete", code=0)
    assert len(model.requests) <= 3  # the 4 s budget cut the calls short: no 20 s answer was waited for


def test_429_with_retry_after_then_an_answer_is_a_complete_review(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(status(429, retry_after="1"))
    model.handler = lambda body: text(
        '{"verdicts": []}' if '"verdicts"' in body["messages"][-1]["content"] else GOOD
    )
    run = _run(gh, tmp_path, model, on_error="fail")
    _honest(run, gh, verdict="clean", code=0)


# --------------------------------------------------------------------------- GitHub


@pytest.mark.parametrize("code", [404, 502])
def test_github_refusing_the_pull_request_read_ends_honestly(
    gh: FakeGitHub, tmp_path: Path, code: int
) -> None:
    gh.fail("GET", r"/pulls/7$", code, times=10)
    run = _run(gh, tmp_path, None, on_error="fail")
    assert "Traceback" not in run.stdout + run.stderr
    assert run.code in (2, 3), run.stdout[-800:]
    assert run.summary.strip() and gh.comments(e2e.REPO, 7) == []
    assert run.outputs.get("verdict") in ("incomplete", None)


@pytest.mark.parametrize("code", [422, 500])
def test_a_failed_comment_post_is_reported_and_not_duplicated(
    gh: FakeGitHub, tmp_path: Path, code: int
) -> None:
    gh.fail("POST", r"/issues/7/comments$", code, times=10)
    run = _run(gh, tmp_path, None, on_error="warn")
    assert "Traceback" not in run.stdout + run.stderr
    assert run.code == 0 and gh.comments(e2e.REPO, 7) == []
    assert "comment" in run.summary.lower()
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1, "a POST is never retried blindly"


def test_a_primary_rate_limit_mid_review_still_writes_the_summary_with_rule_findings(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    gh.add_pull(
        e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=[diff_entry("app.py", e2e.DEBUG_PATCH)]
    )
    gh.fail(
        "GET",
        r"/issues/7/comments",
        403,
        body={"message": "API rate limit exceeded for installation."},
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)},
        times=10,
    )
    run = _run(gh, tmp_path, None, on_error="warn")
    assert "Traceback" not in run.stdout + run.stderr
    assert run.code == 0
    assert "breakpoint" in run.summary.lower() or "Debugger" in run.summary
    assert len(gh.comments(e2e.REPO, 7)) <= 1
