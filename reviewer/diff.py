"""Unified diffs → files → hunks → lines, and which lines can carry an inline comment.

Numbering, for the hunk ``@@ -10,3 +10,4 @@``::

    ' ctx'      old=10  new=10   RIGHT-commentable (context)
    '-gone'     old=11  new=None LEFT-commentable (removed)
    '+fresh'    old=None new=11  RIGHT-commentable (added)
    '+more'     old=None new=12  RIGHT-commentable (added)
    ' ctx'      old=12  new=13   RIGHT-commentable (context)

GitHub accepts an inline comment only on a line of a hunk: RIGHT for added and context lines
(new numbers), LEFT for removed lines (old numbers). A range must sit inside one hunk.
"""

from __future__ import annotations

import functools
import gc
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import unidiff

from reviewer.errors import PatchError

LineKind = Literal["+", "-", " "]
FileStatus = Literal["added", "modified", "removed", "renamed", "copied"]

_SUBMODULE_MODE = "160000"
_MODE_LINE = re.compile(r"^(old|new|new file|deleted file) mode (\d+)")
_INDEX_MODE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ (\d+)")
_COPY_FROM = re.compile(r"^copy from ")
_GITHUB_STATUS: Mapping[str, FileStatus] = {
    "added": "added",
    "removed": "removed",
    "modified": "modified",
    "renamed": "renamed",
    "copied": "copied",
    "changed": "modified",
    "unchanged": "modified",
}


@dataclass(frozen=True)
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

    @functools.cached_property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.kind == "+")

    @functools.cached_property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.kind == "-")

    @property
    def new_end(self) -> int:
        return self.new_start + max(self.new_len, 1) - 1

    def text(self) -> str:
        """The hunk as a unified-diff fragment, header included."""
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

    @property
    def additions(self) -> int:
        return sum(h.added for h in self.hunks)

    @property
    def deletions(self) -> int:
        return sum(h.removed for h in self.hunks)

    @property
    def mode_changed(self) -> bool:
        return self.old_mode is not None and self.new_mode is not None and self.old_mode != self.new_mode

    def added_lines(self) -> Iterable[DiffLine]:
        return self._added_lines

    @functools.cached_property
    def _added_lines(self) -> tuple[DiffLine, ...]:
        """Every rule and the planner walk the added lines; collect them once per file."""
        return tuple(line for hunk in self.hunks for line in hunk.lines if line.kind == "+")


def _clean(value: str) -> str:
    return value.rstrip("\n").rstrip("\r")


def _strip_prefix(name: str) -> str:
    name = name.rstrip("\t")
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


def _file_from_unidiff(patched: unidiff.PatchedFile, hunks: Sequence[Hunk] | None = None) -> DiffFile:
    info = [str(line).rstrip("\n") for line in (patched.patch_info or [])]
    old_mode = new_mode = None
    submodule = False
    copied = any(_COPY_FROM.match(line) for line in info)
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
    source = _strip_prefix(patched.source_file or "")
    target = _strip_prefix(patched.target_file or "")
    if patched.is_added_file:
        status: FileStatus = "added"
        path, old_path = target, None
    elif patched.is_removed_file:
        status, path, old_path = "removed", source, None
    elif copied:
        status, path, old_path = "copied", target, source
    elif patched.is_rename:
        status, path, old_path = "renamed", target, source
    else:
        status, path, old_path = "modified", target or source, None
    if hunks is None:
        hunks = tuple(_hunk(i, h) for i, h in enumerate(patched))
    return DiffFile(
        path=path,
        status=status,
        hunks=tuple(hunks),
        old_path=old_path,
        binary=bool(patched.is_binary_file),
        has_patch=True,
        old_mode=old_mode,
        new_mode=new_mode,
        submodule=submodule,
    )


def _hunk(index: int, hunk: unidiff.Hunk) -> Hunk:
    lines = tuple(
        DiffLine(
            kind=line.line_type, old=line.source_line_no, new=line.target_line_no, text=_clean(line.value)
        )
        for line in hunk
        if line.line_type in ("+", "-", " ")
    )
    return Hunk(
        index=index,
        old_start=hunk.source_start,
        old_len=hunk.source_length,
        new_start=hunk.target_start,
        new_len=hunk.target_length,
        header=(hunk.section_header or "").strip(),
        lines=lines,
    )


