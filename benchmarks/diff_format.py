"""What the numbered diff format costs in tokens, per layout (issue 18: the model sees the lines).

For each commit of the defect benchmark (benchmarks/defects/dataset.json, read from the `fetch`
snapshots as bench_defects.py does), the whole diff of its reviewable files is written as the
planner writes a unit (one part a hunk, `## File:` header, numbered lines) in five layouts, and
counted with gpt-4o-mini's tokenizer (o200k, litellm's offline counter):

- `padded`: numbers right-aligned to 6 columns, removed lines `(n) -`, hunk heads with their
  ranges, the file header on every part (imreview before session 18);
- `unpadded`: the same without the padding;
- `no parens`: removed lines `n -` as well;
- `no ranges`: hunk heads `@@ <definition>` as well;
- `header once`: a file's header once per call as well (the shipped layout, `reviewer.plan`).

Also the same diff as `git diff` prints it (no numbers): what numbering itself costs.

    python benchmarks/diff_format.py [--mirrors /work/.mirror] [--output FILE]   # results: DIFF_FORMAT.md
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import bench_defects as bd  # noqa: E402

from reviewer.diff import DiffFile, DiffLine, Hunk, parse_patch  # noqa: E402
from reviewer.plan import UnitPart, _file_header, joined  # noqa: E402
from reviewer.policy import skip_reason  # noqa: E402


def _padded(line: DiffLine) -> str:
    if line.kind == "-":
        return f"{f'({line.old})':>6} - "
    return f"{line.new:>6} {'+' if line.kind == '+' else ' '} "


def _unpadded(line: DiffLine) -> str:
    if line.kind == "-":
        return f"({line.old}) - "
    return f"{line.new} {'+' if line.kind == '+' else ' '} "


def _plain(line: DiffLine) -> str:
    if line.kind == "-":
        return f"{line.old} - "
    return f"{line.new} {'+' if line.kind == '+' else ' '} "


def _ranged(h: Hunk) -> str:
    head = f"@@ -{h.old_start},{h.old_len} +{h.new_start},{h.new_len} @@"
    return f"{head} {h.header}" if h.header else head


def _short(h: Hunk) -> str:
    return f"@@ {h.header}" if h.header else "@@"


def _parts(
    files: list[DiffFile], number: Callable[[DiffLine], str], head: Callable[[Hunk], str]
) -> list[tuple[str, str]]:
    return [
        (f.path, "\n".join([_file_header(f), head(h), *(number(line) + line.text for line in h.lines)]))
        for f in files
        for h in f.hunks
    ]


LAYOUTS: dict[str, tuple[Callable[[DiffLine], str], Callable[[Hunk], str], bool]] = {
    "padded": (_padded, _ranged, False),
    "unpadded": (_unpadded, _ranged, False),
    "no parens": (_plain, _ranged, False),
    "no ranges": (_plain, _short, False),
    "header once": (_plain, _short, True),
}


def layouts(files: list[DiffFile]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, (number, head, once) in LAYOUTS.items():
        parts = _parts(files, number, head)
        if once:
            out[name] = joined([UnitPart(path, i, text) for i, (path, text) in enumerate(parts)])
        else:
            out[name] = "\n\n".join(text for _, text in parts)
    return out


def main() -> None:
    import litellm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    count = lambda text: int(litellm.token_counter(model="gpt-4o-mini", text=text))  # noqa: E731
    totals: dict[str, int] = {"git diff": 0, **{name: 0 for name in LAYOUTS}}
    lines = 0
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "imreview-diff-format"
    work.mkdir(exist_ok=True)
    commits = bd.load()
    for c in commits:
        repo = bd.build(work, args.mirrors, c)
        raw = subprocess.run(
            ["git", "-C", str(repo), "diff", "main", "feature"], check=True, capture_output=True
        ).stdout
        files = [f for f in parse_patch(raw) if f.hunks and skip_reason(f) is None]
        git_text = "\n".join(f"## File: {f.path}\n" + "\n".join(h.text() for h in f.hunks) for f in files)
        totals["git diff"] += count(git_text)
        for name, text in layouts(files).items():
            totals[name] += count(text)
        lines += sum(len(h.lines) for f in files for h in f.hunks)
    base = totals["padded"]
    rows = [
        f"| {name} | {tokens:,} | {tokens / lines:.2f} | {100 * tokens / base:.1f} % |"
        for name, tokens in totals.items()
    ]
    table = "\n".join(
        [
            f"{len(commits)} commits, {lines:,} diff lines, every reviewable file's hunks, o200k tokens:",
            "",
            "| layout | tokens | per diff line | of `padded` |",
            "|---|---:|---:|---:|",
            *rows,
        ]
    )
    print(table)
    if args.output:
        args.output.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
