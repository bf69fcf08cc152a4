"""The completion gate (`publish_ready`), the verdict, and `--fail-on` (DESIGN 4.5, 10.3)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reviewer.report import (
    BudgetReport,
    Coverage,
    Finding,
    Gap,
    Gate,
    GateCheck,
    Verdict,
    priority_rank,
)

FAIL_ON = ("never", "P1", "P2", "P3")
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
    say: Callable[..., str] | None = None,
) -> Gate:
    """Integrity checks: disclosed gaps do not block publishing; a moved head or an undisclosed
    overrun does. Every reservation fits the limits, so a limit is passed only when the provider
    reported more than was reserved: the budget lists that in `overrun`, and the review it paid
    for is published with the overrun shown here (DESIGN 5).

    `say` (the renderer's `translate`) localizes the details through the `gate_detail.*` strings;
    without it they are English.
    """
    unaccounted = [f.path for f in coverage.files if f.status == "partial" and not f.reason]
    counts: dict[str, int] = {}
    for f in coverage.files:
        counts[f.status] = counts.get(f.status, 0) + 1
    moved = current_head is not None and current_head != pinned_head
    limits, used = budget.limits, budget.used
    over = [
        (name, value, limits[name])
        for name, value in (
            ("input_tokens", used.input_tokens),
            ("output_tokens", used.output_tokens),
            ("calls", used.calls),
            ("cost_usd", used.cost_usd),
        )
        if value is not None and limits.get(name) is not None and value > limits[name] + 1e-9
    ]
    disclosed = {o.limit for o in budget.overrun}
    overrun = [name for name, _, _ in over if name not in disclosed]
    budget_detail = (
        "over " + ", ".join(overrun)
        if overrun
        else "; ".join(
            f"provider-reported {name} {value:g} > limit {limit:g} (usage above the reservation; disclosed,"
            " the paid-for review is published)"
            for name, value, limit in over
        )
        or ("exhausted, disclosed" if budget.exhausted else "ok")
    )
    checks: tuple[GateCheck, ...] = (
        GateCheck(
            "head_unchanged",
            not moved,
            f"head moved from {pinned_head[:12]} to {(current_head or '')[:12]}"
            if moved
            else f"{pinned_head[:12]}" + ("" if current_head is not None else " (not re-read)"),
        ),
        GateCheck(
            "coverage_accounted",
            not unaccounted,
            ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no files",
        ),
        GateCheck(
            "answers_parsed",
            answers_parsed + answers_gapped >= answers_expected,
            f"{answers_parsed}/{answers_expected} parsed"
            + (f", {answers_gapped} reported as gaps" if answers_gapped else ""),
        ),
        GateCheck(
            "budget_respected",
            not overrun,
            budget_detail,
        ),
        GateCheck(
            "output_limits",
            all(o.size <= o.limit for o in outputs),
            ", ".join(
                f"{o.name} {o.size:,}/{o.limit:,}" + (" (truncated)" if o.truncated else "") for o in outputs
            )
            or "nothing rendered",
        ),
    )
    if say is not None:
        checks = _localized(
            checks,
            say,
            pinned=pinned_head,
            current=current_head,
            counts=counts,
            overrun=overrun,
            disclosed=[(name, value, limit) for name, value, limit in over if name not in overrun],
            budget=budget,
            parsed=answers_parsed,
            expected=answers_expected,
            gapped=answers_gapped,
            outputs=outputs,
        )
    ready = all(c.ok for c in checks)
    return Gate(publish_ready=ready, checks=checks)


def _localized(
    checks: tuple[GateCheck, ...],
    say: Callable[..., str],
    *,
    pinned: str,
    current: str | None,
    counts: Mapping[str, int],
    overrun: Sequence[str],
    disclosed: Sequence[tuple[str, float, float]],
    budget: BudgetReport,
    parsed: int,
    expected: int,
    gapped: int,
    outputs: Sequence[OutputSize],
) -> tuple[GateCheck, ...]:
    details = {
        "head_unchanged": say("gate_detail.moved", head=pinned[:12], now=(current or "")[:12])
        if current is not None and current != pinned
        else pinned[:12] + ("" if current is not None else say("gate_detail.not_reread")),
        "coverage_accounted": ", ".join(
            say(f"status_count.{status}", n=n) for status, n in sorted(counts.items())
        )
        or say("gate_detail.no_files"),
        "answers_parsed": say("gate_detail.parsed", parsed=parsed, expected=expected)
        + (say("gate_detail.gapped", n=gapped) if gapped else ""),
        "budget_respected": say("gate_detail.over", limits=", ".join(overrun))
        if overrun
        else "; ".join(
            say("gate_detail.disclosed", limit=name, used=f"{value:g}", allowed=f"{limit:g}")
            for name, value, limit in disclosed
        )
        or say("gate_detail.exhausted" if budget.exhausted else "gate_detail.ok"),
        "output_limits": ", ".join(
            say(
                "gate_detail.output",
                name=say(f"gate_output.{o.name}", default=o.name),
                size=o.size,
                limit=o.limit,
            )
            + (say("gate_detail.truncated") if o.truncated else "")
            for o in outputs
        )
        or say("gate_detail.nothing_rendered"),
    }
    return tuple(GateCheck(c.name, c.ok, details.get(c.name, c.detail)) for c in checks)


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
    out = {"P1": 0, "P2": 0, "P3": 0}
    for f in findings:
        out[f.priority] += 1
    return out
