"""Issue 9's targets, measured: startup, local review scaling, GitHub requests, parallel units.

    /work/venv/bin/python benchmarks/bench_perf.py                  # every section, writes PERF.md
    /work/venv/bin/python benchmarks/bench_perf.py --runs 1 --only local --sizes 300

Everything is built here (real git repositories in a temp dir, the loopback fake GitHub and model
servers from tests/fakes) and every timed command runs as a subprocess, as a user runs it. Each time
row is the median of `--runs` runs (default 5); request counts are exact and checked equal across
runs. Wall time on a shared machine moves with its load, so each local-review row also gives the
CPU time (user + system) and peak RSS of the imreview process itself, read from wait4(2), which
load does not inflate; the load average is printed next to every section.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_review import PrShape, build_repo, cli_env, git, imreview_command  # noqa: E402

EMPTY_ANSWER = '{"findings": [], "exclusions": [], "signals": []}'


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float
    rss_mb: float
    code: int
    stdout: str
    stderr: str


def run(argv: Sequence[str], *, cwd: Path, env: dict[str, str], stdin: str | None = None) -> Sample:
    """One subprocess with its own rusage (wait4), not the sum over every child so far."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(stdin)
    wall = time.perf_counter() - started
    usage = _last_usage
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, out, err)


_last_usage: Any = None


def _install_usage_hook() -> None:
    """Popen reaps the child itself; wrap os.waitpid so its rusage is kept (wait4 on the same pid)."""
    original = os.waitpid

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        global _last_usage
        if pid > 0:
            got, status, usage = os.wait4(pid, options)
            if got:
                _last_usage = usage
            return got, status
        return original(pid, options)

    os.waitpid = waitpid  # type: ignore[assignment]


def bench_env(work: Path) -> dict[str, str]:
    """bench_review's clean environment, with this checkout importable (the venv need not install it)."""
    return {**cli_env(work), "PYTHONPATH": str(ROOT)}


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} (1 / 5 min) on {os.cpu_count()} CPUs"


# --- target 1: startup -------------------------------------------------------------------------


def bench_help(runs: int, work: Path) -> list[str]:
    env = bench_env(work)
    probe = (
        "import sys; from reviewer.cli import main; main(['--help']);"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'litellm', 'github', 'jinja2'}))"
    )
    help_argv = [*imreview_command(), "--help"]
    help_samples = [run(help_argv, cwd=work, env=env) for _ in range(runs + 1)][1:]
    imports = run([sys.executable, "-c", probe], cwd=work, env={**env, "PYTHONPATH": str(ROOT)})
    heavy = imports.stdout.strip().splitlines()[-1]
    litellm = [run([sys.executable, "-c", "import litellm"], cwd=work, env=env) for _ in range(runs)]
    return [
        "| `imreview --help` | "
        f"{median([s.wall for s in help_samples]):.3f} s | {median([s.cpu for s in help_samples]):.3f} s |"
        f" heavy modules imported: {heavy} |",
        f"| `python -c 'import litellm'` | {median([s.wall for s in litellm]):.3f} s |"
        f" {median([s.cpu for s in litellm]):.3f} s | what `--help` would cost if it imported litellm |",
    ]


# --- target 2: local review without a model ------------------------------------------------------


def bench_local(runs: int, work: Path, sizes: Sequence[int], log: Callable[[str], None]) -> list[str]:
    env = bench_env(work)
    rows = []
    for files in sizes:
        shape = PrShape(f"n{files}", files=files, modified=10, added=30)
        repo = build_repo(work, shape)
        log(f"built {files}-file repo")
        diff_argv = ["git", "diff", "--no-color", "--no-ext-diff", "-M", "--full-index", "main", "feature"]
        diffs = [run(diff_argv, cwd=repo, env=env) for _ in range(runs)]
        argv = [
            *imreview_command(),
            "review",
            str(repo),
            "--base",
            "main",
            "--json",
            str(work / "r.json"),
            "--summary",
            str(work / "s.md"),
        ]
        reviews = []
        (work / "r.json").unlink(missing_ok=True)
        for _ in range(runs):
            sample = run(argv, cwd=work, env=env)
            if sample.code not in (0, 1) or not (work / "r.json").exists():
                raise SystemExit(f"review of {files} files exited {sample.code}: {sample.stderr[-2000:]}")
            reviews.append(sample)
        report = json.loads((work / "r.json").read_text(encoding="utf-8"))
        git_wall = median([s.wall for s in diffs])
        wall, cpu = median([s.wall for s in reviews]), median([s.cpu for s in reviews])
        rss = max(s.rss_mb for s in reviews)
        beyond = max(0.0, cpu - median([s.cpu for s in diffs]))
        listed = len(report["coverage"]["files"])
        rows.append(
            f"| {files:,} files / {shape.changed_lines:,} lines | {wall:.2f} s | {cpu:.2f} s |"
            f" {git_wall:.2f} s | {beyond:.2f} s | {rss:.0f} MB |"
            f" {cpu / files * 1000:.2f} ms | `{report['verdict']}`, {listed:,} files |"
        )
        log(f"{files} files: wall {wall:.2f} s, cpu {cpu:.2f} s, rss {rss:.0f} MB ({load()})")
        git(repo, "gc", "--quiet", "--prune=now")
    return rows


