"""The tables of package lines per feature and per module in docs/architecture.md.

    python scripts/module_sizes.py           # rewrite the tables between their markers
    python scripts/module_sizes.py --check   # exit 1 when a table is out of date

Counts every line of `reviewer/*.py` and `reviewer/*/*.py` (as `wc -l reviewer/*.py reviewer/*/*.py`
does) and the statements in them (Python's own parser; docstrings are not statements). Modules are
listed largest first with their docstring's first sentence as their job; features are the groups of
`FEATURES`, which must name every module once (a new module fails the script until it is placed).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- BEGIN GENERATED: module sizes (scripts/module_sizes.py) -->"
END = "<!-- END GENERATED: module sizes -->"
FEATURE_BEGIN = "<!-- BEGIN GENERATED: feature sizes (scripts/module_sizes.py) -->"
FEATURE_END = "<!-- END GENERATED: feature sizes -->"

FEATURES: dict[str, tuple[str, ...]] = {
    "the review's core: diff, rules, plan, file policy, context": (
        "diff",
        "rules",
        "plan",
        "policy",
        "context",
    ),
    "the model: calls, model facts, budget": ("llm", "model_facts", "budget"),
    "answers: parsing, verification, gate": ("findings", "answer_json", "answer_size", "verify", "gate"),
    "the review loop and a run's frame": ("review", "run", "progress", "errors", "__init__"),
    "the report and its rendering": ("render", "report", "links", "schema/__init__"),
    "configuration": ("config",),
    "a PR on GitHub: read, state, publish, runner sinks": (
        "pull",
        "source/github",
        "source/__init__",
        "publish",
        "state",
        "runner_sinks",
    ),
    "the Action's entry: inputs, events, report files": ("action", "events", "report_files"),
    "the command line and local git": ("cli", "source/local", "__main__"),
    "incremental review of a push": ("incremental",),
    "scan of open PRs (schedule, fan-out)": ("scan",),
    "comment commands and dismissal memory": (
        "commands",
        "commanded",
        "dismissals",
        "memory",
        "source/threads",
    ),
    "`imreview eval`": ("evaluate",),
}
"""Each module's feature, for the table that says where the lines go."""


def _modules() -> list[Path]:
    package = ROOT / "reviewer"
    return sorted([*package.glob("*.py"), *package.glob("*/*.py")])


def _job(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n", 1)[0]
    return " ".join(first.split()).replace("|", "\\|")


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def _statements(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    )


def _name(path: Path) -> str:
    return path.relative_to(ROOT / "reviewer").with_suffix("").as_posix()


def feature_table() -> str:
    modules = {_name(p): p for p in _modules()}
    placed = [m for group in FEATURES.values() for m in group]
    unplaced = sorted(set(modules) - set(placed))
    twice = sorted({m for m in placed if placed.count(m) > 1} | (set(placed) - set(modules)))
    if unplaced or twice:
        raise SystemExit(f"FEATURES in {__file__}: not placed {unplaced}, placed twice or missing {twice}")
    rows = [
        (sum(_lines(modules[m]) for m in group), sum(_statements(modules[m]) for m in group), name, group)
        for name, group in FEATURES.items()
    ]
    rows.sort(key=lambda r: (-r[0], r[2]))
    lines = [
        "| feature | lines | statements | modules |",
        "|---|---:|---:|---|",
        *(f"| {name} | {n:,} | {s:,} | {', '.join(f'`{m}`' for m in group)} |" for n, s, name, group in rows),
        f"| **total** | **{sum(r[0] for r in rows):,}** | **{sum(r[1] for r in rows):,}** | |",
    ]
    return "\n".join(lines)


def table() -> str:
    rows = [(_lines(p), p) for p in _modules()]
    rows.sort(key=lambda r: (-r[0], r[1].as_posix()))
    total = sum(n for n, _ in rows)
    lines = [
        "| module | lines | its job (the module docstring's first sentence) |",
        "|---|---:|---|",
        *(f"| `{p.relative_to(ROOT).as_posix()}` | {n:,} | {_job(p)} |" for n, p in rows),
        f"| **total** ({len(rows)} files) | **{total:,}** | |",
    ]
    return "\n".join(lines)


def _between(text: str, begin: str, end: str, body: str) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{PAGE}: markers {begin!r} … {end!r} not found")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def rendered(text: str) -> str:
    text = _between(text, FEATURE_BEGIN, FEATURE_END, feature_table())
    return _between(text, BEGIN, END, table())


def main(argv: list[str]) -> int:
    text = PAGE.read_text(encoding="utf-8")
    new = rendered(text)
    if "--check" in argv:
        if new != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python scripts/module_sizes.py")
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
