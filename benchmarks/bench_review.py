"""A reproducible wall-time benchmark of the `imreview` command line.

Everything it needs is built here: synthetic git repositories in a temp dir (real git), the loopback
fake model server from tests/fakes, and the CLI run as a subprocess exactly as a user runs it. Machines
are noisy, so every figure is a median of several runs and every comparison is a ratio of two medians
measured in the same invocation. Nothing leaves 127.0.0.1.

    /work/venv/bin/python benchmarks/bench_review.py            # writes benchmarks/RESULTS.md
    /work/venv/bin/python benchmarks/bench_review.py --quick    # one run each, no file written
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.model_server import FakeModelServer, Reply, text  # noqa: E402

MODEL = "openai/fake-model"
EMPTY_ANSWER = '{"findings": [], "exclusions": [], "signals": []}'
SLOW_REPLY_SECONDS = 0.5
RUN_TIMEOUT_SECONDS = 120.0
CALLS_LIMIT = 3
CONCURRENCY_CALLS = 12
INPUT_TOKENS_LIMIT = 20_000


@dataclass(frozen=True)
class PrShape:
    """A synthetic pull request: `files` files, each with `modified` rewritten and `added` new lines."""

    name: str
    files: int
    modified: int
    added: int

    @property
    def changed_lines(self) -> int:
        return self.files * (2 * self.modified + self.added)


SMALL = PrShape("small", files=5, modified=8, added=24)
LARGE = PrShape("large", files=300, modified=10, added=30)


@dataclass(frozen=True)
class Run:
    """One CLI invocation: its wall time and what it left behind (report.json, requests to the fake);
    empty and None for commands that are not reviews."""

    seconds: float
    returncode: int
    report: Mapping[str, Any]
    requests: int | None


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    label: str
    runs: Sequence[Run]
    derived: str = ""

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def spread(self) -> str:
        times = [r.seconds for r in self.runs]
        return f"{min(times):.3f}–{max(times):.3f}"

    @property
    def requests(self) -> str:
        counts = sorted({r.requests for r in self.runs if r.requests is not None})
        return "/".join(str(c) for c in counts) or "–"


class BenchError(RuntimeError):
    """A run did not do what the benchmark relies on (a broken CLI must not yield a pretty table)."""


def git_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Bench Author",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench Author",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
        "GIT_TEMPLATE_DIR": "",
    }


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=git_env(repo), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BenchError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout


def _function(rng: random.Random, module: int, index: int, value: int) -> list[str]:
    name = f"compute_{module}_{index}"
    factor = rng.randint(2, 97)
    return [
        f"def {name}(items, limit={value}):",
        f'    """Scale the first items of a batch for module {module}, step {index}."""',
        "    total = 0",
        "    for position, item in enumerate(items[:limit]):",
        f"        total += item * {factor} + position",
        f"    return total - {value}",
    ]


def _module(shape: PrShape, module: int, changed: bool) -> str:
    """Twenty six-line functions; the change rewrites `modified` return lines and appends `added` lines."""
    rng = random.Random(module)
    lines: list[str] = [f'"""Synthetic module {module} for the imreview benchmark."""', ""]
    for index in range(20):
        lines += [*_function(rng, module, index, index + module), "", ""]
    if changed:
        returns = [i for i, line in enumerate(lines) if line.startswith("    return total - ")]
        for i in returns[: shape.modified]:
            lines[i] = lines[i].replace("return total - ", "return total + 1 - ")
        extra: list[str] = []
        index = 100
        while len(extra) < shape.added:
            extra += [*_function(rng, module, index, index * 3 + module), ""]
            index += 1
        lines += extra[: shape.added]
    return "\n".join(lines) + "\n"


def build_repo(parent: Path, shape: PrShape) -> Path:
    """`main` holds the base, `feature` (checked out) the change; returns the repo path."""
    repo = parent / f"repo-{shape.name}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    paths = [f"pkg{m // 50}/module_{m}.py" for m in range(shape.files)]
    for phase, changed in (("base", False), ("feature", True)):
        if changed:
            git(repo, "checkout", "-q", "-b", "feature")
        for m, rel in enumerate(paths):
            target = repo / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_module(shape, m, changed), encoding="utf-8")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", f"{shape.name} {phase}")
    stat = git(repo, "diff", "--numstat", "main...feature").split("\n")
    counted = sum(int(a) + int(d) for a, d, _ in (line.split("\t") for line in stat if line))
    if counted != shape.changed_lines:
        raise BenchError(f"{shape.name} PR has {counted} changed lines, expected {shape.changed_lines}")
    return repo


def imreview_command() -> list[str]:
    """The console script next to this interpreter, as a user runs it; `python -m reviewer` otherwise."""
    script = Path(sys.executable).parent / "imreview"
    return [str(script)] if script.exists() else [sys.executable, "-m", "reviewer"]


def cli_env(home: Path) -> dict[str, str]:
    """A clean environment: no provider keys or proxies; litellm reads its bundled cost map (no fetch)."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
    }