# --- targets 3 and 4: GitHub requests ---------------------------------------------------------------


def _endpoint(method: str, path: str) -> str:
    path = re.sub(r"/contents/.*", "/contents/{path}", path)
    path = re.sub(r"[0-9a-f]{40}", "{sha}", path)
    path = re.sub(r"/(issues|pulls|comments)/\d+", r"/\1/{n}", path)
    path = re.sub(r"^/repos/[^/]+/[^/]+", "", path)
    return f"{method} {path or '/'}"


GITHUB_CASES = ((False, True), (False, False), (True, True), (True, False))
"""(model, state key) per PR size: without a model no context is read; without a state key (no
`IMREVIEW_STATE_KEY`, no model API key) a new sticky comment is edited once to name its own id."""
OTHER_FILES = 600
"""Files at the head that the PR does not change: repository context searches some of them."""


def bench_github(work: Path, sizes: Sequence[int], log: Callable[[str], None]) -> list[str]:
    import tests.test_action_e2e as e2e
    from tests.fakes.github_server import FakeGitHub, diff_entry
    from tests.fakes.model_server import FakeModelServer, text

    token = "ghs_" + "b" * 36  # what GITHUB_TOKEN looks like: an installation token
    e2e.TOKEN = token
    patch = "@@ -1,3 +1,4 @@\n def div(a, b):\n-    return 0\n+    total = a / b\n+    return total\n # end"
    rows = []
    for files in sizes:
        for with_model, keyed in GITHUB_CASES:
            counts: list[collections.Counter[str]] = []
            for _ in range(2):
                with FakeGitHub() as gh, FakeModelServer() as model, tempfile.TemporaryDirectory() as tmp:
                    gh.add_token(token)
                    gh.add_repo(e2e.REPO)
                    entries = [diff_entry(f"src/m{i}.py", patch) for i in range(files)]
                    gh.add_pull(e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=entries)
                    for i in range(files):
                        gh.add_content(
                            e2e.REPO, e2e.HEAD, f"src/m{i}.py", "def div(a, b):\n    return a / b\n"
                        )
                    for i in range(OTHER_FILES):
                        gh.add_content(
                            e2e.REPO, e2e.HEAD, f"src/lib/o{i}.py", f"def helper{i}(x):\n    return x\n"
                        )
                    model.handler = lambda body: text(EMPTY_ANSWER)
                    extra = {} if keyed else {"IMREVIEW_STATE_KEY": ""}
                    runner = e2e.Runner(Path(tmp), gh.url, extra_env=extra)
                    inputs = (
                        {"model": "openai/fake-model", "api_base": model.api_base, "max_calls": "10"}
                        if with_model
                        else {}
                    )
                    result = runner.run("pull_request", e2e.event_payload("pull_request.opened"), **inputs)
                    if result.code not in (0, 1):
                        raise SystemExit(
                            f"action on {files} files exited {result.code}: {result.stderr[-2000:]}"
                        )
                    if gh.violations:
                        raise SystemExit(f"fake GitHub contract violations: {gh.violations[:3]}")
                    counts.append(collections.Counter(_endpoint(r.method, r.path) for r in gh.requests))
                    verdict = result.outputs.get("verdict", "?")
            if counts[0] != counts[1]:
                raise SystemExit(f"{files} files: request counts differ between runs: {counts}")
            per = ", ".join(f"{n}× `{k}`" for k, n in counts[0].most_common())
            rows.append(
                f"| {files:,} | {'fake model' if with_model else 'none'} | {'yes' if keyed else 'no'}"
                f" | **{sum(counts[0].values())}** | {per} | `{verdict}` |"
            )
            log(f"github {files} files, model {with_model}, key {keyed}: {sum(counts[0].values())} requests")
    return rows


