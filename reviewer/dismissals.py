"""Dismissal memory: findings a maintainer rejected on a PR (`/imreview ignore`, a resolved thread,
a 👎 on the inline comment), never raised again. Pure. A **dismissal key** survives line moves: the
rule id (rule findings) or the normalised title (model findings), with a whitespace-insensitive hash
of the lines the finding sits on. Keys live in the signed sticky state, so a forged one changes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from reviewer.config import IgnoreRule
from reviewer.diff import DiffFile
from reviewer.findings import line_texts
from reviewer.incremental import TITLE_CHARS, CarriedFinding, fingerprint
from reviewer.policy import glob_regex
from reviewer.report import Dismissal, DismissalHow, Finding

__all__ = ["Dismissal", "apply", "dismiss", "dismissal_key", "merged"]
MAX_DISMISSED = 100
"""Dismissals a state keeps (newest kept): bounds the sticky marker."""
_WORDS = re.compile(r"[^\w]+")
_WS = re.compile(r"\s+")


def dismissal_key(*, rule: str, title: str, lines: str) -> str:
    """12 hex: the rule id, or else the title (lower case, words only, single spaces: "Division by
    zero!" and "division  by zero" agree), with the fingerprint of the lines."""
    title = _WORDS.sub(" ", _WS.sub(" ", title).strip()[:TITLE_CHARS].lower()).strip()
    what = f"rule\0{rule}" if rule else f"title\0{title}"
    return hashlib.sha256(f"imreview-dismissal-v1\0{what}\0{lines}".encode()).hexdigest()[:12]


def _rule(source: str) -> str:
    return source.partition(":")[2] if source.startswith("rule:") else ""


def key_of(finding: Finding, texts: Mapping[int, str]) -> str | None:
    """The finding's key from the lines it sits on (`texts`: its file's side, by line), or None
    when it is not anchored on lines of the diff."""
    if finding.line is None or not finding.anchored:
        return None
    last = max(finding.line, finding.line if finding.end_line is None else finding.end_line)
    span = [texts.get(n) for n in range(finding.line, last + 1)]
    if any(t is None for t in span):
        return None
    lines = fingerprint([t for t in span if t is not None])
    return dismissal_key(rule=_rule(finding.source), title=finding.title, lines=lines)


def dismiss(
    carried: Sequence[CarriedFinding], finding_id: str, *, by: str, how: DismissalHow
) -> Dismissal | None:
    """The dismissal of the carried finding `finding_id`, or None when the state holds no such one."""
    match = next((c for c in carried if c.id == finding_id), None)
    if match is None:
        return None
    key = dismissal_key(rule="", title=match.title, lines=match.fingerprint)
    return Dismissal(key, match.id, match.title, match.path, by, how)


def merged(earlier: Iterable[Dismissal], new: Iterable[Dismissal]) -> tuple[Dismissal, ...]:
    """Earlier dismissals first, then new keys; one entry per key; the newest MAX_DISMISSED kept."""
    out: dict[str, Dismissal] = {}
    for d in (*earlier, *new):
        out.setdefault(d.key, d)
    return tuple(out.values())[-MAX_DISMISSED:]


@dataclass(frozen=True)
class Filtered:
    kept: tuple[Finding, ...]
    dropped: tuple[Finding, ...]
    listed: tuple[Dismissal, ...] = ()
    """The `config` dismissals of the dropped findings (`ignored_by_config`)."""


def apply(
    findings: Sequence[Finding], dismissed: Collection[Dismissal], files: Sequence[DiffFile]
) -> Filtered:
    """The findings without the dismissed ones (by key, or by the id a dismissal recorded)."""
    keys = {d.key for d in dismissed}
    ids = {d.id for d in dismissed}
    return _split(findings, files, lambda f, key: f.id in ids or key in keys)


def ignored_by_config(
    findings: Sequence[Finding], rules: Sequence[IgnoreRule], files: Sequence[DiffFile]
) -> Filtered:
    """The findings the base branch's `ignore:` list leaves out (by rule id, path glob or dismissal
    key), each listed as a `config` dismissal for the comment's folded list."""
    return _split(findings, files, lambda f, key: next((r for r in rules if _ignores(r, f, key)), None))


def _split(
    findings: Sequence[Finding], files: Sequence[DiffFile], drops: Callable[[Finding, str | None], object]
) -> Filtered:
    """Findings kept and dropped by `drops(finding, its key)`; a finding's key comes from its file's
    lines in the diff (read once per path and side), None when its file is not in the diff."""
    by_path = {f.path: f for f in files}
    texts = functools.cache(lambda path, side: line_texts(by_path[path], side))
    kept: list[Finding] = []
    dropped: list[Finding] = []
    listed: list[Dismissal] = []
    for f in findings:
        key = key_of(f, texts(f.path, f.side)) if f.path in by_path else None
        why = drops(f, key)
        (dropped if why else kept).append(f)
        if isinstance(why, IgnoreRule):
            listed.append(Dismissal(key or f.id, f.id, f.title[:160], f.path, why.reason[:60], "config"))
    return Filtered(tuple(kept), tuple(dropped), tuple(listed))


def _ignores(rule: IgnoreRule, finding: Finding, key: str | None) -> bool:
    if rule.rule:
        return _rule(finding.source) == rule.rule
    if rule.path:
        return bool(glob_regex(rule.path).match(finding.path))
    return key is not None and key == rule.fingerprint
