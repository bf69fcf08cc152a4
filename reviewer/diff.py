"""Unified diffs → files → hunks → lines, and which lines can carry an inline comment.

Numbering, for the hunk ``@@ -10,3 +10,4 @@``: a context line has both numbers (10/10), a removed
line only its old one (11), an added line only its new one (11, 12). GitHub accepts an inline comment
only on a line of one hunk: RIGHT on added and context lines (new numbers), LEFT on removed lines.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal, get_args

from reviewer.errors import PatchError

if TYPE_CHECKING:
    import unidiff

LineKind = Literal["+", "-", " "]
FileStatus = Literal["added", "modified", "removed", "renamed", "copied"]

_SUBMODULE_MODE = "160000"
_MODE_LINE = re.compile(r"^(old|new|new file|deleted file) mode (\d+)")
_INDEX_MODE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ (\d+)")
_GITHUB_STATUS: Mapping[str, FileStatus] = {s: s for s in get_args(FileStatus)}
"""GitHub's file statuses we keep; any other (`changed`, `unchanged`) is a modification."""


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: LineKind
    old: int | None
    new: int | None
    text: str


@dataclass(frozen=True)
class Hunk:
    index: int
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    header: str
    lines: tuple[DiffLine, ...]

    @cached_property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.kind == "+")

    @cached_property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.kind == "-")

    @property
    def new_end(self) -> int:
        return self.new_start + max(self.new_len, 1) - 1

    def text(self) -> str:
        head = f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"
        if self.header:
            head += f" {self.header}"
        return "\n".join([head, *(f"{line.kind}{line.text}" for line in self.lines)])


@dataclass(frozen=True)
class DiffFile:
    """One file of a diff. `path` is the new name (the old one for a removed file)."""

    path: str
    status: FileStatus
    hunks: tuple[Hunk, ...] = ()
    old_path: str | None = None
    binary: bool = False
    has_patch: bool = True
    old_mode: str | None = None
    new_mode: str | None = None
    submodule: bool = False
    unusable: str = ""
    """Why a patch that was sent could not be used (`not_a_diff`); the file is then `has_patch=False`."""

    @cached_property
    def additions(self) -> int:
        return sum(h.added for h in self.hunks)

    @cached_property
    def deletions(self) -> int:
        return sum(h.removed for h in self.hunks)

    @property
    def mode_changed(self) -> bool:
        return self.old_mode is not None and self.new_mode is not None and self.old_mode != self.new_mode

    def added_lines(self) -> Iterable[DiffLine]:
        return self._added_lines

    @cached_property
    def _added_lines(self) -> tuple[DiffLine, ...]:
        """Every rule and the planner walk the added lines; collect them once per file."""
        return tuple([line for hunk in self.hunks for line in hunk.lines if line.kind == "+"])

    @cached_property
    def added_text(self) -> str:
        return "\n".join([line.text for line in self.added_lines()])

    @cached_property
    def longest_added(self) -> int:
        return max([len(line.text) for line in self.added_lines()], default=0)


def _strip_prefix(name: str) -> str:
    name = name.rstrip("\t")
    return name[2:] if name.startswith(("a/", "b/")) else name


def _file_from_unidiff(patched: unidiff.PatchedFile) -> DiffFile:
    hunks: list[Hunk] = []
    for h in patched:
        lines = [
            DiffLine(x.line_type, x.source_line_no, x.target_line_no, x.value.rstrip("\n").rstrip("\r"))
            for x in h
            if x.line_type in ("+", "-", " ")
        ]
        counts = (h.source_start, h.source_length, h.target_start, h.target_length)
        hunks.append(Hunk(len(hunks), *counts, (h.section_header or "").strip(), tuple(lines)))
    info = [str(line).rstrip("\n") for line in (patched.patch_info or [])]
    return _diff_file(
        info, patched.source_file, patched.target_file, tuple(hunks), bool(patched.is_binary_file)
    )


def _diff_file(
    info: Sequence[str], source: str | None, target: str | None, hunks: tuple[Hunk, ...], binary: bool
) -> DiffFile:
    """A file from its header lines (`diff --git`, modes, renames), its ---/+++ names and its hunks;
    added / removed / copied / renamed decided as unidiff's PatchedFile decides them."""
    old_mode = new_mode = None
    submodule = False
    for line in info:
        if m := _MODE_LINE.match(line):
            which, mode = m.groups()
            if which in ("old", "deleted file"):
                old_mode = mode
            else:
                new_mode = mode
            submodule = submodule or mode == _SUBMODULE_MODE
        elif m := _INDEX_MODE.match(line):
            old_mode = new_mode = m.group(1)
            submodule = submodule or m.group(1) == _SUBMODULE_MODE
    path, status, old_path = _status(
        source, target, hunks, copied=any(x.startswith("copy from ") for x in info)
    )
    return DiffFile(path, status, hunks, old_path, binary, True, old_mode, new_mode, submodule)