# --- target 5: the first model request after reading GitHub and importing litellm -------------------


class _TimedList(list[Any]):
    """The fake GitHub's request log, with the monotonic time each request arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        self.times.append(time.monotonic())
        super().append(item)


def bench_first_call(runs: int, work: Path, files: int, log: Callable[[str], None]) -> list[str]:
    """The Action on a `files`-file PR: when the first request reaches the model server, measured
    from the later of the last GitHub read before it and the end of litellm's import (the import
    starts just before the PR's files are listed and lasts `budget.startup.import_seconds`)."""
    import tests.test_action_e2e as e2e
    from tests.fakes.github_server import FakeGitHub, diff_entry
    from tests.fakes.model_server import FakeModelServer, text

    token = "ghs_" + "b" * 36
    e2e.TOKEN = token
    patch = "@@ -1,3 +1,4 @@\n def div(a, b):\n-    return 0\n+    total = a / b\n+    return total\n # end"
    rows: list[tuple[float, float, float, float, float, float]] = []
    for _ in range(runs):
        with FakeGitHub() as gh, FakeModelServer() as model, tempfile.TemporaryDirectory() as tmp:
            timed = _TimedList()
            gh.requests = timed
            gh.add_token(token)
            gh.add_repo(e2e.REPO)
            entries = [diff_entry(f"src/m{i}.py", patch) for i in range(files)]
            gh.add_pull(e2e.REPO, 7, head_sha=e2e.HEAD, base_sha=e2e.BASE, files=entries)
            for i in range(files):
                gh.add_content(e2e.REPO, e2e.HEAD, f"src/m{i}.py", "def div(a, b):\n    return a / b\n")
            arrivals: list[float] = []

            def handle(body: dict[str, Any], arrivals: list[float] = arrivals) -> Any:
                arrivals.append(time.monotonic())
                return text(EMPTY_ANSWER)

            model.handler = handle
            started = time.monotonic()
            result = e2e.Runner(Path(tmp), gh.url).run(
                "pull_request",
                e2e.event_payload("pull_request.opened"),
                model="openai/fake-model",
                api_base=model.api_base,
                max_calls="4",
            )
            if result.code not in (0, 1) or not arrivals:
                raise SystemExit(f"first-call run exited {result.code}: {result.stderr[-2000:]}")
            first = arrivals[0]
            log_ = list(zip(timed.times, list(timed), strict=True))
            reads = [t for t, _ in log_ if t <= first]
            listing = next(t for t, r in log_ if r.path.endswith("/files"))
            report = json.loads(next(Path(tmp).rglob("report-7.json")).read_text(encoding="utf-8"))
            startup = report["budget"]["startup"]
            import_end = listing + startup["import_seconds"]
            github_end = max(reads)
            rows.append(
                (
                    first - started,
                    github_end - started,
                    startup["import_seconds"],
                    startup["import_wait_seconds"],
                    first - max(github_end, import_end),
                    float(len(reads)),
                )
            )
    med = [median([r[i] for r in rows]) for i in range(6)]
    log(f"first call: {med[0]:.2f} s after start, {med[4]:.2f} s after GitHub + import ({load()})")
    verdict = "met" if med[4] <= 1.5 else "NOT met"
    return [
        f"| {files} files | {med[0]:.2f} s | {med[1]:.2f} s | {med[2]:.2f} s | {med[3]:.2f} s |"
        f" **{med[4]:.2f} s** | {verdict} | {min(r[4] for r in rows):.2f}–{max(r[4] for r in rows):.2f} s |"
    ]


# --- target 6: parallel units -------------------------------------------------------------------


