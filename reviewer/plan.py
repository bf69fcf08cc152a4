"""Stage 3, plan: filter files by policy, rank hunks by risk, pack whole hunks into model-sized units.

Nothing is cut silently: a filtered file is a `Skip`, lines no call carries are `Plan.unplaced`, and
`coverage()` turns the plan and what was sent into per-file statuses (DESIGN section 4). No I/O:
file contents come through the `read_file` callback.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from reviewer import context as ctx
from reviewer.budget import (
    COST_SLACK_USD,
    Allowance,
    Deadline,
    held_call_cost,
    held_tokens,
)
from reviewer.diff import DiffFile, DiffLine, Hunk
from reviewer.policy import category, opens_definition, sensitive, skip_reason
from reviewer.report import Coverage, CoverageStatus, FileCoverage, Side, SliceCoverage

LEGEND = (
    'Each file starts with "## File: <path> (<status>)", then its hunks. Each hunk starts with "@@" '
    "(and the enclosing definition when git names one), then one line per diff line: `<n> + text` is "
    "an added line and `<n>   text` an unchanged line, both numbered in the new file (side RIGHT); "
    "`<n> - text` is a removed line, numbered in the old file (side LEFT); `<n> ~ text` is extra "
    "context from the file, outside the diff, that cannot carry a comment."
)
"""How `UnitPart.text` is laid out; prompt templates can quote it to the model."""

CONTEXT_MAX_LINES = 40

_CATEGORY_WEIGHT: Mapping[str, float] = {"source": 3.0, "test": 2.0, "config": 1.5, "docs": 1.0}


@dataclass(frozen=True)
class Skip:
    """A file left out by policy: lockfile, generated, vendored, minified, binary, excluded, secret_file."""

    path: str
    reason: str


@dataclass(frozen=True)
class UnitPart:
    """One hunk, or one slice of it, as the model sees it (see LEGEND), already redacted.

    `lines` is the slice's [start, stop) into `Hunk.lines` (None: the whole hunk); `span` is the
    first and last line number of the slice in the file, for the report."""

    path: str
    hunk_index: int
    text: str
    lines: tuple[int, int] | None = None
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class Unit:
    """Hunks (or slices) for one model call, decided before any call. `tokens` counts the diff text and
    the repository context; `input_tokens` the whole request as it will be sent (prompt with `nonce`,
    schema, `context_text`); `answer_tokens` is the `max_tokens` reserved for its answer."""

    id: int
    parts: tuple[UnitPart, ...]
    tokens: int
    risk: float
    nonce: str = ""
    input_tokens: int = 0
    answer_tokens: int = 0
    context: tuple[ctx.Snippet, ...] = ()
    context_text: str = ""
    context_tokens: int = 0

    @property
    def text(self) -> str:
        return joined(self.parts)


def joined(parts: Sequence[UnitPart]) -> str:
    """A unit's diff text: its parts in order, a file's header written once (a part of the same file
    as the one before it leaves out its header line, the first line of every part's text)."""
    out: list[str] = []
    for i, part in enumerate(parts):
        same_file = i > 0 and parts[i - 1].path == part.path
        out.append(part.text.partition("\n")[2] if same_file else part.text)
    return "\n\n".join(out)


@dataclass(frozen=True)
class Unplaced:
    """Lines of a hunk no call carries: `budget` (the budget ran out) or `context_window` (not even
    one line of it fits one call). `lines` is [start, stop) into `Hunk.lines`."""

    path: str
    hunk_index: int
    lines: tuple[int, int]
    reason: str


@dataclass(frozen=True)
class TextFree:
    """Plan without writing any part's text (no model: only size and coverage are reported).
    `tokens(n)` is what `count_tokens` gives n characters; a hunk whose text `may_redact` says
    `redact` leaves unchanged is sized from its lines' lengths alone."""

    tokens: Callable[[int], int]
    may_redact: Callable[[str], bool]


@dataclass(frozen=True)
class Plan:
    units: tuple[Unit, ...]
    skipped: tuple[Skip, ...]
    reviewable: tuple[str, ...]
    no_patch: tuple[str, ...]
    unplaced: tuple[Unplaced, ...] = ()
    context_displaced_lines: int = 0
    """Changed lines the context would have pushed out had it been packed with the diff: above 0,
    the diff went alone and repository context only got what the budget left (`make_plan`)."""

    @property
    def input_tokens(self) -> int:
        return sum(u.input_tokens for u in self.units)

    @property
    def context_tokens(self) -> int:
        """Tokens of repository context in the planned calls."""
        return sum(u.context_tokens for u in self.units)


def _weight(path: str) -> float:
    return _CATEGORY_WEIGHT[category(path)] * (1.5 if sensitive(path) else 1.0)


def hunk_risk(path: str, hunk: Hunk) -> float:
    """Category dominates, security-sensitive paths weigh 1.5x, added lines add up to 0.9;
    deletion-only hunks score below every hunk that adds code."""
    weight = _weight(path)
    if hunk.added == 0:
        return round(0.1 * weight, 4)
    return round(weight + 0.9 * min(1.0, math.log2(1 + hunk.added) / 8), 4)


def tier(risk: float, path: str) -> tuple[bool, float]:
    """The pack order's first keys (ascending): security-sensitive source that adds code first, then
    by category (source, tests, config, docs); deletion-only hunks last."""
    weight = _weight(path)
    adds = risk >= weight
    first = adds and weight >= _CATEGORY_WEIGHT["source"] * 1.5
    return (not first, -_CATEGORY_WEIGHT[category(path)] if adds else 0.0)


def pack_keys(
    items: Sequence[tuple[float, DiffFile, Hunk, int]],
) -> dict[tuple[str, int], tuple[bool, float, float]]:
    """Each (risk, file, hunk, tokens)'s pack-order key: `tier`, then the most added lines per token.
    Chosen on 72 real defect-introducing commits (benchmarks/DEFECTS.md) as the only order at or above
    PR-Agent's mean defect-line recall at 8k, 16k and 32k; the benchmark swaps this function for the
    orders it compares (benchmarks/pack_orders.py)."""
    return {
        (f.path, h.index): (*tier(risk, f.path), -h.added / max(tokens, 1)) for risk, f, h, tokens in items
    }


def _file_header(file: DiffFile) -> str:
    details: list[str] = [file.status]
    if file.old_path and file.old_path != file.path:
        details.append(f"{file.status} from {file.old_path}")
    if file.mode_changed:
        details.append(f"mode {file.old_mode} -> {file.new_mode}")
    return f"## File: {file.path} ({', '.join(details)})"


def _hunk_head(hunk: Hunk) -> str:
    """The hunk's first line: its line ranges are left out, every line carries its own number."""
    return f"@@ {hunk.header}" if hunk.header else "@@"


def _numbered(hunk: Hunk, extension: Sequence[tuple[int, str]]) -> list[str]:
    out = [_hunk_head(hunk)]
    out.extend(f"{n} ~ {text}" for n, text in extension)
    out.extend(_number(line) + line.text for line in hunk.lines)
    return out


def _number(line: DiffLine) -> str:
    """A diff line's prefix: its number (old-file for a removed line, the mark says which) and its
    mark. Neither padded to a column nor parenthesised: that cost 12 % and 4 % of a diff's tokens
    (benchmarks/DIFF_FORMAT.md)."""
    if line.kind == "-":
        return f"{line.old} - "
    return f"{line.new} {'+' if line.kind == '+' else ' '} "


def _indent(text: str) -> int:
    return len(text.expandtabs(4)) - len(text.expandtabs(4).lstrip())


def enclosing_context(hunk: Hunk, head_lines: Sequence[str]) -> tuple[tuple[int, str], ...]:
    """The file lines from the enclosing definition down to the hunk's first line, when that
    definition is above the hunk and at most CONTEXT_MAX_LINES away; () otherwise. Scope is climbed
    by indentation: column 0 without a definition means there is no enclosing one."""
    if not _head_matches(hunk, head_lines):
        return ()
    changed = [line.text for line in hunk.lines if line.kind != " " and line.text.strip()]
    if not changed:
        return ()
    start = hunk.new_start + 1 if hunk.new_len == 0 else hunk.new_start
    found = _definition_line(_scope_candidates(hunk, head_lines, start), min(_indent(t) for t in changed))
    if found is None:
        return ()
    return tuple((k, head_lines[k - 1]) for k in range(found, start))


def _head_matches(hunk: Hunk, head_lines: Sequence[str]) -> bool:
    """The head text is the one the diff was made against: otherwise its line numbers would put
    someone else's definition above the hunk."""
    return all(
        line.new <= len(head_lines) and head_lines[line.new - 1].rstrip() == line.text.rstrip()
        for line in hunk.lines
        if line.kind != "-" and line.new is not None
    )


def _scope_candidates(hunk: Hunk, head_lines: Sequence[str], start: int) -> list[tuple[int | None, str]]:
    """Lines to climb, nearest first: the hunk's own leading context (no file number: a definition
    there is inside the hunk already), then up to CONTEXT_MAX_LINES file lines above it."""
    first_change = next(i for i, line in enumerate(hunk.lines) if line.kind != " ")
    leading = [line.text for line in hunk.lines[:first_change]]
    above = [(n, head_lines[n - 1]) for n in range(start - 1, max(0, start - 1 - CONTEXT_MAX_LINES), -1)]
    candidates: list[tuple[int | None, str]] = [(None, text) for text in reversed(leading)]
    return candidates + above


def _definition_line(candidates: Sequence[tuple[int | None, str]], bound: int) -> int | None:
    """The file line of the nearest definition less indented than `bound`, narrowing `bound` at each
    less-indented line; None when the scope closes first or the definition is inside the hunk."""
    for n, text in candidates:
        if bound == 0:
            return None
        if not text.strip() or _indent(text) >= bound:
            continue
        if opens_definition(text):
            return n
        bound = _indent(text)
    return None


SLICE_OVERLAP_LINES = 3
"""Lines a slice repeats from the one before it, so a defect across the cut is seen whole."""

ANSWER_WINDOW_SHARE = 3
"""An answer reserves at most this share (1/3) of the window: the rest carries the prompt and diff."""
SEPARATOR_TOKENS = 2
"""Slack per part for the blank line that joins parts (a join can merge tokens, never add many)."""

REQUEST_SLACK_TOKENS = 16
"""Held per request beyond its overhead and parts when the finished request is counted whole
(`measure`): tokens merge or split where the parts join the prompt (measured: 7 on one slice), and
a unit packed to the brim must not lose a whole part to that."""

MIN_SLICE_TOKENS = 24
"""Below this much room no slice (file header, hunk header and one line) can fit: stop filling."""


def answer_tokens(allowance: Allowance) -> int:
    """The `max_tokens` every unit reserves: one whole answer (`allowance.answer_tokens`) within the
    per-call cap, a third of the window, the output tokens and what the money buys. A budget that
    cannot pay a whole answer per unit gets fewer units, never starved answers."""
    a = allowance
    caps = [a.answer_tokens, a.max_answer_tokens]
    if a.window:
        caps.append(a.window // ANSWER_WINDOW_SHARE)
    if a.output_tokens is not None:
        caps.append(a.output_tokens)
    if a.cost_usd is not None and a.price is not None and a.price[1] > 0 and math.isfinite(a.cost_usd):
        caps.append(int(min(a.cost_usd / a.price[1], 1e12)))
    return max(1, min(caps))


_Held = tuple[int, int, float]
"""What requests hold of the allowance: input tokens (with the margin), answer tokens, cost."""


def _held(a: Allowance, counted: int) -> _Held:
    answer = answer_tokens(a)
    cost = 0.0 if a.price is None else held_call_cost(a.price, counted, answer, a.margin_percent)
    return held_tokens(counted, a.margin_percent), answer, cost


def _fits_window(a: Allowance, counted: int) -> bool:
    if a.window is None:
        return True
    held_in, answer, _ = _held(a, counted)
    return held_in + answer <= a.window


def _within(a: Allowance, total: _Held) -> bool:
    """Whether what the plan holds in all fits its input, output and money limits."""
    tokens, out, cost = total
    if a.input_tokens is not None and tokens > a.input_tokens:
        return False
    if a.output_tokens is not None and out > a.output_tokens:
        return False
    return a.cost_usd is None or a.price is None or cost <= a.cost_usd + COST_SLACK_USD


def _plus(held: _Held, more: _Held, sign: int = 1) -> _Held:
    return held[0] + sign * more[0], held[1] + sign * more[1], held[2] + sign * more[2]


def _largest(hi: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [0, hi] that `fits` (true up to some n, false beyond), else 0."""
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class _Open:
    """`tokens` is everything the unit's text holds: its parts plus `ctx_tokens`, the room held for
    context (at most `ctx_limit`, the share of what the unit could hold when it opened); `ctx` is the
    token count of each context snippet its parts asked for; `paths` its parts' files."""

    nonce: str
    overhead: int
    parts: list[tuple[UnitPart, float, int]]
    tokens: int = 0
    ctx_limit: int = 0
    ctx_tokens: int = 0
    ctx: dict[tuple[str, int], int] = field(default_factory=dict)
    paths: set[str] = field(default_factory=set)


class _FreeRoom:
    """Each unit's free diff tokens in a max-tree, so first fit finds the earliest unit with room
    in O(log units) instead of asking every unit: without a model a large PR fills hundreds."""

    def __init__(self) -> None:
        self._size = 1
        self._tree = [-1, -1]
        self._count = 0

    def append(self, free: int) -> None:
        if self._count == self._size:
            leaves = self._tree[self._size :]
            self._size *= 2
            self._tree = [-1] * self._size + leaves + [-1] * (self._size - len(leaves))
            for i in range(self._size - 1, 0, -1):
                self._tree[i] = max(self._tree[2 * i], self._tree[2 * i + 1])
        self._count += 1
        self.set(self._count - 1, free)

    def set(self, index: int, free: int) -> None:
        tree = self._tree
        i = index + self._size
        tree[i] = free
        while i > 1:
            i //= 2
            top = max(tree[2 * i], tree[2 * i + 1])
            if tree[i] == top:
                return  # every node above already holds the right maximum
            tree[i] = top

    def first(self, at_least: int, start: int = 0) -> int | None:
        """The smallest index >= start whose free room is at least `at_least`, or None."""
        tree, size = self._tree, self._size

        def down(node: int, lo: int, hi: int) -> int | None:
            if hi <= start or tree[node] < at_least:
                return None
            if node >= size:
                return lo
            mid = (lo + hi) // 2
            found = down(2 * node, lo, mid)
            return found if found is not None else down(2 * node + 1, mid, hi)

        found = down(1, 0, size)
        return found if found is not None and found < self._count else None


class _Packer:
    """Units under construction and what they hold of the allowance, so a part is only placed
    where both its call (window) and the whole plan (budget) still have room."""

    def __init__(self, args: PlanOptions, header_tokens: Mapping[str, int]) -> None:
        self.allowance = a = args.allowance
        self.unit_tokens = args.unit_tokens
        self.args = args
        measure, overhead = args.measure, args.overhead
        # a request counted whole (`measure`) holds what its joins may add
        self._overhead = (lambda n: overhead(n) + REQUEST_SLACK_TOKENS) if measure is not None else overhead
        self._context_total = 0
        self.context_frame = 0
        """What a context block costs beyond its snippets (its heading and delimiters in the prompt)."""
        self._context_cap = int(args.share * a.input_tokens) if a.input_tokens is not None else None
        self.units: list[_Open] = []
        self._next: _Open | None = None
        self._sums: _Held = (0, 0, 0.0)
        self._free = _FreeRoom()
        self._unlimited = a.calls is None and a.input_tokens is None and a.output_tokens is None
        self._unlimited &= a.cost_usd is None or a.price is None
        self._only_size = self._unlimited and a.window is None
        """Nothing but `unit_tokens` limits a unit (no model): the free-room tree alone decides."""
        self._call_rooms: dict[int, int] = {}
        self.header_tokens = header_tokens
        """Each file header's tokens: a unit that already holds a part of the file writes it once."""
        self._home: dict[str, int] = {}
        """The last unit that took a part of each file."""
        self.full = False
        """No unit, open or fresh, has room for even one slice (MIN_SLICE_TOKENS): set by `_fill`
        once it finds that, and final, because units only grow and the budget only fills. Every
        later part is `budget` at once, without asking each unit again (planning stays linear)."""
        if args.share and measure is not None:
            sample = self.fresh().nonce
            self.context_frame = max(0, measure(sample, "", "~") - measure(sample, "", ""))

    def fits_call(self, overhead: int, tokens: int) -> bool:
        return tokens <= self.unit_tokens and _fits_window(self.allowance, overhead + tokens)

    def _totals(self, skip: _Open | None = None) -> _Held:
        """What every open unit holds (kept as running sums), without `skip`."""
        if skip is None:
            return self._sums
        return _plus(self._sums, _held(self.allowance, skip.overhead + skip.tokens), -1)

    def fits_budget(self, unit: _Open, tokens: int, new: bool) -> bool:
        a = self.allowance
        if self._unlimited:
            return True
        if new and a.calls is not None and len(self.units) + 1 > a.calls:
            return False
        return _within(a, _plus(self._totals(skip=None if new else unit), _held(a, unit.overhead + tokens)))

    def fresh(self) -> _Open:
        """The next unit to open (its nonce drawn once, so its counted prompt is the sent one)."""
        if self._next is None:
            nonce = self.args.nonce(self.args.first_id + len(self.units))
            self._next = _Open(nonce=nonce, overhead=self._overhead(nonce), parts=[])
            if self.args.share > 0:
                self._next.ctx_limit = int(self.args.share * self.room(self._next))
        return self._next

    def _context_room(self, unit: _Open, wanted: Mapping[tuple[str, int], int]) -> int:
        """The context room `unit` holds once it also serves `wanted`: the snippets asked for (best
        first) that fit the unit's share, all units' context together within the share of the input
        budget (a unit opened early must not keep a share of budget that later went to the diff).
        Room for a snippet that cannot fit is never held."""
        if not wanted:
            return unit.ctx_tokens
        limit = unit.ctx_limit
        if self._context_cap is not None:
            limit = min(limit, unit.ctx_tokens + max(0, self._context_cap - self._context_total))
        room = 0
        for tokens in {**unit.ctx, **wanted}.values():
            extra = tokens + SEPARATOR_TOKENS + (0 if room else self.context_frame)
            if room + extra <= limit:
                room += extra
        return max(room, unit.ctx_tokens)

    def add(
        self,
        options: Sequence[tuple[UnitPart, int]],
        risk: float,
        context: Mapping[tuple[str, int], int] | None = None,
    ) -> bool:
        """The last unit that took a part of the same file (its header is written once), else the
        earliest unit that takes the part (its richest option that fits, with room for the context
        it asks for, else without), else a new one."""
        if self.full:
            return False
        home = self._home.get(options[0][0].path)
        if self._only_size and len(options) == 1 and not context:
            return self._add_sized(*options[0], risk, home)
        if home is not None and self._place(home, options, risk, context or {}):
            return True
        need = min(tokens for _, tokens in options) + SEPARATOR_TOKENS
        index = self._free.first(need)
        while index is not None:
            if self._place(index, options, risk, context or {}):
                return True
            index = self._free.first(need, index + 1)
        return self._place(len(self.units), options, risk, context or {})

    def _add_sized(self, part: UnitPart, tokens: int, risk: float, home: int | None) -> bool:
        """`add` when only `unit_tokens` limits a unit: the unit holding the file if it has room for
        the part less its header, else the first unit with room takes the part."""
        shared = self.header_tokens.get(part.path, 0)
        index: int | None = home
        if home is None or self.units[home].tokens + tokens - shared + SEPARATOR_TOKENS > self.unit_tokens:
            shared, index = 0, self._free.first(tokens + SEPARATOR_TOKENS)
        if index is not None:
            unit = self.units[index]
            self._take(
                index, unit, (part, risk, tokens - shared), unit.tokens + tokens - shared + SEPARATOR_TOKENS
            )
            return True
        if tokens > self.unit_tokens:
            return False
        self._take(len(self.units), self.fresh(), (part, risk, tokens), tokens)
        return True

    def _take(self, index: int, unit: _Open, part: tuple[UnitPart, float, int], total: int) -> None:
        """Unit `index` (the fresh one when it equals len(units)) takes `part` and now holds `total`."""
        unit.parts.append(part)
        unit.tokens = total
        self._home[part[0].path] = index
        if index == len(self.units):
            self.units.append(unit)
            self._next = None
            self._free.append(self.unit_tokens - total)
        else:
            self._free.set(index, self.unit_tokens - total)

    def _place(
        self,
        index: int,
        options: Sequence[tuple[UnitPart, int]],
        risk: float,
        context: Mapping[tuple[str, int], int],
    ) -> bool:
        """Unit `index` (the fresh one when it equals len(units)) takes its richest option that fits,
        with room for the context the part asks for when that fits too."""
        new = index == len(self.units)
        unit = self.fresh() if new else self.units[index]
        grown = self._context_room(unit, context)
        path = options[0][0].path
        shared = self.header_tokens.get(path, 0) if path in unit.paths else 0
        for part, whole_tokens in options:
            tokens = whole_tokens - shared
            diff = unit.tokens - unit.ctx_tokens + tokens + (SEPARATOR_TOKENS if unit.parts else 0)
            for room in dict.fromkeys((grown, unit.ctx_tokens)):
                total = diff + room
                if not (self.fits_call(unit.overhead, total) and self.fits_budget(unit, total, new)):
                    continue
                if not self._unlimited:
                    held = _held(self.allowance, unit.overhead + total)
                    self._sums = _plus(self._totals(skip=None if new else unit), held)
                unit.paths.add(path)
                if room == grown and context:
                    unit.ctx.update(context)
                self._context_total += room - unit.ctx_tokens
                unit.ctx_tokens = room
                self._take(index, unit, (part, risk, tokens), total)
                return True
        return False

    def call_room(self, overhead: int) -> int:
        """The most diff tokens one call with this overhead can carry, whatever the budget."""
        if overhead not in self._call_rooms:
            self._call_rooms[overhead] = _largest(self.unit_tokens, lambda t: self.fits_call(overhead, t))
        return self._call_rooms[overhead]

    def room(self, unit: _Open) -> int:
        """The most diff tokens `unit` (or the fresh one) can still take."""
        new = unit is self._next
        base = unit.tokens + (SEPARATOR_TOKENS if unit.parts else 0)

        def fits(more: int) -> bool:
            return self.fits_call(unit.overhead, base + more) and self.fits_budget(unit, base + more, new)

        return _largest(max(self.unit_tokens - base, 0), fits)


def make_plan(
    files: Sequence[DiffFile],
    options: PlanOptions,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Plan:
    """Filter, rank, and decide for the whole allowance at once which hunks go into which call.

    Hunks go in `pack_keys` order, each into the earliest unit with room; a hunk too big for one
    call is cut into overlapping slices; context back to the enclosing definition shrinks before a
    hunk is left out; a hunk the budget cannot take whole fills what is left with its first lines.
    Every step is linear."""
    skeleton, reviewable, risks = _triage(files, include, exclude)
    return _plan(options, skeleton, _count(options, reviewable, risks))


_Ranked = tuple[float, DiffFile, Hunk]
"""A hunk with its risk, as the stages of `make_plan` pass it along."""


@dataclass(frozen=True)
class PlanOptions:
    """How `make_plan` plans, handed whole to its stages and to the diff-only re-plan.

    `unit_tokens` caps a unit's diff text; `overhead(nonce)` is what a request costs without its
    diff and `measure(nonce, text, context_text)` counts the finished request, so the plan holds
    what will be sent. `only` restricts the plan to those hunks (a re-plan) and `first_id` numbers
    its units; `first` hunks (what a push changed) go before all others. `read_file(path)` gives the
    head text, read at most once per file. `context(file, hunk)` gives a hunk's ranked repository
    context; a unit holds it up to `context_share` of what it could hold when it opened. With
    `text_free`, parts carry no text (`UnitPart.text` is empty) and are sized as if it had been
    written. `deadline` (planning's share of `max-seconds`) stops counting at half of it, packing at
    all of it: a hunk not packed by then is `Unplaced` (`time`)."""

    unit_tokens: int
    count_tokens: Callable[[str], int]
    allowance: Allowance = field(default_factory=Allowance)
    read_file: Callable[[str], str | None] | None = None
    redact: Callable[[str], str] = lambda s: s
    nonce: Callable[[int], str] = lambda i: ""
    overhead: Callable[[str], int] = lambda nonce: 0
    measure: Callable[[str, str, str], int] | None = None
    only: Collection[tuple[str, int]] | None = None
    first: Collection[tuple[str, int]] = ()
    first_id: int = 0
    context: Callable[[DiffFile, Hunk], Sequence[ctx.Snippet]] | None = None
    context_share: float = 0.0
    text_free: TextFree | None = None
    deadline: Deadline | None = None

    def __post_init__(self) -> None:
        if self.unit_tokens <= 0:
            raise ValueError(f"unit_tokens must be a positive number of tokens, got {self.unit_tokens}")

    @property
    def share(self) -> float:
        """The context share actually used: none without a context source, never above 90%."""
        return max(0.0, min(self.context_share, 0.9)) if self.context is not None else 0.0


def _triage(
    files: Sequence[DiffFile], include: Sequence[str], exclude: Sequence[str]
) -> tuple[Plan, tuple[DiffFile, ...], dict[tuple[str, int], float]]:
    """The plan before packing (files skipped by policy, listed without a patch, or reviewable: each
    exactly one, reviewable files by their riskiest hunk), the reviewable files, every hunk's risk."""
    skipped: list[Skip] = []
    no_patch: list[str] = []
    reviewable: list[DiffFile] = []
    for f in files:
        reason = skip_reason(f, include=include, exclude=exclude)
        if reason:
            skipped.append(Skip(f.path, reason))
        elif not f.has_patch:
            no_patch.append(f.path)
        else:
            reviewable.append(f)
    risks = {(f.path, h.index): hunk_risk(f.path, h) for f in reviewable for h in f.hunks}
    file_risk = {f.path: max((risks[(f.path, h.index)] for h in f.hunks), default=-1.0) for f in reviewable}
    skeleton = Plan(
        units=(),
        skipped=tuple(sorted(skipped, key=lambda s: s.path)),
        reviewable=tuple(sorted(file_risk, key=lambda p: (-file_risk[p], p))),
        no_patch=tuple(sorted(no_patch)),
    )
    return skeleton, tuple(reviewable), risks


@dataclass(frozen=True)
class _Counted:
    """The reviewable files, and what counting got through before its share of the time ran out:
    each counted hunk's header (and its tokens) and whole part with its tokens, those hunks in pack
    order, and the hunks never counted."""

    reviewable: tuple[DiffFile, ...]
    headers: Mapping[str, str]
    header_tokens: Mapping[str, int]
    wholes: Mapping[tuple[str, int], tuple[UnitPart, int]]
    ranked: tuple[_Ranked, ...]
    uncounted: tuple[_Ranked, ...]


def _plan(args: PlanOptions, skeleton: Plan, counted: _Counted) -> Plan:
    """Count once, then pack with context; when that leaves diff lines unsent that a packing
    without repository context or enclosing definitions would send, the diff goes alone and what
    the budget has left after it buys repository context (`_refilled`)."""
    packed, held_room = _packed(args, skeleton, counted)
    reviewable, only = counted.reviewable, args.only
    unsent = _unsent_lines(packed.units, reviewable, only)
    if not unsent or not (held_room or args.read_file is not None):
        return packed
    plain = dataclasses.replace(args, context=None, context_share=0.0, read_file=None)
    diff_only, _ = _packed(plain, skeleton, counted)
    plain_unsent = _unsent_lines(diff_only.units, reviewable, only)
    if unsent <= plain_unsent:
        return packed
    refilled = _refilled(args, skeleton, diff_only, counted)
    if refilled is not None and _unsent_lines(refilled.units, reviewable, only) <= plain_unsent:
        diff_only = refilled
    return dataclasses.replace(diff_only, context_displaced_lines=unsent - plain_unsent)


def _refilled(args: PlanOptions, skeleton: Plan, diff_only: Plan, counted: _Counted) -> Plan | None:
    """The plan with repository context capped at what `diff_only` leaves of the input budget
    (None: no context source, no input limit, or nothing left)."""
    a = args.allowance
    if not args.share or a.input_tokens is None:
        return None
    left = a.input_tokens - sum(held_tokens(u.input_tokens, a.margin_percent) for u in diff_only.units)
    if left <= 0:
        return None
    share = min(args.share, left / a.input_tokens)
    return _packed(dataclasses.replace(args, context_share=share, read_file=None), skeleton, counted)[0]


def _packed(args: PlanOptions, skeleton: Plan, counted: _Counted) -> tuple[Plan, bool]:
    """Pack and finish the counted hunks, as `args` say; and whether any unit held room for context."""
    packing = _Packing(args, counted)
    unplaced = packing.run()
    units = packing.finish(unplaced)
    held_room = bool(args.share) and any(u.ctx_tokens for u in packing.packer.units)
    return dataclasses.replace(skeleton, units=units, unplaced=tuple(unplaced)), held_room


def _count(
    args: PlanOptions, reviewable: tuple[DiffFile, ...], risks: Mapping[tuple[str, int], float]
) -> _Counted:
    """Each hunk's whole part and tokens, once per plan (they do not depend on context), until half
    of `deadline` has passed (after one hunk), in pack order's token-free prefix: the least risky
    hunks are left uncounted. Only counting every hunk lets packing ask for repository context."""
    chosen = [
        (risks[(f.path, h.index)], f, h)
        for f in reviewable
        for h in f.hunks
        if args.only is None or (f.path, h.index) in args.only
    ]
    out = _clock(args.deadline, COUNT_SHARE)
    headers: dict[str, str] = {}
    wholes: dict[tuple[str, int], tuple[UnitPart, int]] = {}
    uncounted: list[_Ranked] = []
    # in the token-free prefix of the pack order: `first` hunks, then `tier`
    for item in sorted(
        chosen, key=lambda it: ((it[1].path, it[2].index) not in args.first, *tier(it[0], it[1].path))
    ):
        _, f, h = item
        if uncounted or (wholes and out()):
            uncounted.append(item)
            continue
        header = headers.get(f.path) or headers.setdefault(f.path, _file_header(f))
        wholes[(f.path, h.index)] = _whole(f, h, header, args.count_tokens, args.redact, args.text_free)
    header_tokens = {path: args.count_tokens(h) for path, h in headers.items()}
    ranked = _ranked(chosen, wholes, args.first)
    return _Counted(reviewable, headers, header_tokens, wholes, ranked, tuple(uncounted))


def _ranked(
    chosen: Sequence[_Ranked],
    wholes: Mapping[tuple[str, int], tuple[UnitPart, int]],
    first: Collection[tuple[str, int]],
) -> tuple[_Ranked, ...]:
    """The counted hunks in full pack order, which needs each hunk's tokens."""
    counted = [item for item in chosen if (item[1].path, item[2].index) in wholes]
    keys = pack_keys([(r, f, h, wholes[(f.path, h.index)][1]) for r, f, h in counted])

    def key(item: _Ranked) -> tuple[bool, bool, float, float, str, int]:
        at = (item[1].path, item[2].index)
        return (at not in first, *keys[at], *at)

    return tuple(sorted(counted, key=key))


class _Packing:
    """The packing stage: every counted hunk, in pack order, into the packer; `snippets` is each
    hunk's ranked repository context, for choosing a unit's share at the end. `deadline` is looked
    at before each hunk; once it has passed (after at least one unit), every hunk left is `time`."""

    def __init__(self, args: PlanOptions, counted: _Counted) -> None:
        self.args = args
        self.counted = counted
        self.packer = _Packer(args, counted.header_tokens)
        self.snippets: dict[tuple[str, int], tuple[ctx.Snippet, ...]] = {}
        self._snippet_tokens: dict[tuple[str, int], int] = {}
        self._heads: dict[str, list[str] | None] = {}
        self._out = _clock(args.deadline, 1.0)

    def run(self) -> list[Unplaced]:
        """What no unit carries."""
        unplaced: list[Unplaced] = []
        for risk, f, hunk in self.counted.ranked:
            if self.packer.units and self._out():
                unplaced.append(Unplaced(f.path, hunk.index, WHOLE_HUNK, "time"))
                continue
            unplaced += self._hunk(risk, f, hunk)
        unplaced += [
            Unplaced(f.path, hunk.index, WHOLE_HUNK, "time") for _, f, hunk in self.counted.uncounted
        ]
        return unplaced

    def _hunk(self, risk: float, f: DiffFile, hunk: Hunk) -> list[Unplaced]:
        """Place one hunk whole (with as much enclosing context as fits), or cut into slices when no
        call can take it whole, or its first lines when the budget cannot."""
        packer, count_tokens, redact = self.packer, self.args.count_tokens, self.args.redact
        plain, plain_tokens = self.counted.wholes[(f.path, hunk.index)]
        call_room = packer.call_room(packer.fresh().overhead)
        if packer.full and plain_tokens <= call_room:
            return [Unplaced(f.path, hunk.index, (0, len(hunk.lines)), "budget")]
        if plain_tokens > call_room:
            unplaced: list[Unplaced] = []
            written = None
            for part, tokens in _slices(f, hunk, call_room, count_tokens, redact, unplaced):
                if not packer.add([(part, tokens)], risk):
                    assert part.lines is not None
                    written = written or _Written(f, hunk, count_tokens, redact)
                    unplaced += _fill(packer, risk, written, *part.lines)
            return unplaced
        options = self._options(f, hunk, plain, plain_tokens)
        # the first call searches the repository for every hunk at once (linear, not interruptible,
        # cannot stop halfway): only when counting every hunk fitted in its half of the time, and
        # while time is left
        wants = self._wants(f, hunk) if not self.counted.uncounted and not self._out() else {}
        if packer.add(options, risk, wants):
            return []
        return _fill(packer, risk, _Written(f, hunk, count_tokens, redact), 0, len(hunk.lines))

    def _wants(self, f: DiffFile, hunk: Hunk) -> dict[tuple[str, int], int]:
        """The tokens of each snippet of the hunk's repository context (each counted once)."""
        context, count_tokens, redact = self.args.context, self.args.count_tokens, self.args.redact
        if context is None or not self.args.share or category(f.path) not in ("source", "test"):
            return {}
        snippets = tuple(ctx.rank(context(f, hunk)))
        self.snippets[(f.path, hunk.index)] = snippets
        for s in snippets:
            if s.key not in self._snippet_tokens:
                self._snippet_tokens[s.key] = count_tokens(redact(s.text()))
        return {s.key: self._snippet_tokens[s.key] for s in snippets}

    def _options(
        self, f: DiffFile, hunk: Hunk, plain: UnitPart, plain_tokens: int
    ) -> list[tuple[UnitPart, int]]:
        """The hunk with its enclosing definition, shrinking, then alone: the packer takes the
        richest that fits. Head files are read once, never for removed files, docs or config."""
        redact, header, read_file = self.args.redact, self.counted.headers[f.path], self.args.read_file
        options = [(plain, plain_tokens)]
        if read_file is None or f.status == "removed" or category(f.path) in ("docs", "config"):
            return options
        if f.path not in self._heads:
            text = read_file(f.path)
            self._heads[f.path] = None if text is None else text.splitlines()
        lines = self._heads[f.path]
        extension = enclosing_context(hunk, lines) if lines is not None else ()
        for shrunk in _shrinking(extension):
            rich = UnitPart(f.path, hunk.index, redact("\n".join([header, *_numbered(hunk, shrunk)])))
            options.insert(-1, (rich, self.args.count_tokens(rich.text)))
        return options

    def finish(self, unplaced: list[Unplaced]) -> tuple[Unit, ...]:
        """Count each finished request as it will be sent; a unit the exact count no longer fits (a
        token merge at a part join) gives up its context first (its least ranked snippets), then its
        least risky part (`budget` in `unplaced`), until it fits or no part is left."""
        packer, measure, a = self.packer, self.args.measure, self.args.allowance
        barred = frozenset(x.path for x in unplaced)
        units: list[Unit] = []
        reserved: _Held = (0, 0, 0.0)
        for u in packer.units:
            parts, room = list(u.parts), u.ctx_tokens
            while parts:
                ordered = _ordered([(p, r) for p, r, _ in parts])
                if self.args.text_free is not None:
                    ordered = tuple(dataclasses.replace(p, text="") if p.text else p for p in ordered)
                snippets, context_text, context_tokens = self._context(ordered, room, barred)
                tokens = sum(t for _, _, t in parts) + SEPARATOR_TOKENS * (len(parts) - 1) + context_tokens
                if measure is not None:
                    counted = measure(u.nonce, joined(ordered), context_text)
                else:
                    counted = u.overhead + tokens
                total = _plus(reserved, _held(a, counted))
                if _fits_window(a, counted) and _within(a, total):
                    reserved = total
                    unit = Unit(
                        id=self.args.first_id + len(units),
                        parts=ordered,
                        tokens=tokens,
                        risk=max(r for _, r, _ in parts),
                        nonce=u.nonce,
                        input_tokens=counted,
                        answer_tokens=answer_tokens(a),
                        context=snippets,
                        context_text=context_text,
                        context_tokens=context_tokens,
                    )
                    units.append(unit)
                    break
                if snippets:
                    room = context_tokens + packer.context_frame - 1
                    continue
                dropped = min(parts, key=lambda item: item[1])
                parts.remove(dropped)
                part = dropped[0]
                unplaced.append(Unplaced(part.path, part.hunk_index, part.lines or WHOLE_HUNK, "budget"))
        return tuple(units)

    def _context(
        self, parts: Sequence[UnitPart], room: int, barred: frozenset[str]
    ) -> tuple[tuple[ctx.Snippet, ...], str, int]:
        """The best-ranked snippets these parts asked for that fit `room` tokens with the block's
        frame, never from a `barred` file (its diff goes unsent): (snippets, text, its tokens)."""
        count_tokens, redact = self.args.count_tokens, self.args.redact
        room -= self.packer.context_frame
        if room <= 0:
            return (), "", 0
        groups = [
            [s for s in self.snippets.get((p.path, p.hunk_index), ()) if s.path not in barred] for p in parts
        ]
        chosen = list(ctx.select(ctx.merge(groups), room, count_tokens, redact))
        while chosen:
            text = ctx.render(chosen, redact)
            tokens = count_tokens(text)
            if tokens <= room:
                return tuple(chosen), text, tokens
            chosen.pop()
        return (), "", 0


def _unsent_lines(
    units: Sequence[Unit], files: Sequence[DiffFile], only: Collection[tuple[str, int]] | None
) -> int:
    """Changed lines of the planned hunks that no unit carries."""
    carried: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for u in units:
        for p in u.parts:
            carried.setdefault((p.path, p.hunk_index), []).append(p.lines or WHOLE_HUNK)
    return sum(
        1
        for f in files
        for h in f.hunks
        if only is None or (f.path, h.index) in only
        for i, line in enumerate(h.lines)
        if line.kind != " "
        and not any(start <= i < stop for start, stop in carried.get((f.path, h.index), ()))
    )


COUNT_SHARE = 0.5
"""The part of planning's time that counting every hunk's tokens may use; packing has the rest."""


def _clock(deadline: Deadline | None, fraction: float) -> Callable[[], bool]:
    """Whether `fraction` of `deadline` has passed, asked at most once per hunk; once yes, always yes."""
    out = False

    def passed() -> bool:
        nonlocal out
        out = out or (deadline is not None and deadline.passed(fraction))
        return out

    return passed


def _whole(
    f: DiffFile,
    hunk: Hunk,
    header: str,
    count_tokens: Callable[[str], int],
    redact: Callable[[str], str],
    text_free: TextFree | None,
) -> tuple[UnitPart, int]:
    """The whole hunk as one part and its tokens. Text-free, a hunk that redaction cannot change is
    sized from its lines' lengths: the numbered text is its lines joined as they are (`check`) plus
    each line's prefix."""
    if text_free is not None:
        check = "\n".join([header, _hunk_head(hunk), *[line.text for line in hunk.lines]])
        if not text_free.may_redact(check):
            prefixes = sum(len(_number(line)) for line in hunk.lines)
            return UnitPart(f.path, hunk.index, ""), text_free.tokens(len(check) + prefixes)
    part = UnitPart(f.path, hunk.index, redact("\n".join([header, *_numbered(hunk, ())])))
    return part, count_tokens(part.text)


def _shrinking(extension: Sequence[tuple[int, str]]) -> list[tuple[tuple[int, str], ...]]:
    """Context options, richest first: the whole way back to the definition, then the definition
    line with the nearest half, then the definition line alone."""
    if not extension:
        return []
    head, rest = extension[0], tuple(extension[1:])
    out = [tuple(extension), (head, *rest[len(rest) // 2 :]), (head,)]
    return list(dict.fromkeys(out))


class _Written:
    """A hunk's file header and numbered lines, written once: every slice of it joins some of them."""

    def __init__(
        self, f: DiffFile, hunk: Hunk, count_tokens: Callable[[str], int], redact: Callable[[str], str]
    ) -> None:
        self.file, self.hunk, self._count_tokens, self._redact = f, hunk, count_tokens, redact
        self._header, self._body = _file_header(f), _numbered(hunk, ())

    def part(self, start: int, end: int) -> tuple[UnitPart, int]:
        """Lines [start, end) as a part (a slice unless that is the whole hunk), and its tokens."""
        n = len(self.hunk.lines)
        head = self._body[0] + f"  [slice: diff lines {start + 1}-{end} of {n} in this hunk]"
        text = self._redact("\n".join([self._header, head, *self._body[1 + start : 1 + end]]))
        lines = None if start == 0 and end == n else (start, end)
        part = UnitPart(self.file.path, self.hunk.index, text, lines, _span(self.hunk, start, end))
        return part, self._count_tokens(text)

    def largest(self, start: int, stop: int, cap: int) -> tuple[UnitPart, int] | None:
        """The longest slice [start, end) with end <= stop whose text fits `cap` tokens, or None.
        Doubling from one line, then halving: every slice written is at most twice the one returned,
        so cutting a hunk of n lines costs O(n log n)."""
        if cap <= 0 or start >= stop:
            return None
        best = self.part(start, start + 1)
        if best[1] > cap:
            return None  # not even one line
        lo, hi, step = start + 1, stop, 1
        while lo < hi:
            probe = min(lo + step, hi)
            candidate = self.part(start, probe)
            if candidate[1] > cap:
                hi = probe - 1
                break
            best, lo, step = candidate, probe, step * 2
        while lo < hi:
            mid = (lo + hi + 1) // 2
            candidate = self.part(start, mid)
            if candidate[1] <= cap:
                best, lo = candidate, mid
            else:
                hi = mid - 1
        return best


def _span(hunk: Hunk, start: int, stop: int) -> tuple[int, int]:
    """The file line range of lines [start, stop) of a hunk, on one side: new-file numbers (side
    RIGHT) of its added and unchanged lines, or, when it holds only removed lines, their old-file
    numbers (side LEFT, `_side`). Never starts after it ends."""
    lines = hunk.lines[start:stop]
    right = [line.new for line in lines if line.kind != "-" and line.new is not None]
    numbers = right or [line.old for line in lines if line.old is not None] or [0]
    return min(numbers), max(numbers)


def _side(hunk: Hunk, start: int, stop: int) -> Side:
    """RIGHT unless lines [start, stop) of the hunk are all removed lines."""
    lines = hunk.lines[start:stop]
    removed_only = bool(lines) and all(line.kind == "-" or line.new is None for line in lines)
    return "LEFT" if removed_only else "RIGHT"


def _slices(
    f: DiffFile,
    hunk: Hunk,
    cap: int,
    count_tokens: Callable[[str], int],
    redact: Callable[[str], str],
    unplaced: list[Unplaced],
) -> list[tuple[UnitPart, int]]:
    """A hunk too big for one call, cut at line boundaries into slices that each fit one call,
    overlapping by SLICE_OVERLAP_LINES; a line that does not fit even alone is `context_window`."""
    out: list[tuple[UnitPart, int]] = []
    written = _Written(f, hunk, count_tokens, redact)
    start, n = 0, len(hunk.lines)
    while start < n:
        best = written.largest(start, n, cap)
        if best is None:
            unplaced.append(Unplaced(f.path, hunk.index, (start, start + 1), "context_window"))
            start += 1
            continue
        out.append(best)
        end = (best[0].lines or (0, n))[1]
        if end >= n:
            break
        start = max(end - SLICE_OVERLAP_LINES, start + 1)
    return out


def _fill(packer: _Packer, risk: float, written: _Written, start: int, stop: int) -> list[Unplaced]:
    """Spend what the allowance still holds on the first lines [start, stop) of a hunk that did not
    fit whole, before any less risky hunk gets the room; whatever still does not fit is `budget`."""
    while start < stop and not packer.full:
        best_unit = max([*packer.units, packer.fresh()], key=packer.room)
        room = packer.room(best_unit) - (SEPARATOR_TOKENS if best_unit.parts else 0)
        if room < MIN_SLICE_TOKENS:
            packer.full = True
            break
        best = written.largest(start, stop, room)
        if best is None or not packer.add([best], risk):
            break
        end = (best[0].lines or (0, len(written.hunk.lines)))[1]
        if end >= stop:
            return []
        start = max(end - SLICE_OVERLAP_LINES, start + 1)
    if start >= stop:
        return []
    return [Unplaced(written.file.path, written.hunk.index, (start, stop), "budget")]


WHOLE_HUNK = (0, 1 << 30)
"""An Unplaced range that stands for every line of its hunk."""


def _ordered(parts: Sequence[tuple[UnitPart, float]]) -> tuple[UnitPart, ...]:
    """Within a unit: files by their riskiest hunk, each file's hunks (and slices) in file order."""
    best: dict[str, float] = {}
    for part, risk in parts:
        best[part.path] = max(risk, best.get(part.path, risk))
    ranked = sorted(
        parts,
        key=lambda item: (
            -best[item[0].path],
            item[0].path,
            item[0].hunk_index,
            (item[0].lines or (0, 0))[0],
        ),
    )
    return tuple(part for part, _ in ranked)


_REASON_ORDER = ("no_model", "no_credentials", "model_error", "context_window")


def coverage(
    plan: Plan,
    files: Sequence[DiffFile],
    *,
    reviewed_units: Collection[int],
    unsent_reason: Mapping[int, str] | None = None,
    default_unsent: str = "budget",
    carried: Collection[tuple[str, int]] = (),
) -> Coverage:
    """Per-file status from the plan and the units whose answers were used, line by line (slices
    overlap): a file with some reviewed lines but not all is `partial`. A line no call carried takes
    the planner's reason; a line in a unit not reviewed, that unit's `unsent_reason`, else
    `default_unsent`. With mixed reasons, a run-wide cause is named first, then `context_window`.
    `carried` hunks were reviewed by an earlier run and are unchanged since: covered."""
    unsent_reason = unsent_reason or {}
    known = {u.id for u in plan.units}
    unknown = sorted(set(reviewed_units) - known) + sorted(set(unsent_reason) - known)
    if unknown:  # the caller mixed up plans: fail, never guess
        raise ValueError(f"coverage: unit ids {unknown} are not in the plan (it has {len(known)} units)")
    ledger = _Ledger(files)
    for u in plan.units:
        done = u.id in reviewed_units
        for p in u.parts:
            state = _DONE if done else unsent_reason.get(u.id, default_unsent)
            ledger.mark(p.path, p.hunk_index, p.lines, state, p.span)
    for path, index in carried:
        ledger.mark(path, index, None, _DONE)
    for x in plan.unplaced:
        ledger.mark(x.path, x.hunk_index, x.lines, x.reason, weak=True)
    skipped = {s.path: s.reason for s in plan.skipped}
    no_patch, reviewable = set(plan.no_patch), set(plan.reviewable)
    entries: list[FileCoverage] = []
    lines_reviewed = 0
    for f in sorted(files, key=lambda f: f.path):
        total = len(f.hunks)
        if f.path in skipped:
            entries.append(FileCoverage(f.path, "skipped", skipped[f.path], total, 0))
        elif f.path in no_patch:
            entries.append(FileCoverage(f.path, "listed", "no_patch", total, 0))
        elif f.path not in reviewable:
            raise ValueError(f"coverage: {f.path!r} is not in the plan; build the plan from the same files")
        else:
            entry, reviewed = ledger.entry(f)
            entries.append(entry)
            lines_reviewed += reviewed
    lines_changed = sum(f.additions + f.deletions for f in files)
    return Coverage(files=tuple(entries), lines_changed=lines_changed, lines_reviewed=lines_reviewed)


_DONE = "\0reviewed"
"""A line's mark once a reviewed call carried it (every other mark is the reason it was not)."""


class _Ledger:
    """Per hunk, each line's mark: `_DONE`, the reason it was not reviewed, or None (none given yet:
    `budget`); and every slice as the report lists it."""

    def __init__(self, files: Sequence[DiffFile]) -> None:
        self._by_path = {f.path: f for f in files}
        self._marks: dict[tuple[str, int], list[str | None]] = {}
        self._slices: dict[str, list[SliceCoverage]] = {}

    def mark(
        self,
        path: str,
        index: int,
        lines: tuple[int, int] | None,
        mark: str,
        span: tuple[int, int] | None = None,
        *,
        weak: bool = False,
    ) -> None:
        """Lines [start, stop) of a hunk (a slice the report lists unless None or WHOLE_HUNK) get
        `mark`: `_DONE` always, a reason unless the line is done, a `weak` one (no call carried the
        line) only where no unit gave one."""
        f = self._by_path.get(path)
        if f is None or index >= len(f.hunks):
            return
        hunk = f.hunks[index]
        n = len(hunk.lines)
        start, stop = lines or (0, n)
        start, stop = max(start, 0), min(stop, n)
        if start >= stop:
            return
        marks = self._marks.setdefault((path, index), [None] * n)
        old = marks[start:stop]
        if mark == _DONE or (not any(old) if weak else _DONE not in old):
            marks[start:stop] = [mark] * (stop - start)
        else:
            marks[start:stop] = [m if m == _DONE or (weak and m) else mark for m in old]
        if lines is not None and lines != WHOLE_HUNK:
            first, last = span or _span(hunk, start, stop)
            on = _side(hunk, start, stop)
            self._slices.setdefault(path, []).append(SliceCoverage(index, first, last, mark == _DONE, on))

    def entry(self, f: DiffFile) -> tuple[FileCoverage, int]:
        """A reviewable file's coverage, and its changed lines reviewed."""
        missing: list[str] = []
        seen_any = False
        hunks_done = lines_reviewed = 0
        for hunk in f.hunks:
            n = len(hunk.lines)  # a patch series can name a path twice: marks come from its last file
            marks = (self._marks.get((f.path, hunk.index), []) + [None] * n)[:n]
            done = [line for line, m in zip(hunk.lines, marks, strict=True) if m == _DONE]
            seen_any = seen_any or bool(done)
            lines_reviewed += sum(1 for line in done if line.kind != " ")
            gaps = [m or "budget" for m in marks if m != _DONE]
            hunks_done += not gaps
            missing.extend(dict.fromkeys(gaps))
        slices = tuple(
            sorted(self._slices.get(f.path, ()), key=lambda s: (s.hunk, s.start, s.end, not s.reviewed))
        )
        total = len(f.hunks)
        if not missing:
            return FileCoverage(f.path, "reviewed", None, total, total, slices), lines_reviewed
        reason = next((r for r in _REASON_ORDER if r in missing), missing[0])
        status: CoverageStatus = "partial" if hunks_done or seen_any else "listed"
        return FileCoverage(f.path, status, reason, total, hunks_done, slices), lines_reviewed
