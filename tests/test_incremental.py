"""Incremental re-review on a push (issue 7, item 3), against real git history.

The PR's history is a real git repository; the loopback GitHub answers the PR files list and the
compare API from it, and the loopback model answers like a consistent reviewer (a finding whenever
the line it is about is in the prompt). What a maintainer would notice is asserted: what reached the
model, which findings the comment keeps (and with which ids), which inline comments were posted,
and what the summary says when the review had to be full.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reviewer.config import Overrides
from reviewer.diff import DiffFile, parse_github_file
from reviewer.events import SkipRules
from reviewer.incremental import map_line, to_carry
from reviewer.pull import PrOutcome, PullJob, review_pull
from reviewer.report import Finding, Report
from reviewer.state import StickyState, state_marker
from tests.factories import fake_github, github_client, model_answer
from tests.fakes.git_repo import GitRepo
from tests.fakes.github_server import FakeGitHub
from tests.fakes.model_server import FakeModelServer, Reply, text

REPO = "octo-org/widgets"
TOKEN = "fake-token"
MODEL = "openai/fake-model"


def numbered(prefix: str, n: int) -> list[str]:
    return [f"def {prefix}_{i}(x):\n    return x + {i}\n" for i in range(n)]


UTIL_BASE = "".join(numbered("util", 10))
APP_BASE = "".join(numbered("app", 30))
DIVIDE = "def divide(a, b):\n    return a / b\n"
EVAL = "def run(cmd):\n    return eval(cmd)\n"
FINDINGS = {
    "return a / b": {
        "path": "util.py",
        "priority": "P2",
        "title": "Division by zero when b is 0",
        "trigger": "divide(1, 0)",
        "observation": "raises ZeroDivisionError",
        "suggestion": "check b first",
        "quote": "return a / b",
        "confidence": 0.8,
    },
    "return eval(cmd)": {
        "path": "app.py",
        "priority": "P1",
        "title": "eval of caller input",
        "trigger": "run('__import__(\"os\")')",
        "observation": "runs arbitrary code",
        "suggestion": "parse instead of eval",
        "quote": "return eval(cmd)",
        "confidence": 0.9,
    },
}


def consistent_reviewer(body: dict[str, Any]) -> Reply:
    """Reports each known defect whose line is in the prompt (at the line the prompt numbers it)."""
    prompt = body["messages"][-1]["content"]
    if '"verdicts"' in prompt:
        return text('{"verdicts": []}')
    found = []
    for quote, item in FINDINGS.items():
        for row in prompt.splitlines():
            if row.rstrip().endswith(quote) and row.split()[0].isdigit():
                found.append({**item, "line": int(row.split()[0])})
                break
    return text(model_answer(*found))


class Pr:
    """PR #7 of REPO: a feature branch in a real repository, seen through the loopback GitHub."""

    def __init__(self, tmp: Path, gh: FakeGitHub) -> None:
        self.git = GitRepo(tmp / "repo")
        self.gh = gh
        self.base = self.git.commit({"util.py": UTIL_BASE, "app.py": APP_BASE}, "base")
        self.git.checkout(self.base, new_branch="feature")
        gh.use_git(REPO, self.git)

    def open(self, head: str) -> None:
        self.gh.add_pull(
            REPO, 7, head_sha=head, base_sha=self.base, merge_base_sha=self.base, files=self.files(head)
        )

    def push(self, head: str) -> None:
        self.gh.set_head(REPO, 7, head, files=self.files(head))

    def files(self, head: str) -> list[dict[str, Any]]:
        return self.git.entries(self.base, head)


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("IMREVIEW_STATE_KEY", "incremental-test-key-0123456789abcdef")
    with fake_github({TOKEN: {"login": "alice"}}, repo=REPO) as server:
        yield server


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(handler=consistent_reviewer) as server:
        yield server


@pytest.fixture
def pr(tmp_path: Path, gh: FakeGitHub) -> Pr:
    return Pr(tmp_path, gh)