def bench_parallel(runs: int, work: Path, log: Callable[[str], None]) -> list[str]:
    from tests.fakes.model_server import FakeModelServer, text

    latency, units, workers = 2.0, 16, 4
    repo = build_repo(work, PrShape("par", files=600, modified=10, added=30))  # more than 16 calls hold
    env = bench_env(work)
    spans: list[float] = []
    counts = []
    with FakeModelServer() as model:
        arrivals: list[float] = []
        lock = threading.Lock()

        def handle(body: dict[str, Any]) -> Any:
            with lock:
                arrivals.append(time.monotonic())
            return text(EMPTY_ANSWER, prompt_tokens=100, completion_tokens=20, delay=latency)

        model.handler = handle
        argv = [
            *imreview_command(),
            "review",
            str(repo),
            "--base",
            "main",
            "--model",
            "openai/fake-model",
            "--api-base",
            model.api_base,
            "--max-calls",
            str(units),
            "--max-input-tokens",
            "2000000",  # the calls, not the default token budgets, decide how many units there are
            "--max-output-tokens",
            "200000",
            "--max-concurrency",
            str(workers),
            "--max-seconds",
            "600",
            "--summary",
            str(work / "p.md"),
        ]
        for _ in range(runs):
            arrivals.clear()
            sample = run(argv, cwd=work, env=env)
            done = time.monotonic()
            if sample.code not in (0, 1) or len(arrivals) != units:
                problem = f"exit {sample.code}, {len(arrivals)} requests: {sample.stderr[-1500:]}"
                raise SystemExit(f"parallel run: {problem}")
            spans.append(max(arrivals) + latency - min(arrivals))
            counts.append(len(arrivals))
            del done
    ideal = units / workers * latency
    limit = 1.15 * ideal + 1
    span = median(spans)
    log(f"parallel: {span:.2f} s from first request to last answer ({load()})")
    verdict = "met" if span <= limit else "NOT met"
    return [
        f"| {units} units, {latency:.0f} s latency, `--max-concurrency {workers}` | {span:.2f} s |"
        f" {ideal:.0f} s | {limit:.1f} s | {verdict} | {min(spans):.2f}–{max(spans):.2f} s |"
    ]


def rows_or_failure(make: Callable[[], list[str]], columns: int) -> list[str]:
    """A section that misbehaves leaves one row saying why; the other sections are still written."""
    try:
        return make()
    except SystemExit as exc:
        why = str(exc).replace("\n", " ")[:300].replace("|", "/")
        return [f"| failed: {why} |" + " |" * (columns - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="*", default=[300, 3000, 30000])
    parser.add_argument("--pr-sizes", type=int, nargs="*", default=[100, 1000, 3000])
    sections = ["help", "local", "github", "first-call", "parallel"]
    parser.add_argument("--only", choices=[*sections, "requests"], action="append")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "PERF.md")
    args = parser.parse_args(argv)
    _install_usage_hook()
    only = {"github" if name == "requests" else name for name in args.only or sections}
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    out = [
        "# imreview performance (issue 9)",
        "",
        "```",
        f"cd {shlex.quote(str(ROOT))} && {shlex.join([sys.executable, *sys.argv])}",
        "```",
        "",
        f"- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Python {platform.python_version()};"
        f" {platform.platform()}; `nproc` {os.cpu_count()}",
        f"- {load()} at the start; medians of {args.runs} runs",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="imreview-perf-") as tmp:
        work = Path(tmp)
        if "help" in only:
            out += [
                "| Command | Wall | CPU | Note |",
                "|---|---:|---:|---|",
                *rows_or_failure(lambda: bench_help(args.runs, work), 4),
                "",
            ]
            log(f"help done ({load()})")
        if "local" in only:
            out += [
                f"Local review, no model ({load()} before):",
                "",
                "| PR | Wall | CPU (imreview) | `git diff` wall | CPU beyond git diff | Peak RSS"
                " | CPU per file | Report |",
                "|---|---:|---:|---:|---:|---:|---:|---|",
                *rows_or_failure(lambda: bench_local(args.runs, work, args.sizes, log), 8),
                "",
            ]
        if "github" in only:
            out += [
                "GitHub requests, Action on `pull_request.opened` with the sticky comment"
                f" (installation token; {OTHER_FILES} more files at the head for context):",
                "",
                "| PR files | Model | State key | Requests | Per endpoint | Verdict |",
                "|---:|---|---|---:|---|---|",
                *rows_or_failure(lambda: bench_github(work, args.pr_sizes, log), 6),
                "",
            ]
        if "first-call" in only:
            out += [
                "First model request, Action path (loopback GitHub, fake model, `max-calls 4`):",
                "",
                "| PR | First request (from start) | Last GitHub read before it | litellm import"
                " | Import waited for | First request after max(GitHub, import) | ≤ 1.5 s | Range |",
                "|---|---:|---:|---:|---:|---:|---|---:|",
                *rows_or_failure(lambda: bench_first_call(args.runs, work, 300, log), 8),
                "",
            ]
        if "parallel" in only:
            out += [
                "Parallel units (the model server sleeps before answering;"
                " span = first request to last answer):",
                "",
                "| Shape | Span (median) | Ideal | Target | | Range |",
                "|---|---:|---:|---:|---|---:|",
                *rows_or_failure(lambda: bench_parallel(args.runs, work, log), 6),
                "",
            ]
    text_out = "\n".join(out)
    print(text_out)
    args.output.write_text(text_out, encoding="utf-8")
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
