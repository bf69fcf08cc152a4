"""Mine real defects from public history with the SZZ method; writes benchmarks/defects/dataset.json.

For each repository (a local git directory, e.g. a `fetch` snapshot), newest first:

1. bug-fixing commits: the message matches fix/bug/regression/crash (word start), not a merge,
   at most `MAX_FIX_FILES` files and `MAX_FIX_LINES` changed lines (huge commits are refactors);
2. the fix's deleted or modified lines in source files of the language (not tests, docs,
   examples, vendored code), blank and brace-only lines and comments left out;
3. `git blame -w --line-porcelain <fix>^ -- <path>` of those lines: the commit that added each one
   and its line number and path in that commit (new side);
4. introducing commits that are not merges, touch 5–60 files, and whose diff (parent..commit)
   adds the blamed line: those lines are the labels.

Only metadata is written (repository, language, commit and parent, labelled (path, new-side line),
the fixes that blamed them): no source text. The file is the cache: `bench_defects.py` reads it and
never mines again unless asked (`--mine`).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

FIX_MESSAGE = re.compile(r"\b(fix|bug|regression|crash)", re.IGNORECASE)
MAX_FIX_FILES = 10
MAX_FIX_LINES = 300
MIN_FILES, MAX_FILES = 5, 60
NOT_SOURCE = re.compile(
    r"(^|/)(tests?|testing|testdata|test_data|spec|specs|__tests__|docs?|examples?|benches|benchmarks?"
    r"|fixtures?|vendor|third_party|deps|node_modules|dist|build)/"
    r"|(^|/)(test_[^/]*|[^/]*_test\.[a-z]+|[^/]*\.test\.[a-z]+|[^/]*\.spec\.[a-z]+|[^/]*Test\.java|[^/]*Tests\.java)$",
    re.IGNORECASE,
)
TRIVIAL = re.compile(r"^\s*([{}()\[\];,]*|//.*|#.*|/?\*.*|\"\"\"|''')\s*$")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


@dataclass(frozen=True)
class Source:
    """A repository to mine: where its git directory is and which files are its source."""

    repo: str
    language: str
    git_dir: Path
    extensions: tuple[str, ...]
    licence: str


@dataclass
class Introducing:
    repo: str
    language: str
    commit: str
    parent: str
    files: int
    labels: set[tuple[str, int]] = field(default_factory=set)
    fixes: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "language": self.language,
            "commit": self.commit,
            "parent": self.parent,
            "files": self.files,
            "labels": sorted([p, n] for p, n in self.labels),
            "fixes": sorted(self.fixes),
        }


def git(git_dir: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, check=False, timeout=120
    )
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else ""


def is_source(src: Source, path: str) -> bool:
    return path.endswith(src.extensions) and not NOT_SOURCE.search(path)


def fixes(src: Source) -> Iterator[tuple[str, str]]:
    """(fix, its parent) of every small bug-fixing commit, newest first."""
    log = git(src.git_dir, "log", "--no-merges", "--format=%x00%H %P%x01%B", "HEAD")
    for record in log.split("\x00")[1:]:
        head, _, message = record.partition("\x01")
        shas = head.split()
        if len(shas) != 2 or not FIX_MESSAGE.search(message):
            continue
        yield shas[0], shas[1]


def removed_lines(src: Source, parent: str, fix: str) -> dict[str, list[int]] | None:
    """Old-side line numbers the fix deletes or modifies, per source file; None for a huge fix."""
    stat = git(src.git_dir, "diff", "--numstat", "--no-renames", parent, fix)
    rows = [r.split("\t") for r in stat.splitlines() if r.count("\t") >= 2]
    if not rows or len(rows) > MAX_FIX_FILES:
        return None
    if sum(int(a) + int(d) for a, d, _ in rows if a.isdigit() and d.isdigit()) > MAX_FIX_LINES:
        return None
    paths = [p for _, d, p in rows if d.isdigit() and int(d) > 0 and is_source(src, p)]
    out: dict[str, list[int]] = {}
    for path in paths:
        diff = git(src.git_dir, "diff", "-U0", "--no-renames", parent, fix, "--", path)
        for m in HUNK.finditer(diff):
            start, length = int(m.group(1)), int(m.group(2) or "1")
            out.setdefault(path, []).extend(range(start, start + length))
    return out


def blame(src: Source, parent: str, path: str, lines: list[int]) -> Iterator[tuple[str, str, int]]:
    """(introducing commit, its path, its line number) of each non-trivial line."""
    ranges = [arg for n in sorted(set(lines)) for arg in ("-L", f"{n},{n}")]
    out = git(src.git_dir, "blame", "-w", "--line-porcelain", *ranges, parent, "--", path)
    sha = orig_path = ""
    orig = 0
    boundary = False
    for row in out.splitlines():
        if row.startswith("\t"):
            if not boundary and not TRIVIAL.match(row[1:]):
                yield sha, orig_path, orig
            continue
        parts = row.split(" ")
        if len(parts[0]) == 40 and len(parts) >= 3 and parts[1].isdigit():
            sha, orig, boundary = parts[0], int(parts[1]), False
        elif parts[0] == "filename":
            orig_path = row[len("filename ") :]
        elif parts[0] == "boundary":
            boundary = True


@functools.cache
def added_lines(src: Source, parent: str, commit: str, path: str) -> set[int]:
    diff = git(src.git_dir, "diff", "-U0", "--no-renames", parent, commit, "--", path)
    out: set[int] = set()
    for m in HUNK.finditer(diff):
        start, length = int(m.group(3)), int(m.group(4) or "1")
        out.update(range(start, start + length))
    return out


def introducing_shape(src: Source, commit: str) -> tuple[str, int] | None:
    """(parent, files touched) of a non-merge commit of realistic size, else None."""
    parents = git(src.git_dir, "rev-list", "--parents", "-n", "1", commit).split()
    if len(parents) != 2:
        return None
    files = len(git(src.git_dir, "diff", "--name-only", "--no-renames", parents[1], commit).splitlines())
    return (parents[1], files) if MIN_FILES <= files <= MAX_FILES else None


def mine(src: Source, wanted: int, max_fixes: int = 4000) -> list[Introducing]:
    found: dict[str, Introducing] = {}
    rejected: set[str] = set()
    for n, (fix, parent) in enumerate(fixes(src)):
        if len(found) >= wanted or n >= max_fixes:
            break
        removed = removed_lines(src, parent, fix)
        if not removed:
            continue
        for path, lines in removed.items():
            for sha, orig_path, orig in blame(src, parent, path, lines):
                if sha in rejected:
                    continue
                if sha not in found:
                    shape = introducing_shape(src, sha)
                    if shape is None:
                        rejected.add(sha)
                        continue
                    found[sha] = Introducing(src.repo, src.language, sha, shape[0], shape[1])
                intro = found[sha]
                if orig in added_lines(src, intro.parent, sha, orig_path):
                    intro.labels.add((orig_path, orig))
                    intro.fixes.add(fix)
        for sha in [s for s, i in found.items() if not i.labels]:
            del found[sha]
    return list(found.values())[:wanted]


def write(dataset: list[Introducing], sources: list[Source], path: Path) -> None:
    payload = {
        "method": "SZZ (benchmarks/defects_mine.py)",
        "sources": [
            {
                "repo": s.repo,
                "language": s.language,
                "licence": s.licence,
                "head": git(s.git_dir, "rev-parse", "HEAD").strip(),
            }
            for s in sources
        ],
        "commits": [i.to_json() for i in dataset],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
