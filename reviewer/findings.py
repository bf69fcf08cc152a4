"""Model answers → validated findings; anchoring to commentable lines; dedupe; ordering.

Models answer in many shapes: ONE table (`LISTS`) maps them onto ours, each change named by a code
(`NORMALISED_CODES`) and counted, so the report shows a prompt that drifts (`answers.normalised`).
Nothing is dropped silently between the model and the report: an item that cannot be read is
listed in `dropped`, and a finding that cannot be anchored stays in the summary with
`anchored: false` and its `anchor_reason`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from reviewer import answer_json
from reviewer.diff import DiffFile, LineIndex
from reviewer.report import PRIORITIES, Exclusion, Finding, Signal, Unverified, finding_id, priority_rank

SIGNAL_KINDS = ("MERGE", "DELETE", "INLINE", "MOVE")
MAX_TEXT = 2_000
MAX_QUOTE = 1_000
MAX_ITEMS = 50
_WS = re.compile(r"\s+")
_T = TypeVar("_T")


_NULLABLE_INT = {"type": ["integer", "null"]}
_TEXT = {"type": "string"}


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A strict JSON Schema object: every property required, no other."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def _list_of(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": _object(properties)}


VERDICTS_SCHEMA: Mapping[str, Any] = _object(
    {"verdicts": _list_of({"id": _TEXT, "holds": {"type": "boolean"}, "reason": _TEXT})}
)

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
_SIDE_WORDS = {"new": "RIGHT", "head": "RIGHT", "added": "RIGHT", "old": "LEFT", "base": "LEFT"}
DEFAULT_PRIORITY = "P2"
"""A finding whose model gave no priority at all is kept as P2 (and counted as `priority_missing`)."""

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
"""A finding's fields: our name → the names models use, ours first (the first one present wins)."""

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


@dataclass(frozen=True)
class Dropped:
    """One item of a model answer that was left out, and why (`malformed`, `not_in_pr`, `example`,
    `truncated`: the answer ended inside it)."""

    where: str
    why: str
    detail: str
    """The parser's own sentence (a repair call is told it); the report words it from `why`."""
    path: str = ""
    """`not_in_pr`: the path the answer named."""


@dataclass(frozen=True)
class ModelAnswer:
    findings: tuple[Finding, ...]
    exclusions: tuple[Exclusion, ...]
    signals: tuple[Signal, ...]
    dropped: tuple[Dropped, ...] = ()
    unverified: tuple[Unverified, ...] = ()
    normalised: tuple[str, ...] = ()
    """What had to be normalised to read it, one `NORMALISED_CODES` code per change."""
    missing: bool = False
    """The answer ended (cut at `max_tokens`, or a malformed tail) while its findings were still
    being written: more may have been meant than it holds."""
    continued: int = 0
    """Continuation calls that asked for the rest of it."""

    def joined(self, more: ModelAnswer) -> ModelAnswer:
        """This answer followed by its continuation: every item of both (duplicates go later, with
        the rest), the half-written item of this one no longer lost when the continuation is whole."""
        rewritten = len(more.findings) >= self.cut_findings  # else the cut ones stay disclosed
        kept = [d for d in self.dropped if d.why != "truncated" or not rewritten]
        return ModelAnswer(
            findings=self.findings + more.findings,
            exclusions=self.exclusions + more.exclusions,
            signals=self.signals + more.signals,
            dropped=(*kept, *(dataclasses.replace(d, where=f"continuation {d.where}") for d in more.dropped)),
            unverified=self.unverified + more.unverified,
            normalised=self.normalised + more.normalised,
            missing=more.missing or not rewritten,
            continued=self.continued + more.continued + 1,
        )

    @property
    def cut_findings(self) -> int:
        """Findings the answer began but did not finish (dropped as `truncated`)."""
        return sum(1 for d in self.dropped if d.why == "truncated" and "findings[" in d.where)


class NothingUsable(ValueError):
    """Every finding of an answer was dropped: the answer counts as unparsed, never as clean."""

    def __init__(self, message: str, dropped: tuple[Dropped, ...]) -> None:
        super().__init__(message)
        self.dropped = dropped


