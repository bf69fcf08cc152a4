"""Fault injection through the loopback servers (issue 10): for each GitHub or model failure, no
traceback for the user, a one-line reason in the summary, the right verdict (`incomplete` whenever
anything was not reviewed), the exit code `on-error` asks for, and nothing half-published."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import test_action_e2e as e2e
from tests.factories import fake_github, model_answer
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import (
    FakeModelServer,
    Reply,
    context_exceeded,
    delayed,
    json_reply,
    status,
    text,
)


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with fake_github({e2e.TOKEN: {}}, repo=e2e.REPO) as server:
        server.add_pull(
            e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=[diff_entry("app.py", e2e.PATCH)]
        )
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
    "unknown model": json_reply(
        {
            "error": {
                "message": "The model `fake-model` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
        404,
    ),
    "400 context length exceeded": context_exceeded("vllm", window=100, prompt_tokens=5000, max_tokens=100),
    "finish_reason length": text('{"findings": [{"path": "app.py", "li', finish_reason="length"),
}
MODEL_REASONS = {
    "unknown model": "model unknown to the provider",
    "400 context length exceeded": "context window 100 tokens",
    "finish_reason length": "unparsable model answers",
}
"""The reason the summary's first line gives, where the fault has a reason of its own."""


@pytest.mark.parametrize("fault", list(MODEL_FAULTS))
def test_model_fault_is_an_honest_incomplete_review(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path, fault: str
) -> None:
    model.handler = _always(MODEL_FAULTS[fault])
    run = _run(gh, tmp_path, model, on_error="fail", max_seconds="30")
    _honest(run, gh, verdict="incomplete", code=3)
    [comment] = gh.comments(e2e.REPO, 7)
    assert "incomplete" in comment["body"].lower()
    first = run.summary.strip().splitlines()[0]
    assert re.search(r"incomplete: \S", first) and MODEL_REASONS.get(fault, "") in first, first


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
        '{"verdicts": []}' if '"verdicts"' in body["messages"][-1]["content"] else model_answer()
    )
    run = _run(gh, tmp_path, model, on_error="fail")
    _honest(run, gh, verdict="clean", code=0)


@pytest.mark.parametrize("reported", [5, 1_000_000], ids=["usage understated", "usage as sent"])
def test_an_answer_of_several_megabytes_is_fitted_not_posted_whole(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path, reported: int
) -> None:
    """4 MB in one finding: parsed, cut to GitHub's limits where we post; the overrun is disclosed
    whether the server reports it or understates it (the answer is then charged its own size)."""
    huge = e2e.answer(e2e.finding(observation="overflow " * 500_000))
    model.handler = lambda body: (
        text('{"verdicts": []}')
        if '"verdicts"' in body["messages"][-1]["content"]
        else text(huge, completion_tokens=reported)
    )
    run = _run(gh, tmp_path, model, on_error="fail", max_seconds="30")
    _honest(run, gh, verdict="findings", code=0)
    [comment] = gh.comments(e2e.REPO, 7)
    assert "Division by zero" in comment["body"] and len(comment["body"]) < 65_536
    assert len(run.summary.encode()) < 1_000_000
    assert len(model.requests) <= 3
    assert "budget exhausted" in run.summary and "disclosed" in run.summary


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


# --------------------------------------------------------------------------- GitHub fault table
#
# Each case injects one fault into the loopback GitHub and runs the Action without a model: the
# deterministic rules find the `breakpoint()` in DEBUG_PATCH, so a run that read everything ends
# `findings` (exit 0 under `fail-on: never`), and one that could not read the PR ends `incomplete`.

SECONDARY = {
    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
}
UNREAD = "unread"  # the PR could not be read: incomplete, exit per on-error, nothing posted
RECOVERED = "recovered"  # retried within bounds: a complete review, one comment
NOT_POSTED = "not posted"  # reviewed, but the comment failed: the summary's Published row says why


@dataclass(frozen=True)
class GitHubFault:
    method: str
    path: str
    fault: dict[str, Any]
    outcome: str
    reason: str
    files: int = 1


