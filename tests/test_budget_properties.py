"""Property tests (hypothesis): the plan never promises more than the budget holds, the planned calls
are all accepted by the ledger, and spend above a limit is always disclosed (issues 6 and 10)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer import gate
from reviewer.budget import Budget, BudgetExhausted, Limits, held_tokens
from reviewer.diff import parse_patch
from reviewer.plan import Allowance, Unit
from reviewer.render import Renderer
from reviewer.report import BudgetReport, Coverage, Gate
from tests.factories import added_file, assert_every_line_placed, quarter_plan

line_text = st.text(alphabet="abcdefgh =()+_.,xyz0123456789", min_size=0, max_size=160)


def hold_every_unit(budget: Budget, units: Iterable[Unit], price: tuple[float, float], margin: int) -> None:
    """Reserve each planned call as the review will: BudgetExhausted here is a plan the ledger refuses."""
    for u in units:
        budget.reserve(
            phase="review",
            input_tokens=u.input_tokens,
            max_output_tokens=u.answer_tokens,
            cost_usd=u.input_tokens * price[0] + u.answer_tokens * price[1],
            answer_cost_usd=u.answer_tokens * price[1],
            margin_percent=margin,
        )


@st.composite
def patches(draw: st.DrawFn) -> str:
    out = []
    for n in range(draw(st.integers(1, 6))):
        path = draw(st.sampled_from(["src/auth/", "src/", "tests/", "docs/"])) + f"f{n}.py"
        lines = draw(st.lists(line_text, min_size=1, max_size=120))
        out.append(added_file(path, lines))
    return "".join(out)


@st.composite
def allowances(draw: st.DrawFn) -> Allowance:
    return Allowance(
        input_tokens=draw(st.one_of(st.none(), st.integers(0, 30_000))),
        output_tokens=draw(st.one_of(st.none(), st.integers(0, 20_000))),
        calls=draw(st.one_of(st.none(), st.integers(0, 12))),
        window=draw(st.one_of(st.none(), st.integers(200, 40_000))),
        margin_percent=draw(st.sampled_from([100, 110, 115])),
        max_answer_tokens=draw(st.integers(64, 4096)),
        cost_usd=draw(st.one_of(st.none(), st.floats(0, 0.05))),
        price=draw(st.one_of(st.none(), st.tuples(st.floats(1e-8, 1e-5), st.floats(1e-8, 4e-5)))),
    )


def gate_on_budget(report: BudgetReport) -> Gate:
    """The publishing gate of a review that parsed no answer and kept its head: only `report` decides."""
    return gate.evaluate(
        pinned_head="a" * 40,
        current_head="a" * 40,
        coverage=Coverage(),
        answers_expected=0,
        answers_parsed=0,
        answers_gapped=0,
        budget=report,
        say=Renderer().translate,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patch=patches(), allowance=allowances(), overhead=st.integers(0, 600))
def test_the_plan_fits_every_limit_and_accounts_for_every_line(
    patch: str, allowance: Allowance, overhead: int
) -> None:
    files = parse_patch(patch)
    plan = quarter_plan(
        files, overhead=overhead, unit_tokens=allowance.window or 1_000_000, allowance=allowance
    )
    m = allowance.margin_percent
    held = [held_tokens(u.input_tokens, m) for u in plan.units]
    if allowance.input_tokens is not None:
        assert sum(held) <= allowance.input_tokens
    if allowance.output_tokens is not None:
        assert sum(u.answer_tokens for u in plan.units) <= allowance.output_tokens
    if allowance.calls is not None:
        assert len(plan.units) <= allowance.calls
    if allowance.window is not None:
        assert all(h + u.answer_tokens <= allowance.window for h, u in zip(held, plan.units, strict=True))

    # the ledger accepts every planned call, in any order: coverage is decided before the first call
    # (a plan filled to the brim of any limit, the cost limit included, never has a unit refused)
    limits = Limits(
        input_tokens=allowance.input_tokens if allowance.input_tokens is not None else 10**9,
        output_tokens=allowance.output_tokens if allowance.output_tokens is not None else 10**9,
        cost_usd=allowance.cost_usd if allowance.cost_usd is not None and allowance.price else 10.0**6,
        seconds=3600,
        calls=allowance.calls if allowance.calls is not None else 10**6,
    )
    price = allowance.price or (0.0, 0.0)
    hold_every_unit(Budget(limits), reversed(plan.units), price, m)

    # every line of every hunk is sent or accounted for with a reason
    assert_every_line_placed(plan, files)
    assert all(x.reason in ("budget", "context_window") for x in plan.unplaced)

    # `context_window` only for lines that do not fit one call even alone
    if allowance.window is None:
        assert all(x.reason == "budget" for x in plan.unplaced)


@st.composite
def calls(draw: st.DrawFn) -> list[tuple[int, int, int, int, float | None]]:
    """(estimate, max_tokens, used input, used output, cost): usage is often far above the estimate."""
    out = []
    for _ in range(draw(st.integers(1, 25))):
        estimate = draw(st.integers(0, 5_000))
        answer = draw(st.integers(1, 2_000))
        factor = draw(st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.1, 3.0, 20.0]))
        used_out = draw(st.integers(0, answer * 3))
        cost = draw(st.one_of(st.none(), st.floats(0, 0.5)))
        out.append((estimate, answer, int(estimate * factor), used_out, cost))
    return out


@settings(max_examples=200, deadline=None)
@given(
    plan=calls(),
    limits=st.builds(
        Limits,
        input_tokens=st.integers(0, 40_000),
        output_tokens=st.integers(0, 20_000),
        cost_usd=st.floats(0, 2),
        seconds=st.just(3600.0),
        calls=st.integers(0, 30),
    ),
    margin=st.sampled_from([100, 110, 115]),
)
def test_spend_never_exceeds_a_limit_without_being_disclosed_and_the_review_is_published(
    plan: list[tuple[int, int, int, int, float | None]], limits: Limits, margin: int
) -> None:
    budget = Budget(limits)
    for estimate, answer, used_in, used_out, cost in plan:
        try:
            r = budget.reserve(
                phase="review",
                input_tokens=estimate,
                max_output_tokens=answer,
                cost_usd=cost,
                margin_percent=margin,
            )
        except BudgetExhausted:
            continue
        budget.settle(r, input_tokens=used_in, output_tokens=used_out, cost_usd=cost)
    report = budget.report()
    used = report.used
    disclosed = {o.limit for o in report.overrun}
    for name, value in (
        ("input_tokens", used.input_tokens),
        ("output_tokens", used.output_tokens),
        ("calls", used.calls),
        ("cost_usd", used.cost_usd),
    ):
        limit = getattr(limits, name)
        assert value is None or value <= limit + 1e-9 or name in disclosed
    assert used.calls <= limits.calls, "calls are counted before they are sent: never over"
    for call in report.calls:
        assert call.reserved_input_tokens == held_tokens(call.estimated_input_tokens, margin)
    result = gate_on_budget(report)
    check = next(c for c in result.checks if c.name == "budget_respected")
    assert check.ok and result.publish_ready, "a paid-for review is published"
    if disclosed:
        assert "disclosed" in check.detail and all(name in check.detail for name in disclosed)


def test_an_overrun_the_budget_did_not_disclose_blocks_publishing() -> None:
    budget = Budget(Limits(input_tokens=100))
    r = budget.reserve(
        phase="review", input_tokens=90, max_output_tokens=10, cost_usd=0.0, margin_percent=100
    )
    budget.settle(r, input_tokens=500, output_tokens=1, cost_usd=0.0)
    report = budget.report()
    assert [(o.limit, o.used, o.allowed) for o in report.overrun] == [("input_tokens", 500, 100)]
    hidden = report.__class__(**{**report.__dict__, "overrun": ()})
    result = gate_on_budget(hidden)
    assert not result.publish_ready


@settings(max_examples=60, deadline=None)
@given(
    cost_usd=st.floats(0.004, 0.05),
    price=st.tuples(st.floats(1e-7, 1e-5), st.floats(1e-6, 4e-5)),
    margin=st.sampled_from([110, 115]),
    lines=st.integers(20, 400),
)
def test_a_plan_filled_to_the_brim_of_its_cost_limit_is_accepted_call_by_call(
    cost_usd: float, price: tuple[float, float], margin: int, lines: int
) -> None:
    """The planner and the ledger hold a unit alike (margin on the input only): the last unit of a
    plan that spends the whole cost limit is never refused at run time."""
    patch = added_file("src/a.py", [f"    value_{i} = compute(value_{i - 1}) + {i}" for i in range(lines)])
    allowance = Allowance(cost_usd=cost_usd, price=price, margin_percent=margin, max_answer_tokens=4096)
    plan = quarter_plan(parse_patch(patch), overhead=500, unit_tokens=100_000, allowance=allowance)
    budget = Budget(Limits(input_tokens=10**9, output_tokens=10**9, cost_usd=cost_usd, calls=1000))
    hold_every_unit(budget, plan.units, price, margin)


@settings(max_examples=150, deadline=None)
@given(
    run_cost=st.integers(0, 1000),
    steps=st.lists(
        st.tuples(
            st.integers(0, 3),  # which child
            st.integers(0, 400),  # the cost asked for, in thousandths
            st.integers(0, 600),  # what the provider billed, in thousandths of what was asked
            st.booleans(),  # settled (True) or cancelled
        ),
        max_size=30,
    ),
    own=st.lists(st.integers(0, 1000), min_size=4, max_size=4),
)
def test_children_never_spend_more_than_the_parent_has_left(
    run_cost: int, steps: list[tuple[int, int, int, bool]], own: list[int]
) -> None:
    """Whatever the children ask, in whatever order: a reservation is accepted only when it fits
    the child and what the parent has left, and the parent is charged exactly what its children
    spent. Billing at most what was reserved, the parent never passes its limit."""
    run = Budget(Limits.shared_by_run(Limits(cost_usd=run_cost / 1000)))
    children = [Budget(Limits(cost_usd=c / 1000, calls=1000), parent=run) for c in own]
    for which, asked, billed, settle in steps:
        child = children[which]
        cost = asked / 1000
        child_left, run_left = child.left().cost_usd, run.left().cost_usd
        try:
            r = child.reserve(
                phase="review",
                input_tokens=1,
                max_output_tokens=1,
                cost_usd=cost,
                answer_cost_usd=cost,
                margin_percent=100,
            )
        except BudgetExhausted as exc:
            assert exc.limit == "cost_usd"
            assert cost > min(child_left, run_left) - 1e-12 or min(child_left, run_left) <= 0
            continue
        assert cost <= min(child_left, run_left) + 1e-12, "accepted more than the parent has left"
        if settle:
            child.settle(r, input_tokens=1, output_tokens=1, cost_usd=cost * min(billed, 1000) / 1000)
        else:
            child.cancel(r)
    spent = run.spent().cost_usd
    assert spent is not None and spent <= run_cost / 1000 + 1e-9
    assert spent == pytest.approx(sum(c.spent().cost_usd or 0.0 for c in children))
    assert run.spent().calls == sum(c.spent().calls for c in children)
