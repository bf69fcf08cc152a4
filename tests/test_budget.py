"""The budget ledger: every limit refuses a call that could overrun it, also under parallel workers."""

from __future__ import annotations

import threading

import pytest

from reviewer.budget import Budget, BudgetExhausted, Limits
from reviewer.report import Usage

BIG = Limits(input_tokens=1_000_000, output_tokens=1_000_000, cost_usd=100.0, seconds=1000.0, calls=1000)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def limits(**changes: float) -> Limits:
    values = {**BIG.__dict__, **changes}
    return Limits(**values)


def reserve(
    budget: Budget, *, phase: str = "review", inp: int = 100, out: int = 100, cost: float | None = 0.01
):
    return budget.reserve(phase=phase, input_tokens=inp, max_output_tokens=out, cost_usd=cost)


def test_input_tokens_limit_refuses_an_estimate_that_would_overrun_with_the_margin() -> None:
    budget = Budget(limits(input_tokens=1000))
    reserve(budget, inp=800)  # 920 held with the 15 % margin
    with pytest.raises(BudgetExhausted, match="input_tokens") as refused:
        reserve(budget, inp=70)  # 81 more would make 1001
    assert refused.value.limit == "input_tokens"
    assert budget.report().exhausted


def test_output_tokens_limit_refuses_a_max_tokens_that_would_overrun() -> None:
    budget = Budget(limits(output_tokens=2000))
    r = reserve(budget, out=1000)
    budget.settle(r, input_tokens=10, output_tokens=1000, cost_usd=0.0)
    reserve(budget, out=600)  # max_tokens is a hard cap: held as is, no margin
    with pytest.raises(BudgetExhausted, match="output_tokens") as refused:
        reserve(budget, out=401)  # 1000 + 600 + 401 > 2000
    assert refused.value.limit == "output_tokens"


def test_cost_limit_refuses_a_call_whose_priced_estimate_would_overrun() -> None:
    budget = Budget(limits(cost_usd=0.10))
    r = reserve(budget, cost=0.05)
    budget.settle(r, input_tokens=10, output_tokens=10, cost_usd=0.06)
    with pytest.raises(BudgetExhausted, match="cost_usd") as refused:
        reserve(budget, cost=0.04)  # 0.046 with margin > 0.04 left
    assert refused.value.limit == "cost_usd"
    reserve(budget, cost=0.03)


def test_seconds_limit_refuses_once_the_wall_time_is_spent() -> None:
    clock = FakeClock()
    budget = Budget(limits(seconds=10.0), clock=clock)
    reserve(budget)
    clock.now += 9.9
    assert budget.seconds_left() == pytest.approx(0.1)
    reserve(budget)
    clock.now += 0.1
    with pytest.raises(BudgetExhausted, match="seconds") as refused:
        reserve(budget)
    assert refused.value.limit == "seconds"
    assert budget.seconds_left() == 0.0


def test_calls_limit_counts_settled_and_in_flight_calls() -> None:
    budget = Budget(limits(calls=2))
    first = reserve(budget)
    budget.settle(first, input_tokens=1, output_tokens=1, cost_usd=0.0)
    reserve(budget)  # in flight, not settled yet
    with pytest.raises(BudgetExhausted, match="calls") as refused:
        reserve(budget)
    assert refused.value.limit == "calls"


@pytest.mark.parametrize("name", ["input_tokens", "output_tokens", "cost_usd", "seconds", "calls"])
def test_a_limit_of_zero_means_no_model_calls(name: str) -> None:
    budget = Budget(limits(**{name: 0}))
    with pytest.raises(BudgetExhausted, match=f"^budget exhausted: {name}") as refused:
        reserve(budget, inp=0, out=0, cost=0.0)
    assert refused.value.limit == name
    assert budget.report().used.calls == 0


def test_settle_replaces_the_reservation_by_real_usage_and_cancel_releases_it() -> None:
    budget = Budget(limits(input_tokens=1000, calls=3))
    big = reserve(budget, inp=800)
    with pytest.raises(BudgetExhausted, match="input_tokens"):
        reserve(budget, inp=200)
    budget.settle(big, input_tokens=300, output_tokens=20, cost_usd=0.002)
    never_sent = reserve(budget, inp=500)
    budget.cancel(never_sent)
    reserve(budget, inp=600)  # 300 used + 690 held fits in 1000
    used = budget.report().used
    assert (used.input_tokens, used.output_tokens, used.calls) == (300, 20, 1)
    assert used.cost_usd == pytest.approx(0.002)