EXAMPLE_VALUES = frozenset(
    {
        "<path of a file shown in the diff>",
        "<one sentence naming the defect>",
        "<the input or call that makes it happen>",
        "<what goes wrong then>",
        "<the smallest change that fixes it>",
        "<one line copied from the diff>",
        "<the suspicion>",
        "<why the code shows it is fine>",
        "<path:line or symbol>",
        "<where it should go>",
        "<why>",
        "<what the code shown cannot confirm>",
        "<the test to run, the caller to read or the path to exercise that would confirm it>",
        # the example of earlier versions, which small models were seen to echo (issue 12)
        "a/b.py",
        "exact code text from the diff",
        "…",
    }
)
"""The placeholder values of the answer example in `templates/prompts/findings_schema.j2`: a field
equal to one of them is an echo of the prompt, never a finding (tests keep the two in sync)."""
_PLACEHOLDER = re.compile(r"<[^<>\n]{1,80}>")


def _echoes_example(prose: Iterable[str], code: Iterable[str] = ()) -> bool:
    """True when a field is a placeholder of the example; code (a quote) only on an exact match."""
    prose = [v.strip() for v in prose if v.strip()]
    if any(v in EXAMPLE_VALUES or _PLACEHOLDER.fullmatch(v) for v in prose):
        return True
    return any(v.strip() in EXAMPLE_VALUES for v in code if v.strip())


def json_object(text: str) -> Any:
    """The JSON value in a model answer: bare, fenced, after thinking, followed by prose, or with a
    malformed or cut tail (`reviewer.answer_json`)."""
    return answer_json.read_json(text).value


def _fields(
    item: Mapping[str, Any], names: Mapping[str, tuple[str, ...]], notes: list[str]
) -> dict[str, Any]:
    """`item` with our field names: the first name of the table present (ours first) wins."""
    out: dict[str, Any] = {}
    for ours, theirs in names.items():
        name = next((n for n in theirs if n in item), None)
        if name is not None:
            if name != ours:
                notes.append("field_name")
            out[ours] = item[name]
    return out


def _text(
    item: Mapping[str, Any], key: str, where: str, *, required: bool = True, cap: int = MAX_TEXT
) -> str:
    value = item.get(key)
    if value is None or value == "":
        if required:
            raise ValueError(f"{where}: missing '{key}'")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: '{key}' must be a string")
    return value[:cap]


