"""The shapes real models answer in, mapped onto ours: ONE table to extend when a model drifts.

Each list of the answer (findings, exclusions, signals) has a `ListShape`: the keys a model may
give it at the top level, and per field the names models use for it. Severity words, confidence
words, string numbers, `./` paths, wrappers (`{"issues": [...]}`, `{"review": {...}}`) and a bare
list are mapped here too. Every change made is named by a code (`NORMALISED_CODES`) and counted, so
the report shows a prompt that drifts (`answers.normalised` in report.json).

Adding a synonym is one entry in `FINDING_FIELDS` (or the other tables); adding a list to the answer
is one `ListShape` in `LISTS`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

SEVERITY_WORDS: Mapping[str, str] = {
    **dict.fromkeys(
        ("p1", "p0", "1", "0", "blocker", "blocking", "critical", "high", "urgent", "severe"), "P1"
    ),
    **dict.fromkeys(("p2", "2", "major", "medium", "moderate", "important", "warning", "warn"), "P2"),
    **dict.fromkeys(
        ("p3", "3", "4", "minor", "low", "nit", "nitpick", "info", "trivial", "suggestion", "style", "note"),
        "P3",
    ),
}
"""Severity words, case-insensitive, → our priorities (a word not here is a malformed priority)."""

CONFIDENCE_WORDS: Mapping[str, float] = {
    "certain": 0.95,
    "very high": 0.9,
    "high": 0.9,
    "medium": 0.6,
    "moderate": 0.6,
    "low": 0.3,
    "very low": 0.15,
}

DEFAULT_PRIORITY = "P2"
"""A finding whose model gave no priority at all is kept as P2 (and counted as `priority_missing`)."""


@dataclass(frozen=True)
class ListShape:
    """One list of the answer: its key, the other top-level keys models give it, and its fields
    (our name → the names models use, ours first)."""

    key: str
    aliases: tuple[str, ...]
    fields: Mapping[str, tuple[str, ...]]


FINDING_FIELDS: Mapping[str, tuple[str, ...]] = {
    "path": ("path", "file", "filename", "file_path", "filepath", "file_name", "fileName", "filePath"),
    "line": (
        "line",
        "lineNumber",
        "line_number",
        "start_line",
        "startLine",
        "line_start",
        "lineStart",
        "lines",
    ),
    "end_line": ("end_line", "endLine", "line_end", "lineEnd", "end"),
    "side": ("side",),
    "priority": ("priority", "severity", "level", "importance", "risk"),
    "title": ("title", "summary", "headline", "name"),
    "trigger": ("trigger", "scenario", "when", "reproduction", "repro"),
    "observation": (
        "observation",
        "message",
        "description",
        "issue",
        "comment",
        "body",
        "details",
        "explanation",
        "problem",
        "impact",
    ),
    "suggestion": (
        "suggestion",
        "fix",
        "recommendation",
        "suggested_fix",
        "suggestedFix",
        "remediation",
        "solution",
        "suggested_change",
    ),
    "quote": ("quote", "code", "snippet", "code_snippet", "line_content", "existing_code", "original_code"),
    "confidence": ("confidence", "certainty", "probability"),
    "location": ("location", "loc", "position"),
}

LISTS: tuple[ListShape, ...] = (
    ListShape(
        "findings",
        (
            "issues",
            "comments",
            "suggestions",
            "problems",
            "bugs",
            "defects",
            "results",
            "items",
            "review_comments",
        ),
        FINDING_FIELDS,
    ),
    ListShape(
        "exclusions",
        ("non_issues", "false_positives", "cleared", "dismissed"),
        {
            "claim": ("claim", "suspicion", "concern", "hypothesis", "title"),
            "reason": ("reason", "why", "rationale", "explanation"),
            "path": FINDING_FIELDS["path"],
            "line": FINDING_FIELDS["line"],
        },
    ),
    ListShape(
        "signals",
        ("simplifications", "refactors", "simplification_signals"),
        {
            "kind": ("kind", "type", "action"),
            "target": ("target", "what", "location"),
            "into": ("into", "destination", "to"),
            "reason": ("reason", "why", "rationale"),
        },
    ),
)
"""Every list of the answer, in the order they are read. A new list is one entry here (and its
item builder in `reviewer.findings`)."""

WRAPPERS = ("review", "result", "response", "output", "answer", "data", "code_review")
"""Top-level keys whose object holds the answer itself (`{"review": {"findings": [...]}}`)."""

NORMALISED_CODES = (
    "think_block",
    "prose",
    "fence",
    "repaired",
    "wrapper",
    "bare_list",
    "list_name",
    "field_name",
    "priority_word",
    "priority_missing",
    "string_number",
    "line_range",
    "location",
    "path_prefix",
    "side_word",
    "confidence_word",
    "confidence_percent",
    "title_from_text",
    "filled_empty",
)
"""What may be counted in `answers.normalised` (report.json), each a way a real answer differed."""

_LINE_RANGE = re.compile(r"^\s*[Ll]?(?:ines?\s*)?(\d+)\s*(?:[-–:]|to|\.\.)\s*[Ll]?(\d+)\s*$")
_LOCATION = re.compile(r"^\s*(?P<path>[^\s:]+?):(?P<line>\d+)(?:[-:](?P<end>\d+))?\s*$")
_SENTENCE = re.compile(r"(?<=[.!?。])\s")


def unwrap(value: Any, notes: list[str]) -> dict[str, Any]:
    """The answer as our top-level object: a bare list is the findings list; a wrapper object is
    opened; a list under another name is renamed; a lone finding object is a list of one."""
    if isinstance(value, list):
        notes.append("bare_list")
        return {"findings": value}
    if not isinstance(value, dict):
        raise ValueError("the answer must be a JSON object")
    value = _opened(value, notes)
    if isinstance(value, list):
        return {"findings": value}
    out = _renamed(value, notes)
    if not any(s.key in out for s in LISTS) and _lone_finding(value):
        notes.append("wrapper")
        return {"findings": [value]}
    return out


def _opened(value: dict[str, Any], notes: list[str]) -> dict[str, Any] | list[Any]:
    """Up to two wrapper objects (`WRAPPERS`) opened, until one holds a list we know; a wrapper
    holding a list is that list."""
    for _ in range(2):
        if any(_has_list(value, shape) for shape in LISTS):
            break
        inner = [value[k] for k in WRAPPERS if isinstance(value.get(k), (dict, list))]
        if not inner:
            break
        notes.append("wrapper")
        if isinstance(inner[0], list):
            return inner[0]
        value = inner[0]
    return value


def _renamed(value: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """Each list under its own key (the first of its names found); keys the tables do not know stay."""
    out: dict[str, Any] = {}
    for shape in LISTS:
        name = next((n for n in (shape.key, *shape.aliases) if n in value), None)
        if name is not None:
            if name != shape.key:
                notes.append("list_name")
            out[shape.key] = value[name]
    for key, item in value.items():  # lists the tables do not know stay for the caller to read
        if key not in out and all(key not in (s.key, *s.aliases) for s in LISTS):
            out.setdefault(key, item)
    return out


def _has_list(value: Mapping[str, Any], shape: ListShape) -> bool:
    return any(name in value for name in (shape.key, *shape.aliases))


def _lone_finding(value: Mapping[str, Any]) -> bool:
    return any(n in value for n in FINDING_FIELDS["path"]) and any(
        n in value for n in (*FINDING_FIELDS["title"], *FINDING_FIELDS["observation"])
    )


def fields(item: Mapping[str, Any], shape: ListShape, notes: list[str]) -> dict[str, Any]:
    """`item` with our field names: the first name of the table present (ours first) wins."""
    out: dict[str, Any] = {}
    for ours, names in shape.fields.items():
        for name in names:
            if name in item:
                if name != ours:
                    notes.append("field_name")
                out[ours] = item[name]
                break
    return out


def finding_fields(
    item: Mapping[str, Any], notes: list[str], paths: Collection[str] | None = None
) -> dict[str, Any]:
    """A finding's raw fields mapped and made plain: `location` "a.py:12" split, line ranges split,
    `./` and `b/` taken off paths, severity and confidence words mapped, a missing title taken from
    the first sentence of the text (or the text from the title)."""
    out = fields(item, LISTS[0], notes)
    for fix in _FINDING_FIXES:
        fix(out, notes)
    if isinstance(out.get("path"), str):
        out["path"] = clean_path(out["path"], notes, paths)
    return out


def _split_location(out: dict[str, Any], notes: list[str]) -> None:
    location = out.pop("location", None)
    if isinstance(location, str) and (match := _LOCATION.match(location)):
        notes.append("location")
        out.setdefault("path", match.group("path"))
        out.setdefault("line", match.group("line"))
        if match.group("end"):
            out.setdefault("end_line", match.group("end"))
    elif isinstance(location, Mapping):
        notes.append("location")
        for key, value in fields(location, LISTS[0], notes).items():
            out.setdefault(key, value)


def _split_line_range(out: dict[str, Any], notes: list[str]) -> None:
    line = out.get("line")
    if isinstance(line, list) and line and all(isinstance(n, (int, str)) for n in line[:2]):
        notes.append("line_range")
        out["line"], out["end_line"] = line[0], line[-1] if len(line) > 1 else out.get("end_line")
    elif isinstance(line, str) and (match := _LINE_RANGE.match(line)):
        notes.append("line_range")
        out["line"], out["end_line"] = match.group(1), match.group(2)


def _priority(out: dict[str, Any], notes: list[str]) -> None:
    out["priority"] = priority(out.get("priority"), notes)


_SIDE_WORDS = {"new": "RIGHT", "head": "RIGHT", "added": "RIGHT", "old": "LEFT", "base": "LEFT"}


def _side_word(out: dict[str, Any], notes: list[str]) -> None:
    side = out.get("side")
    if isinstance(side, str) and side.strip().lower() in _SIDE_WORDS:
        notes.append("side_word")
        out["side"] = _SIDE_WORDS[side.strip().lower()]


def _confidence(out: dict[str, Any], notes: list[str]) -> None:
    out["confidence"] = confidence(out.get("confidence"), notes)


def _title_from_text(out: dict[str, Any], notes: list[str]) -> None:
    title, text = out.get("title"), out.get("observation")
    if not _filled(title) and isinstance(text, str) and text.strip():
        notes.append("title_from_text")
        out["title"] = first_sentence(text)


def _fill_empty(out: dict[str, Any], notes: list[str]) -> None:
    for name in ("trigger", "suggestion", "quote", "observation"):
        if not _filled(out.get(name)):
            notes.append("filled_empty")
            out[name] = ""


_FINDING_FIXES: tuple[Callable[[dict[str, Any], list[str]], None], ...] = (
    _split_location,
    _split_line_range,
    _priority,
    _side_word,
    _confidence,
    _title_from_text,
    _fill_empty,
)
"""What finding_fields does to a finding's fields, in this order."""