def test_a_reservation_cannot_be_settled_twice() -> None:
    budget = Budget(BIG)
    r = reserve(budget)
    budget.settle(r, input_tokens=1, output_tokens=1, cost_usd=0.0)
    with pytest.raises(ValueError, match="already settled"):
        budget.settle(r, input_tokens=1, output_tokens=1, cost_usd=0.0)
    with pytest.raises(ValueError, match="already settled"):
        budget.cancel(r)


def test_unknown_phase_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="'reviw'"):
        Budget(BIG).reserve(phase="reviw", input_tokens=1, max_output_tokens=1, cost_usd=None)


def test_output_tokens_left_is_the_largest_max_tokens_that_is_accepted() -> None:
    budget = Budget(limits(output_tokens=1000))
    left = budget.output_tokens_left()
    assert left == 1000
    with pytest.raises(BudgetExhausted, match="output_tokens"):
        reserve(budget, out=left + 1)
    reserve(budget, out=left)
    assert budget.output_tokens_left() == 0


def test_unknown_cost_makes_the_run_cost_unknown_but_token_and_call_limits_hold() -> None:
    budget = Budget(limits(input_tokens=1000, calls=2))
    r = reserve(budget, inp=100, cost=None)
    budget.settle(r, input_tokens=100, output_tokens=5, cost_usd=None)
    with pytest.raises(BudgetExhausted, match="input_tokens") as refused:
        reserve(budget, inp=900, cost=None)
    assert refused.value.limit == "input_tokens"
    r = reserve(budget, phase="verify", cost=0.01)
    budget.settle(r, input_tokens=1, output_tokens=1, cost_usd=0.01)
    with pytest.raises(BudgetExhausted, match="calls") as refused:
        reserve(budget, cost=None)
    assert refused.value.limit == "calls"
    report = budget.report()
    assert report.used.cost_usd is None
    assert report.by_phase["review"].cost_usd is None
    assert report.by_phase["verify"].cost_usd == pytest.approx(0.01)
    assert report.by_phase["repair"] == Usage()


def test_unknown_cost_is_refused_once_the_known_spend_reached_the_cost_limit() -> None:
    budget = Budget(limits(cost_usd=0.01))
    r = reserve(budget, cost=0.005)
    budget.settle(r, input_tokens=1, output_tokens=1, cost_usd=0.01)
    with pytest.raises(BudgetExhausted, match="cost_usd") as refused:
        reserve(budget, cost=None)
    assert refused.value.limit == "cost_usd"


def test_report_has_limits_used_exhausted_and_the_three_phases() -> None:
    clock = FakeClock()
    budget = Budget(Limits(), clock=clock)
    r = reserve(budget, phase="review")
    clock.now += 2.5
    budget.settle(r, input_tokens=1200, output_tokens=300, cost_usd=0.004)
    r = reserve(budget, phase="repair")
    clock.now += 1.004
    budget.settle(r, input_tokens=1500, output_tokens=100, cost_usd=0.001)
    report = budget.report()
    assert report.limits == {
        "input_tokens": 200_000,
        "output_tokens": 24_000,
        "cost_usd": 1.0,
        "seconds": 600.0,
        "calls": 24,
    }
    assert report.used == Usage(
        input_tokens=2700, output_tokens=400, cost_usd=pytest.approx(0.005), seconds=3.5, calls=2
    )
    assert report.exhausted is False
    assert set(report.by_phase) == {"review", "repair", "verify"}
    assert report.by_phase["review"] == Usage(1200, 300, pytest.approx(0.004), 2.5, 1)
    assert report.by_phase["repair"].calls == 1
    assert report.by_phase["verify"] == Usage()


def test_mark_exhausted_is_reported() -> None:
    budget = Budget(BIG)
    budget.mark_exhausted()
    assert budget.report().exhausted is True


def test_parallel_reservations_never_oversubscribe() -> None:
    budget = Budget(limits(input_tokens=10_000, output_tokens=1_000_000, calls=1000))
    start = threading.Barrier(16)
    granted: list[int] = []
    refused: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        for _ in range(20):
            try:
                r = reserve(budget, inp=100, out=10)
            except BudgetExhausted as error:
                with lock:
                    refused.append(error.limit)
            else:
                with lock:
                    granted.append(r.input_tokens)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) <= 10_000
    assert len(granted) == 10_000 // 115
    assert set(refused) == {"input_tokens"}


