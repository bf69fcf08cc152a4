"""Incremental re-review: after a push, send the model only the PR hunks the push changed.

Our signed sticky state keeps the head a review covered, its base, config hash and model, and its
model findings (`CarriedFinding`). When the new head descends from that head and nothing else that
shapes a review moved, a hunk is re-sent when the push touched a line inside it, and an earlier
finding is re-anchored through the push's diff: dropped when its lines changed or its re-sent hunk
was answered without it, else carried (`carried_from`), never posted inline again. Anything else is
a full review, and `reason` says why (docs/incremental-review.md). Pure: the compare read is the
caller's.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reviewer.diff import DiffFile, LineIndex
from reviewer.findings import line_texts, norm, same_root_cause
from reviewer.report import PRIORITIES, Coverage, Finding, Incremental, priority_rank

COMPARE_FILES_CAP = 300
"""The compare API lists at most 300 files: a push that reached the cap may have touched more."""
CARRY_LIMIT_CHARS = 12_000
"""What the carried findings may take of the sticky marker (encoded), so the comment body keeps
its room under GitHub's 65,536 characters."""
TITLE_CHARS = 160
_SHA = re.compile(r"^[0-9a-f]{40}$")
_JSON_KEYS = ("id", "path", "line", "end", "side", "p", "title", "fp", "at", "c")
"""CarriedFinding's fields, in order, as the state names them (short: the marker has little room)."""


@dataclass(frozen=True)
class CarriedFinding:
    """A model finding as the signed state keeps it: where it is, what it says in one line, and a
    fingerprint of the lines it sits on, so a later run can tell whether they changed."""

    id: str
    path: str
    line: int
    end_line: int | None
    side: str
    priority: str
    title: str
    fingerprint: str
    found_at: str
    confidence: float = 0.5

    def to_json(self) -> dict[str, Any]:
        return dict(zip(_JSON_KEYS, dataclasses.astuple(self), strict=True))

    @classmethod
    def from_json(cls, value: Any) -> CarriedFinding | None:
        """None for anything malformed (a state we cannot read is a full review, never a crash):
        empty strings, an unknown side or priority, no full sha, no line numbers. A confidence
        outside 0..1 reads as 0.5."""
        if not isinstance(value, Mapping):
            return None
        fields: list[Any] = [value.get(k) for k in _JSON_KEYS]
        ident, path, line, end, side, priority, title, fp, at, c = fields
        if not all(isinstance(v, str) and v for v in (ident, path, side, priority, title, fp, at)):
            return None
        if not _is_line(line) or (end is not None and not _is_line(end)):
            return None
        if side not in ("RIGHT", "LEFT") or priority not in PRIORITIES or not _SHA.match(at):
            return None
        sane = isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c <= 1
        return cls(ident, path, line, end, side, priority, title, fp, at, c if sane else 0.5)

    def finding(self, *, path: str, line: int, end_line: int | None) -> Finding:
        return Finding(
            id=self.id,
            priority=self.priority,  # type: ignore[arg-type]  # checked in from_json
            title=self.title,
            path=path,
            line=line,
            end_line=end_line,
            side=self.side,  # type: ignore[arg-type]
            trigger="",
            observation="",
            suggestion="",
            quote="",
            confidence=float(self.confidence),
            source="llm",
            anchored=True,
            anchor_reason="carried",
            carried_from=self.found_at,
        )