def timed(
    argv: list[str], *, cwd: Path, env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False
    )
    return time.perf_counter() - started, proc


class Bench:
    """Holds the temp dir and the one fake model server; every run counts the requests it caused."""

    def __init__(self, work: Path, server: FakeModelServer) -> None:
        self.work = work
        self.server = server
        self.env = cli_env(work)
        self.reply: Callable[[dict[str, Any]], Reply] = instant_reply
        self.server.handler = lambda body: self.reply(body)

    def plain(self, argv: list[str], n: int) -> list[Run]:
        runs = []
        for _ in range(n):
            seconds, proc = timed(argv, cwd=self.work, env=self.env)
            if proc.returncode != 0:
                raise BenchError(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
            runs.append(Run(seconds, proc.returncode, {}, None))
        return runs

    def review(self, repo: Path, n: int, *args: str, model: bool = True) -> list[Run]:
        runs = []
        report_path = self.work / "report.json"
        for _ in range(n):
            report_path.unlink(missing_ok=True)
            model_args = ["--model", MODEL, "--api-base", self.server.api_base] if model else []
            argv = [
                *imreview_command(),
                "review",
                str(repo),
                "--base",
                "main",
                "--json",
                str(report_path),
                "--summary",
                str(self.work / "summary.md"),
                *model_args,
                *args,
            ]
            before = len(self.server.requests)
            seconds, proc = timed(argv, cwd=self.work, env=self.env)
            requests = len(self.server.requests) - before
            if not report_path.exists():
                raise BenchError(
                    f"{shlex.join(argv)} wrote no report (exit {proc.returncode}): {proc.stderr}"
                )
            if proc.returncode not in (0, 1):
                raise BenchError(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
            report = json.loads(report_path.read_text(encoding="utf-8"))
            runs.append(Run(seconds, proc.returncode, report, requests))
        return runs


def prompt_tokens(body: dict[str, Any]) -> int:
    """A real-ish count: about four characters of the serialized messages per token."""
    return max(1, len(json.dumps(body.get("messages", []))) // 4)


def instant_reply(body: dict[str, Any]) -> Reply:
    return text(EMPTY_ANSWER, prompt_tokens=prompt_tokens(body), completion_tokens=20)


def slow_reply(body: dict[str, Any]) -> Reply:
    return text(
        EMPTY_ANSWER, prompt_tokens=prompt_tokens(body), completion_tokens=20, delay=SLOW_REPLY_SECONDS
    )


def used(run: Run, key: str) -> Any:
    return run.report["budget"]["used"][key]


def coverage_note(run: Run) -> str:
    cov = run.report["coverage"]
    files = cov["files"]
    reviewed = sum(1 for f in files if f["status"] == "reviewed")
    return (
        f"{reviewed}/{len(files)} files fully reviewed, {cov['lines_reviewed']:,}/{cov['lines_changed']:,}"
        f" lines sent, verdict `{run.report['verdict']}`"
    )


def units(run: Run) -> int:
    """Review units sent: one review-phase call each while every answer parses first time."""
    return int(run.report["budget"]["by_phase"]["review"]["calls"])


def same_requests(label: str, runs: Sequence[Run]) -> int:
    """Request counts must not vary between runs, or the medians compare different work."""
    counts = {r.requests or 0 for r in runs}
    if len(counts) != 1:
        raise BenchError(f"{label}: request counts differ between runs: {sorted(counts)}")
    return counts.pop()


def measure(fast: int, slow: int, log: Callable[[str], None]) -> tuple[list[Row], list[str]]:
    """All measurements, in one process so every ratio compares runs made minutes apart at most.

    `fast` runs for what finishes well under a second, `slow` for everything that imports litellm.
    The concurrency pair is capped at CONCURRENCY_CALLS requests: 24 sleeps one at a time would push
    the whole benchmark past three minutes without changing the ratio's meaning. Returns the table
    rows and the budget-enforcement check lines.
    """
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="imreview-bench-") as tmp, FakeModelServer() as server:
        work = Path(tmp)
        bench = Bench(work, server)
        repos = {SMALL.name: build_repo(work, SMALL), LARGE.name: build_repo(work, LARGE)}
        log(f"repos built in {work}")

        help_argv = [*imreview_command(), "--help"]
        bench.plain(help_argv, 1)
        help_runs = bench.plain(help_argv, fast)
        import_runs = bench.plain([sys.executable, "-c", "import litellm"], slow)
        import_median = Row("", import_runs).median
        help_ratio = import_median / Row("", help_runs).median
        rows += [
            Row("`imreview --help`", help_runs, f"{help_ratio:.0f}× faster than importing litellm"),
            Row(
                "`python -c 'import litellm'`",
                import_runs,
                "the floor for `--help` if litellm were imported eagerly",
            ),
        ]
        log(f"--help and import litellm measured ({help_ratio:.0f}×)")

        plain: dict[str, Row] = {}
        for shape, n in ((SMALL, fast), (LARGE, slow)):
            runs = bench.review(repos[shape.name], n, model=False)
            label = f"review, no model, {shape.name} PR ({shape.files} files, {shape.changed_lines:,} lines)"
            rate = shape.changed_lines / Row("", runs).median
            plain[shape.name] = Row(label, runs, f"{rate:,.0f} changed lines/s; {coverage_note(runs[0])}")
            rows.append(plain[shape.name])
            log(f"no model, {shape.name}: {plain[shape.name].median:.3f} s")

        instant: dict[str, Row] = {}
        for shape in (SMALL, LARGE):
            label = f"review, fake model (instant), {shape.name} PR"
            runs = bench.review(repos[shape.name], slow)
            requests = same_requests(label, runs)
            overhead = Row("", runs).median - plain[shape.name].median
            per_request = (overhead - import_median) / max(requests, 1) * 1000
            instant[shape.name] = Row(
                label,
                runs,
                f"{units(runs[0])} units; model stage +{overhead:.2f} s over no model"
                f" (≈ {import_median:.2f} s litellm import + {per_request:.0f} ms/request);"
                f" {coverage_note(runs[0])}",
            )
            rows.append(instant[shape.name])
            log(f"instant model, {shape.name}: {instant[shape.name].median:.3f} s, {requests} requests")

        bench.reply = slow_reply
        cap = ("--max-calls", str(CONCURRENCY_CALLS))
        concurrency: dict[int, Row] = {}
        for workers in (1, 4):
            label = f"review, fake model ({SLOW_REPLY_SECONDS} s/request), large PR, `{shlex.join(cap)}`"
            label += f", `--max-concurrency {workers}`"
            runs = bench.review(repos[LARGE.name], slow, *cap, "--max-concurrency", str(workers))
            if same_requests(label, runs) != CONCURRENCY_CALLS:
                raise BenchError(f"{label}: expected {CONCURRENCY_CALLS} requests, got {runs[0].requests}")
            concurrency[workers] = Row(label, runs)
            log(f"--max-concurrency {workers}: {concurrency[workers].median:.3f} s")
        bench.reply = instant_reply
        one, four = concurrency[1], concurrency[4]
        saved = one.median - four.median
        ideal = CONCURRENCY_CALLS * SLOW_REPLY_SECONDS * (1 - 1 / 4)
        rows += [
            Row(one.label, one.runs, f"{CONCURRENCY_CALLS} × {SLOW_REPLY_SECONDS} s sleeps, one at a time"),
            Row(
                four.label,
                four.runs,
                f"**{one.median / four.median:.2f}×** faster wall time than `--max-concurrency 1`;"
                f" saves {saved:.2f} s, of which the overlapped sleeps account for {ideal:.2f} s"
                " and overlapped per-request client work for the rest",
            ),
        ]

        calls_runs = bench.review(repos[LARGE.name], 1, "--max-calls", str(CALLS_LIMIT))
        received = calls_runs[0].requests
        if received != CALLS_LIMIT:
            raise BenchError(f"--max-calls {CALLS_LIMIT}: the server received {received} requests")
        rows.append(
            Row(
                f"review, large PR, `--max-calls {CALLS_LIMIT}`",
                calls_runs,
                f"server received exactly {received} requests; {coverage_note(calls_runs[0])}",
            )
        )
        log("--max-calls checked")

        tokens_runs = bench.review(repos[LARGE.name], 1, "--max-input-tokens", str(INPUT_TOKENS_LIMIT))
        tokens_run = tokens_runs[0]
        spent = used(tokens_run, "input_tokens")
        reported = sum(
            prompt_tokens(body)
            for body in server.requests[len(server.requests) - (tokens_run.requests or 0) :]
        )
        if spent > INPUT_TOKENS_LIMIT:
            raise BenchError(f"--max-input-tokens {INPUT_TOKENS_LIMIT}: report.json says {spent} were used")
        if spent != reported:
            raise BenchError(f"report.json says {spent} input tokens; the fake server reported {reported}")
        rows.append(
            Row(
                f"review, large PR, `--max-input-tokens {INPUT_TOKENS_LIMIT}`",
                tokens_runs,
                f"used {spent:,} input tokens = {spent / INPUT_TOKENS_LIMIT:.1%} of the limit;"
                f" {coverage_note(tokens_run)}",
            )
        )
        log("--max-input-tokens checked")
    checks = [
        f"`--max-calls {CALLS_LIMIT}` on the large PR: the fake server received {received} requests"
        f" (must be exactly {CALLS_LIMIT}): OK",
        f"`--max-input-tokens {INPUT_TOKENS_LIMIT}` on the large PR: report.json `budget.used.input_tokens` ="
        f" {spent} ≤ {INPUT_TOKENS_LIMIT} ({spent / INPUT_TOKENS_LIMIT:.1%}), and equal to the sum of the"
        f" `prompt_tokens` the fake server reported (len(json.dumps(messages)) // 4 per request): OK",
    ]
    return rows, checks


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| Measurement | Runs | Median wall (s) | Range (s) | Model requests | Derived |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        cells = (row.label, str(len(row.runs)), f"{row.median:.3f}", row.spread, row.requests, row.derived)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def nproc() -> str:
    exe = shutil.which("nproc")
    if exe:
        return subprocess.run([exe], capture_output=True, text=True, check=False).stdout.strip()
    return str(len(os.sched_getaffinity(0)))


def environment() -> list[str]:
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False).stdout
    return [
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Python {platform.python_version()} ({sys.executable}), litellm"
        f" {importlib.metadata.version('litellm')}, imreview {importlib.metadata.version('imreview')},"
        f" {git_version.strip()}",
        f"- `nproc`: {nproc()}; {platform.platform()}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of everything; do not write a file")
    parser.add_argument(
        "--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md", help="where to write the results"
    )
    args = parser.parse_args(argv)
    fast, slow = (1, 1) if args.quick else (5, 3)
    command = f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    try:
        rows, checks = measure(fast, slow, log)
    except BenchError as exc:
        print(f"bench_review: {exc}", file=sys.stderr)
        return 1
    total = time.perf_counter() - started
    body = table(rows)
    print(body)
    print()
    print("\n".join(checks))
    if args.quick:
        return 0
    document = [
        "# imreview CLI benchmark",
        "",
        "Produced by:",
        "",
        "```",
        command,
        "```",
        "",
        *environment(),
        f"- Whole benchmark: {total:.0f} s",
        "",
        body,
        "",
        "Budget enforcement:",
        "",
        *(f"- {c}" for c in checks),
        "",
        "Reading the table: every time is the wall time of the whole CLI process, median of the runs shown;",
        "ratios compare medians from this one invocation. The small PR is 5 files / 200 changed lines, the",
        "large one 300 files / 15,000 (additions + deletions, checked with `git diff --numstat`). The fake",
        "model answers with no findings and reports `prompt_tokens = len(json.dumps(messages)) // 4`;",
        "`openai/fake-model` is unknown to litellm, so imreview assumes its small default context window",
        "and packs small units. *Model stage* is the median with the model minus the median without it;",
        "the per-request figure further subtracts the measured `import litellm` time. *Units* are",
        "review-phase calls in report.json. Coverage and verdict come from report.json (`--json`).",
        "",
    ]
    args.output.write_text("\n".join(document), encoding="utf-8")
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