def test_parallel_settles_keep_every_call_and_token() -> None:
    budget = Budget(limits(calls=40))
    start = threading.Barrier(8)
    outcomes: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        for _ in range(10):
            try:
                r = reserve(budget, inp=10, out=10, cost=0.001)
            except BudgetExhausted:
                ok = False
            else:
                budget.settle(r, input_tokens=7, output_tokens=3, cost_usd=0.001)
                ok = True
            with lock:
                outcomes.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    used = budget.report().used
    assert outcomes.count(True) == 40
    assert (used.calls, used.input_tokens, used.output_tokens) == (40, 280, 120)
    assert used.cost_usd == pytest.approx(0.04)


# --- a scan run's budget is the parent of each PR's: the child's limits and spend ------------------


def hold(budget: Budget, *, inp: int = 0, out: int = 0, cost: float = 0.0):
    """Reserve with no margin, the whole cost the answer's (held exactly): for at-the-limit checks."""
    return budget.reserve(
        phase="review",
        input_tokens=inp,
        max_output_tokens=out,
        cost_usd=cost,
        answer_cost_usd=cost,
        margin_percent=100,
    )


def test_a_childs_limits_are_the_smaller_of_its_own_and_what_the_parent_has_left() -> None:
    clock = FakeClock()
    run = Budget(limits(input_tokens=1000, cost_usd=1.0, seconds=100.0, calls=5), clock=clock)
    first = Budget(limits(input_tokens=10_000, cost_usd=0.5, seconds=600.0, calls=24), parent=run)
    assert (first.limits.input_tokens, first.limits.cost_usd, first.limits.calls) == (1000, 0.5, 5)
    hold_first = hold(first, inp=600, cost=0.5)
    first.settle(hold_first, input_tokens=600, output_tokens=0, cost_usd=0.75)  # the provider billed more
    clock.now += 30.0
    second = Budget(limits(input_tokens=10_000, cost_usd=0.5, seconds=600.0, calls=24), parent=run)
    assert second.limits == Limits(
        input_tokens=400, output_tokens=1_000_000, cost_usd=0.25, seconds=70.0, calls=4
    )
    assert second.report().limits["cost_usd"] == 0.25, "the PR's report shows the limits it had"


def test_what_a_child_spends_is_charged_to_the_parent() -> None:
    run = Budget(Limits.shared_by_run(limits(cost_usd=1.0)))
    for spent in (0.25, 0.5):
        pr = Budget(limits(cost_usd=1.0), parent=run)
        r = hold(pr, inp=100, out=10, cost=spent)
        pr.settle(r, input_tokens=90, output_tokens=10, cost_usd=spent)
        assert pr.spent().cost_usd == spent
    used = run.spent()
    assert (used.cost_usd, used.input_tokens, used.output_tokens, used.calls) == (0.75, 180, 20, 2)
    assert run.left().cost_usd == 0.25


def test_an_unpriced_call_in_a_child_makes_the_runs_cost_unknown() -> None:
    run = Budget(Limits.shared_by_run(limits(cost_usd=1.0)))
    pr = Budget(limits(cost_usd=1.0), parent=run)
    pr.settle(hold(pr, inp=10), input_tokens=10, output_tokens=1, cost_usd=None)
    assert run.spent().cost_usd is None


def test_a_scan_knows_what_a_failed_pr_cost_after_an_earlier_pr_made_the_runs_cost_unknown() -> None:
    """A scan gives each PR a recording ledger between the run and the PR's budget: the row of a PR
    whose review failed after its calls shows their cost, though an earlier unpriced call made the
    run's total unknown."""
    run = Budget(Limits.shared_by_run(limits(cost_usd=1.0)))
    earlier = Budget(limits(cost_usd=1.0), parent=Budget(Limits.unbounded(), parent=run))
    earlier.settle(hold(earlier, inp=10), input_tokens=10, output_tokens=1, cost_usd=None)
    ledger = Budget(Limits.unbounded(), parent=run)
    failed = Budget(limits(cost_usd=1.0), parent=ledger)
    failed.settle(hold(failed, inp=100, cost=0.01), input_tokens=100, output_tokens=5, cost_usd=0.01)
    assert run.spent().cost_usd is None
    assert ledger.spent().cost_usd == 0.01
    assert run.spent().calls == 2, "both calls are charged to the run"


