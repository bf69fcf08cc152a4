"""What incremental re-review saves on a push: model tokens, calls and time, full vs incremental.

A synthetic PR (real git, in a temp dir) changes FILES source files; after its first review, a
push edits one function in one of them. The push is reviewed twice from the same state: once with
the signed sticky state of the first review (incremental), once without it (full). The loopback
GitHub answers the PR files list and the compare API from the git repository; the loopback model
answers every unit with no finding and reports usage as counted from the prompt (3 characters a
token). Medians of RUNS runs; nothing leaves 127.0.0.1.

    /work/venv/bin/python benchmarks/bench_incremental.py        # writes benchmarks/INCREMENTAL.md
    /work/venv/bin/python benchmarks/bench_incremental.py --runs 1 --output -
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["IMREVIEW_STATE_KEY"] = "bench-incremental-0123456789abcdefghij"

from reviewer.config import Overrides  # noqa: E402
from reviewer.pull import PullJob, SkipRules, review_pull  # noqa: E402
from reviewer.source.github import GitHubClient  # noqa: E402
from tests.fakes.git_repo import GitRepo  # noqa: E402
from tests.fakes.github_server import FakeGitHub  # noqa: E402
from tests.fakes.model_server import FakeModelServer, Reply, text  # noqa: E402

REPO = "bench/widgets"
TOKEN = "bench-token"
MODEL = "openai/fake-model"
FILES = 20


def module(name: str, functions: int, salt: str = "") -> str:
    return "".join(
        f"def {name}_{i}(values):\n    total = 0\n    for v in values:\n        total += v * {i}{salt}\n"
        f"    return total\n\n\n"
        for i in range(functions)
    )


def quiet(body: dict[str, Any]) -> Reply:
    prompt = sum(len(str(m.get("content", ""))) for m in body["messages"])
    return text(
        '{"findings": [], "exclusions": [], "signals": []}', prompt_tokens=prompt // 3, completion_tokens=20
    )


def review(gh: FakeGitHub, model: FakeModelServer, *, state: bool) -> tuple[int, int, float, int]:
    """(model calls, input tokens, seconds, hunks sent) for one review of PR #1."""
    job = PullJob(
        repo=REPO,
        number=1,
        overrides=Overrides(model=MODEL, api_base=model.api_base),
        skip=SkipRules(),
        post_comment=state,
    )
    client = GitHubClient(TOKEN, gh.url, seconds_between_writes=0)
    before = len(model.requests)
    started = time.perf_counter()
    outcome = review_pull(client, job, warn=lambda message: None)
    seconds = time.perf_counter() - started
    assert outcome.report is not None, outcome.summary
    used = outcome.report.budget.used
    inc = outcome.report.incremental
    hunks = sum(c.hunks_total for c in outcome.report.coverage.files)
    if inc is not None and inc.mode == "incremental":
        hunks = inc.hunks_sent
    return len(model.requests) - before, used.input_tokens, seconds, hunks


def one_run(tmp: Path) -> dict[str, tuple[int, int, float, int]]:
    git = GitRepo(tmp / "repo")
    base = git.commit({f"src/m{n}.py": module(f"m{n}", 12) for n in range(FILES)}, "base")
    git.checkout(base, new_branch="feature")
    head = git.commit({f"src/m{n}.py": module(f"m{n}", 24, " + 1") for n in range(FILES)}, "feature")
    with FakeGitHub() as gh, FakeModelServer(handler=quiet) as model:
        gh.add_token(TOKEN, login="bench")
        gh.use_git(REPO, git)
        gh.add_pull(REPO, 1, head_sha=head, base_sha=base, merge_base_sha=base, files=git.entries(base, head))
        first = review(gh, model, state=True)
        edited = module("m3", 24, " + 1").replace("total += v * 5 + 1", "total += v * 5 + 2")
        pushed = git.commit({"src/m3.py": edited}, "push")
        gh.set_head(REPO, 1, pushed, files=git.entries(base, pushed))
        full = review(gh, model, state=False)
        incremental = review(gh, model, state=True)
    return {"first review": first, "push, full": full, "push, incremental": incremental}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "INCREMENTAL.md"))
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(one_run(Path(tmp)))
    lines = [
        "# Incremental re-review: what a push costs",
        "",
        f"A PR of {FILES} changed Python files (each: 12 functions rewritten, 12 added); a push then "
        f"edits one line of one file. Medians of {args.runs} runs of `benchmarks/bench_incremental.py` "
        "(loopback GitHub and model, usage counted at 3 characters a token, everything in one "
        "process, so litellm is imported once, in the first run, and the medians leave that import out).",
        "",
        "| review | hunks sent | model calls | input tokens | seconds |",
        "|---|---|---|---|---|",
    ]
    for name in runs[0]:
        calls = statistics.median(r[name][0] for r in runs)
        tokens = statistics.median(r[name][1] for r in runs)
        seconds = statistics.median(r[name][2] for r in runs)
        hunks = statistics.median(r[name][3] for r in runs)
        lines.append(f"| {name} | {hunks:g} | {calls:g} | {tokens:,.0f} | {seconds:.2f} |")
    full = statistics.median(r["push, full"][1] for r in runs)
    incremental = statistics.median(r["push, incremental"][1] for r in runs)
    share = f"{incremental / full:.1%}"
    lines += ["", f"The push's incremental review sends {share} of the full review's input tokens.", ""]
    report = "\n".join(lines)
    if args.output == "-":
        print(report)
    else:
        Path(args.output).write_text(report, encoding="utf-8")
        print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
