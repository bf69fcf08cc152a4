"""Repository context for a hunk (docs/context.md): the head definitions of the identifiers its added
lines use, in other files, and the call sites of the functions it changes. The search is by
identifier, no parser (`reviewer.policy` says what a definition line is). Pure: the repository comes
in through `Corpus` (git objects locally, a GraphQL batch in the Action).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal, Protocol

from reviewer.diff import DiffFile, Hunk
from reviewer.policy import KEYWORDS, MIN_NAME, defined_names, definition_names, is_test_path, searchable

SnippetKind = Literal["definition", "call_site"]

DEFINITION_MAX_LINES = 30
CALL_RADIUS = 2
"""Lines shown on each side of a call site."""
MAX_NAMES = 300
"""Identifiers searched for per PR: a bound on the one search, whatever the size of the change."""
MAX_DEFINITIONS = 3
"""A name defined in more places than this is a common word (`data`, `value`), not one symbol."""
MAX_CALL_SITES = 6
"""Call sites shown per changed function."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|`[^`]*`")
_CALLED = re.compile(r"\.([A-Za-z_]\w*)|\b([A-Za-z_]\w*)\s*\(")
_FAMILIES = (
    ".py .pyi | .js .jsx .mjs .cjs .ts .tsx .mts .cts .vue .svelte | .c .h .cc .cpp .cxx .hpp .hh .hxx .m"
    " .mm | .java .kt .kts .scala .groovy | .cs .fs .vb | .rb .rake | .go | .rs | .php | .swift | .ex .exs"
    " | .sh .bash | .lua | .dart"
)
_SOURCE_FAMILIES = tuple(frozenset(family.split()) for family in _FAMILIES.split("|"))


@dataclass(frozen=True)
class Occurrence:
    """A head line that contains a searched name as a whole word."""

    path: str
    line: int
    text: str


class Corpus(Protocol):
    """The head of the repository, as the search needs it."""

    def grep(self, names: Collection[str]) -> Sequence[Occurrence]:
        """Every head line holding one of `names` as a whole word (at most a few per file per name)."""
        ...

    def read(self, path: str) -> str | None:
        """A head file's text; None when absent or unreadable."""
        ...


@dataclass(frozen=True)
class Snippet:
    """Head lines of another file shown to the model. `references` counts how often the change
    refers to `symbol`."""

    path: str
    start: int
    lines: tuple[str, ...]
    kind: SnippetKind
    symbol: str
    references: int = 1
    same_package: bool = False
    cut: int = 0

    @property
    def key(self) -> tuple[str, int]:
        return (self.path, self.start)

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    def text(self) -> str:
        label = "definition of" if self.kind == "definition" else "call site of"
        head = f"## Context: {self.path} lines {self.start}-{self.end} ({label} `{self.symbol}`)"
        body = [f"{self.start + i} ~ {line}" for i, line in enumerate(self.lines)]
        if self.cut:
            body.append(f"~ … ({self.cut} more lines)")
        return "\n".join([head, *body])