def review(gh: FakeGitHub, model: FakeModelServer, **overrides: Any) -> PrOutcome:
    job = PullJob(
        repo=REPO,
        number=7,
        overrides=Overrides(model=MODEL, api_base=model.api_base, **overrides),
        skip=SkipRules(),
        post_comment=True,
        inline_comments=True,
    )
    client = github_client(gh, TOKEN)
    return review_pull(client, job, warn=lambda message: print(message, file=sys.stderr))


def report_of(outcome: PrOutcome) -> Report:
    assert outcome.report is not None, outcome.summary
    return outcome.report


def prompts(model: FakeModelServer, start: int = 0) -> str:
    return "\n".join(
        r["messages"][-1]["content"]
        for r in model.requests[start:]
        if '"verdicts"' not in r["messages"][-1]["content"]
    )


def inline_ids(gh: FakeGitHub) -> list[str]:
    """Finding ids of every inline comment posted, from the review markers."""
    ids: list[str] = []
    for r in gh.requests_to("POST", r"/pulls/7/reviews$"):
        marker = r.body["body"].rstrip().rpartition("\n")[2]
        ids += json.loads(marker[len("<!-- imreview:review v1 ") : -len(" -->")])["ids"]
    return ids


def first_review(pr: Pr, gh: FakeGitHub, model: FakeModelServer) -> tuple[str, Report]:
    """Both files changed: a division in util.py, an eval in app.py; both are found."""
    head = pr.git.commit({"util.py": UTIL_BASE + DIVIDE, "app.py": EVAL + APP_BASE}, "feature")
    pr.open(head)
    report = report_of(review(gh, model))
    assert report.incremental is not None and report.incremental.reason == "no_prior_review"
    assert {f.title for f in report.findings} == {"Division by zero when b is 0", "eval of caller input"}
    return head, report


def test_a_push_touching_one_file_sends_only_its_new_hunk_and_carries_the_rest(
    pr: Pr, gh: FakeGitHub, model: FakeModelServer
) -> None:
    h1, first = first_review(pr, gh, model)
    ids = {f.path: f.id for f in first.findings}
    assert sorted(inline_ids(gh)) == sorted(ids.values())
    sent_before = len(model.requests)

    h2 = pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push")
    pr.push(h2)
    outcome = review(gh, model)
    report = report_of(outcome)

    seen = prompts(model, sent_before)
    assert "return x * 99" in seen, "the pushed hunk reached the model"
    assert "return a / b" not in seen and "util.py" not in seen, "util.py did not change: not re-sent"
    assert "return eval(cmd)" not in seen, "app.py's first hunk did not change: not re-sent"
    inc = report.incremental
    assert inc is not None and (inc.mode, inc.since, inc.hunks_sent, inc.hunks_carried) == (
        "incremental",
        h1,
        1,
        2,
    )
    assert {f.path: f.id for f in report.findings} == ids, "carried findings keep their ids"
    assert all(f.carried_from == h1 for f in report.findings)
    assert sorted(inline_ids(gh)) == sorted(ids.values()), "no inline comment is posted again"
    coverage = {c.path: c.reviewed_at for c in report.coverage.files}
    assert coverage == {"util.py": h1, "app.py": h2}
    assert report.verdict == "findings"
    (comment,) = gh.comments(REPO, 7)
    assert "Incremental review: only what changed since" in comment["body"]
    assert "Carried from the review of" in comment["body"]
    state = StickyState.parse(comment["body"])
    assert state is not None and state.complete and {c.id for c in state.carried} == set(ids.values())
    assert "| reviewed at |" in outcome.summary and "| this run |" in outcome.summary
    assert gh.violations == []


def test_a_finding_whose_line_changed_is_dropped_and_one_re_found_keeps_its_id(
    pr: Pr, gh: FakeGitHub, model: FakeModelServer
) -> None:
    _, first = first_review(pr, gh, model)
    ids = {f.path: f.id for f in first.findings}
    fixed = "def divide(a, b):\n    return a / b if b else 0\n"
    h2 = pr.git.commit({"util.py": UTIL_BASE + fixed, "app.py": "import os\n" + EVAL + APP_BASE}, "fix")
    pr.push(h2)
    report = report_of(review(gh, model))

    inc = report.incremental
    assert inc is not None and inc.mode == "incremental" and inc.findings_dropped == 1
    assert [f.path for f in report.findings] == ["app.py"], "the division was fixed: its finding is gone"
    (kept,) = report.findings
    assert kept.id == ids["app.py"] and kept.carried_from is None, "re-found in the re-sent hunk, same id"
    assert sorted(inline_ids(gh)) == sorted(ids.values())