def test_a_child_may_spend_exactly_what_the_parent_has_left_and_not_a_token_more() -> None:
    run = Budget(limits(input_tokens=1000, cost_usd=1.0))
    first = Budget(limits(input_tokens=10_000, cost_usd=1.0), parent=run)
    first.settle(hold(first, inp=600, cost=0.75), input_tokens=600, output_tokens=0, cost_usd=0.75)
    second = Budget(limits(input_tokens=10_000, cost_usd=1.0), parent=run)
    with pytest.raises(BudgetExhausted, match="needs 401 with margin, 400 left") as refused:
        hold(second, inp=401)
    assert refused.value.limit == "input_tokens"
    with pytest.raises(BudgetExhausted, match=r"needs \$0\.250001 with margin, \$0\.250000 left"):
        hold(second, cost=0.250001)
    hold(second, inp=400, cost=0.25)  # exactly what is left: accepted
    assert run.left().input_tokens == 0 and run.left().cost_usd == 0.0


def test_a_child_made_when_the_parent_is_spent_makes_no_call() -> None:
    run = Budget(Limits.shared_by_run(limits(cost_usd=0.5)))
    first = Budget(limits(cost_usd=1.0), parent=run)
    first.settle(hold(first, cost=0.5), input_tokens=1, output_tokens=1, cost_usd=0.5)
    late = Budget(limits(cost_usd=1.0), parent=run)
    assert late.limits.cost_usd == 0.0
    with pytest.raises(BudgetExhausted, match=r"\$0\.000000 left") as refused:
        hold(late, inp=1, cost=0.0)
    assert refused.value.limit == "cost_usd"


def test_siblings_in_flight_at_once_never_jointly_overspend_the_parent() -> None:
    """Two children made while the parent had 1,000 tokens left each see 1,000; what one holds
    is held in the parent too, so the other gets only the rest, to the token."""
    run = Budget(limits(input_tokens=1000))
    a = Budget(limits(input_tokens=1000), parent=run)
    b = Budget(limits(input_tokens=1000), parent=run)
    held_by_a = hold(a, inp=700)
    with pytest.raises(BudgetExhausted, match="needs 301 with margin, 300 left"):
        hold(b, inp=301)
    assert b.left().input_tokens == 300
    held_by_b = hold(b, inp=300)
    a.cancel(held_by_a)  # never sent: released in the parent as well
    assert run.left().input_tokens == 700
    b.settle(held_by_b, input_tokens=250, output_tokens=0, cost_usd=0.0)
    assert run.left().input_tokens == 750
    with pytest.raises(ValueError, match="already settled or cancelled"):
        b.settle(held_by_b, input_tokens=1, output_tokens=0, cost_usd=0.0)


def test_a_childs_allowance_is_what_both_have_left() -> None:
    run = Budget(limits(input_tokens=1000, output_tokens=500, calls=3, cost_usd=0.5))
    pr = Budget(limits(input_tokens=800, output_tokens=800, calls=10, cost_usd=1.0), parent=run)
    other = Budget(limits(), parent=run)
    hold(other, inp=500, out=100, cost=0.25)  # a sibling's call in flight
    allowance = pr.allowance(
        price=(1e-6, 2e-6), window=8000, margin_percent=110, max_answer_tokens=4096, answer_tokens=2000
    )
    assert (allowance.input_tokens, allowance.output_tokens, allowance.calls) == (500, 400, 2)
    assert allowance.cost_usd == 0.25
    assert (allowance.price, allowance.window, allowance.margin_percent) == ((1e-6, 2e-6), 8000, 110)


def test_a_child_runs_on_the_parents_clock_and_never_past_its_deadline() -> None:
    clock = FakeClock()
    run = Budget(limits(seconds=100.0), clock=clock)
    clock.now += 90.0
    pr = Budget(limits(seconds=600.0), parent=run)
    assert pr.limits.seconds == 10.0
    clock.now += 10.0
    with pytest.raises(BudgetExhausted) as refused:
        hold(pr)
    assert refused.value.limit == "seconds"


def test_a_runs_limits_bound_only_cost_and_seconds() -> None:
    run = Limits.shared_by_run(limits(input_tokens=5, output_tokens=5, cost_usd=2.0, seconds=60.0, calls=1))
    pr = Budget(limits(input_tokens=1000, calls=3), parent=Budget(run, clock=FakeClock()))
    assert pr.limits == Limits(
        input_tokens=1000, output_tokens=1_000_000, cost_usd=2.0, seconds=60.0, calls=3
    )