def _status(
    source: str | None, target: str | None, hunks: tuple[Hunk, ...], *, copied: bool
) -> tuple[str, FileStatus, str | None]:
    """(path, status, old path), as unidiff's PatchedFile decides them."""
    old, new = _strip_prefix(source or ""), _strip_prefix(target or "")
    one = hunks[0] if len(hunks) == 1 else None
    if source == _DEV_NULL or (one is not None and one.old_start == one.old_len == 0):
        return new, "added", None
    if target == _DEV_NULL or (one is not None and one.new_start == one.new_len == 0):
        return old, "removed", None
    if copied:
        return new, "copied", old
    if (source or "")[2:] != (target or "")[2:]:
        return new, "renamed", old
    return new or old, "modified", None


def decode(raw: bytes | str) -> str:
    """Diff bytes → text; bytes that are not UTF-8 become U+FFFD instead of failing."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")


def _lines(text: str) -> list[str]:
    """Split at `\\n` only: `str.splitlines` would also cut at form feeds, U+2028 and friends,
    which are ordinary characters inside a source line."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def parse_patch(raw: bytes | str) -> tuple[DiffFile, ...]:
    """Parse a whole `git diff` (with `diff --git` headers)."""
    text = decode(raw)
    if not text.strip():
        return ()
    collecting = gc.isenabled()
    gc.disable()  # hundreds of thousands of acyclic objects: the collector would only rescan them
    try:
        return _typechanges_merged(_parse_fast(text))
    except _Unusual:
        pass
    finally:
        if collecting:
            gc.enable()
    import unidiff  # only unusual input needs it

    try:
        patch = unidiff.PatchSet(_lines(text))
    except Exception as exc:  # unidiff has failed with errors of its own on hostile input, not only this one
        detail = str(exc) if isinstance(exc, unidiff.UnidiffParseError) else type(exc).__name__
        raise PatchError(f"malformed diff: {detail}") from exc
    return _typechanges_merged(tuple(_file_from_unidiff(f) for f in patch))


def _typechanges_merged(files: tuple[DiffFile, ...]) -> tuple[DiffFile, ...]:
    """`git diff` writes a file whose type changed (a file made a symlink, or back) as two files of
    one path, removed then added: one file here, its hunks in that order, so that each (path, hunk
    index) names one hunk (the plan, coverage and increments key hunks so)."""
    out: list[DiffFile] = []
    for f in files:
        prev = out[-1] if out else None
        if (
            prev is not None
            and (prev.path, prev.status, f.status) == (f.path, "removed", "added")
            and not (prev.binary or f.binary or prev.submodule or f.submodule or prev.unusable or f.unusable)
        ):
            hunks = tuple(dataclasses.replace(h, index=i) for i, h in enumerate((*prev.hunks, *f.hunks)))
            out[-1] = dataclasses.replace(prev, status="modified", hunks=hunks, new_mode=f.new_mode)
            continue
        out.append(f)
    return tuple(out)


class _Unusual(Exception):
    """Input the fast reader does not take the way unidiff does; unidiff's full parse decides."""


_DEV_NULL = "/dev/null"
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))?\ @@[ ]?(.*)")
_GIT_HEADERS = (
    re.compile(r"^diff --git (?P<source>a/[^\t\n]+) (?P<target>b/[^\t\n]+)"),
    re.compile(r"^diff --git (?P<source>.*://[^\t\n]+) (?P<target>.*://[^\t\n]+)"),
    re.compile(r"^diff --git (?P<source>[^\t\n]+) (?P<target>[^\t\n]+)"),
)
_NEW_FILE = re.compile(r"^new file mode \d+$")
_DELETED_FILE = re.compile(r"^deleted file mode \d+$")
_SOURCE_NAME = re.compile(r"^--- (?P<filename>[^\t\n]+)(?:\t(?P<timestamp>[^\n]+))?")
_TARGET_NAME = re.compile(r"^\+\+\+ (?P<filename>[^\t\n]+)(?:\t(?P<timestamp>[^\n]+))?")
_BINARY = re.compile(
    r"^Binary files? (?P<source_filename>[^\t]+?)(?:\t(?P<source_timestamp>[\s0-9:\+-]+))?"
    r"(?: and (?P<target_filename>[^\t]+?)(?:\t(?P<target_timestamp>[\s0-9:\+-]+))?)? (differ|has changed)"
)
"""unidiff's own patterns (unidiff/constants.py), so a header reads here as it reads there."""