def test_a_force_push_is_a_full_review_and_says_why(pr: Pr, gh: FakeGitHub, model: FakeModelServer) -> None:
    h1, _ = first_review(pr, gh, model)
    pr.git.checkout(pr.base)
    pr.git.git("branch", "-f", "feature", pr.base)
    pr.git.checkout("feature")
    h2 = pr.git.commit(
        {"util.py": UTIL_BASE + DIVIDE, "app.py": EVAL + APP_BASE + "# rebased\n"}, "rewritten"
    )
    pr.push(h2)
    sent_before = len(model.requests)
    outcome = review(gh, model)
    report = report_of(outcome)

    inc = report.incremental
    assert inc is not None and (inc.mode, inc.reason, inc.since) == ("full", "force_push", h1)
    assert "return a / b" in prompts(model, sent_before), "everything reached the model again"
    assert all(f.carried_from is None for f in report.findings)
    assert f"does not descend from `{h1[:7]}`" in outcome.summary
    (comment,) = gh.comments(REPO, 7)
    assert "Full review: the head does not descend from" in comment["body"]


def test_the_base_branch_moving_keeps_it_incremental_merging_it_in_does_not(
    pr: Pr, gh: FakeGitHub, model: FakeModelServer
) -> None:
    h1, _ = first_review(pr, gh, model)
    pr.git.checkout("main")
    moved = pr.git.commit({"other.py": "x = 1\n"}, "main moves on")
    pr.git.checkout("feature")
    gh.set_base(REPO, 7, moved)
    h2 = pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push")
    pr.push(h2)
    report = report_of(review(gh, model))
    inc = report.incremental
    assert inc is not None and (inc.mode, inc.since) == ("incremental", h1), "same merge base, same diff"

    pr.git.git("merge", "-q", "--no-edit", "main")
    h3 = pr.git.head()
    pr.base = moved
    pr.push(h3)
    report = report_of(review(gh, model))
    inc = report.incremental
    assert inc is not None and (inc.mode, inc.reason, inc.since) == ("full", "base_changed", h2)


def test_a_config_change_is_a_full_review(pr: Pr, gh: FakeGitHub, model: FakeModelServer) -> None:
    first_review(pr, gh, model)
    h2 = pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push")
    pr.push(h2)
    sent_before = len(model.requests)
    report = report_of(review(gh, model, max_findings=3))

    inc = report.incremental
    assert inc is not None and (inc.mode, inc.reason) == ("full", "config_changed")
    assert "return a / b" in prompts(model, sent_before)


def test_after_an_incomplete_review_a_push_gets_a_full_review_that_says_why(
    pr: Pr, gh: FakeGitHub, model: FakeModelServer
) -> None:
    model.handler = lambda body: text("this is not JSON")
    head = pr.git.commit({"util.py": UTIL_BASE + DIVIDE, "app.py": EVAL + APP_BASE}, "feature")
    pr.open(head)
    first = report_of(review(gh, model))
    assert first.verdict == "incomplete"

    model.handler = consistent_reviewer
    h2 = pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push")
    pr.push(h2)
    sent_before = len(model.requests)
    outcome = review(gh, model)
    report = report_of(outcome)
    inc = report.incremental
    assert inc is not None and (inc.mode, inc.reason, inc.since) == ("full", "prior_incomplete", head)
    assert "return a / b" in prompts(model, sent_before) and "return x * 99" in prompts(model, sent_before)
    assert {c.reviewed_at for c in report.coverage.files} == {h2}
    assert "did not cover the whole pull request" in outcome.summary


