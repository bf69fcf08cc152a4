"""One sink interface (issue 19): every sink is `publish(report, rendered) -> Published`, one list
runs them, and a PR's review finds our sticky comment once and renders it once.

The PR tests run `review_pull` in-process against the loopback GitHub, without a model: the
deterministic rules find the `breakpoint()` the PR adds, so every run has a finding to publish.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from reviewer import pull
from reviewer.events import SkipRules
from reviewer.publish import utf16_len
from reviewer.render import Renderer
from reviewer.report import Gate, Published, Report
from reviewer.runner_sinks import (
    READ_ONLY,
    Annotations,
    Notice,
    Rendered,
    StepOutputs,
    SummaryFile,
    annotations_dropped,
    publish_all,
)
from reviewer.state import StickyState
from tests.factories import BASE, HEAD, REPO, fake_github, finding, github_client
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.test_schema import minimal_report

HEAD2 = "c2" * 20
DEBUG_PATCH = "@@ -1,2 +1,3 @@\n def div(a, b):\n+    breakpoint()\n     return a / b"
CLOSED = Published("pull_request", False, "the gate did not pass", reason="gate_closed")


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("IMREVIEW_STATE_KEY", "sinks-test-key-0123456789abcdefghij")
    with fake_github({"ours": {"login": "alice"}}, repo=REPO) as server:
        server.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=[diff_entry("src/app.py", DEBUG_PATCH)])
        yield server


def job(**fields: Any) -> pull.PullJob:
    defaults: dict[str, Any] = {
        "repo": REPO,
        "number": 7,
        "skip": SkipRules(reviewed=True),
        "post_comment": True,
        "inline_comments": True,
        "max_pr_cost_usd": 5.0,
    }
    return pull.PullJob(**{**defaults, **fields})


class Counted:
    """Counts the calls of a function of ours and lets each one through unchanged."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        self.calls = 0
        real = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)


def test_a_push_finds_and_parses_the_sticky_comment_once_and_renders_it_once(
    gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: the sticky comment was found and parsed twice per run, and rendered twice (once to
    measure it for the gate); the gate's size is now that of the comment written."""
    client = github_client(gh)
    first = pull.review_pull(client, job(), warn=lambda message: None)
    assert first.comment_url and len(gh.comments(REPO, 7)) == 1
    gh.set_head(REPO, 7, HEAD2)
    found = Counted(monkeypatch, pull, "find_sticky")
    parsed = Counted(monkeypatch, StickyState, "parse")
    rendered = Counted(monkeypatch, Renderer, "comment")
    again = pull.review_pull(client, job(), warn=lambda message: None)
    assert again.verdict == "findings" and again.report is not None
    assert [p.reason for p in again.report.published] == ["updated", "no_new_findings"]
    assert (found.calls, parsed.calls) == (1, 1)
    assert rendered.calls == 1 and again.rendered is not None
    [size] = [c.detail for c in again.report.gate.checks if c.name == "output_limits"]
    assert size == f"comment {utf16_len(again.rendered.comment):,}/65,000"
    [comment] = gh.comments(REPO, 7)
    assert HEAD2 in comment["body"] and "breakpoint" in comment["body"]


def test_the_same_head_again_is_skipped_from_the_state_found_once(
    gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = github_client(gh)
    pull.review_pull(client, job(), warn=lambda message: None)
    found = Counted(monkeypatch, pull, "find_sticky")
    again = pull.review_pull(client, job(), warn=lambda message: None)
    assert again.reason == "already_reviewed" and again.report is None
    assert found.calls == 1


# --------------------------------------------------------------------------- the loop


@dataclasses.dataclass
class Recording:
    """A sink that writes nowhere: it says what it was given, and can fail as a sink would."""

    name: str
    result_reason: str = "posted"
    ok: bool = True
    gated: ClassVar[bool] = True
    records: ClassVar[bool] = True
    seen: list[tuple[str, ...]] = dataclasses.field(default_factory=list)

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        self.seen.append(tuple(p.sink for p in report.published) if report is not None else ())
        return Published(self.name, self.ok, f"{self.name}: {rendered.comment}", reason=self.result_reason)


def a_report(*, ready: bool) -> Report:
    return minimal_report().replace(gate=Gate(publish_ready=ready))


def test_a_closed_gate_runs_no_pull_request_sink_and_says_so_once() -> None:
    comment, review = Recording("comment"), Recording("review")
    stream = io.StringIO()
    report = publish_all(
        [comment, review, Annotations(stream, limit=6)],
        a_report(ready=False),
        Rendered(comment="body"),
        gate_closed=CLOSED,
        warn=lambda message: None,
    )
    assert report.published == (CLOSED,)
    assert comment.seen == [] and review.seen == []


def test_each_sink_sees_what_the_earlier_ones_published_and_failures_are_warned() -> None:
    comment = Recording("comment", result_reason=READ_ONLY, ok=False)
    review = Recording("review")
    notices = io.StringIO()
    warned: list[str] = []
    report = publish_all(
        [comment, review, Notice(notices, "nothing was posted", on_read_only=True)],
        a_report(ready=True),
        Rendered(comment="body"),
        gate_closed=CLOSED,
        warn=warned.append,
    )
    assert review.seen == [("comment",)]
    assert [p.sink for p in report.published] == ["comment", "review"], "the notice is not a result"
    assert warned == ["imreview: comment: comment: body"]
    assert notices.getvalue() == "::notice title=imreview::nothing was posted\n"


def test_no_notice_when_nothing_was_refused() -> None:
    notices = io.StringIO()
    publish_all(
        [Recording("comment"), Notice(notices, "nothing was posted", on_read_only=True)],
        a_report(ready=True),
        Rendered(comment="body"),
        gate_closed=CLOSED,
        warn=lambda message: None,
    )
    assert notices.getvalue() == ""


def test_the_runner_files_say_where_they_were_written_or_why_not(tmp_path: Any) -> None:
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    rendered = Rendered(summary="## imreview\n", outputs={"verdict": "findings"})
    assert SummaryFile(summary).publish(None, rendered).reason == "written"
    assert StepOutputs(outputs).publish(None, rendered).reason == "written"
    assert summary.read_text(encoding="utf-8") == "## imreview\n"
    assert outputs.read_text(encoding="utf-8").startswith("verdict<<ghadelimiter_")
    assert SummaryFile(None).publish(None, rendered).reason == "not_in_actions"
    assert StepOutputs(None).publish(None, rendered).reason == "not_in_actions"


def test_annotations_count_what_the_runner_would_not_show() -> None:
    findings = tuple(finding(line=2, title=f"finding {i}", priority="P2", anchored=True) for i in range(12))
    report = a_report(ready=True).replace(findings=findings)
    stream = io.StringIO()
    result = Annotations(stream, limit=12).publish(report, Rendered())
    assert result.reason == "dropped" and "10 printed, 2 over" in result.detail
    assert stream.getvalue().count("::warning ") == 10
    assert annotations_dropped(findings, 12) == 2, "the summary counts what was dropped, without writing"
    assert annotations_dropped(findings, 10) == 0