def _float(value: object, key: str, where: str, kind: str) -> float:
    """A bool, or a string float() refuses, is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where}: '{key}' must be {kind}")
    try:
        return float(value)
    except ValueError as exc:
        raise ValueError(f"{where}: '{key}' must be {kind}") from exc


def _int(item: Mapping[str, Any], key: str, where: str, notes: list[str]) -> int | None:
    value = item.get(key)
    if value is None or value == "":
        return None
    number = _float(value, key, where, "an integer")
    if not math.isfinite(number) or not number.is_integer():
        raise ValueError(f"{where}: '{key}' must be an integer, not {value!r}")
    if number < 0:
        raise ValueError(f"{where}: '{key}' must not be negative")
    if isinstance(value, str):
        notes.append("string_number")
    return int(number) or None


Clean = Callable[[str], str]
_Paths = Collection[str] | None


def _finding(item: dict[str, Any], where: str, clean: Clean, notes: list[str], paths: _Paths) -> Finding:
    """A finding needs a path and a statement of the defect (a title or an observation); a missing
    trigger, fix, quote, side or confidence is left empty (the outputs say so) or given its
    default, never a reason to drop it."""
    _plain_finding(item, notes, paths)
    priority = str(item["priority"]).upper().strip()
    if priority not in PRIORITIES:
        raise ValueError(f"{where}: 'priority' must be one of P1, P2, P3 (or a severity word)")
    side = str(item.get("side") or "RIGHT").upper().strip()
    if side not in ("RIGHT", "LEFT"):
        raise ValueError(f"{where}: 'side' must be RIGHT or LEFT")
    path = _text(item, "path", where).strip()
    title = clean(_text(item, "title", where, cap=200))
    quote = clean(item["quote"][:MAX_QUOTE])
    confidence = (
        0.5 if item["confidence"] is None else _float(item["confidence"], "confidence", where, "a number")
    )
    if not math.isfinite(confidence):
        raise ValueError(f"{where}: 'confidence' must be a finite number, not {item['confidence']!r}")
    line = _int(item, "line", where, notes)
    end_line = _int(item, "end_line", where, notes)
    return Finding(
        id=finding_id(path, quote, title),
        priority=priority,
        title=title,
        path=path,
        line=line,
        end_line=end_line if end_line and line and end_line > line else None,
        side=side,  # type: ignore[arg-type]
        trigger=clean(item["trigger"][:MAX_TEXT]),
        observation=clean(item["observation"][:MAX_TEXT]),
        suggestion=clean(item["suggestion"][:MAX_TEXT]),
        quote=quote,
        confidence=min(max(confidence, 0.0), 1.0),
        source="llm",
    )


def _plain_finding(out: dict[str, Any], notes: list[str], paths: _Paths) -> None:
    """A finding's fields made plain, each change noted; `_finding` checks them after."""
    _split_location(out, notes)
    _split_line_range(out, notes)
    out["priority"] = _priority(out.get("priority"), notes)
    side = out.get("side")
    if isinstance(side, str) and side.strip().lower() in _SIDE_WORDS:
        notes.append("side_word")
        out["side"] = _SIDE_WORDS[side.strip().lower()]
    out["confidence"] = _confidence(out.get("confidence"), notes)
    text = out.get("observation")
    if not _filled(out.get("title")) and isinstance(text, str) and text.strip():
        notes.append("title_from_text")
        head = _SENTENCE.split(text.strip(), maxsplit=1)[0].strip()
        out["title"] = head if len(head) <= 200 else head[:199].rstrip() + "…"
    for name in ("trigger", "suggestion", "quote", "observation"):
        if not _filled(out.get(name)):
            notes.append("filled_empty")
            out[name] = ""
    if isinstance(out.get("path"), str):
        out["path"] = _clean_path(out["path"], notes, paths)