def pack(carried: Sequence[CarriedFinding]) -> str:
    """The carried findings as the state keeps them: base64 of their JSON, because titles and paths
    are model and PR text and the marker must stay inert (no mention, no marker look-alike)."""
    text = json.dumps([c.to_json() for c in carried], separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def unpack(value: Any) -> tuple[tuple[CarriedFinding, ...], bool]:
    """(findings, intact): anything malformed reads as not intact, and the next review is full."""
    if not isinstance(value, str):
        return (), False
    try:
        items = json.loads(base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError, binascii.Error, RecursionError):
        return (), False
    if not isinstance(items, list):
        return (), False
    parsed = [CarriedFinding.from_json(item) for item in items]
    return tuple(c for c in parsed if c is not None), all(c is not None for c in parsed)


def _is_line(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def fingerprint(texts: Sequence[str]) -> str:
    """Whitespace-insensitive hash of the lines a finding sits on (10 hex)."""
    return hashlib.sha256("\n".join(map(norm, texts)).encode("utf-8")).hexdigest()[:10]


def _span_texts(texts: Mapping[int, str], line: int, end_line: int | None) -> list[str] | None:
    last = end_line if end_line is not None and end_line > line else line
    wanted = [texts.get(n) for n in range(line, last + 1)]
    return None if any(t is None for t in wanted) else [t for t in wanted if t is not None]


def to_carry(
    findings: Sequence[Finding], files: Sequence[DiffFile], *, head: str, limit_chars: int = CARRY_LIMIT_CHARS
) -> tuple[tuple[CarriedFinding, ...], bool]:
    """The anchored model findings to keep in the state (rule findings re-run for free), most severe
    first, and whether all fit: one that cannot be fingerprinted or does not fit `limit_chars` makes
    the next run review everything rather than lose it."""
    by_path = {f.path: f for f in files}
    texts = functools.cache(lambda path, side: line_texts(by_path[path], side))  # a file side read once
    kept: list[CarriedFinding] = []
    used = 0
    complete = True
    for f in sorted(
        (f for f in findings if f.source == "llm"),
        key=lambda f: (priority_rank(f.priority), f.path, f.line or 0),
    ):
        anchored = f.anchored and f.line is not None and f.path in by_path
        span = _span_texts(texts(f.path, f.side), f.line, f.end_line) if anchored and f.line else None
        item = _carried(f, span, head=head) if span is not None else None
        size = len(json.dumps(item.to_json(), ensure_ascii=False).encode("utf-8")) + 1 if item else 0
        if item is None or (used + size) * 4 / 3 + 4 > limit_chars:
            complete = False
            continue
        used += size
        kept.append(item)
    return tuple(kept), complete


def _carried(f: Finding, span: Sequence[str], *, head: str) -> CarriedFinding:
    """The finding as the state keeps it: one line of title, and a fingerprint of its lines' `span`."""
    line = f.line or 0
    return CarriedFinding(
        id=f.id,
        path=f.path,
        line=line,
        end_line=f.end_line if f.end_line is not None and f.end_line > line else None,
        side=f.side,
        priority=f.priority,
        title=norm(f.title)[:TITLE_CHARS] or f.id,
        fingerprint=fingerprint(span),
        found_at=f.carried_from or head,
        confidence=round(f.confidence, 2),
    )


def coverage_complete(coverage: Coverage, gap_whys: Collection[str]) -> bool:
    """Every reviewable file was reviewed (policy skips and files GitHub gives no patch for aside)."""
    if "too_many_files" in gap_whys:
        return False
    return all(
        c.status in ("reviewed", "skipped") or (c.status == "listed" and c.reason == "no_patch")
        for c in coverage.files
    )


@dataclass(frozen=True)
class Prior:
    """What the signed state says about the last review (see `StickyState`)."""

    head: str
    merge_base: str
    config: str
    model: str
    complete: bool
    carried: tuple[CarriedFinding, ...]


def full_reason(
    prior: Prior | None, *, head: str, merge_base: str, config_digest: str, model: str
) -> str | None:
    """Why this run must review everything, or None when the push's diff is worth reading: for an
    incremental review, or (`prior.complete` false) to send what the push changed first."""
    if prior is None or not _SHA.match(prior.head):
        return "no_prior_review"
    if prior.head == head:
        return "same_head"
    if not merge_base or prior.merge_base != merge_base:
        return "base_changed"
    if prior.model != model:
        return "model_changed"
    if prior.config != config_digest:
        return "config_changed"
    return None


def compare_reason(status: str, files: int) -> str | None:
    """The compare API's verdict on `prior_head...new_head`: only `ahead` is a plain push."""
    if status != "ahead":
        return "force_push"
    if files >= COMPARE_FILES_CAP:
        return "compare_too_large"
    return None


@dataclass(frozen=True)
class Increment:
    """What a review after a push sends: the PR hunks to (re-)send, the earlier findings that may
    carry, and the hunks the push touched (`first`: planned before the others). With `reason`
    `incremental` the rest of the PR keeps the earlier review; otherwise (`prior_incomplete`) the
    whole PR is sent, what the push changed first, so a tight budget or per-PR cap pays for that."""

    since: str
    resend: frozenset[tuple[str, int]]
    carried: tuple[Finding, ...]
    dropped: tuple[str, ...]
    hunks_total: int
    first: frozenset[tuple[str, int]] = frozenset()
    reason: str = "incremental"

    @property
    def carries(self) -> bool:
        return self.reason == "incremental"

    def info(self, findings_carried: int, findings_dropped: int) -> Incremental:
        return Incremental(
            mode="incremental" if self.carries else "full",
            reason=self.reason,
            since=self.since,
            hunks_sent=len(self.resend),
            hunks_carried=self.hunks_total - len(self.resend),
            findings_carried=findings_carried,
            findings_dropped=findings_dropped,
        )


def full(reason: str, since: str | None = None) -> Incremental:
    return Incremental(mode="full", reason=reason, since=since if since and _SHA.match(since) else None)


def increment(prior: Prior, pushed: Sequence[DiffFile], files: Sequence[DiffFile]) -> Increment:
    """Plan the incremental review of `files` (the PR diff at the new head) from `pushed` (the diff
    `prior.head...new head`): the hunks to re-send and the earlier findings re-anchored."""
    resend = frozenset(_pushed_hunks({d.path: d for d in pushed}, files))
    everything = frozenset((f.path, h.index) for f in files for h in f.hunks)
    carried, dropped = _carried_over(prior.carried, pushed, files) if prior.complete else ((), ())
    return Increment(
        since=prior.head,
        resend=resend if prior.complete else everything,
        carried=carried,
        dropped=dropped,
        hunks_total=len(everything),
        first=resend,
        reason="incremental" if prior.complete else "prior_incomplete",
    )


def _pushed_hunks(by_new: Mapping[str, DiffFile], files: Sequence[DiffFile]) -> set[tuple[str, int]]:
    """The PR hunks (path, index) the push touched; every hunk of a file whose push diff has no patch."""
    resend: set[tuple[str, int]] = set()
    for f in files:
        delta = by_new.get(f.path)
        touched = _touched(delta) if delta is not None and delta.has_patch else None
        if delta is not None:
            resend.update(
                (f.path, h.index)
                for h in f.hunks
                if touched is None or any(h.new_start <= t <= h.new_end for t in touched)
            )
    return resend


def _carried_over(
    earlier: Sequence[CarriedFinding], pushed: Sequence[DiffFile], files: Sequence[DiffFile]
) -> tuple[tuple[Finding, ...], tuple[str, ...]]:
    """(the earlier findings re-anchored at the new head, the ids of those that could not be)."""
    by_new = {d.path: d for d in pushed}
    renamed = {d.old_path: d.path for d in pushed if d.old_path and d.status == "renamed"}
    index = LineIndex.build(files)
    by_path = {f.path: f for f in files}
    moved = [(c.id, _reanchor(c, by_new, renamed, by_path, index)) for c in earlier]
    return tuple(m for _, m in moved if m is not None), tuple(ident for ident, m in moved if m is None)


def _touched(delta: DiffFile) -> set[int]:
    """New-side lines a push changed: added lines, and both neighbours of a removal."""
    touched: set[int] = set()
    for hunk in delta.hunks:
        cursor = hunk.new_start
        for line in hunk.lines:
            if line.kind == "+" and line.new is not None:
                touched.add(line.new)
                cursor = line.new + 1
            elif line.kind == "-":
                touched.update((cursor - 1, cursor))
            elif line.new is not None:
                cursor = line.new + 1
    return touched


def map_line(delta: DiffFile, line: int) -> int | None:
    """Where old line `line` of a file is after `delta`, or None when the push changed it."""
    shift = 0
    for hunk in delta.hunks:
        before = hunk.old_start < line if hunk.old_len == 0 else hunk.old_start + hunk.old_len <= line
        if before:
            shift += hunk.new_len - hunk.old_len
            continue
        if hunk.old_len and hunk.old_start <= line:
            for dl in hunk.lines:
                if dl.old == line:
                    return dl.new if dl.kind == " " else None
            return None
        break
    return line + shift


def _reanchor(
    c: CarriedFinding,
    by_new: Mapping[str, DiffFile],
    renamed: Mapping[str, str],
    by_path: Mapping[str, DiffFile],
    index: LineIndex,
) -> Finding | None:
    path = renamed.get(c.path, c.path)
    line, end = c.line, c.end_line
    delta = by_new.get(path)
    if delta is not None and c.side == "RIGHT":
        moved = _after_push(c, delta)
        if moved is None:
            return None
        line, end = moved
    diff = by_path.get(path)
    if diff is None:
        return None
    span = _span_texts(line_texts(diff, c.side), line, end)
    if span is None or fingerprint(span) != c.fingerprint:
        return None
    if end is not None and not index.range_commentable(path, line, end, c.side):
        end = None
    if not index.commentable(path, line, c.side):
        return None
    return c.finding(path=path, line=line, end_line=end)


def _after_push(c: CarriedFinding, delta: DiffFile) -> tuple[int, int | None] | None:
    """Where the finding's lines are after a push that changed its file; None when the push changed
    them (or removed the file, or GitHub gave no patch to tell)."""
    if not delta.has_patch or delta.status == "removed":
        return None
    end = c.end_line
    mapped = [map_line(delta, n) for n in range(c.line, (end or c.line) + 1)]
    if any(m is None for m in mapped):
        return None
    return mapped[0] or c.line, mapped[-1] if end is not None else None


def merge(
    new: Sequence[Finding],
    carried: Sequence[Finding],
    *,
    answered: Collection[tuple[str, int]],
    index: LineIndex,
) -> tuple[list[Finding], list[Finding], list[str]]:
    """(findings, carried kept, ids dropped): a carried finding the model reports again is the new
    one under the old id; one in a hunk that was re-sent and answered without it is dropped."""
    out = list(new)
    kept: list[Finding] = []
    dropped: list[str] = []
    for c in carried:
        match = next((i for i, n in enumerate(out) if n.source == "llm" and same_root_cause(n, c)), None)
        if match is not None:
            out[match] = dataclasses.replace(out[match], id=c.id)
            continue
        hunk = index.side(c.path, c.side).get(c.line or 0)
        if hunk is not None and (c.path, hunk) in answered:
            dropped.append(c.id)
            continue
        kept.append(c)
    return [*out, *kept], kept, dropped


def stamp_coverage(coverage: Coverage, *, head: str, since: str | None, sent: Collection[str]) -> Coverage:
    """`reviewed_at` per file: this run's head when any of its hunks was answered now (or the
    review was full), else the earlier head whose review still covers it."""
    files = tuple(
        dataclasses.replace(
            c,
            reviewed_at=(head if since is None or c.path in sent else since)
            if c.status in ("reviewed", "partial")
            else None,
        )
        for c in coverage.files
    )
    return dataclasses.replace(coverage, files=files)
