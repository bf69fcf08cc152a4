"""The completion gate, the verdict and --fail-on."""

from __future__ import annotations

from reviewer.gate import OutputSize, evaluate, exit_code, fails, verdict
from reviewer.render import Renderer
from reviewer.report import BudgetReport, Coverage, FileCoverage, Finding, Gap, Usage
from tests.factories import finding

LIMITS = {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 1.0, "seconds": 60, "calls": 4}


def _budget(**used: object) -> BudgetReport:
    return BudgetReport(limits=LIMITS, used=Usage(**used), exhausted=False, by_phase={})  # type: ignore[arg-type]


def _finding(priority: str) -> Finding:
    blank = {"trigger": "", "observation": "", "suggestion": "", "quote": ""}
    return finding(id="0" * 12, priority=priority, title="t", path="a.py", line=1, confidence=1.0, **blank)


def _cov(*statuses: tuple[str, str | None]) -> Coverage:
    return Coverage(
        files=tuple(
            FileCoverage(f"f{i}", s, r, 1, 1 if s == "reviewed" else 0)  # type: ignore[arg-type]
            for i, (s, r) in enumerate(statuses)
        )
    )


def test_gate_ready_when_all_checks_pass() -> None:
    g = evaluate(
        pinned_head="a" * 40,
        current_head="a" * 40,
        coverage=_cov(("reviewed", None)),
        answers_expected=2,
        answers_parsed=1,
        answers_gapped=1,
        budget=_budget(calls=2),
        outputs=[OutputSize("comment", 10, 100)],
        say=Renderer().translate,
    )
    assert g.publish_ready
    assert [c.name for c in g.checks] == [
        "head_unchanged",
        "coverage_accounted",
        "answers_parsed",
        "budget_respected",
        "output_limits",
    ]


def test_moved_head_blocks_publishing_and_makes_incomplete() -> None:
    g = evaluate(
        pinned_head="a" * 40,
        current_head="b" * 40,
        coverage=_cov(("reviewed", None)),
        answers_expected=0,
        answers_parsed=0,
        answers_gapped=0,
        budget=_budget(),
        say=Renderer().translate,
    )
    assert not g.publish_ready and not g.checks[0].ok
    assert (
        verdict(findings=[_finding("P1")], coverage=_cov(("reviewed", None)), gaps=[], head_moved=True)
        == "incomplete"
    )


def test_unreported_parse_failure_and_overrun_block() -> None:
    g = evaluate(
        pinned_head="a",
        current_head="a",
        coverage=_cov(),
        answers_expected=3,
        answers_parsed=1,
        answers_gapped=0,
        budget=_budget(calls=5),
        outputs=[OutputSize("comment", 70_000, 65_000)],
        say=Renderer().translate,
    )
    failed = {c.name for c in g.checks if not c.ok}
    assert failed == {"answers_parsed", "budget_respected", "output_limits"}


def test_verdicts() -> None:
    reviewed = _cov(("reviewed", None), ("skipped", "lockfile"))
    assert verdict(findings=[], coverage=reviewed, gaps=[], head_moved=False) == "clean"
    assert verdict(findings=[_finding("P3")], coverage=reviewed, gaps=[], head_moved=False) == "findings"
    budget_cut = _cov(("reviewed", None), ("listed", "budget"))
    assert verdict(findings=[], coverage=budget_cut, gaps=[], head_moved=False) == "incomplete"
    no_model = _cov(("listed", "no_model"))
    gap = [Gap("LLM review not run: no model configured", "no_model")]
    assert verdict(findings=[], coverage=no_model, gaps=gap, head_moved=False) == "incomplete"
    assert verdict(findings=[_finding("P1")], coverage=no_model, gaps=gap, head_moved=False) == "findings"


def test_fail_on_and_exit_codes() -> None:
    p2 = [_finding("P2")]
    assert not fails(p2, "never") and not fails(p2, "P1") and fails(p2, "P2") and fails(p2, "P3")
    assert exit_code(verdict_="incomplete", findings=p2, fail_on="P2", on_error="fail") == 3
    assert exit_code(verdict_="incomplete", findings=p2, fail_on="P2", on_error="warn") == 1
    assert exit_code(verdict_="findings", findings=p2, fail_on="P1", on_error="fail") == 0
