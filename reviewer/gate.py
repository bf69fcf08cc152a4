"""The completion gate (`publish_ready`), the verdict, and `--fail-on` (DESIGN 4.5, 10.3)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reviewer.report import BudgetReport, Coverage, Finding, Gap, Gate, GateCheck, Verdict, priority_rank

UNREVIEWED_WHYS = frozenset(
    {
        "budget",
        "no_model",
        "no_credentials",
        "model_error",
        "unparsed",
        "no_patch",
        "too_many_files",
        "truncated",
        "include_unmatched",
        "time",
    }
)
MODEL_DOWN_WHYS = (
    "no_credentials",
    "model_auth",
    "model_unknown_model",
    "model_unreachable",
    "model_error",
    "unparsed",
)
"""Why a configured model may have reviewed nothing, most specific first (templates/macros.md.j2's
`model_down` lists the same codes in the same order)."""


@dataclass(frozen=True)
class OutputSize:
    """A rendered output, its size in the unit GitHub counts, and its limit."""

    name: str
    size: int
    limit: int
    truncated: bool = False


def evaluate(
    *,
    pinned_head: str,
    current_head: str | None,
    coverage: Coverage,
    answers_expected: int,
    answers_parsed: int,
    answers_gapped: int,
    budget: BudgetReport,
    outputs: Sequence[OutputSize] = (),
    say: Callable[..., str],
) -> Gate:
    """Integrity checks: disclosed gaps do not block publishing; a moved head or an undisclosed
    overrun does. Every reservation fits the limits, so a limit is passed only when the provider
    reported more than was reserved: the budget lists that in `overrun`, and the review it paid
    for is published with the overrun shown here (DESIGN 5).

    `say` (the renderer's `translate`) localizes the details through the `gate_detail.*` strings.
    """
    moved = current_head is not None and current_head != pinned_head
    unaccounted = [f.path for f in coverage.files if f.status == "partial" and not f.reason]
    over = _over_limits(budget)
    disclosed = {o.limit for o in budget.overrun}
    overrun = [name for name, _, _ in over if name not in disclosed]
    checks = (
        GateCheck("head_unchanged", not moved, _head_detail(say, pinned_head, current_head)),
        GateCheck("coverage_accounted", not unaccounted, _coverage_detail(say, coverage)),
        GateCheck(
            "answers_parsed",
            answers_parsed + answers_gapped >= answers_expected,
            say("gate_detail.parsed", parsed=answers_parsed, expected=answers_expected)
            + (say("gate_detail.gapped", n=answers_gapped) if answers_gapped else ""),
        ),
        GateCheck("budget_respected", not overrun, _budget_detail(say, overrun, over, budget.exhausted)),
        GateCheck("output_limits", all(o.size <= o.limit for o in outputs), _outputs_detail(say, outputs)),
    )
    return Gate(publish_ready=all(c.ok for c in checks), checks=checks)


def _over_limits(budget: BudgetReport) -> list[tuple[str, float, float]]:
    """(limit, used, allowed) for each limit the provider-reported usage passed."""
    limits, used = budget.limits, budget.used
    values = ((name, getattr(used, name)) for name in ("input_tokens", "output_tokens", "calls", "cost_usd"))
    return [
        (name, value, limits[name])
        for name, value in values
        if value is not None and limits.get(name) is not None and value > limits[name] + 1e-9
    ]


def _head_detail(say: Callable[..., str], pinned: str, current: str | None) -> str:
    if current is not None and current != pinned:
        return say("gate_detail.moved", head=pinned[:12], now=current[:12])
    return pinned[:12] + ("" if current is not None else say("gate_detail.not_reread"))


def _coverage_detail(say: Callable[..., str], coverage: Coverage) -> str:
    counts = sorted(Counter(f.status for f in coverage.files).items())
    return ", ".join(say(f"status_count.{status}", n=n) for status, n in counts) or say(
        "gate_detail.no_files"
    )


def _budget_detail(
    say: Callable[..., str],
    overrun: Sequence[str],
    over: Sequence[tuple[str, float, float]],
    exhausted: bool,
) -> str:
    """The undisclosed overruns; else the disclosed ones; else whether the budget ran out."""
    if overrun:
        return say("gate_detail.over", limits=", ".join(overrun))
    return "; ".join(
        say("gate_detail.disclosed", limit=name, used=f"{value:g}", allowed=f"{limit:g}")
        for name, value, limit in over
    ) or say("gate_detail.exhausted" if exhausted else "gate_detail.ok")


def _outputs_detail(say: Callable[..., str], outputs: Sequence[OutputSize]) -> str:
    return ", ".join(
        say(
            "gate_detail.output",
            name=say(f"gate_output.{o.name}", default=o.name),
            size=o.size,
            limit=o.limit,
        )
        + (say("gate_detail.truncated") if o.truncated else "")
        for o in outputs
    ) or say("gate_detail.nothing_rendered")


def model_down(*, coverage: Coverage, gaps: Sequence[Gap]) -> Gap | None:
    """The run-level gap that says why a configured model reviewed nothing (no key, endpoint down,
    key refused, unknown model, every call failed or unparsable), or None when it reviewed something
    or was never configured (`no_model` is the deterministic-only mode, not a failure)."""
    if any(f.status in ("reviewed", "partial") for f in coverage.files):
        return None
    return next((g for why in MODEL_DOWN_WHYS for g in gaps if g.why == why and g.path is None), None)


def verdict(
    *, findings: Sequence[Finding], coverage: Coverage, gaps: Sequence[Gap], head_moved: bool
) -> Verdict:
    """incomplete beats findings beats clean; never clean while something went unreviewed, and
    never `findings` when a configured model did not review: rule findings alone are not a review."""
    if head_moved or model_down(coverage=coverage, gaps=gaps) is not None:
        return "incomplete"
    if any(g.why == "include_unmatched" for g in gaps):  # the whole change was left out
        return "incomplete"
    reviewable = [f for f in coverage.files if f.status != "skipped"]
    reviewed_any = any(f.status in ("reviewed", "partial") for f in reviewable)
    unreviewed = any(f.status in ("listed", "partial") for f in reviewable) or any(
        g.why in UNREVIEWED_WHYS for g in gaps
    )
    if findings:
        return "findings"
    if (reviewable and not reviewed_any) or unreviewed:
        return "incomplete"
    return "clean"


def fails(findings: Sequence[Finding], fail_on: str) -> bool:
    """True when a finding is at or above the `--fail-on` priority."""
    if fail_on == "never":
        return False
    threshold = priority_rank(fail_on)
    return any(priority_rank(f.priority) <= threshold for f in findings)


def exit_code(*, verdict_: str, findings: Sequence[Finding], fail_on: str, on_error: str) -> int:
    """DESIGN section 2, first match wins: 3 incomplete under fail, 1 findings at fail-on, 0.
    A configured model that did not review makes the verdict incomplete, so `on-error` decides for
    it, and `fail-on` still applies to the rule findings that were found (docs/verdict.md)."""
    if verdict_ == "incomplete" and on_error == "fail":
        return 3
    if fails(findings, fail_on):
        return 1
    return 0


def counts(findings: Sequence[Finding]) -> Mapping[str, int]:
    return {priority: sum(f.priority == priority for f in findings) for priority in ("P1", "P2", "P3")}