def _word_pattern(names: Iterable[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")\b")


@dataclass(frozen=True)
class MemoryCorpus:
    """A corpus over texts already read (the Action's GraphQL batch; tests)."""

    texts: Mapping[str, str]
    per_file: int = 8

    def grep(self, names: Collection[str]) -> Sequence[Occurrence]:
        if not names:
            return []
        pattern = _word_pattern(names)
        out: list[Occurrence] = []
        for path in sorted(self.texts):
            text = self.texts[path]
            if "\0" in text[:8000] or not pattern.search(text):
                continue
            found: Counter[str] = Counter()
            for number, line in enumerate(text.splitlines(), 1):
                matched = {m.group(0) for m in pattern.finditer(line)}
                if not matched or all(found[n] >= self.per_file for n in matched):
                    continue
                found.update(matched)
                out.append(Occurrence(path, number, line))
        return out

    def read(self, path: str) -> str | None:
        return self.texts.get(path)


@functools.lru_cache(maxsize=65536)
def _family(path: str) -> frozenset[str]:
    suffix = PurePosixPath(path).suffix.lower()
    return next((f for f in _SOURCE_FAMILIES if suffix in f), frozenset({suffix}) if suffix else frozenset())


def mentioned(files: Sequence[DiffFile]) -> frozenset[str]:
    """Every identifier in the hunks' lines (imports included): file stems worth reading first."""
    return frozenset(n for f in files for h in f.hunks for line in h.lines for n in _names(line.text))


def candidate_paths(
    paths: Iterable[str], changed: Collection[str], limit: int, names: Collection[str] = ()
) -> list[str]:
    """Head files worth reading when they cannot be searched where they are (the Action): those in
    the changed files' languages, a file named like an identifier of the change (`money.py` for
    `billing.money`) first, then nearest directory first; at most `limit`."""
    suffixes = frozenset().union(*(_family(p) for p in changed))
    dirs = [PurePosixPath(p).parent.parts for p in changed]

    def distance(path: str) -> int:
        parts = PurePosixPath(path).parent.parts
        best = 1 << 20
        for d in dirs:
            common = 0
            for a, b in zip(parts, d, strict=False):
                if a != b:
                    break
                common += 1
            best = min(best, len(parts) + len(d) - 2 * common)
        return best

    pool = [
        p
        for p in dict.fromkeys(paths)
        if p not in changed and searchable(p) and PurePosixPath(p).suffix.lower() in suffixes
    ]
    named = frozenset(names)
    return sorted(pool, key=lambda p: (PurePosixPath(p).stem not in named, distance(p), p))[:limit]


def _code(text: str) -> str:
    return _STRING.sub(" ", text)


def _names(text: str) -> list[str]:
    return [
        n
        for n in _IDENT.findall(_code(text))
        if len(n) >= MIN_NAME and n.lower() not in KEYWORDS and not n.isdigit()
    ]


def _indent(text: str) -> int:
    expanded = text.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


def _block(lines: Sequence[str], first: int) -> tuple[tuple[str, ...], int]:
    """The definition starting at index `first`: the line, every following line indented deeper (or
    blank), and a closing line at its own indent (`}`, `end`, `)`); cut at DEFINITION_MAX_LINES."""
    base = _indent(lines[first])
    stop = first + 1
    if stop < len(lines) and lines[stop].strip().startswith("{") and _indent(lines[stop]) == base:
        stop += 1  # a brace on its own line (Allman style)
    while stop < len(lines) and (not lines[stop].strip() or _indent(lines[stop]) > base):
        stop += 1
    if stop < len(lines) and re.match(r"\s*(?:[})\]]|end\b)", lines[stop]) and _indent(lines[stop]) == base:
        stop += 1
    while stop > first + 1 and not lines[stop - 1].strip():
        stop -= 1
    shown = min(stop, first + DEFINITION_MAX_LINES)
    return tuple(lines[first:shown]), stop - shown


def _package(path: str) -> str:
    return str(PurePosixPath(path).parent)


def changed_functions(hunk: Hunk) -> list[str]:
    """Names of the definitions a hunk changes: a definition line added or removed (its signature
    changed), else the nearest definition above the first changed line (its body changed)."""
    out = [name for line in hunk.lines if line.kind != " " for name in definition_names(line.text)]
    if out:
        return list(dict.fromkeys(out))
    first = next((i for i, line in enumerate(hunk.lines) if line.kind != " "), None)
    if first is None:
        return []
    texts = [*(line.text for line in reversed(hunk.lines[:first])), hunk.header]
    return next((names[:1] for text in texts if (names := definition_names(text))), [])


@dataclass(frozen=True)
class _Wants:
    """What a hunk's added lines use (name → times), which of them they call or reach as an
    attribute (a function's definition is shown only for those: a variable that shares a
    function's name is not a use of it), and the functions it changes."""

    uses: Mapping[str, int]
    changes: tuple[str, ...]
    called: frozenset[str] = frozenset()


def _wants(hunk: Hunk) -> _Wants:
    added = [line.text for line in hunk.lines if line.kind == "+"]
    changes = tuple(changed_functions(hunk))
    own = {*changes, *(n for text in added for n in definition_names(text))}
    uses = Counter(n for text in added for n in _names(text))
    called = frozenset(m.group(1) or m.group(2) for text in added for m in _CALLED.finditer(_code(text)))
    return _Wants({n: c for n, c in uses.items() if n not in own}, changes, called)


STAND_IN_LINE = "    result = helper_function(first_value, other_value) + offset  # ~"
"""A stand-in line as wide as a long line of code (64 characters), for `stand_in`."""
STAND_IN_DEFINITION_LINES = 10
"""A definition as `stand_in` sizes it: a signature and a short body (most are shorter)."""


def stand_in(file: DiffFile, hunk: Hunk) -> tuple[Snippet, ...]:
    """Context as large as this hunk can expect, what a review is priced with before its context is
    read: a STAND_IN_DEFINITION_LINES definition per name it uses, MAX_CALL_SITES call sites per
    function it changes, each its own place, of STAND_IN_LINE lines."""
    wants = _wants(hunk)
    sizes = [STAND_IN_DEFINITION_LINES] * min(len(wants.uses), MAX_NAMES)
    sizes += [2 * CALL_RADIUS + 1] * (len(wants.changes) * MAX_CALL_SITES)
    out: list[Snippet] = []
    start = 1
    for size in sizes:
        out.append(Snippet(f"{file.path}~{hunk.index}", start, (STAND_IN_LINE,) * size, "definition", "name"))
        start += size + 1
    return tuple(out)


def _shows(occ: Occurrence, name: str, file: DiffFile, wants: _Wants) -> bool:
    """A definition worth showing: in another file, of something the hunk calls if it is callable,
    and not a test's for a file that is not a test."""
    callable_ = re.search(rf"\b{re.escape(name)}\s*[(<]", occ.text) is not None
    return not (
        occ.path == file.path
        or (callable_ and name not in wants.called)
        or (is_test_path(occ.path) and not is_test_path(file.path))
    )


class Finder:
    """Context for every hunk of a change from one search of the corpus (the MAX_NAMES names the
    hunks use or change most often)."""

    def __init__(self, files: Sequence[DiffFile], corpus: Corpus) -> None:
        self.corpus = corpus
        self._wants: dict[tuple[str, int], _Wants] = {}
        counts: Counter[str] = Counter()
        for f in files:
            for h in f.hunks:
                w = self._wants_of(f.path, h)
                counts.update(w.uses)
                counts.update(w.changes)
        hits = self._grep(sorted(counts, key=lambda n: (-counts[n], n))[:MAX_NAMES])
        changed = {n for w in self._wants.values() for n in w.changes}
        self._found: dict[SnippetKind, dict[str, list[Occurrence]]] = {
            "definition": {
                n: [o for o in found if n in defined_names(o.path, o.text)] for n, found in hits.items()
            },
            "call_site": {
                n: [
                    o
                    for o in hits[n]
                    if re.search(rf"\b{re.escape(n)}\s*\(", _code(o.text))
                    and n not in defined_names(o.path, o.text)
                ]
                for n in changed
                if n in hits
            },
        }
        self._lines = functools.cache(
            lambda path: None if (text := corpus.read(path)) is None else text.splitlines()
        )
        self._in_family = functools.cache(self._of_family)
        self._ordered_sites = functools.cache(self._sorted_sites)

    def _of_family(self, kind: SnippetKind, name: str, family: frozenset[str]) -> list[Occurrence]:
        """Definitions or call sites of `name` in code of the hunk's language family (prose and other
        languages reuse the same words), filtered once per name and family (cached in __init__)."""
        return [occ for occ in self._found[kind].get(name, ()) if not family or _family(occ.path) == family]

    def _sorted_sites(self, name: str, family: frozenset[str], package: str) -> list[Occurrence]:
        """Call sites of `name` in the family, the hunk's own package first, tests last."""
        return sorted(
            self._in_family("call_site", name, family),
            key=lambda occ: (_package(occ.path) != package, is_test_path(occ.path), occ.path, occ.line),
        )

    def _wants_of(self, path: str, hunk: Hunk) -> _Wants:
        key = (path, hunk.index)
        if key not in self._wants:
            self._wants[key] = _wants(hunk)
        return self._wants[key]

    def _grep(self, names: list[str]) -> dict[str, list[Occurrence]]:
        """Every searchable line of the corpus that holds one of `names`, by name."""
        hits: dict[str, list[Occurrence]] = {n: [] for n in names}
        if not names:
            return hits
        pattern = _word_pattern(names)
        for occ in self.corpus.grep(names):
            if searchable(occ.path):
                for n in dict.fromkeys(pattern.findall(occ.text)):
                    if n in hits:
                        hits[n].append(occ)
        return hits

    def for_hunk(self, file: DiffFile, hunk: Hunk) -> tuple[Snippet, ...]:
        """Snippets for one hunk, best first: definitions of the names it uses (of a name with few
        enough), and up to MAX_CALL_SITES call sites outside the hunk of each function it changes."""
        wants = self._wants_of(file.path, hunk)
        package = _package(file.path)
        family = _family(file.path)
        span = range(hunk.new_start, hunk.new_start + max(hunk.new_len, 1))
        found: list[tuple[Occurrence, str, int, SnippetKind]] = []
        for name, refs in wants.uses.items():
            defined = self._in_family("definition", name, family)
            if len(defined) <= MAX_DEFINITIONS:
                found += [
                    (occ, name, refs, "definition") for occ in defined if _shows(occ, name, file, wants)
                ]
        for name in wants.changes:
            ordered = self._ordered_sites(name, family, package)
            sites = [occ for occ in ordered if not (occ.path == file.path and occ.line in span)]
            found += [(occ, name, len(sites), "call_site") for occ in sites[:MAX_CALL_SITES]]
        out: dict[tuple[str, int], Snippet] = {}
        for occ, name, refs, kind in found:
            snippet = self._snippet(occ, name, refs, kind, package)
            if snippet is not None:
                out.setdefault(snippet.key, snippet)
        return tuple(rank(out.values()))

    def _snippet(
        self, occ: Occurrence, name: str, refs: int, kind: SnippetKind, package: str
    ) -> Snippet | None:
        lines: list[str] | None = self._lines(occ.path)
        if lines is None or occ.line > len(lines):
            return None
        if kind == "definition":
            start, (shown, cut) = occ.line, _block(lines, occ.line - 1)
        else:
            start, cut = max(1, occ.line - CALL_RADIUS), 0
            shown = tuple(lines[start - 1 : min(len(lines), occ.line + CALL_RADIUS)])
        return Snippet(occ.path, start, shown, kind, name, refs, _package(occ.path) == package, cut)


def rank(snippets: Iterable[Snippet]) -> list[Snippet]:
    """Same package first, then the most referred to, definitions before call sites."""
    return sorted(
        snippets, key=lambda s: (not s.same_package, -s.references, s.kind != "definition", s.path, s.start)
    )


def merge(groups: Iterable[Sequence[Snippet]]) -> list[Snippet]:
    """The snippets of several hunks for one unit: one per place, references summed, ranked; a
    snippet inside another one of the same file adds nothing."""
    merged: dict[tuple[str, int], Snippet] = {}
    for group in groups:
        for s in group:
            seen = merged.get(s.key)
            merged[s.key] = (
                s
                if seen is None
                else _absorbed(seen, s, lines=max(seen.lines, s.lines, key=len), cut=min(seen.cut, s.cut))
            )
    out: list[Snippet] = []
    for s in sorted(merged.values(), key=lambda s: (s.path, s.start, -len(s.lines))):
        if out and out[-1].path == s.path and s.end <= out[-1].end:
            out[-1] = _absorbed(out[-1], s)
        else:
            out.append(s)
    return rank(out)


def _absorbed(keep: Snippet, other: Snippet, **changes: Any) -> Snippet:
    """`keep` standing for `other` too: their references summed, same package if either is."""
    return dataclasses.replace(
        keep,
        references=keep.references + other.references,
        same_package=keep.same_package or other.same_package,
        **changes,
    )


SEPARATOR = "\n\n"


def render(snippets: Sequence[Snippet], redact: Callable[[str], str] = lambda s: s) -> str:
    return SEPARATOR.join(redact(s.text()) for s in snippets)


def select(
    snippets: Sequence[Snippet],
    limit: int,
    count_tokens: Callable[[str], int],
    redact: Callable[[str], str] = lambda s: s,
) -> tuple[Snippet, ...]:
    """The best-ranked snippets whose rendered text fits `limit` tokens (a snippet that does not fit
    is passed over for smaller ones after it)."""
    chosen: list[Snippet] = []
    used = 0
    for s in snippets:
        cost = count_tokens(redact(s.text())) + (2 if chosen else 0)
        if used + cost <= limit:
            chosen.append(s)
            used += cost
    return tuple(chosen)