def decode(raw: bytes | str) -> str:
    """Diff bytes → text; bytes that are not UTF-8 become U+FFFD instead of failing."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")


def _lines(text: str) -> list[str]:
    """Split at `\\n` only: `str.splitlines` would also cut at form feeds, U+2028 and friends,
    which are ordinary characters inside a source line."""
    parts = text.split("\n")
    last = parts.pop()
    out = [part + "\n" for part in parts]
    if last:
        out.append(last)
    return out


def parse_patch(raw: bytes | str) -> tuple[DiffFile, ...]:
    """Parse a whole `git diff` (with `diff --git` headers)."""
    text = decode(raw)
    if not text.strip():
        return ()
    lines = _lines(text)
    collecting = gc.isenabled()
    gc.disable()  # hundreds of thousands of acyclic objects: the collector would only rescan them
    try:
        return _parse_fast(lines)
    except (unidiff.UnidiffParseError, _Unusual):
        pass
    finally:
        if collecting:
            gc.enable()
    try:
        patch = unidiff.PatchSet(lines)
    except unidiff.UnidiffParseError as exc:
        raise PatchError(f"malformed diff: {exc}") from exc
    return tuple(_file_from_unidiff(f) for f in patch)


class _Unusual(Exception):
    """Input the fast path does not handle the way unidiff does; the full unidiff parse decides."""


_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))?\ @@[ ]?(.*)")


def _parse_fast(lines: Sequence[str]) -> tuple[DiffFile, ...]:
    """unidiff reads the file headers (its metadata-only mode, no object per line); the hunk bodies
    are read here, one tuple per line. 6-8x faster than unidiff's full parse on large diffs, with
    the same result: every hunk here must line up with one unidiff counted, else `_Unusual`."""
    patch = unidiff.PatchSet(lines, metadata_only=True)
    hunks = _hunks(lines)
    out: list[DiffFile] = []
    taken = 0
    for patched in patch:
        mine = hunks[taken : taken + len(patched)]
        if len(mine) != len(patched):
            raise _Unusual("hunk count")
        for ours, theirs in zip(mine, patched, strict=True):
            if (ours.old_start, ours.old_len, ours.new_start, ours.new_len) != (
                theirs.source_start,
                theirs.source_length,
                theirs.target_start,
                theirs.target_length,
            ):
                raise _Unusual("hunk header")
        taken += len(mine)
        numbered = [
            Hunk(i, h.old_start, h.old_len, h.new_start, h.new_len, h.header, h.lines)
            for i, h in enumerate(mine)
        ]
        out.append(_file_from_unidiff(patched, numbered))
    if taken != len(hunks):
        raise _Unusual("hunk count")
    return tuple(out)


def _hunks(lines: Sequence[str]) -> list[Hunk]:
    """Every hunk of the diff in order, numbered as unidiff numbers lines; headers elsewhere skipped."""
    hunks: list[Hunk] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        i += 1
        if not line.startswith("@@") or not (m := _HUNK_HEADER.match(line)):
            continue
        old_start, new_start = int(m.group(1)), int(m.group(3))
        old_len = 1 if m.group(2) is None else int(m.group(2))
        new_len = 1 if m.group(4) is None else int(m.group(4))
        old, new = old_start, new_start
        old_end, new_end = old_start + old_len, new_start + new_len
        body: list[DiffLine] = []
        while True:
            if i >= n:
                raise _Unusual("hunk shorter than its header says")
            line = lines[i]
            i += 1
            kind = line[:1]
            text = line[1:].rstrip("\r\n")  # one line: at most one "\n", at its end
            if kind == "+":
                body.append(DiffLine("+", None, new, text))
                new += 1
            elif kind == "-":
                body.append(DiffLine("-", old, None, text))
                old += 1
            elif kind == " ":
                body.append(DiffLine(" ", old, new, text))
                old += 1
                new += 1
            elif kind != "\\":
                raise _Unusual("not a hunk line")
            if old > old_end or new > new_end:
                raise _Unusual("hunk longer than its header says")
            if old == old_end and new == new_end:
                break
        header = m.group(5).rstrip("\n").strip()
        hunks.append(Hunk(len(hunks), old_start, old_len, new_start, new_len, header, tuple(body)))
    return hunks


def parse_github_file(
    *,
    filename: str,
    status: str,
    patch: str | None,
    previous_filename: str | None = None,
    changes: int | None = None,
) -> DiffFile:
    """One entry of GitHub's PR files list; its `patch` has no ---/+++ headers, so add them.

    GitHub omits `patch` for binaries and huge diffs (listed, not guessed) but also for a rename
    with no edits (`changes: 0`), which is complete with zero hunks. A `patch` that holds no hunk
    (text that is not a diff, binary junk) is not guessed at either: `unusable="not_a_diff"`.
    """
    mapped = _GITHUB_STATUS.get(status, "modified")
    old_name = previous_filename or filename
    if patch is None:
        pure_move = mapped in ("renamed", "copied") and changes == 0 and previous_filename is not None
        return DiffFile(path=filename, status=mapped, old_path=previous_filename, has_patch=pure_move)
    src = "/dev/null" if mapped == "added" else f"a/{old_name}"
    dst = "/dev/null" if mapped == "removed" else f"b/{filename}"
    header = f"diff --git a/{old_name} b/{filename}\n"
    if mapped in ("renamed", "copied") and previous_filename:
        verb = "rename" if mapped == "renamed" else "copy"
        header += f"{verb} from {previous_filename}\n{verb} to {filename}\n"
    if mapped == "added":
        header += "new file mode 100644\n"
    elif mapped == "removed":
        header += "deleted file mode 100644\n"
    body = patch if patch.endswith("\n") else patch + "\n"
    text = f"{header}--- {src}\n+++ {dst}\n{body}" if patch.strip() else header
    try:
        files = parse_patch(text)
    except PatchError:
        files = ()
    if patch.strip() and not (files and (files[0].hunks or files[0].binary)):
        return DiffFile(
            path=filename, status=mapped, old_path=previous_filename, has_patch=False, unusable="not_a_diff"
        )
    if not files:
        return DiffFile(path=filename, status=mapped, old_path=previous_filename)
    parsed = files[0]
    return DiffFile(
        path=filename,
        status=mapped,
        hunks=parsed.hunks,
        old_path=previous_filename if mapped in ("renamed", "copied") else None,
        binary=parsed.binary,
    )


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
