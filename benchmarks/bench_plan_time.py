"""How long planning takes on PRs of many small hunks, and what is reviewed (issue 21 item 1).

A PR author controls the diff's shape: 100 files of 60 one-line edits each (6,000 hunks) used to
hold planning for 6.1 s under `max-seconds: 5` on an idle 2-core machine (52 s on a loaded one),
with no model call made. Each case here is a real git repository in a temp dir whose branch
changes every eighth line of its files (one hunk per change), reviewed in-process by the real
review path (`reviewer.review.analyse`, LocalSource, repository context on) against the loopback
model server (tests/fakes/model_server.py, an empty findings answer at once), with the default
limits and the `max-seconds` shown. Planning time is the wall time of the plan stage (timed around
`_Planner.plan`, the one call the review makes), median of `--runs` runs after one warm-up run (the
tokenizer's one-time load is not planning). "Reviewed" is what the report says: model calls,
files reviewed / partial / not sent, changed lines sent, and the reasons of the gaps.

    /work/main/.venv/bin/python benchmarks/bench_plan_time.py            # writes benchmarks/PLAN_TIME.md
    /work/main/.venv/bin/python benchmarks/bench_plan_time.py --runs 1 --output -   # quick look
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key-0000")

from reviewer import review as review_module  # noqa: E402
from reviewer.budget import Budget, Limits  # noqa: E402
from reviewer.config import Config  # noqa: E402
from reviewer.render import Renderer  # noqa: E402
from reviewer.review import analyse, conclude  # noqa: E402
from reviewer.source.local import LocalSource  # noqa: E402
from tests.fakes.model_server import FakeModelServer, text  # noqa: E402

EMPTY = '{"findings": [], "exclusions": [], "signals": []}'
CASES = ((100, 60), (200, 100), (500, 100))
"""(files, one-line edits per file): 6,000, 20,000 and 50,000 hunks."""
SECONDS = (5.0, 60.0)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(where: Path, files: int, edits: int) -> Path:
    repo = where / f"repo-{files}x{edits}"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "user.name", "bench")
    for f in range(files):
        (repo / f"m{f:03d}.py").write_text("".join(f"v{i} = {i}\n" for i in range(8 * edits)))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "feature")
    for f in range(files):
        body = "".join(f"v{i} = {i + (1 if i % 8 == 0 else 0)}\n" for i in range(8 * edits))
        (repo / f"m{f:03d}.py").write_text(body)
    _git(repo, "commit", "-q", "-am", "one-line edits")
    return repo


class _Timed:
    """Times the plan stage: the wall time of each `_Planner.plan` call of one review."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._plan: Callable[..., Any] = review_module._Planner.plan

    def __enter__(self) -> _Timed:
        original = self._plan
        seconds = self.seconds

        def timed(planner: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(planner, *args, **kwargs)
            finally:
                seconds.append(time.perf_counter() - start)

        review_module._Planner.plan = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        review_module._Planner.plan = self._plan  # type: ignore[method-assign]


def review_once(repo: Path, server: FakeModelServer, seconds: float) -> dict[str, Any]:
    limits = Limits(seconds=seconds)
    config = Config(model="openai/gpt-4o-mini", api_base=server.api_base, limits=limits)
    source = LocalSource(repo, base="main")
    renderer = Renderer()
    change = source.change()
    before = len(server.requests)
    with _Timed() as timed:
        analysis = analyse(
            source, change, config, budget=Budget(limits), renderer=renderer, warn=lambda message: None
        )
    report = conclude(analysis, current_head=None, outputs=(), renderer=renderer)
    statuses = Counter(f.status for f in report.coverage.files)
    reasons = Counter(f.reason for f in report.coverage.files if f.reason)
    return {
        "plan_seconds": sum(timed.seconds),
        "calls": len(server.requests) - before,
        "reviewed": statuses.get("reviewed", 0),
        "partial": statuses.get("partial", 0),
        "listed": statuses.get("listed", 0),
        "lines": (report.coverage.lines_reviewed, report.coverage.lines_changed),
        "reasons": dict(reasons),
        "verdict": report.verdict,
    }


def write(output: str, rows: list[str], started: float) -> None:
    load = os.getloadavg()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text_out = "\n".join(
        [
            "# Planning time on PRs of many small hunks (issue 21 item 1)",
            "",
            "Produced by `python benchmarks/bench_plan_time.py` (from the repository root); the method is in",
            "the script's docstring.",
            "",
            f"- Date: {now}; Python {platform.python_version()}; `nproc`: {os.cpu_count()}; "
            f"load average at the end {load[0]:.1f} (other jobs shared the machine); "
            f"whole benchmark {time.perf_counter() - started:.0f} s",
            "- Default limits (200,000 input tokens, 24 calls, $1) and the `max-seconds` shown; "
            "planning may use a quarter of the seconds left when it starts (`PLAN_SECONDS_SHARE`), "
            "counting half of that.",
            "- Files: reviewed / partial / not sent. Lines: changed lines (+ and −) sent to the model and "
            "answered. Reasons: the files' gap reasons (`time`: planning's share of `max-seconds` ran "
            "out before the hunk; `budget`: the token or call budget had no room).",
            "",
            "| hunks | files × edits | max-seconds | runs | plan median (s) | range (s) | calls "
            "| files | lines sent | reasons | verdict |",
            "|---:|---|---:|---:|---:|---:|---:|---|---:|---|---|",
            *rows,
            "",
        ]
    )
    if output == "-":
        print(text_out)
    else:
        Path(output).write_text(text_out, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "PLAN_TIME.md"))
    args = parser.parse_args()
    started = time.perf_counter()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer() as server:
        server.handler = lambda body: text(EMPTY, prompt_tokens=500, completion_tokens=20)
        review_once(make_repo(Path(tmp), 5, 5), server, 600.0)  # warm-up: litellm, tokenizer
        for files, edits in CASES:
            repo = make_repo(Path(tmp), files, edits)
            for seconds in SECONDS:
                runs = [review_once(repo, server, seconds) for _ in range(args.runs)]
                times = sorted(r["plan_seconds"] for r in runs)
                last = runs[len(runs) // 2]
                sent, changed = last["lines"]
                reasons = ", ".join(f"{k} {v}" for k, v in sorted(last["reasons"].items())) or "none"
                rows.append(
                    f"| {files * edits:,} | {files} × {edits} | {seconds:g} | {len(runs)} "
                    f"| {statistics.median(times):.2f} | {times[0]:.2f}–{times[-1]:.2f} | {last['calls']} "
                    f"| {last['reviewed']} / {last['partial']} / {last['listed']} | {sent:,} of {changed:,} "
                    f"| {reasons} | {last['verdict']} |"
                )
                print(rows[-1], flush=True)
                write(args.output, rows, started)  # so far: a cut-short run still leaves a table
    write(args.output, rows, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