def _filled(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def first_sentence(text: str, limit: int = 200) -> str:
    head = _SENTENCE.split(text.strip(), maxsplit=1)[0].strip()
    return head if len(head) <= limit else head[: limit - 1].rstrip() + "…"


def clean_path(path: str, notes: list[str], paths: Collection[str] | None = None) -> str:
    """A path as the diff names it: without `./`, a `b/` diff prefix or a leading `/`.

    With the PR's files known (`paths`), a `b/` is taken off only when the path without it is a PR
    file and the path with it is not: a PR may really have a folder `b/`."""
    stripped = path.strip()
    for prefix in ("./", "b/", "/"):
        if stripped.startswith(prefix) and len(stripped) > len(prefix):
            rest = stripped[len(prefix) :]
            if prefix == "b/" and paths is not None and (stripped in paths or rest not in paths):
                continue
            stripped = rest
    if stripped != path:
        notes.append("path_prefix")
    return stripped


def priority(value: Any, notes: list[str]) -> Any:
    """P1/P2/P3 from the words and numbers models use; a value no table knows is returned as is
    (the caller calls it malformed); none at all is DEFAULT_PRIORITY."""
    if value is None or (isinstance(value, str) and not value.strip()):
        notes.append("priority_missing")
        return DEFAULT_PRIORITY
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return value
    word = str(value).strip().lower()
    mapped = SEVERITY_WORDS.get(word)
    if mapped is None:
        return value
    if str(value).strip() != mapped:
        notes.append("priority_word")
    return mapped


def confidence(value: Any, notes: list[str]) -> Any:
    """A number from 0 to 1: words mapped, percentages divided, strings of numbers read."""
    if isinstance(value, str):
        word = value.strip().lower().rstrip("%").strip()
        if word in CONFIDENCE_WORDS:
            notes.append("confidence_word")
            return CONFIDENCE_WORDS[word]
        try:
            number = float(word)
        except ValueError:
            return value
        notes.append("string_number")
        value = number
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if number and 1 < value <= 100:
        notes.append("confidence_percent")
        return value / 100
    return value
