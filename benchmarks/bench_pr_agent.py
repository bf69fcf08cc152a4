"""Side by side with PR-Agent's `/review` packing at the same token spend; writes benchmarks/PR_AGENT.md.

PR-Agent (PyPI `pr-agent`, Python 3.12, in its own venv: `--pr-agent-python`) reviews each PR of
`tests/fakes/pr_shapes.py` through its own local git provider (`--pr_url main review` in a real
git repository, `config.git_provider=local`), with its window set to 8k, 16k and its default 32k
(`config.max_model_tokens`), against the loopback model server. The server counts every prompt
as OpenAI counts gpt-4o-mini. imreview then reviews the same repository with PR-Agent's own spend
as `--max-input-tokens`, against the same kind of server. For both, from what the server received:

- input tokens (the server's count) and calls,
- share of the PR's added lines shown to the model with their line numbers (PR-Agent numbers only
  new-side lines, so removed lines are left out of the comparison for both),
- the same share for the riskiest quarter of the files (imreview's own risk ranking: security-
  sensitive source first, docs last — the measure favours imreview's order by construction),
- reference lines shown, on the "large + eval" PR (the large PR with the 9 cases of the shipped eval
  set added, `bench_planner.with_eval_cases`): the share of the lines the eval labels as defects,
  where a reviewer commented, shown numbered on the new side (added or unchanged) to the model.

Token counts and coverage are deterministic; one run per row. Usage:
`python benchmarks/bench_pr_agent.py --pr-agent-python /path/to/py312-venv/bin/python`
(`python3.12 -m venv V && V/bin/pip install pr-agent==0.49.0`).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_planner as bp  # noqa: E402

from reviewer.cli import main  # noqa: E402
from tests.fakes.model_server import FakeModelServer, text  # noqa: E402

WINDOWS = (("8k", 8192), ("16k", 16384), ("32k (default)", 32000))
PR_AGENT_FILE = re.compile(r"^## File: '([^']+)'", re.MULTILINE)
PR_AGENT_ADDED = re.compile(r"^(\d+) \+", re.MULTILINE)
PR_AGENT_NEW_SIDE = re.compile(r"^(\d+) [ +]", re.MULTILINE)
PR_AGENT_ANSWER = (
    "```yaml\nreview:\n  estimated_effort_to_review_[1-5]: |\n    1\n  relevant_tests: |\n    No\n"
    "  key_issues_to_review: []\n  security_concerns: |\n    No\n```"
)


@dataclass(frozen=True)
class Side:
    tokens: int
    calls: int
    added_share: float
    risky_share: float
    reference_share: float | None = None


def added(changed: bp.Changed) -> dict[str, set[int]]:
    return {p: {n for kind, n in lines if kind == "+"} for p, lines in changed.lines.items()}


def share(shown: dict[str, set[int]], lines: dict[str, set[int]], paths: tuple[str, ...]) -> float:
    total = sum(len(lines[p]) for p in paths)
    return sum(len(lines[p] & shown.get(p, set())) for p in paths) / total if total else 1.0


def pr_agent_shown(
    bodies: list[dict[str, Any]], pattern: re.Pattern[str] = PR_AGENT_ADDED
) -> dict[str, set[int]]:
    shown: dict[str, set[int]] = {}
    for body in bodies:
        content = "\n".join(str(m.get("content", "")) for m in body["messages"])
        sections = PR_AGENT_FILE.split(content)
        for path, section in zip(sections[1::2], sections[2::2], strict=True):
            new_side = "\n".join(part.split("__old hunk__")[0] for part in section.split("__new hunk__")[1:])
            shown.setdefault(path, set()).update(int(n) for n in pattern.findall(new_side))
    return shown


def tiktoken_cache(python: str) -> str:
    """litellm's bundled tiktoken files in PR-Agent's venv: PR-Agent would fetch them otherwise."""
    code = "import litellm.litellm_core_utils.tokenizers as t, os; print(os.path.dirname(t.__file__))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def run_pr_agent(
    python: str,
    repo: Path,
    window: int,
    changed: bp.Changed,
    cache: str,
    references: dict[str, set[int]] | None,
) -> Side:
    with FakeModelServer(count_prompt=bp.openai_count) as server:
        server.handler = lambda body: text(
            PR_AGENT_ANSWER, prompt_tokens=server.count_prompt(body), completion_tokens=40
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(repo.parent),
            "CONFIG.GIT_PROVIDER": "local",
            "CONFIG.MODEL": "gpt-4o-mini",
            "CONFIG.FALLBACK_MODELS": "[]",
            "CONFIG.MAX_MODEL_TOKENS": str(window),
            "CONFIG.PUBLISH_OUTPUT": "false",
            "OPENAI.KEY": "sk-bench",
            "OPENAI.API_BASE": server.api_base,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "TIKTOKEN_CACHE_DIR": cache,
        }
        git = ["git", "-C", str(repo)]
        subprocess.run([*git, "checkout", "-q", "feature"], check=True)
        proc = subprocess.run(
            [python, "-m", "pr_agent.cli", "--pr_url", "main", "review"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for leftover in ("review.md",):
            (repo / leftover).unlink(missing_ok=True)
        if not server.requests:
            raise SystemExit(f"PR-Agent sent nothing for {repo.name} at {window}: {proc.stdout[-2000:]}")
        shown = pr_agent_shown(server.requests)
        lines = added(changed)
        return Side(
            tokens=sum(server.count_prompt(b) for b in server.requests),
            calls=len(server.requests),
            added_share=share(shown, lines, tuple(lines)),
            risky_share=share(shown, lines, changed.riskiest),
            reference_share=None
            if references is None
            else bp.reference_share(pr_agent_shown(server.requests, PR_AGENT_NEW_SIDE), references),
        )


def run_imreview(
    repo: Path, limit: int, changed: bp.Changed, work: Path, references: dict[str, set[int]] | None
) -> Side:
    with FakeModelServer(count_prompt=bp.openai_count) as server:
        server.handler = lambda body: text(
            bp.EMPTY, prompt_tokens=server.count_prompt(body), completion_tokens=20
        )
        args = ["review", str(repo), "--base", "main", "--head", "feature", "--json", str(work / "r.json")]
        args += [
            "--summary",
            str(work / "s.md"),
            "--model",
            "openai/gpt-4o-mini",
            "--api-base",
            server.api_base,
        ]
        args += ["--max-cost-usd", "100", "--max-output-tokens", "1000000", "--max-calls", "1000"]
        args += ["--max-input-tokens", str(limit)]
        with bp.quiet():
            code = main(args)
        if code != 0:
            raise SystemExit(f"imreview exited {code} on {repo.name} at {limit}")
        sent = bp.sent_lines(server)
        shown = {p: {n for kind, n in s if kind == "+"} for p, s in sent.items()}
        lines = added(changed)
        return Side(
            tokens=sum(server.count_prompt(b) for b in server.requests if b not in server.refused),
            calls=len(server.requests),
            added_share=share(shown, lines, tuple(lines)),
            risky_share=share(shown, lines, changed.riskiest),
            reference_share=None
            if references is None
            else bp.reference_share(bp.new_side_shown(server), references),
        )


def pct(x: float | None) -> str:
    return "–" if x is None else f"{round(100 * x)}%"


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pr-agent-python", required=True, help="python of a venv with pr-agent installed")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "PR_AGENT.md"))
    parser.add_argument("--shapes", default=",".join(bp.SHAPES), help="comma-separated PR names to run")
    args = parser.parse_args()
    version = subprocess.run(
        [args.pr_agent_python, "-c", "import importlib.metadata as m; print(m.version('pr-agent'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    cache = tiktoken_cache(args.pr_agent_python)
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="imreview-vs-pr-agent-") as tmp:
        root = Path(tmp)
        for name in args.shapes.split(","):
            repo = bp.build(root, name.replace(" + ", "-"), bp.SHAPES[name]())
            references = bp.REFERENCES.get(name)
            changed = bp.changed_lines(repo)
            n_added = sum(len(v) for v in added(changed).values())
            label = f"{name} ({len(changed.lines)} files, {n_added:,} added lines)"
            for window_label, window in WINDOWS:
                theirs = run_pr_agent(args.pr_agent_python, repo, window, changed, cache, references)
                ours = run_imreview(repo, theirs.tokens, changed, root, references)
                rows.append((label, window_label, theirs, ours))
                print(label, window_label, theirs, ours, flush=True)
    lines = [
        "# Side by side with PR-Agent: what the model is shown at the same token spend",
        "",
        "Produced by `python benchmarks/bench_pr_agent.py --pr-agent-python V/bin/python`; see the",
        "script's docstring for what is measured and how.",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; imreview at `{sha.stdout.strip()}`;"
        f" PR-Agent {version} (PyPI, Python 3.12)",
        f"- Python {platform.python_version()} for imreview; one run per row (deterministic counts);"
        f" whole benchmark {time.monotonic() - started:.0f} s",
        "",
        "| PR | PR-Agent window | PR-Agent: input tokens | calls | added lines shown | riskiest files' added"
        " lines | reference lines shown | imreview at PR-Agent's spend: input tokens | calls | added lines"
        " shown | riskiest files' added lines | reference lines shown |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, window_label, theirs, ours in rows:
        lines.append(
            f"| {label} | {window_label} | {theirs.tokens:,} | {theirs.calls} | {pct(theirs.added_share)} |"
            f" {pct(theirs.risky_share)} | {pct(theirs.reference_share)} | {ours.tokens:,} | {ours.calls} |"
            f" {pct(ours.added_share)} | {pct(ours.risky_share)} | {pct(ours.reference_share)} |"
        )
    Path(args.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main_bench()
