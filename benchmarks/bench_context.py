"""Context recall on the shipped eval set (issue 8); writes benchmarks/CONTEXT.md.

Context recall is the share of reference lines present in what the model was sent. The reference
lines of an item are the lines of its labelled defects (`expected[].path/line`, in the diff) and
the lines outside the diff that show them (`expected[].evidence`: the unchanged caller, the
definition of a constant); three items of the shipped set have such evidence. A line is present
when some review prompt shows it numbered: in the diff block (added, unchanged or `~` context
line of its file) or in the repository-context block (`## Context: <path> lines a-b`).

Two scenarios, each at input budgets (`--max-input-tokens`) of 8k, 16k and 32k, with repository
context (`context_share: 0.3`, the default) and without (`context_share: 0`):
- **shipped set**: every item of benchmarks/eval/dataset.json reviewed on its own (`imreview eval`);
  each is small, so no budget binds: this measures what context adds.
- **one large PR**: every item's files in one repository (each under `<item id>/`) plus the
  `medium` PR shape of tests/fakes/pr_shapes.py (12 files in 6 languages, ~1,000 changed lines),
  reviewed as one change: budgets bind, and context competes with the diff for them.

Everything runs in-process (`imreview eval`, real litellm, token counts of gpt-4o-mini) against
the loopback oracle model (tests/fakes/oracle_model.py) with `needs_evidence`: it reports a planted
defect only when the prompt shows the defect's line and all of its evidence, as a model that reads
only what it is shown would. The eval table is that oracle's precision, recall and F1.
Counts are deterministic; each configuration runs `--runs` times (default 5) and the table shows
medians. Usage: `python benchmarks/bench_context.py [--runs N] [--output PATH]`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "eval"))
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
for _key in ("OPENAI_API_KEY", "IMREVIEW_MODEL", "IMREVIEW_API_BASE"):
    os.environ.pop(_key, None)

import build_dataset  # noqa: E402

from reviewer.cli import main  # noqa: E402
from tests.fakes import pr_shapes  # noqa: E402
from tests.fakes.model_behaviours import last_user_text  # noqa: E402
from tests.fakes.model_server import FakeModelServer, Reply  # noqa: E402
from tests.fakes.oracle_model import Oracle, Planted  # noqa: E402

BUDGETS = (("8k", 8192), ("16k", 16384), ("32k", 32768))
SHARES = (("with context", 0.3), ("without context", 0.0))
MODEL = "openai/gpt-4o-mini"
_OPEN = re.compile(r"^<<<UNTRUSTED (\d+) (\w+)$", re.M)
_FILE = re.compile(r"^## File: (.+?) \(")
_CONTEXT = re.compile(r"^## Context: (.+?) lines \d+-\d+ \(")
_NEW_LINE = re.compile(r"^\s*(\d+) ([+ ~]) ")


@dataclass(frozen=True)
class Run:
    references: int
    references_shown: int
    evidence: int
    evidence_shown: int
    added: int
    added_shown: int
    input_tokens: int
    context_tokens: int
    calls: int
    true_positives: int
    false_positives: int
    false_negatives: int


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def blocks(prompt: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _OPEN.finditer(prompt):
        end = prompt.find(f"\nUNTRUSTED {m.group(1)}>>>", m.end())
        out[m.group(2)] = prompt[m.end() + 1 : end]
    return out


def shown_lines(prompt: str) -> tuple[set[tuple[str, int]], set[tuple[str, int]], str]:
    """(lines shown, added lines shown, context block) of one review prompt."""
    parts = blocks(prompt)
    shown: set[tuple[str, int]] = set()
    added: set[tuple[str, int]] = set()
    for label, pattern in (("diff", _FILE), ("context", _CONTEXT)):
        path = ""
        for line in parts.get(label, "").splitlines():
            if m := pattern.match(line):
                path = m.group(1)
            elif (n := _NEW_LINE.match(line)) and path:
                shown.add((path, int(n.group(1))))
                if label == "diff" and n.group(2) == "+":
                    added.add((path, int(n.group(1))))
    return shown, added, parts.get("context", "")


def planted(item: dict[str, Any], repo: Path) -> list[Planted]:
    """The oracle's defects; in the one large PR an item's siblings are its own files only."""
    changed = git(repo, "diff", "--name-only", "main", "feature").splitlines()
    if item["id"] == "one-large-pr":
        changed = [
            p for p in changed if p.split("/")[0] in {e["path"].split("/")[0] for e in item["expected"]}
        ]
    out = []
    for e in item["expected"]:
        line = git(repo, "show", f"feature:{e['path']}").splitlines()[e["line"] - 1]
        evidence = tuple(
            git(repo, "show", f"feature:{x['path']}").splitlines()[x["line"] - 1]
            for x in e.get("evidence", ())
        )
        scope = e["path"].split("/")[0] + "/" if item["id"] == "one-large-pr" else ""
        siblings = tuple(p for p in changed if p != e["path"] and p.startswith(scope))
        out.append(
            Planted(
                item["id"], e["path"], e["line"], line, e["severity"], e["description"], siblings, evidence
            )
        )
    return out


def added_lines(repo: Path) -> int:
    total = 0
    for row in git(repo, "diff", "--numstat", "main", "feature").splitlines():
        added = row.split("\t")[0]
        total += int(added) if added.isdigit() else 0
    return total


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def run_item(item: dict[str, Any], repo: Path, budget: int, share: float, work: Path) -> Run:
    import litellm

    dataset = work / f"{item['id']}-{budget}-{share}.json"
    entry = dict(item)
    entry.pop("diff", None)
    entry["repo"] = str(repo)
    dataset.write_text(json.dumps([entry]))
    config = work / f"config-{share}.yml"
    config.write_text(f"context_share: {share}\nmax_output_tokens: 1000000\n")
    scores = work / "scores.json"
    oracle = Oracle(planted(item, repo), needs_evidence=True)
    prompts: list[str] = []

    def handler(body: dict[str, Any]) -> Reply:
        prompts.append(last_user_text(body))
        return oracle(body)

    with FakeModelServer(handler=handler) as server, quiet():
        code = main(
            [
                "eval",
                "--max-cost-usd",
                "100",
                str(dataset),
                "--model",
                MODEL,
                "--api-base",
                server.api_base,
                "--config",
                str(config),
                "--max-input-tokens",
                str(budget),
                "--max-calls",
                "100",
                "--json",
                str(scores),
            ]
        )
    if code != 0:
        raise SystemExit(f"imreview eval exited {code} on {item['id']}")
    card = json.loads(scores.read_text())
    shown: set[tuple[str, int]] = set()
    added: set[tuple[str, int]] = set()
    context_tokens = input_tokens = 0
    for prompt in prompts:
        if "<<<UNTRUSTED" not in prompt or " diff\n" not in prompt:
            continue
        lines, plus, context = shown_lines(prompt)
        shown |= lines
        added |= plus
        input_tokens += int(litellm.token_counter(model="gpt-4o-mini", text=prompt))
        if context:
            context_tokens += int(litellm.token_counter(model="gpt-4o-mini", text=context))
    references = {(e["path"], e["line"]) for e in item["expected"]}
    evidence = {(x["path"], x["line"]) for e in item["expected"] for x in e.get("evidence", ())}
    return Run(
        references=len(references | evidence),
        references_shown=len((references | evidence) & shown),
        evidence=len(evidence),
        evidence_shown=len(evidence & shown),
        added=added_lines(repo),
        added_shown=len(added),
        input_tokens=input_tokens,
        context_tokens=context_tokens,
        calls=len(prompts),
        true_positives=card["true_positives"],
        false_positives=card["false_positives"],
        false_negatives=card["false_negatives"],
    )


def combined(dataset: list[dict[str, Any]], built: Path, out: Path) -> tuple[dict[str, Any], Path]:
    """One repository holding every item under `<id>/`, plus the `medium` PR shape as other work."""
    repo = out / "combined"
    repo.mkdir()
    build_dataset._git(repo, "init", "-q", "-b", "main")
    base: dict[str, str] = {}
    head: dict[str, str] = {}
    for case in build_dataset.CASES:
        base |= {f"{case.id}/{p}": t for p, t in case.base.items()}
        head |= {f"{case.id}/{p}": t for p, t in case.head.items()}
    for path, (old, new) in pr_shapes.medium().items():
        if old is not None:
            base[path] = old
        head[path] = new
    build_dataset._write(repo, base)
    build_dataset._git(repo, "add", "-A")
    build_dataset._git(repo, "commit", "-q", "--no-gpg-sign", "-m", "base")
    build_dataset._git(repo, "checkout", "-q", "-b", "feature")
    build_dataset._write(repo, head)
    build_dataset._git(repo, "add", "-A")
    build_dataset._git(repo, "commit", "-q", "--no-gpg-sign", "-m", "Everything at once")
    expected = []
    for item in dataset:
        for e in item["expected"]:
            moved = {**e, "path": f"{item['id']}/{e['path']}"}
            if "evidence" in e:
                moved["evidence"] = [{**x, "path": f"{item['id']}/{x['path']}"} for x in e["evidence"]]
            expected.append(moved)
    item = {"id": "one-large-pr", "base": "main", "head": "feature", "expected": expected, "rejected": []}
    return item, repo


def median_run(runs: list[Run]) -> dict[str, Any]:
    return {name: statistics.median(getattr(r, name) for r in runs) for name in Run.__dataclass_fields__}


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "—"


def oracle_scores(tp: float, fp: float, fn: float) -> str:
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    return " / ".join("—" if v is None else f"{v:.2f}" for v in (precision, recall, f1))


def share(m: dict[str, Any], part: str, whole: str) -> str:
    return f"{m[part]:.0f}/{m[whole]:.0f} ({pct(m[part], m[whole])})"


def table(rows: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    out = [
        "| Scenario | Budget | Context | Reference lines in prompt | Evidence lines in prompt "
        "| Added lines in prompt | Context tokens / input | Calls | Oracle P / R / F1 |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for scenario, budget, m in rows:
        scores = oracle_scores(m["true_positives"], m["false_positives"], m["false_negatives"])
        out.append(
            f"| {scenario} | {budget} | {m['label']} | {share(m, 'references_shown', 'references')} "
            f"| {share(m, 'evidence_shown', 'evidence')} | {share(m, 'added_shown', 'added')} "
            f"| {pct(m['context_tokens'], m['input_tokens'])} | {m['calls']:.0f} | {scores} |"
        )
    return out


def summed(runs: list[Run]) -> Run:
    """The shipped set as one total (the eval's micro-average)."""
    return Run(**{name: sum(getattr(r, name) for r in runs) for name in Run.__dataclass_fields__})


def main_bench(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "CONTEXT.md")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="imreview-context-") as tmp:
        work = Path(tmp)
        built = build_dataset.build(work / "set")
        dataset = json.loads(built.read_text())
        repos = {item["id"]: work / "set" / "repos" / item["id"] for item in dataset}
        big_item, big_repo = combined(dataset, built, work)
        for label, budget in BUDGETS:
            for context_label, share in SHARES:
                shipped = [
                    summed([run_item(item, repos[item["id"]], budget, share, work) for item in dataset])
                    for _ in range(args.runs)
                ]
                large = [run_item(big_item, big_repo, budget, share, work) for _ in range(args.runs)]
                for scenario, runs in (("shipped set (9 items)", shipped), ("one large PR", large)):
                    m = median_run(runs)
                    m["label"] = context_label
                    rows.append((scenario, label, m))
                    print(scenario, label, context_label, m, flush=True)
    rows.sort(key=lambda r: (not r[0].startswith("shipped"), [b for b, _ in BUDGETS].index(r[1])))
    lines = [
        "# Context recall (issue 8)",
        "",
        f"Made by `python benchmarks/bench_context.py` (medians of {args.runs} runs; the counts are",
        "deterministic, so every run gave the same numbers). Budget = `--max-input-tokens` per item",
        "(per PR); tokens counted as gpt-4o-mini; model = the loopback oracle with `needs_evidence`.",
        "",
        "- **Reference lines**: each labelled defect's line plus its `evidence` lines outside the diff,",
        "  present (numbered) in some review prompt. **Evidence lines**: those outside the diff only.",
        "- **Added lines**: added lines of the diff present in some review prompt (diff coverage).",
        "- **Context tokens / input**: the context blocks' share of the review prompts' tokens.",
        "- **Calls**: every model request (review and verification).",
        "- **Oracle P / R / F1**: `imreview eval`'s scores for an oracle that reports a defect only when",
        "  its line and its evidence are in the prompt.",
        "",
        *table(rows),
        "",
        "Shipped set: each item is small, so no budget binds; context adds the 3 evidence lines at 3 %",
        "of the input tokens. One large PR (every item under `<id>/` plus the `medium` PR shape): at 8k",
        "the budget holds about 70 % of the added lines and the riskier other files (auth, billing, CI)",
        "come first, so most labelled hunks are not sent either way; context (1 % of the tokens) costs",
        "8 added lines (2 % of them) and brings the one evidence line whose hunk was sent, doubling the",
        "oracle's recall. At 16k and 32k everything fits: context adds the 3 evidence lines at 4 %.",
        "",
    ]
    args.output.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main_bench(sys.argv[1:]))