GITHUB_FAULTS: dict[str, GitHubFault] = {
    "401 bad credentials": GitHubFault("GET", r"/pulls/7$", {"status": 401, "times": 10}, UNREAD, "HTTP 401"),
    "403 forbidden": GitHubFault("GET", r"/pulls/7$", {"status": 403, "times": 10}, UNREAD, "HTTP 403"),
    "410 gone (issues disabled)": GitHubFault(
        "GET", r"/issues/7/comments", {"status": 410, "times": 10}, NOT_POSTED, "HTTP 410"
    ),
    "503 on every try": GitHubFault(
        "GET", r"/pulls/7/files", {"status": 503, "times": 10}, UNREAD, "HTTP 503"
    ),
    "503 once": GitHubFault("GET", r"/pulls/7/files", {"status": 503, "times": 1}, RECOVERED, ""),
    "secondary rate limit, Retry-After 1": GitHubFault(
        "GET",
        r"/pulls/7/files",
        {"status": 403, "body": SECONDARY, "headers": {"Retry-After": "1"}, "times": 1},
        RECOVERED,
        "",
    ),
    "secondary rate limit, Retry-After 3600": GitHubFault(
        "GET",
        r"/pulls/7/files",
        {"status": 403, "body": SECONDARY, "headers": {"Retry-After": "3600"}, "times": 10},
        UNREAD,
        "rate limit",
    ),
    "secondary rate limit on the comment, Retry-After 1": GitHubFault(
        "POST",
        r"/issues/7/comments$",
        {"status": 403, "body": SECONDARY, "headers": {"Retry-After": "1"}, "times": 1},
        RECOVERED,
        "",
    ),
    "429 on the comment twice, Retry-After 1": GitHubFault(
        "POST",
        r"/issues/7/comments$",
        {"status": 429, "headers": {"Retry-After": "1"}, "times": 2},
        RECOVERED,
        "",
    ),
    "secondary rate limit on the comment, Retry-After 3600": GitHubFault(
        "POST",
        r"/issues/7/comments$",
        {"status": 403, "body": SECONDARY, "headers": {"Retry-After": "3600"}, "times": 10},
        NOT_POSTED,
        "rate limit",
    ),
    "secondary rate limit on the comment every time": GitHubFault(
        "POST",
        r"/issues/7/comments$",
        {"status": 403, "body": SECONDARY, "headers": {"Retry-After": "1"}, "times": 10},
        NOT_POSTED,
        "rate limit",
    ),
    "connection reset on every try": GitHubFault(
        "GET", r"/pulls/7/files", {"mode": "reset", "times": 10}, UNREAD, "connection was reset"
    ),
    "connection reset once": GitHubFault(
        "GET", r"/pulls/7/files", {"mode": "reset", "times": 1}, RECOVERED, ""
    ),
    "connection reset on the comment": GitHubFault(
        "POST", r"/issues/7/comments$", {"mode": "reset", "times": 10}, NOT_POSTED, "connection was reset"
    ),
    "slower than the timeout": GitHubFault(
        "GET", r"/pulls/7/files", {"mode": "slow", "delay": 1.5, "times": 10}, UNREAD, "did not answer within"
    ),
    "truncated JSON": GitHubFault(
        "GET", r"/pulls/7$", {"mode": "truncate", "times": 10}, UNREAD, "not complete JSON"
    ),
    "truncated JSON listing comments": GitHubFault(
        "GET", r"/issues/7/comments", {"mode": "truncate", "times": 10}, NOT_POSTED, "not complete JSON"
    ),
    "a failing page 2 of the files": GitHubFault(
        "GET", r"/pulls/7/files", {"status": 500, "page": 2, "times": 10}, UNREAD, "HTTP 500", files=150
    ),
}


def _debug_pull(gh: FakeGitHub, files: int = 1) -> None:
    more = [diff_entry(f"pkg/m{i}.py", e2e.OTHER_PATCH) for i in range(files - 1)]
    gh.add_pull(
        e2e.REPO,
        7,
        head_sha=e2e.HEAD,
        base_sha=e2e.BASE,
        files=[diff_entry("app.py", e2e.DEBUG_PATCH), *more],
    )


def _fault_run(gh: FakeGitHub, tmp_path: Path, on_error: str = "fail") -> e2e.Run:
    runner = e2e.Runner(tmp_path, gh.url, extra_env={"IMREVIEW_GITHUB_TIMEOUT": "1"})
    return runner.run("pull_request", e2e.event_payload("pull_request.opened"), on_error=on_error)


def _published_row(summary: str, where: str) -> str:
    rows = [line for line in summary.splitlines() if line.startswith(f"| {where} |")]
    assert len(rows) == 1, summary[-1500:]
    return rows[0]


