"""The table of package lines per module in docs/architecture.md, from `wc -l`'s count.

    python scripts/module_sizes.py           # rewrite the table between its markers
    python scripts/module_sizes.py --check   # exit 1 when the table is out of date

Counts every line of `reviewer/*.py` and `reviewer/*/*.py` (as `wc -l reviewer/*.py reviewer/*/*.py`
does), largest first, with each module's one-line docstring as its job.
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


def _modules() -> list[Path]:
    package = ROOT / "reviewer"
    return sorted([*package.glob("*.py"), *package.glob("*/*.py")])


def _job(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n", 1)[0]
    return " ".join(first.split()).replace("|", "\\|")


def table() -> str:
    rows = [(len(p.read_bytes().splitlines()), p) for p in _modules()]
    rows.sort(key=lambda r: (-r[0], r[1].as_posix()))
    total = sum(n for n, _ in rows)
    lines = [
        "| module | lines | its job (the module docstring's first sentence) |",
        "|---|---:|---|",
        *(f"| `{p.relative_to(ROOT).as_posix()}` | {n:,} | {_job(p)} |" for n, p in rows),
        f"| **total** ({len(rows)} files) | **{total:,}** | |",
    ]
    return "\n".join(lines)


def rendered(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{PAGE}: markers {BEGIN!r} … {END!r} not found")
    return pattern.sub(lambda _: f"{BEGIN}\n{table()}\n{END}", text)


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