def _parse_fast(text: str) -> tuple[DiffFile, ...]:
    """`git diff` output read in one pass (unidiff's full parse takes over twice as long): only the
    shapes git writes, read exactly as unidiff reads them; anything else raises `_Unusual`."""
    strip_cr = "\r" in text
    out: list[DiffFile] = []
    current: _FileReader | None = None
    rest = _lines_of(text)
    for line in rest:
        if line.startswith("diff --git "):
            if current is not None:
                out.append(current.file())
            current = _FileReader(line)
        elif current is None:
            raise _Unusual("text outside a diff --git file")
        elif line.startswith("@@") and (h := _HUNK_HEADER.match(line)):
            current.hunks.append(_read_hunk(rest, h, len(current.hunks), strip_cr))
        elif current.hunks:
            if line and not line.startswith("\\ No newline at end of file"):
                raise _Unusual("text after a hunk")
            # else unidiff adds it to the last hunk as a line that is neither side
        elif current.header_line(line):  # a binary file ends with its "Binary files" line
            out.append(current.file())
            current = None
    if current is not None:
        out.append(current.file())
    return tuple(out)


class _FileReader:
    """One `diff --git` file of `_parse_fast`: its header lines, its ---/+++ names, its hunks."""

    __slots__ = ("binary", "hunks", "info", "source", "target")

    def __init__(self, line: str) -> None:
        m = _GIT_HEADERS[0].match(line) or _GIT_HEADERS[1].match(line) or _GIT_HEADERS[2].match(line)
        if not m:
            raise _Unusual("a diff --git line unidiff reads as header text")
        self.info = [line]
        self.source: str | None = m.group("source")
        self.target: str | None = m.group("target")
        self.hunks: list[Hunk] = []
        self.binary = False

    def header_line(self, line: str) -> bool:
        """Read one line before the first hunk; True when it ends the file (a binary one)."""
        if _NEW_FILE.match(line):
            self.source = _DEV_NULL
        elif _DELETED_FILE.match(line):
            self.target = _DEV_NULL
        elif line.startswith("--- ") and (m := _SOURCE_NAME.match(line)):
            if m.group("filename") != self.source:
                raise _Unusual("--- names another file")
            return False
        elif line.startswith("+++ ") and (m := _TARGET_NAME.match(line)):
            if m.group("filename") != self.target:
                raise _Unusual("+++ names another file")
            return False
        elif not line or line == "GIT binary patch" or line.startswith("\\ No newline at end of file"):
            raise _Unusual("an empty line, marker or binary patch before any hunk")
        elif _BINARY.match(line):
            self.binary = True
        self.info.append(line)
        return self.binary

    def file(self) -> DiffFile:
        return _diff_file(self.info, self.source, self.target, tuple(self.hunks), self.binary)


_CHUNK = 1 << 20


def _lines_of(text: str) -> Iterator[str]:
    """The lines of `text` (split at `\\n` only, no final empty line), split a megabyte at a time:
    a list of every line of a large diff would hold as much memory again as the lines it parses to."""
    end = len(text) - 1 if text.endswith("\n") else len(text)

    def chunks() -> Iterator[list[str]]:
        start = 0
        while start < end:
            stop = text.find("\n", start + _CHUNK, end)
            stop = end if stop < 0 else stop
            yield text[start:stop].split("\n")
            start = stop + 1
        if start == end and end < len(text):
            yield [""]  # the text ended with an empty line before its last newline

    return itertools.chain.from_iterable(chunks())


def _read_hunk(lines: Iterator[str], h: re.Match[str], index: int, strip_cr: bool) -> Hunk:
    """The hunk whose header `h` matched, its body read from `lines` (left just after it).
    Numbered and cut where unidiff cuts: it ends once both sides hold the header's counts (a side
    that overshoots never comes back, so the counts are checked once, at the end)."""
    old_start, old_len, new_start, new_len = _counts(h)
    old_end, new_end = old_start + old_len, new_start + new_len
    old, new = old_start, new_start
    body: list[DiffLine] = []
    add = body.append
    for line in lines:
        kind = line[:1]
        if kind == "+":
            add(DiffLine("+", None, new, line[1:]))
            new += 1
        elif kind == "-":
            add(DiffLine("-", old, None, line[1:]))
            old += 1
        elif kind == " " or not line or line == "\r":
            add(DiffLine(" ", old, new, line[1:]))
            old += 1
            new += 1
        elif kind == "\\":
            continue
        else:
            raise _Unusual("not a hunk line")
        if new >= new_end and old >= old_end:
            break
    else:
        raise _Unusual("hunk shorter than its header says")
    if new != new_end or old != old_end:
        raise _Unusual("hunk longer than its header says")
    if strip_cr:
        body = [DiffLine(ln.kind, ln.old, ln.new, ln.text.rstrip("\r")) for ln in body]
    hunk = Hunk(index, old_start, old_len, new_start, new_len, header=h.group(5).strip(), lines=tuple(body))
    # every line is + (new side), - (old side) or context (both), and both sides hold their counts:
    hunk.__dict__["added"], hunk.__dict__["removed"] = len(body) - old_len, len(body) - new_len
    return hunk