@pytest.mark.parametrize("name", list(GITHUB_FAULTS))
def test_a_github_fault_ends_honestly(gh: FakeGitHub, tmp_path: Path, name: str) -> None:
    case = GITHUB_FAULTS[name]
    _debug_pull(gh, case.files)
    gh.fail(case.method, case.path, **case.fault)
    run = _fault_run(gh, tmp_path)
    first = run.summary.strip().splitlines()[0]
    ours = [c for c in gh.comments(e2e.REPO, 7) if e2e.MARKER in c["body"]]
    if case.outcome == UNREAD:
        _honest(run, gh, verdict="incomplete", code=3)
        assert "incomplete" in first, run.summary[:400]
        [reason] = [line for line in run.summary.splitlines() if case.reason in line]
        assert "could not read pull request" in reason and "Traceback" not in reason
        assert ours == [] and gh.reviews(e2e.REPO, 7) == []
        [error] = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
        assert case.reason in error and "\n" not in error
    elif case.outcome == RECOVERED:
        _honest(run, gh, verdict="findings", code=0)
        assert len(ours) == 1 and "breakpoint" in ours[0]["body"]
        assert "✔" in _published_row(run.summary, "sticky comment")
    else:
        _honest(run, gh, verdict="findings", code=0)
        assert "breakpoint" in run.summary, "the review itself is still reported"
        row = _published_row(run.summary, "sticky comment")
        assert "✘" in row and case.reason in row, row
        assert ours == [], "the summary says not posted: nothing may be on the PR"
    assert gh.violations == []


def _posted_once(run: e2e.Run, gh: FakeGitHub) -> None:
    """The review is whole, and exactly one sticky comment is on the PR, reported as posted."""
    _honest(run, gh, verdict="findings", code=0)
    [comment] = gh.comments(e2e.REPO, 7)
    assert "✔" in _published_row(run.summary, "sticky comment")
    assert run.outputs["comment-url"] == comment["html_url"]


