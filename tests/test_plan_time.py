"""Issue 21 item 1: planning is counted in `max-seconds`; past its share it stops with `time` gaps
and the review goes on with what it planned.

Time here is the budget's own clock, injected: a clock that moves one tick each time it is read,
so how far planning gets depends only on how often it looks, never on the machine's speed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewer import gate
from reviewer.budget import Budget, Deadline, Limits
from reviewer.config import Config
from reviewer.diff import DiffFile, parse_patch
from reviewer.plan import Plan, PlanOptions, coverage, make_plan
from reviewer.render import Renderer
from reviewer.review import analyse, conclude
from reviewer.source.local import LocalSource
from tests.factories import model_answer
from tests.fakes.model_server import FakeModelServer, text


class Ticks:
    """A clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float = 1.0) -> None:
        self.now = 0.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def many_hunks(files: int, edits: int) -> list[DiffFile]:
    """`files` files of `edits` one-line changes each, far enough apart to be separate hunks."""
    out = []
    for f in range(files):
        lines = [f"diff --git a/m{f:03d}.py b/m{f:03d}.py", f"--- a/m{f:03d}.py", f"+++ b/m{f:03d}.py"]
        for e in range(edits):
            n = 1 + 8 * e
            lines += [f"@@ -{n},1 +{n},1 @@", f"-v{e} = {e}", f"+v{e} = {e + 1}"]
        out += parse_patch("\n".join(lines) + "\n")
    return out


def test_planning_past_its_deadline_leaves_time_gaps_and_keeps_what_it_packed() -> None:
    files = many_hunks(20, 30)
    clock = Ticks()
    plan = make_plan(
        files,
        PlanOptions(
            unit_tokens=2_000, count_tokens=lambda s: len(s) // 4, deadline=Deadline(clock, 0.0, 400.0)
        ),
    )
    timed = [x for x in plan.unplaced if x.reason == "time"]
    packed = {(p.path, p.hunk_index) for u in plan.units for p in u.parts}
    assert plan.units and timed
    assert len(packed) + len(timed) == 600
    assert not packed & {(x.path, x.hunk_index) for x in timed}
    cov = coverage(plan, files, reviewed_units={u.id for u in plan.units})
    reasons = {f.reason for f in cov.files if f.status != "reviewed"}
    assert reasons == {"time"}
    assert 0 < cov.lines_reviewed < cov.lines_changed


def test_counting_stops_at_half_the_deadline_and_packing_at_all_of_it() -> None:
    files = many_hunks(10, 20)
    counted = make_plan(
        files,
        PlanOptions(
            unit_tokens=2_000, count_tokens=lambda s: len(s) // 4, deadline=Deadline(Ticks(), 0.0, 60.0)
        ),
    )
    # at most half of the span is spent counting (one read per hunk), then packing gets the rest
    packed = sum(len(u.parts) for u in counted.units)
    assert 0 < packed <= 30
    assert sum(1 for x in counted.unplaced if x.reason == "time") == 200 - packed


def test_a_deadline_never_reached_changes_nothing() -> None:
    files = many_hunks(10, 20)
    free = make_plan(files, PlanOptions(unit_tokens=2_000, count_tokens=lambda s: len(s) // 4))
    far = make_plan(
        files,
        PlanOptions(
            unit_tokens=2_000, count_tokens=lambda s: len(s) // 4, deadline=Deadline(Ticks(), 0.0, 1e9)
        ),
    )
    assert _shape(free) == _shape(far) and not far.unplaced


def test_a_deadline_already_passed_still_plans_one_hunk() -> None:
    files = many_hunks(5, 5)
    plan = make_plan(
        files,
        PlanOptions(
            unit_tokens=2_000, count_tokens=lambda s: len(s) // 4, deadline=Deadline(Ticks(), 0.0, 0.0)
        ),
    )
    assert sum(len(u.parts) for u in plan.units) == 1
    assert sum(1 for x in plan.unplaced if x.reason == "time") == 24


def _shape(plan: Plan) -> list[list[tuple[str, int]]]:
    return [[(p.path, p.hunk_index) for p in u.parts] for u in plan.units]


# --- the whole review, with the model on the loopback server --------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def big_pr(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.invalid")
    _git(repo, "config", "user.name", "t")
    for f in range(30):
        (repo / f"m{f:03d}.py").write_text("".join(f"v{i} = {i}\n" for i in range(8 * 20)))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "feature")
    for f in range(30):
        body = "".join(f"v{i} = {i + (1 if i % 8 == 0 else 0)}\n" for i in range(8 * 20))
        (repo / f"m{f:03d}.py").write_text(body)
    _git(repo, "commit", "-q", "-am", "600 one-line edits")
    return repo


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with FakeModelServer() as s:
        s.handler = lambda body: text(model_answer(), prompt_tokens=500, completion_tokens=20)
        yield s


def test_a_pr_of_many_hunks_under_a_small_max_seconds_reviews_what_it_planned_and_is_not_clean(
    big_pr: Path, server: FakeModelServer
) -> None:
    limits = Limits(
        input_tokens=10_000_000, output_tokens=1_000_000, cost_usd=100.0, seconds=1_200, calls=200
    )
    config = Config(model="openai/gpt-4o-mini", api_base=server.api_base, limits=limits)
    source = LocalSource(big_pr, base="main")
    renderer = Renderer()
    # one tick a read: planning gets a quarter of what is left (~300 reads), the calls the rest
    analysis = analyse(
        source,
        source.change(),
        config,
        budget=Budget(limits, clock=Ticks()),
        renderer=renderer,
        warn=lambda message: None,
    )
    report = conclude(analysis, current_head=None, outputs=(), renderer=renderer)
    assert server.requests, "what was planned is sent"
    assert report.budget.used.calls == len(server.requests)
    reasons = {f.reason for f in report.coverage.files if f.status != "reviewed"}
    assert reasons == {"time"}
    assert 0 < report.coverage.lines_reviewed < report.coverage.lines_changed
    assert any(g.why == "time" for g in report.gaps)
    assert report.verdict == "incomplete"
    assert gate.exit_code(verdict_=report.verdict, findings=(), fail_on="never", on_error="fail") == 3
    summary = renderer.summary(report.to_dict())
    assert "planning used its share of max-seconds" in summary
