"""The JSON value in a model's answer, read as tolerantly as real answers need, and where it was cut.

Real answers are not always one clean JSON object: reasoning models think first (`<think>…</think>`),
chat models wrap the JSON in prose or a Markdown fence, small models leave a trailing comma or an
unclosed bracket, and every model can be cut at `max_tokens`. The repair itself is json-repair's
(docs/answers.md says why that library); this module finds the JSON in the text and tells which of
its containers were still open where the text ended, so the caller keeps only the items that were
written out completely and knows that more may have been meant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_REPAIR_CHARS = 16_000
"""json-repair is pure Python and slows down faster than linearly on hostile text (a 32 kB run of
unclosed strings took 20 s on a loaded 2-core machine): a longer answer is repaired from its first
16 kB only (a valid answer of any size still parses strictly; six findings are about 9 kB)."""
MAX_REPAIR_TOTAL = 20_000
MAX_CANDIDATES = 12
MAX_REPAIRS = 3
"""Candidates repaired at most (the whole answer, a fence, the first brackets), and characters over
all of them: the rest are only tried as valid JSON, so a hostile answer costs a bounded time."""
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON|javascript|js)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_START = re.compile(r"[\[{]")
_ANSWER_START = re.compile(r'\{\s*"(?:findings|exclusions|signals|unverified)"\s*:')
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


@dataclass(frozen=True)
class Read:
    """The JSON value found in an answer. `cut_items` are the ids (`id()`) of objects of `value` that
    the text ended inside of (half written); `open_lists` the ids of its lists that never closed.
    `notes` name what had to be done to read it (`think_block`, `prose`, `fence`, `repaired`)."""

    value: Any
    cut_items: frozenset[int] = frozenset()
    open_lists: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()


@dataclass
class _Open:
    kind: str  # "{" or "["
    children: int = 0  # containers begun directly inside this one


def _candidates(text: str) -> Iterator[tuple[str, str]]:
    """(JSON text to try, how it was found): the whole answer, each fenced block (an unclosed last
    fence running to the end), the first object after prose that opens with one of the answer's keys
    and parses as it stands (prose with brackets of its own, `{b}`, is then never repaired into the
    answer), then the text from each opening bracket."""
    whole = text.strip()
    yield whole, ""
    for match in _FENCE.finditer(text):
        yield match.group(1).strip(), "fence"
    first = _ANSWER_START.search(text)
    if first is not None and first.start() > 0 and _complete(text[first.start() :]):
        yield text[first.start() :], "prose"
    for n, match in enumerate(_START.finditer(text)):
        if n >= MAX_CANDIDATES:
            break
        if match.start() > 0:
            yield text[match.start() :], "prose"


ANSWER_KEYS = frozenset({"findings", "exclusions", "signals", "unverified"})


def _looks_like_answer(value: Any, how: str) -> bool:
    """An answer is an object or a list of objects. Found after prose (`how == "prose"`), an empty
    list or an object holding no object and none of the answer's keys is the prose's own example
    (`returns [] when…`), never the answer: the search goes on to the next bracket."""
    if isinstance(value, list):
        return _holds_object(value) if value else how != "prose"
    if not isinstance(value, dict) or not value:
        return False
    return how != "prose" or bool(ANSWER_KEYS & value.keys()) or any(_holds_object(v) for v in value.values())


def _holds_object(value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return any(isinstance(item, dict) for item in items)


def _complete(text: str) -> bool:
    try:
        json.JSONDecoder().raw_decode(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def last_answer(thinking: str) -> str:
    """A reasoning that holds the answer, from the last object opening with one of the answer's keys
    (it thought aloud first, brackets and drafts included); all of it when none opens so. Only for a
    reasoning: in an answer, the first such object is the answer and a later one may be an example."""
    starts = [match.start() for match in _ANSWER_START.finditer(thinking)]
    return thinking[starts[-1] :] if starts else thinking


def without_thinking(text: str) -> str:
    """`text` without a reasoning model's thinking: `<think>…</think>` blocks (an unclosed one runs to
    the end), and everything up to a lone `</think>`."""
    body = _THINK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(body))
    return body[closes[-1].end() :] if closes else body


def read_json(text: str) -> Read:
    """The first answer-like JSON value of `text` (an object, or a list of objects): parsed strictly
    when it is valid, else repaired by json-repair with the containers still open at the end of the
    text recorded. Raises ValueError when the text holds no such value.

    A reasoning model's thinking is skipped: `<think>…</think>` blocks (an unclosed one runs to the
    end), or everything up to a lone `</think>` (DeepSeek-R1's template opens the block in the
    prompt, so the answer holds only its end)."""
    body = without_thinking(text)
    notes = ("think_block",) if body != text else ()
    decoder = json.JSONDecoder()
    repairs = 0
    repaired_chars = 0
    for candidate, how in _candidates(body):
        if not candidate or candidate[0] not in "[{":
            continue
        extra = (how,) if how else ()
        try:
            value, end = decoder.raw_decode(candidate)
        except (json.JSONDecodeError, RecursionError):
            repairs += 1
            piece = candidate[: min(MAX_REPAIR_CHARS, MAX_REPAIR_TOTAL - repaired_chars)]
            if repairs > MAX_REPAIRS or not piece:
                continue
            repaired_chars += len(piece)
            read = _repaired(piece)
            if read is not None and _looks_like_answer(read.value, how):
                return Read(read.value, read.cut_items, read.open_lists, (*notes, *extra, "repaired"))
            continue
        if _looks_like_answer(value, how):
            if not how and candidate[end:].strip():
                extra = ("prose",)
            return Read(value=value, notes=(*notes, *extra))
    raise ValueError("no JSON object found in the answer")


def _repaired(candidate: str) -> Read | None:
    import json_repair

    try:
        value = json_repair.loads(candidate, skip_json_loads=True)
    except (ValueError, RecursionError):
        return None
    if candidate[0] == "{" and isinstance(value, list):  # two values in a row: the first one is meant
        value = value[0] if value else None
    if not isinstance(value, (dict, list)):
        return None
    chain = _open_chain(candidate)
    cut_items, open_lists = _match_chain(value, chain)
    return Read(value=value, cut_items=cut_items, open_lists=open_lists)


def _open_chain(text: str) -> list[_Open]:
    """The containers still open where the text ends, outermost first (empty when the first value
    closed). Strings in double quotes are skipped, escapes honoured."""
    stack: list[_Open] = []
    for char in _STRING_OR_BRACKET.findall(text):
        if char in "[{":
            if stack:
                stack[-1].children += 1
            stack.append(_Open(char))
        elif char in "]}":
            if stack:
                stack.pop()
            if not stack:
                return []
    return stack


def _match_chain(value: Any, chain: list[_Open]) -> tuple[frozenset[int], frozenset[int]]:
    """Follow the open containers into the repaired value: each open container's open child is its
    last container child, when the repair kept as many container children as the text began (the
    repair may drop a child it could not make anything of; then nothing below is marked)."""
    cut: set[int] = set()
    lists: set[int] = set()
    current: Any = value
    parent: Any = None
    for depth, opened in enumerate(chain):
        if (opened.kind == "{") != isinstance(current, dict) or not isinstance(current, (dict, list)):
            break
        if isinstance(current, list):
            lists.add(id(current))
        elif isinstance(parent, list) or depth == 0:  # a lone object cut at the root is half written too
            cut.add(id(current))
        if depth + 1 >= len(chain):
            break
        values = current.values() if isinstance(current, dict) else current
        children = [v for v in values if isinstance(v, (dict, list))]
        if len(children) != opened.children:
            break
        parent, current = current, children[-1]
    return frozenset(cut), frozenset(lists)