def _counts(h: re.Match[str]) -> tuple[int, int, int, int]:
    """(old start, old length, new start, new length) of a hunk header; a length left out is 1."""
    old_len = 1 if h.group(2) is None else int(h.group(2))
    new_len = 1 if h.group(4) is None else int(h.group(4))
    if old_len == new_len == 0:
        raise _Unusual("an empty hunk")
    return int(h.group(1)), old_len, int(h.group(3)), new_len


def parse_github_file(
    *,
    filename: str,
    status: str,
    patch: str | None,
    previous_filename: str | None = None,
    changes: int | None = None,
) -> DiffFile:
    """One entry of GitHub's PR files list. GitHub omits `patch` for binaries and huge diffs (listed,
    not guessed) but also for a rename with no edits (`changes: 0`, complete with zero hunks); a
    `patch` that holds no hunk (not a diff, binary junk) is not guessed at: `unusable="not_a_diff"`."""
    mapped = _GITHUB_STATUS.get(status, "modified")
    if patch is None:
        pure_move = mapped in ("renamed", "copied") and changes == 0 and previous_filename is not None
        return DiffFile(path=filename, status=mapped, old_path=previous_filename, has_patch=pure_move)
    try:
        files = parse_patch(_github_text(mapped, patch, renamed_from=previous_filename))
    except PatchError:
        files = ()
    if patch.strip() and not (files and (files[0].hunks or files[0].binary)):
        return DiffFile(filename, mapped, old_path=previous_filename, has_patch=False, unusable="not_a_diff")
    if not files:
        return DiffFile(path=filename, status=mapped, old_path=previous_filename)
    moved = mapped in ("renamed", "copied")
    return DiffFile(filename, mapped, files[0].hunks, previous_filename if moved else None, files[0].binary)


def _github_text(mapped: FileStatus, patch: str, *, renamed_from: str | None) -> str:
    """The `git diff` text of one GitHub patch under made-up names: the real ones, holding a newline
    or a tab (git allows both), would rewrite the diff that is parsed."""
    src = "/dev/null" if mapped == "added" else "a/old"
    dst = "/dev/null" if mapped == "removed" else "b/new"
    header = "diff --git a/old b/new\n"
    if mapped in ("renamed", "copied") and renamed_from:
        verb = "rename" if mapped == "renamed" else "copy"
        header += f"{verb} from old\n{verb} to new\n"
    header += {"added": "new file mode 100644\n", "removed": "deleted file mode 100644\n"}.get(mapped, "")
    body = patch if patch.endswith("\n") else patch + "\n"
    return f"{header}--- {src}\n+++ {dst}\n{body}" if patch.strip() else header


@dataclass(frozen=True)
class LineIndex:
    """path → line → hunk index, per side; anchoring and inline checks become lookups."""

    right: Mapping[str, Mapping[int, int]]
    left: Mapping[str, Mapping[int, int]]

    @classmethod
    def build(cls, files: Iterable[DiffFile]) -> LineIndex:
        right: dict[str, dict[int, int]] = {}
        left: dict[str, dict[int, int]] = {}
        for f in files:
            r = right.setdefault(f.path, {})
            lft = left.setdefault(f.path, {})
            for hunk in f.hunks:
                for line in hunk.lines:
                    if line.kind == "-" and line.old is not None:
                        lft[line.old] = hunk.index
                    elif line.new is not None:
                        r[line.new] = hunk.index
        return cls(right=right, left=left)

    def side(self, path: str, side: str) -> Mapping[int, int]:
        return (self.left if side == "LEFT" else self.right).get(path, {})

    def commentable(self, path: str, line: int, side: str = "RIGHT") -> bool:
        return line in self.side(path, side)

    def range_commentable(self, path: str, start: int, end: int, side: str = "RIGHT") -> bool:
        """Both ends on commentable lines of the same hunk, as GitHub requires."""
        lines = self.side(path, side)
        return start in lines and end in lines and lines[start] == lines[end]
