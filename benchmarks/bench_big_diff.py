"""What one huge file diff costs `imreview review`, with and without the per-file diff cap.

A file diff over `reviewer.review.MAX_PATCH_CHARS` (1,000,000 characters) is listed as not reviewed
before any rule or the planner reads it. This measures what the cap saves: the planner slices one
long hunk into model-sized pieces (linearly in its size since issue 9; before, slicing grew faster
than the size and a generated file of a few MB held a run for most of a minute). Each
case is a real git repository in a temp dir whose branch adds one generated text file of the given
size (plus a one-line change to `app.py`), reviewed without a model by the CLI in a subprocess,
exactly as a user runs it; "cap lifted" runs the same CLI with the constant raised.

    /work/venv/bin/python benchmarks/bench_big_diff.py           # writes benchmarks/BIG_DIFF.md
    /work/venv/bin/python benchmarks/bench_big_diff.py --quick   # one run each, no file written
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = "a generated fixture line that is not code at all, number %07d\n"  # 65 bytes
SIZES_MB = (0.25, 0.9, 2.0, 4.0, 52.0)
LIFTED_SIZES_MB = (0.9, 2.0, 4.0, 52.0)
RUNS = 5
LIFTED_RUNS = 3
READING = (
    'Reading: at or under the cap the two variants do the same work; above it, "capped" lists '
    "`data.txt` as not reviewed (`no_patch`, with a gap naming its size) in about the time of reading "
    'the diff, while "cap lifted" slices and redacts it, in a time that grows linearly with its size '
    "(each slice's end is found by doubling then halving over lines numbered once per hunk)."
)
TIMEOUT = 600.0
LIFT = (
    "import sys, reviewer.review as r; r.MAX_PATCH_CHARS = 10**12; "
    "from reviewer.cli import main; sys.exit(main())"
)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(where: Path, megabytes: float) -> Path:
    repo = where / f"repo-{megabytes}"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "user.name", "bench")
    (repo / "app.py").write_text("x = 1\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "feature")
    lines = int(megabytes * 1_000_000 / len(LINE % 0))
    with (repo / "data.txt").open("w", encoding="utf-8") as fh:
        fh.writelines(LINE % i for i in range(lines))
    (repo / "app.py").write_text("x = 2\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "a generated file")
    return repo


def review(repo: Path, out: Path, *, lifted: bool) -> tuple[float, dict[str, object]]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(out),
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    report = out / "report.json"
    command = [sys.executable, "-c", LIFT] if lifted else [sys.executable, "-m", "reviewer"]
    args = ["review", str(repo), "--base", "main", "--json", str(report), "--quiet"]
    started = time.perf_counter()
    proc = subprocess.run(
        [*command, *args], env=env, cwd=out, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 3):
        raise SystemExit(f"review failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds, json.loads(report.read_text(encoding="utf-8"))


def data_status(report: dict[str, object]) -> str:
    files = report.get("coverage", {}).get("files", [])  # type: ignore[union-attr]
    for entry in files:
        if entry.get("path") == "data.txt":
            return f"{entry.get('status')} ({entry.get('reason') or 'no reason'})"
    return "absent"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run each; print, write nothing")
    options = parser.parse_args(argv)
    runs, lifted_runs = (1, 1) if options.quick else (RUNS, LIFTED_RUNS)
    rows = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        for size in sorted(set(SIZES_MB) | set(LIFTED_SIZES_MB)):
            repo = make_repo(where, size)
            cases = [("capped", False, runs)] + (
                [("cap lifted", True, lifted_runs)] if size in LIFTED_SIZES_MB else []
            )
            for label, lifted, count in cases:
                if label == "capped" and size not in SIZES_MB:
                    continue
                times, status = [], ""
                for n in range(count):
                    out = where / f"out-{size}-{label}-{n}"
                    out.mkdir()
                    seconds, report = review(repo, out, lifted=lifted)
                    times.append(seconds)
                    status = data_status(report)
                row = (size, label, count, statistics.median(times), min(times), max(times), status)
                spread = f"range {row[4]:.2f}-{row[5]:.2f}"
                print(f"{size:>6} MB {label:<10} median {row[3]:7.2f} s  {spread}  {status}")
                rows.append(row)
    if options.quick:
        return 0
    table = [
        "| data.txt diff | cap | runs | median wall (s) | range (s) | data.txt in the report |",
        "|---:|---|---:|---:|---:|---|",
        *[f"| {r[0]:g} MB | {r[1]} | {r[2]} | {r[3]:.2f} | {r[4]:.2f}–{r[5]:.2f} | {r[6]} |" for r in rows],
    ]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join(
        [
            "# One huge file diff: `imreview review` with and without the 1 MB per-file cap",
            "",
            "Produced by `python benchmarks/bench_big_diff.py` (from the repository root).",
            "",
            f"- Date: {now}; Python {platform.python_version()}; `nproc`: {os.cpu_count()}; "
            f"whole benchmark {time.perf_counter() - began:.0f} s",
            "- Each run: the CLI in a subprocess, no model, on a branch that adds `data.txt` of the size "
            "shown and changes `app.py`; wall time of the whole process, median of the runs shown.",
            "",
            *table,
            "",
            READING,
            "",
        ]
    )
    (Path(__file__).resolve().parent / "BIG_DIFF.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