def test_the_action_reviews_a_synchronize_push_incrementally(
    tmp_path: Path, pr: Pr, gh: FakeGitHub, model: FakeModelServer
) -> None:
    """The same through the Action's entrypoint: `opened`, then `synchronize` after a push."""
    from tests.test_action_e2e import TOKEN as ACTION_TOKEN
    from tests.test_action_e2e import Runner, event_payload

    gh.add_token(ACTION_TOKEN)
    runner = Runner(tmp_path / "runner", gh.url)
    inputs = {"model": MODEL, "api_base": model.api_base, "inline_comments": "true"}
    h1 = pr.git.commit({"util.py": UTIL_BASE + DIVIDE, "app.py": EVAL + APP_BASE}, "feature")
    pr.open(h1)
    opened = runner.run("pull_request", event_payload("pull_request.opened", head=h1, base=pr.base), **inputs)
    assert opened.code == 0, opened.stderr
    assert opened.outputs["findings"] == "2" and len(inline_ids(gh)) == 2
    sent_before = len(model.requests)

    h2 = pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push")
    pr.push(h2)
    pushed = runner.run(
        "pull_request", event_payload("pull_request.synchronize", head=h2, base=pr.base), **inputs
    )
    assert pushed.code == 0, pushed.stderr
    seen = prompts(model, sent_before)
    assert "return x * 99" in seen and "util.py" not in seen and "return eval(cmd)" not in seen
    assert pushed.outputs["findings"] == "2", "carried findings still count"
    assert len(inline_ids(gh)) == 2, "no inline comment posted again"
    assert "Incremental review: only what changed since" in pushed.summary
    (comment,) = gh.comments(REPO, 7)
    assert "Carried from the review of" in comment["body"]
    assert gh.violations == []


# --------------------------------------------------------------------------- the pure parts


def _delta(patch: str) -> DiffFile:
    return parse_github_file(filename="m.py", status="modified", patch=patch)


def test_lines_are_followed_through_a_push_and_changed_ones_are_none() -> None:
    delta = _delta("@@ -3,3 +3,4 @@\n c\n-old\n+new\n+more\n e\n@@ -20,0 +22,2 @@\n+x\n+y")
    assert [map_line(delta, n) for n in (1, 2, 3)] == [1, 2, 3], "above the first change: unmoved"
    assert map_line(delta, 4) is None, "replaced"
    assert map_line(delta, 5) == 6, "context inside the hunk follows the insertion"
    assert [map_line(delta, n) for n in (6, 20)] == [7, 21], "between the hunks: +1"
    assert map_line(delta, 21) == 24, "after an insertion of two below line 20"


def test_a_hand_edited_carried_list_makes_the_state_incomplete() -> None:
    good = {"id": "0" * 12, "path": "a.py", "line": 3, "end": None, "side": "RIGHT", "p": "P2"}
    good |= {"title": "t", "fp": "f" * 10, "at": "a" * 40}

    def state_with(carried: Any) -> StickyState | None:
        body = "x\n\n" + state_marker(
            {"head": "a" * 40, "base": "b" * 40, "complete": True, "carried": carried}
        )
        return StickyState.parse(body)

    packed = base64.urlsafe_b64encode(json.dumps([good]).encode()).decode()
    state = state_with(packed)
    assert state is not None and state.complete and len(state.carried) == 1
    for bad in (
        {**good, "line": "3"},
        {**good, "p": "P0"},
        {**good, "at": "HEAD"},
        {**good, "line": True},
        7,
    ):
        state = state_with(base64.urlsafe_b64encode(json.dumps([good, bad]).encode()).decode())
        assert state is not None and not state.complete and len(state.carried) == 1, bad
    for broken in ("not base64!", [good], packed[:-3], base64.urlsafe_b64encode(b"{}").decode()):
        state = state_with(broken)
        assert state is not None and not state.complete and state.carried == (), broken


def test_findings_that_do_not_fit_the_state_make_the_next_review_full() -> None:
    diff = parse_github_file(filename="a.py", status="added", patch="@@ -0,0 +1,3 @@\n+one\n+two\n+three")
    findings = [
        Finding(f"{n:012x}", "P2", f"title {n}", "a.py", n, None, "RIGHT", "", "", "", "", 0.5, "llm", True)
        for n in (1, 2, 3)
    ]
    kept, complete = to_carry(findings, [diff], head="c" * 40)
    assert len(kept) == 3 and complete
    kept, complete = to_carry(findings, [diff], head="c" * 40, limit_chars=400)
    assert 0 < len(kept) < 3 and not complete