def test_a_rate_limited_comment_is_tried_again_after_its_wait_and_posted_once(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    """Secondary limit on the create, then a create whose answer is lost: the wait is sat out, the
    comment is looked for by its marker before each new try, and exactly one sticky lands."""
    _debug_pull(gh)
    gh.fail("POST", r"/issues/7/comments$", 403, body=SECONDARY, headers={"Retry-After": "1"})
    gh.fail("POST", r"/issues/7/comments$", mode="slow", delay=1.5)
    _posted_once(_fault_run(gh, tmp_path), gh)
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 2


def test_a_rate_limited_create_that_landed_is_found_before_the_retry_and_not_posted_again(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    """GitHub made the comment but answered a secondary rate limit: after the wait, the comment is
    looked for first, found, and the create is not sent again."""
    _debug_pull(gh)
    gh.fail(
        "POST", r"/issues/7/comments$", 403, body=SECONDARY, headers={"Retry-After": "1"}, mode="status_after"
    )
    _posted_once(_fault_run(gh, tmp_path), gh)
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1, "found: the create is not sent again"


def test_a_rate_limited_review_is_posted_once_after_its_wait(gh: FakeGitHub, tmp_path: Path) -> None:
    _debug_pull(gh)
    gh.fail("POST", r"/pulls/7/reviews$", 403, body=SECONDARY, headers={"Retry-After": "1"})
    runner = e2e.Runner(tmp_path, gh.url)
    run = runner.run("pull_request", e2e.event_payload("pull_request.opened"), inline_comments="true")
    _honest(run, gh, verdict="findings", code=0)
    [review] = gh.reviews(e2e.REPO, 7)
    assert len(review["comments"]) == 1 and "✔" in _published_row(run.summary, "inline review")
    assert len(gh.requests_to("POST", r"/pulls/7/reviews$")) == 2
    assert "pending" not in e2e.marker_state(gh.comments(e2e.REPO, 7)[0]["body"])


def test_a_rate_limit_wait_longer_than_the_time_left_is_not_sat_out(gh: FakeGitHub, tmp_path: Path) -> None:
    """The review's `max-seconds` bounds the wait: 30 s asked with a 5 s budget is not waited for,
    and the comment is not tried again."""
    _debug_pull(gh)
    gh.fail("POST", r"/issues/7/comments$", 403, body=SECONDARY, headers={"Retry-After": "30"}, times=5)
    run = e2e.Runner(tmp_path, gh.url).run(
        "pull_request", e2e.event_payload("pull_request.opened"), max_seconds="5"
    )
    _honest(run, gh, verdict="findings", code=0)
    assert "rate limit" in _published_row(run.summary, "sticky comment")
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1


def test_warn_keeps_an_unreadable_pull_request_green(gh: FakeGitHub, tmp_path: Path) -> None:
    _debug_pull(gh)
    gh.fail("GET", r"/pulls/7$", 401, times=10)
    run = _fault_run(gh, tmp_path, on_error="warn")
    _honest(run, gh, verdict="incomplete", code=0)
    assert "::warning title=imreview::review of #7 is incomplete" in run.stdout


def test_a_comment_post_that_times_out_but_landed_is_reported_as_posted(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    """GitHub created the comment, but its answer came after our timeout: re-listing finds it."""
    _debug_pull(gh)
    gh.fail("POST", r"/issues/7/comments$", mode="slow", delay=1.5)
    _posted_once(_fault_run(gh, tmp_path), gh)
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1, "a POST is never retried blindly"


def test_a_failing_page_of_comments_never_makes_a_second_sticky(gh: FakeGitHub, tmp_path: Path) -> None:
    """Our comment sits on page 2 of 2; when that page fails, we cannot know it is there: post nothing."""
    _debug_pull(gh)
    for n in range(110):
        gh.add_comment(e2e.REPO, 7, f"human comment {n}", login="octocat", kind="User")
    runner = e2e.Runner(tmp_path, gh.url)
    first = runner.run("pull_request", e2e.event_payload("pull_request.opened"), on_error="fail")
    assert first.code == 0 and len([c for c in gh.comments(e2e.REPO, 7) if e2e.MARKER in c["body"]]) == 1
    gh.set_head(e2e.REPO, 7, e2e.HEAD2)
    gh.fail("GET", r"/issues/7/comments", 502, page=2, times=20)
    run = runner.run(
        "pull_request", e2e.event_payload("pull_request.synchronize", head=e2e.HEAD2), on_error="fail"
    )
    _honest(run, gh, verdict="findings", code=0)
    assert "✘" in _published_row(run.summary, "sticky comment")
    assert len([c for c in gh.comments(e2e.REPO, 7) if e2e.MARKER in c["body"]]) == 1
    assert not gh.requests_to("POST", r"/issues/7/comments$")[1:], "posted again without seeing page 2"


@pytest.mark.parametrize(
    ("fault", "landed"),
    [({"mode": "slow", "delay": 1.5}, True), ({"mode": "reset"}, False)],
    ids=["slow", "reset"],
)
def test_a_review_post_whose_answer_was_lost_is_reported_as_it_is(
    gh: FakeGitHub, tmp_path: Path, fault: dict[str, Any], landed: bool
) -> None:
    """A review is created whole or not at all; the summary says which, never "not posted" about one
    that is on the PR, and a rerun never posts its inline comments twice."""
    _debug_pull(gh)
    gh.fail("POST", r"/pulls/7/reviews$", **fault)
    runner = e2e.Runner(tmp_path, gh.url, extra_env={"IMREVIEW_GITHUB_TIMEOUT": "1"})
    run = runner.run("pull_request", e2e.event_payload("pull_request.opened"), inline_comments="true")
    _honest(run, gh, verdict="findings", code=0)
    reviews = gh.reviews(e2e.REPO, 7)
    row = _published_row(run.summary, "inline review")
    if landed:
        [review] = reviews
        assert "✔" in row and len(review["comments"]) == 1, row
    else:
        assert reviews == [] and "✘" in row and "connection was reset" in row, row
    again = runner.run("pull_request", e2e.event_payload("pull_request.opened"), inline_comments="true")
    assert again.code == 0
    assert sum(len(r["comments"]) for r in gh.reviews(e2e.REPO, 7)) == 1, "lost, or posted twice"


def test_an_inline_review_that_failed_after_the_comment_is_posted_by_the_rerun(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    """The comment posts, the review POST fails: the comment's state says the review is pending, so
    the rerun at the same head is not "already reviewed" and posts it; the run after that skips."""
    _debug_pull(gh)
    gh.fail("POST", r"/pulls/7/reviews$", 502)
    runner = e2e.Runner(tmp_path, gh.url)
    event = e2e.event_payload("pull_request.opened")
    first = runner.run("pull_request", event, inline_comments="true")
    _honest(first, gh, verdict="findings", code=0)
    assert "✘" in _published_row(first.summary, "inline review")
    [comment] = gh.comments(e2e.REPO, 7)
    assert gh.reviews(e2e.REPO, 7) == [] and e2e.marker_state(comment["body"])["pending"] == ["review"]

    second = runner.run("pull_request", event, inline_comments="true")
    _honest(second, gh, verdict="findings", code=0)
    assert "already reviewed" not in second.summary
    [review] = gh.reviews(e2e.REPO, 7)
    assert len(review["comments"]) == 1 and "breakpoint" in review["comments"][0]["body"].lower()
    [edited] = gh.comments(e2e.REPO, 7)
    assert edited["id"] == comment["id"] and "pending" not in e2e.marker_state(edited["body"])

    third = runner.run("pull_request", event, inline_comments="true")
    assert "already reviewed" in third.summary and len(gh.reviews(e2e.REPO, 7)) == 1