def _filled(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


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
        for key, value in _fields(location, FINDING_FIELDS, notes).items():
            out.setdefault(key, value)


def _split_line_range(out: dict[str, Any], notes: list[str]) -> None:
    line = out.get("line")
    if isinstance(line, list) and line and all(isinstance(n, (int, str)) for n in line[:2]):
        notes.append("line_range")
        out["line"], out["end_line"] = line[0], line[-1] if len(line) > 1 else out.get("end_line")
    elif isinstance(line, str) and (match := _LINE_RANGE.match(line)):
        notes.append("line_range")
        out["line"], out["end_line"] = match.group(1), match.group(2)


def _priority(value: Any, notes: list[str]) -> Any:
    """P1/P2/P3 from the words and numbers models use; a value no table knows is returned as is
    (the caller calls it malformed); none at all is DEFAULT_PRIORITY."""
    if value is None or (isinstance(value, str) and not value.strip()):
        notes.append("priority_missing")
        return DEFAULT_PRIORITY
    known = isinstance(value, (str, int)) and not isinstance(value, bool)
    mapped = SEVERITY_WORDS.get(str(value).strip().lower()) if known else None
    if mapped is not None and str(value).strip() != mapped:
        notes.append("priority_word")
    return value if mapped is None else mapped


def _confidence(value: Any, notes: list[str]) -> Any:
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


def _clean_path(path: str, notes: list[str], paths: _Paths = None) -> str:
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


def _exclusion(item: dict[str, Any], where: str, clean: Clean, notes: list[str], paths: _Paths) -> Exclusion:
    path = _text(item, "path", where, required=False)
    return Exclusion(
        claim=clean(_text(item, "claim", where)),
        reason=clean(_text(item, "reason", where)),
        path=_clean_path(path, notes, paths) if path else None,
        line=_int(item, "line", where, notes),
    )


def _signal(item: dict[str, Any], where: str, clean: Clean, notes: list[str], paths: _Paths) -> Signal:
    kind = str(item.get("kind", "")).upper().strip()
    if kind not in SIGNAL_KINDS:
        raise ValueError(f"{where}: 'kind' must be one of {', '.join(SIGNAL_KINDS)}")
    return Signal(
        kind=kind,
        target=clean(_text(item, "target", where)),
        into=clean(_text(item, "into", where, required=False)),
        reason=clean(_text(item, "reason", where)),
    )


@dataclass(frozen=True)
class _List:
    """One list of the answer: the other top-level keys models give it, its fields (our name → the
    names models use, ours first), its item builder (raises ValueError for a malformed item), the
    fields of a built item checked for echoes of the prompt's example (prose, code), and its schema."""

    aliases: tuple[str, ...]
    fields: Mapping[str, tuple[str, ...]]
    build: Callable[[dict[str, Any], str, Clean, list[str], _Paths], Any]
    echo_fields: Callable[[Any], tuple[tuple[str, ...], tuple[str, ...]]]
    types: Mapping[str, Any]
    """The JSON Schema of each field that is not a string."""


LISTS: Mapping[str, _List] = {
    "findings": _List(
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
        _finding,
        lambda f: ((f.path, f.title, f.trigger, f.observation), (f.quote,)),
        {
            "line": _NULLABLE_INT,
            "end_line": _NULLABLE_INT,
            "side": {"type": "string", "enum": ["RIGHT", "LEFT"]},
            "priority": {"type": "string", "enum": list(PRIORITIES)},
            "confidence": {"type": "number"},
        },
    ),
    "exclusions": _List(
        ("non_issues", "false_positives", "cleared", "dismissed"),
        {
            "claim": ("claim", "suspicion", "concern", "hypothesis", "title"),
            "reason": ("reason", "why", "rationale", "explanation"),
            "path": FINDING_FIELDS["path"],
            "line": FINDING_FIELDS["line"],
        },
        _exclusion,
        lambda e: ((e.claim, e.reason, e.path or ""), ()),
        {"path": {"type": ["string", "null"]}, "line": _NULLABLE_INT},
    ),
    "signals": _List(
        ("simplifications", "refactors", "simplification_signals"),
        {
            "kind": ("kind", "type", "action"),
            "target": ("target", "what", "location"),
            "into": ("into", "destination", "to"),
            "reason": ("reason", "why", "rationale"),
        },
        _signal,
        lambda s: ((s.target, s.reason, s.into), ()),
        {"kind": {"type": "string", "enum": list(SIGNAL_KINDS)}},
    ),
}
"""Every list of the answer, read in this order: ONE table to extend when a model drifts (a
synonym is one entry; a new list is one `_List`)."""


ANSWER_SCHEMA: Mapping[str, Any] = _object(
    {
        **{
            key: _list_of({name: spec.types.get(name, _TEXT) for name in spec.fields if name != "location"})
            for key, spec in LISTS.items()
        },
        "unverified": _list_of({"what": _TEXT, "how": _TEXT}),
    }
)
"""The findings schema (DESIGN section 4) as JSON Schema, for providers that enforce `response_format`."""

_LIST_NAMES = {name: key for key, spec in LISTS.items() for name in (key, *spec.aliases)}
"""Every top-level name of a list, ours first, → our key."""


def _unwrap(value: Any, notes: list[str]) -> dict[str, Any]:
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
    out = {k: v for k, v in value.items() if k not in _LIST_NAMES}
    for name, key in _LIST_NAMES.items():
        if name in value and key not in out:
            if name != key:
                notes.append("list_name")
            out[key] = value[name]
    if out.keys() & LISTS.keys() or not _lone_finding(value):
        return out
    notes.append("wrapper")
    return {"findings": [value]}


def _opened(value: dict[str, Any], notes: list[str]) -> dict[str, Any] | list[Any]:
    """Up to two wrappers opened, until one holds a list we know; a wrapper of a list is that list."""
    for _ in range(2):
        inner = [value[k] for k in WRAPPERS if isinstance(value.get(k), (dict, list))]
        if _LIST_NAMES.keys() & value.keys() or not inner:
            break
        notes.append("wrapper")
        if isinstance(inner[0], list):
            return inner[0]
        value = inner[0]
    return value


def _lone_finding(value: Mapping[str, Any]) -> bool:
    stated = (*FINDING_FIELDS["title"], *FINDING_FIELDS["observation"])
    return any(n in value for n in FINDING_FIELDS["path"]) and any(n in value for n in stated)


def parse_answer(text: str, *, clean: Clean = lambda s: s, pr_paths: _Paths = None) -> ModelAnswer:
    """Read one unit's answer, item by item, in any shape `LISTS` knows.

    The JSON is read tolerantly (`answer_json`): an item the answer ended inside of is dropped as
    `truncated` (only complete items count), and `missing` says the findings may go on past the end.
    A malformed item, a finding on a path that is not a file of the PR (`pr_paths`), and an echo of
    the prompt's example are dropped and listed in `dropped`; the rest of the answer is kept. An
    answer whose every finding was dropped raises NothingUsable (a ValueError): it is unparsed,
    never clean; so does one cut before its first finding. A wrong overall shape raises ValueError
    saying what is wrong.
    """
    read = answer_json.read_json(text)
    notes: list[str] = list(read.notes)
    data = _unwrap(read.value, notes)
    if not any(key in data for key in LISTS):
        raise ValueError("the answer has no 'findings' list (use [] when there is nothing to report)")
    kept, dropped = _read_lists(data, read, clean, notes, pr_paths)
    lost = [d for d in dropped if d.where.startswith("findings[")]
    missing = id(data.get("findings")) in read.open_lists or any(d.why == "truncated" for d in lost)
    if not kept["findings"] and lost:
        reasons = "; ".join([d.detail for d in lost][:3])
        raise NothingUsable(f"no usable finding in the answer ({reasons})", tuple(dropped))
    if not kept["findings"] and missing:
        raise NothingUsable("the answer ended before its first finding was complete", tuple(dropped))
    unverified, unverified_dropped = _unverified(data.get("unverified"), clean)
    return ModelAnswer(
        findings=tuple(kept["findings"]),
        exclusions=tuple(kept["exclusions"]),
        signals=tuple(kept["signals"]),
        dropped=(*dropped, *unverified_dropped),
        unverified=unverified,
        normalised=tuple(notes),
        missing=missing,
    )


def _read_lists(
    data: Mapping[str, Any], read: answer_json.Read, clean: Clean, notes: list[str], pr_paths: _Paths
) -> tuple[dict[str, list[Any]], list[Dropped]]:
    """Every list of the answer (`LISTS`' order): the items kept, by list, and the items dropped."""
    kept: dict[str, list[Any]] = {key: [] for key in LISTS}
    dropped: list[Dropped] = []
    for key, spec in LISTS.items():
        items = [] if data.get(key) is None else data[key]
        if not isinstance(items, list):
            raise ValueError(f"'{key}' must be a list")
        for i, raw in enumerate(items[:MAX_ITEMS]):
            where = f"{key}[{i}]"
            if id(raw) in read.cut_items:
                dropped.append(Dropped(where, "truncated", f"{where}: the answer ended inside it"))
                continue
            try:
                if not isinstance(raw, dict):
                    raise ValueError(f"{where}: must be an object")
                item = spec.build(_fields(raw, spec.fields, notes), where, clean, notes, pr_paths)
            except ValueError as exc:
                dropped.append(Dropped(where, "malformed", str(exc)))
                continue
            if _echoes_example(*spec.echo_fields(item)):
                dropped.append(
                    Dropped(where, "example", f"{where}: repeats the example of the answer format")
                )
            elif key == "findings" and pr_paths is not None and item.path not in pr_paths:
                detail = f"{where}: path {item.path[:200]!r} is not a file of this PR"
                dropped.append(Dropped(where, "not_in_pr", detail, path=item.path[:200]))
            else:
                kept[key].append(item)
    return kept, dropped


MAX_UNVERIFIED = 5
"""Verification gaps kept from one answer (the prompt asks for at most this many)."""
UNVERIFIED_CHARS = 300
"""Each verification gap's `what` and `how` are cut to this many characters (the prompt asks for short)."""


def _unverified(value: Any, clean: Clean) -> tuple[tuple[Unverified, ...], tuple[Dropped, ...]]:
    """The answer's verification gaps: at most MAX_UNVERIFIED, each `what` (required) and `how` as
    one short line; a bare string is a `what`. A malformed item or an echo of the prompt's example
    is dropped and listed; a missing or wrong-typed list is nothing to keep."""
    if not isinstance(value, list):
        return (), ()
    kept: list[Unverified] = []
    dropped: list[Dropped] = []
    for i, item in enumerate(value[:MAX_ITEMS]):
        where = f"unverified[{i}]"
        raw = {"what": item} if isinstance(item, str) else item if isinstance(item, dict) else {}
        what, how = raw.get("what"), raw.get("how")
        if not isinstance(what, str) or not what.strip() or not isinstance(how, (str, type(None))):
            dropped.append(Dropped(where, "malformed", f"{where}: needs a 'what' text and a 'how' text"))
        elif _echoes_example((what, how or "")):
            dropped.append(Dropped(where, "example", "repeats the example of the answer format"))
        elif len(kept) < MAX_UNVERIFIED:
            kept.append(Unverified(what=_one_line(clean(what)), how=_one_line(clean(how or ""))))
    return tuple(kept), tuple(dropped)


def _one_line(text: str) -> str:
    text = norm(text)
    return text if len(text) <= UNVERIFIED_CHARS else text[: UNVERIFIED_CHARS - 1] + "…"


def dedupe_unverified(items: Iterable[Unverified], limit: int) -> tuple[Unverified, ...]:
    """Each verification gap once (same `what`, case and spacing aside), the first `limit` of them."""
    return _first_per(items, lambda u: norm(u.what).lower())[:limit]


def _first_per(items: Iterable[_T], key: Callable[[_T], Hashable]) -> tuple[_T, ...]:
    """The first item of each key, in order."""
    out: dict[Hashable, _T] = {}
    for item in items:
        out.setdefault(key(item), item)
    return tuple(out.values())


def group_dropped(dropped: Iterable[Dropped]) -> dict[str, list[Dropped]]:
    """Dropped items by reason, findings only (a dropped exclusion or signal is not a finding lost)."""
    out: dict[str, list[Dropped]] = {}
    for item in dropped:
        if "findings[" in item.where:
            out.setdefault(item.why, []).append(item)
    return out


def norm(text: str) -> str:
    """Whitespace runs as one space, ends trimmed: how quotes and lines are compared."""
    return _WS.sub(" ", text).strip()


def anchor(
    finding: Finding,
    files: Mapping[str, DiffFile],
    index: LineIndex,
    *,
    redact: Callable[[str], str] = lambda s: s,
) -> Finding:
    """Pin a finding to a commentable line, or keep it summary-only with the reason (DESIGN 10.9).

    Quotes may have been redacted (secrets never leave the process), so a line also matches
    when its redacted text contains the quote.
    """
    if finding.path not in files:
        return dataclasses.replace(finding, anchored=False, anchor_reason="not_in_diff")
    lines = index.side(finding.path, finding.side)
    first = norm(finding.quote.splitlines()[0]) if finding.quote.strip() else ""
    if not first:
        if finding.line is not None and finding.line in lines:
            return _with_range(finding, finding.line, index, "as_stated")
        return dataclasses.replace(finding, anchored=False, anchor_reason="line_not_commentable")
    matches = _quote_matches(first, lines, line_texts(files[finding.path], finding.side), redact)
    if not matches:
        return dataclasses.replace(finding, anchored=False, anchor_reason="quote_not_found")
    stated = finding.line or 0
    hunk = _hunk_of(files[finding.path], stated, finding.side)
    near = [n for n in matches if hunk is not None and hunk[0] <= n <= hunk[1]]
    best = min(near or matches, key=lambda n: (abs(n - stated), n))
    return _with_range(finding, best, index, "as_stated" if best == finding.line else "moved_by_quote")


def _quote_matches(
    first: str, lines: Collection[int], text_at: Mapping[int, str], redact: Callable[[str], str]
) -> list[int]:
    """The lines that hold the quote's first line, as quoted or else bare (`bare_quote`)."""
    for quoted in dict.fromkeys((first, bare_quote(first))):
        if not quoted:
            continue
        matches = [
            n
            for n in lines
            if quoted in norm(text_at.get(n, "")) or quoted in norm(redact(text_at.get(n, "")))
        ]
        if matches:
            return matches
    return []


_QUOTE_PREFIX = re.compile(r"^(?:\d{1,6}(?:\s*[:|]\s*|\s+(?=[+-])))?(?:[+-]\s?)?")


def bare_quote(quote: str) -> str:
    """A quote as copied from a numbered diff (`+code`, `12: +code`, `12 | code`): the code alone."""
    return norm(_QUOTE_PREFIX.sub("", quote, count=1))


def _hunk_of(file: DiffFile, line: int, side: str) -> tuple[int, int] | None:
    """The first and last line (on `side`) of the hunk of `file` that holds `line`, if one does."""
    for hunk in file.hunks:
        numbers = [n for ln in hunk.lines if (n := ln.old if side == "LEFT" else ln.new) is not None]
        if numbers and min(numbers) <= line <= max(numbers):
            return min(numbers), max(numbers)
    return None


def line_texts(file: DiffFile, side: str) -> dict[int, str]:
    """The text of every line of `file` on one side of the diff, by its line number there."""
    texts: dict[int, str] = {}
    for hunk in file.hunks:
        for line in hunk.lines:
            if side == "LEFT" and line.kind == "-" and line.old is not None:
                texts[line.old] = line.text
            elif side == "RIGHT" and line.kind != "-" and line.new is not None:
                texts[line.new] = line.text
    return texts


def _with_range(finding: Finding, line: int, index: LineIndex, reason: str) -> Finding:
    end = None
    if finding.end_line and finding.line and finding.end_line > finding.line:
        candidate = line + (finding.end_line - finding.line)
        if index.range_commentable(finding.path, line, candidate, finding.side):
            end = candidate
    return dataclasses.replace(finding, line=line, end_line=end, anchored=True, anchor_reason=reason)


def _title_key(title: str) -> str:
    return " ".join(sorted(set(re.findall(r"[a-z0-9_]{3,}", title.lower()))))


ROOT_CAUSE_LINES = 3
"""Two findings on the same quoted code this many lines apart or less share a root cause."""


def same_root_cause(a: Finding, b: Finding) -> bool:
    """Same id; or the same line with the same title words; or the same quoted code at (nearly) the
    same place, as when two units (or two overlapping slices) report one defect in their own words."""
    if a.id == b.id:
        return True
    if a.path != b.path or a.side != b.side:
        return False
    if a.line is not None and a.line == b.line and _title_key(a.title) == _title_key(b.title):
        return True
    quote_a, quote_b = norm(a.quote), norm(b.quote)
    if not quote_a or quote_a != quote_b:
        return False
    return a.line is None or b.line is None or abs(a.line - b.line) <= ROOT_CAUSE_LINES


def dedupe(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """One finding per root cause: a deterministic rule's copy always wins (it is exact, and a
    model copy could be refuted later, or written to be, taking the rule's finding with it); then
    the most severe copy, then an anchored one, then the surest."""
    kept: list[Finding] = []
    ranked = sorted(
        findings,
        key=lambda f: (
            f.source == "llm",
            priority_rank(f.priority),
            not f.anchored,
            -f.confidence,
            f.path,
            f.line or 0,
        ),
    )
    for finding in ranked:
        if not any(same_root_cause(finding, other) for other in kept):
            kept.append(finding)
    return tuple(order(kept))


def order(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then verified ones, then most confident, then by place."""
    return sorted(
        findings,
        key=lambda f: (
            priority_rank(f.priority),
            f.verified is not True,
            -f.confidence,
            not f.anchored,
            f.path,
            f.line or 0,
        ),
    )


def dedupe_signals(signals: Sequence[Signal]) -> tuple[Signal, ...]:
    return _first_per(signals, lambda s: (s.kind, s.target, s.into))


def dedupe_exclusions(exclusions: Sequence[Exclusion]) -> tuple[Exclusion, ...]:
    return _first_per(exclusions, lambda e: norm(e.claim).lower())
