"""Limits, estimates and the ledger that every model call asks before it is sent (DESIGN section 5).

One `Budget` per review, and one per scan run, the **parent** of each PR's: a reservation must fit
the child and every budget above it, and is charged to each, so a child never spends what its parent
does not have. The planner gets its share as an `Allowance`; pricing lives here too.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from reviewer.errors import BudgetExhausted
from reviewer.report import BudgetReport, CallRecord, Overrun, Startup, Usage

UNBOUNDED = sys.maxsize
"""A token or call limit that never refuses (a scan run's: those limits are each PR's)."""


@dataclass(frozen=True)
class Limits:
    """A run's hard budget. Configuration requires every limit above 0 (reviewer/config.py); a 0
    here (a test's, or a scan's spent share) means no model calls."""

    input_tokens: int = 200_000
    output_tokens: int = 24_000
    cost_usd: float = 1.00
    seconds: float = 600.0
    calls: int = 24

    @classmethod
    def unbounded(cls) -> Limits:
        """Limits that never refuse: a scan's per-PR ledger that only records what a PR's calls cost."""
        return cls(UNBOUNDED, UNBOUNDED, math.inf, math.inf, UNBOUNDED)

    @classmethod
    def shared_by_run(cls, limits: Limits) -> Limits:
        """A scan run's limits: cost and seconds shared by every PR; tokens and calls are each PR's own."""
        return cls(UNBOUNDED, UNBOUNDED, limits.cost_usd, limits.seconds, UNBOUNDED)


DEFAULT_LIMITS = Limits()

Price = tuple[float, float]
"""US dollars per input token and per output token."""

MIN_CALL_INPUT_TOKENS = 1_000
"""Less than any review request holds: the packaged system prompt, review instructions and response
schema alone measure about 1,850 tokens. A budget that cannot pay for this cannot pay for a call."""

DEFAULT_ANSWER_TOKENS = 2_222
"""`answer_size.answer_reservation` for 6 findings in English (tiktoken's o200k); the review passes
the count for its own model, language and `max-findings`."""


@dataclass(frozen=True)
class Allowance:
    """What the whole plan may spend, in the ledger's terms (DESIGN 5; None: unlimited), and how a
    call is sized: `window` bounds one call's held input plus its answer reservation."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    calls: int | None = None
    cost_usd: float | None = None
    price: Price | None = None
    window: int | None = None
    margin_percent: int = 100
    max_answer_tokens: int = 4096
    answer_tokens: int = DEFAULT_ANSWER_TOKENS
    """What one whole answer needs (`answer_size.answer_reservation`): every call reserves it, within
    `max_answer_tokens`."""


MARGIN_PERCENT = 115
"""The default input margin for a caller that cannot say how good its count is (DESIGN 10.2)."""

EXACT_MARGIN_PERCENT = 100
"""A count made with the model's own tokenizer of everything that is sent needs no margin."""

UNCERTAIN_MARGIN_PERCENT = 110
"""A count made with a stand-in tokenizer (measured: llama.cpp counted ~8% more than tiktoken)."""

PLAUSIBLE_CALIBRATION = (0.5, 2.0)
"""A provider count outside these multiples of ours is not a tokenizer's difference (stand-ins differ
by well under 2x) but a broken or lying server: it calibrates nothing."""


def plausible(estimated: int, reported: int) -> bool:
    """Whether the provider's count of what we counted as `estimated` is a tokenizer's difference."""
    low, high = PLAUSIBLE_CALIBRATION
    return estimated > 0 and low * estimated <= reported <= high * estimated


PHASES: tuple[str, ...] = ("review", "repair", "verify")

PLAN_SECONDS_SHARE = 0.25
"""The part of the seconds left that planning may use when a model will be called, so the calls keep
the rest (hunks not reached are `time` gaps)."""


@dataclass(frozen=True)
class Deadline:
    """A span [start, until] on a budget's clock; `passed(f)` is True once `f` of it is over."""

    clock: Callable[[], float]
    start: float
    until: float

    def passed(self, fraction: float = 1.0) -> bool:
        return self.clock() >= self.start + fraction * (self.until - self.start)


@dataclass(frozen=True)
class Reservation:
    """What one in-flight call holds until it is settled or cancelled, and its ledger `record`, which
    settling completes with what the call used."""

    id: int
    phase: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    started_at: float
    record: CallRecord


@dataclass
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: bool = False
    seconds: float = 0.0
    calls: int = 0

    def usage(self, seconds: float) -> Usage:
        cost = None if self.cost_unknown else self.cost_usd
        return Usage(self.input_tokens, self.output_tokens, cost, round(seconds, 2), self.calls)


def held_tokens(tokens: int, margin_percent: int = MARGIN_PERCENT) -> int:
    """What a count of `tokens` holds in the ledger with its margin (rounded up)."""
    return (tokens * margin_percent + 99) // 100


def held_cost_usd(cost_usd: float, answer_cost_usd: float, margin_percent: int = MARGIN_PERCENT) -> float:
    """What an estimated cost holds: the input part with its margin, the answer part as is."""
    answer = min(max(answer_cost_usd, 0.0), cost_usd)
    return (cost_usd - answer) * margin_percent / 100 + answer


def held_call_cost(price: Price, input_tokens: int, answer_tokens: int, margin_percent: int) -> float:
    """What a call holds at `price`, as `Budget.reserve` holds it: one rule for the planner, a re-plan's
    held units and a scan's admission."""
    answer = answer_tokens * price[1]
    return held_cost_usd(input_tokens * price[0] + answer, answer, margin_percent)


def minimal_call_cost(price: Price) -> float:
    """A floor under what one review call reserves (its prompt alone costs more)."""
    return MIN_CALL_INPUT_TOKENS * price[0]


COST_SLACK_USD = 1e-12
"""Float rounding between the planner's running sum and the ledger's: never a real refusal."""

_IDS = itertools.count(1)
"""Reservation ids, unique across budgets: a child's reservation is held by its parents too."""


class Budget:
    """The run's ledger. Every call reserves before it is sent and settles after, under one lock,
    so parallel workers can never jointly promise more than the limits allow. With a `parent`, the
    limits are at most what it has left now, its clock is used, and everything is made in it too."""

    def __init__(
        self, limits: Limits, *, clock: Callable[[], float] = time.monotonic, parent: Budget | None = None
    ) -> None:
        if parent is not None:
            clock = parent._clock
            limits = _smaller(limits, parent.left())
        self.limits = limits
        self.parent = parent
        self._clock: Callable[[], float] = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._open: dict[int, Reservation] = {}
        self._spent = _Spent()
        self._by_phase = {phase: _Spent() for phase in PHASES}
        self._exhausted = False
        self._ledger: list[CallRecord] = []
        self._startup = Startup()

    def reserve(
        self,
        *,
        phase: str,
        input_tokens: int,
        max_output_tokens: int,
        cost_usd: float | None,
        answer_cost_usd: float = 0.0,
        margin_percent: int = MARGIN_PERCENT,
        local_input_tokens: int | None = None,
    ) -> Reservation:
        """Hold the estimate or raise BudgetExhausted naming the first limit it would overrun. The input
        and its cost are held with `margin_percent`, the answer (`answer_cost_usd`) as is, because the
        provider stops it there. `cost_usd` None (price unknown) is refused only once the known spend
        reached the limit. `local_input_tokens`: the uncalibrated count of `input_tokens`."""
        if phase not in PHASES:
            raise ValueError(f"unknown budget phase {phase!r}; expected one of {', '.join(PHASES)}")
        if input_tokens < 0 or max_output_tokens < 0:
            raise ValueError("token estimates must be >= 0")
        if margin_percent < 100:
            raise ValueError(f"margin_percent must be >= 100, got {margin_percent}")
        held_in = held_tokens(input_tokens, margin_percent)
        held_cost = None if cost_usd is None else held_cost_usd(cost_usd, answer_cost_usd, margin_percent)
        with self._locked() as chain:
            for level in chain:
                refused = level._refusal(held_in, max_output_tokens, held_cost, check_seconds=level is self)
                if refused is not None:
                    self._exhausted = True
                    raise BudgetExhausted(*refused)
            local = input_tokens if local_input_tokens is None else local_input_tokens
            record = CallRecord(
                phase, local, held_in, 0, max_output_tokens, 0, calibrated_input_tokens=input_tokens
            )
            reservation = Reservation(
                next(_IDS), phase, held_in, max_output_tokens, held_cost, self._clock(), record
            )
            for level in chain:
                level._open[reservation.id] = reservation
            return reservation

    @contextmanager
    def _locked(self) -> Iterator[list[Budget]]:
        """This budget and every one above it, locked child first (one order: children never deadlock)."""
        chain: list[Budget] = []
        level: Budget | None = self
        while level is not None:
            chain.append(level)
            level = level.parent
        with ExitStack() as stack:
            for level in chain:
                stack.enter_context(level._lock)
            yield chain

    def _room(self) -> tuple[int, int, float]:
        """Input tokens, output tokens and cost not spent or held (below 0 once usage overran)."""
        held = self._open.values()
        return (
            self.limits.input_tokens - self._spent.input_tokens - sum(r.input_tokens for r in held),
            self.limits.output_tokens - self._spent.output_tokens - sum(r.output_tokens for r in held),
            self.limits.cost_usd
            - self._spent.cost_usd
            - sum(r.cost_usd for r in held if r.cost_usd is not None),
        )

    def _refusal(
        self, held_in: int, held_out: int, held_cost: float | None, *, check_seconds: bool = True
    ) -> tuple[str, str] | None:
        limits = self.limits
        input_left, output_left, cost_left = self._room()
        if held_in > input_left or limits.input_tokens <= 0:
            return "input_tokens", f"needs {held_in} with margin, {max(input_left, 0)} left"
        if held_out > output_left or limits.output_tokens <= 0:
            return "output_tokens", f"needs {held_out} with margin, {max(output_left, 0)} left"
        over = held_cost is not None and held_cost > cost_left + COST_SLACK_USD
        if cost_left <= 0 or limits.cost_usd <= 0 or over:
            needs = "an unknown amount" if held_cost is None else f"${held_cost:.6f} with margin"
            return "cost_usd", f"needs {needs}, ${max(cost_left, 0.0):.6f} left"
        elapsed = self._clock() - self._started
        if check_seconds and elapsed >= limits.seconds:
            return "seconds", f"{elapsed:.1f} s of {limits.seconds:g} s used"
        if self._spent.calls + len(self._open) + 1 > limits.calls:
            return "calls", f"{self._spent.calls} made, {len(self._open)} in flight, limit {limits.calls}"
        return None

    def left(self) -> Limits:
        """What could be reserved now (never below 0, never more than the parent has left)."""
        with self._lock:
            input_left, output_left, cost_left = self._room()
            seconds_left = self.limits.seconds - (self._clock() - self._started)
            calls_left = self.limits.calls - self._spent.calls - len(self._open)
        own = Limits(
            input_tokens=max(input_left, 0),
            output_tokens=max(output_left, 0),
            cost_usd=max(cost_left, 0.0),
            seconds=max(seconds_left, 0.0),
            calls=max(calls_left, 0),
        )
        return own if self.parent is None else _smaller(own, self.parent.left())

    def allowance(
        self,
        *,
        price: Price | None,
        window: int | None,
        margin_percent: int,
        max_answer_tokens: int,
        answer_tokens: int,
        held: Limits | None = None,
    ) -> Allowance:
        """What a plan made now may spend, less what `held` (units planned and not sent yet) will reserve."""
        left, held = self.left(), held or Limits(0, 0, 0.0, 0.0, 0)
        return Allowance(
            input_tokens=max(left.input_tokens - held.input_tokens, 0),
            output_tokens=max(left.output_tokens - held.output_tokens, 0),
            calls=max(left.calls - held.calls, 0),
            cost_usd=max(left.cost_usd - held.cost_usd, 0.0),
            price=price,
            window=window,
            margin_percent=margin_percent,
            max_answer_tokens=max_answer_tokens,
            answer_tokens=answer_tokens,
        )

    def elapsed(self) -> float:
        """Seconds on this budget's clock since it started (less any wait `started_model` forgave)."""
        return self._clock() - self._started

    def output_tokens_left(self) -> int:
        """The largest `max_tokens` a reservation would accept right now."""
        return self.left().output_tokens

    def seconds_left(self) -> float:
        return max(self.limits.seconds - (self._clock() - self._started), 0.0)

    def deadline(self, share: float) -> Deadline:
        """When `share` of the seconds left now will have passed: planning's part (PLAN_SECONDS_SHARE)."""
        with self._lock:
            now = self._clock()
            left = max(self.limits.seconds - (now - self._started), 0.0)
        return Deadline(self._clock, now, now + max(share, 0.0) * left)

    def settle(
        self, r: Reservation, *, input_tokens: int, output_tokens: int, cost_usd: float | None, calls: int = 1
    ) -> None:
        """Replace the reservation by what the call used; it is a call whatever the answer was, because
        it reached the server (`calls` > 1 when the client library re-sent it on its own)."""
        record = dataclasses.replace(r.record, input_tokens=input_tokens, output_tokens=output_tokens)
        with self._locked() as chain:
            self._take(r, chain)
            seconds = self._clock() - r.started_at
            for level in chain:
                for spent in (level._spent, level._by_phase[r.phase]):
                    spent.input_tokens += input_tokens
                    spent.output_tokens += output_tokens
                    spent.cost_unknown |= cost_usd is None
                    spent.cost_usd += cost_usd or 0.0
                    spent.seconds += seconds
                    spent.calls += calls
                level._ledger.append(record)

    def record_count(self, estimated: int, counted: int, calibrated: int) -> None:
        """A count the provider made of a prompt before it was sent, in the ledger as phase "count"
        (the provider's count as `input_tokens`); not a model call, it spends nothing."""
        record = CallRecord("count", estimated, 0, counted, 0, 0, calibrated_input_tokens=calibrated)
        with self._locked() as chain:
            for level in chain:
                level._ledger.append(record)

    def cancel(self, r: Reservation) -> None:
        """Release a reservation whose request was never sent."""
        with self._locked() as chain:
            self._take(r, chain)

    def _take(self, r: Reservation, chain: list[Budget]) -> None:
        if r.id not in self._open:
            raise ValueError(f"reservation {r.id} was already settled or cancelled")
        for level in chain:
            level._open.pop(r.id, None)

    def started_model(self, *, import_seconds: float | None, waited: float) -> None:
        """The review waited for the model library's import: `max-seconds` counts from when it can start."""
        with self._lock:
            self._started += max(waited, 0.0)
            wait = round(self._startup.import_wait_seconds + max(waited, 0.0), 2)
            total = round(import_seconds, 2) if import_seconds is not None else self._startup.import_seconds
            self._startup = Startup(import_seconds=total, import_wait_seconds=wait)

    def mark_exhausted(self) -> None:
        """Record that work was left undone for lack of budget without a refused reservation."""
        with self._lock:
            self._exhausted = True

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return self._exhausted

    def spent(self) -> Usage:
        with self._lock:
            return self._spent.usage(self._clock() - self._started)

    def report(self) -> BudgetReport:
        """The ledger; a limit the provider's usage took us over is in `overrun`: disclosed, never hidden."""
        with self._lock:
            used = self._spent.usage(self._clock() - self._started)
            overrun = tuple(
                Overrun(name, value, limit)
                for name in ("input_tokens", "output_tokens", "cost_usd", "calls")
                if (value := getattr(used, name)) is not None
                and value > (limit := getattr(self.limits, name)) + 1e-9
            )
            return BudgetReport(
                limits=dataclasses.asdict(self.limits),
                used=used,
                exhausted=self._exhausted,
                by_phase={phase: spent.usage(spent.seconds) for phase, spent in self._by_phase.items()},
                calls=tuple(self._ledger),
                overrun=overrun,
                startup=self._startup,
            )


def _smaller(a: Limits, b: Limits) -> Limits:
    """Each limit the smaller of the two."""
    return Limits(*(min(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(Limits)))
