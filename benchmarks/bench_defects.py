"""Real defects from public history: which of their lines reach the model, PR-Agent vs imreview.

The dataset (benchmarks/defects/dataset.json, mined by `benchmarks/defects_mine.py` with the SZZ
method from `fetch` snapshots of 12 public repositories in 6 languages) lists commits that
introduced a defect later fixed, and the lines the fix changed, blamed back to that commit (new-side
line numbers). For each commit the benchmark builds a real git repository (a shared clone of the
snapshot, `main` at the parent, `feature` at the commit) and runs:

- PR-Agent 0.49's `/review` (its own venv: `--pr-agent-python`; one process runs every review,
  benchmarks/pr_agent_driver.py, as importing it takes longer than a review) through its local
  git provider with its window set to 8k, 16k, 32k and 128k ("unlimited": gpt-4o-mini's window), against the
  loopback model server counting prompts as OpenAI counts gpt-4o-mini (bench_pr_agent.py);
- imreview's CLI in-process with PR-Agent's own spend as `--max-input-tokens` (no cap for
  "unlimited"), once per packing order asked for (`--orders`, benchmarks/pack_orders.py).

Defect-line recall = labelled lines that appeared numbered on the new side in some prompt. Every
run's result is cached under benchmarks/defects/cache/ (PR-Agent's by commit and window; imreview's
by commit, budget, order and a hash of the measured checkout's reviewer/ and templates/), so a rerun
only measures what changed. An order whose name ends in `+noctx` runs with `context_share: 0`; once
a commit's whole diff fits a budget without context, every order's result there is that whole run.
The i18n YAML is parsed once per process (`cache_i18n`). `--repo-root` measures another imreview
checkout (default: this one).

Usage: `python benchmarks/bench_defects.py --pr-agent-python V/bin/python [--orders a,b]
[--repo-root PATH] [--mirrors /work/.mirror] [--mine]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATASET = HERE / "defects" / "dataset.json"
CACHE = HERE / "defects" / "cache"
WINDOWS = (("8k", 8192), ("16k", 16384), ("32k", 32000), ("unlimited", 128000))
SOURCES = (
    ("pallets/flask", "python", (".py",), "BSD-3-Clause"),
    ("psf/requests", "python", (".py",), "Apache-2.0"),
    ("gin-gonic/gin", "go", (".go",), "MIT"),
    ("spf13/cobra", "go", (".go",), "Apache-2.0"),
    ("axios/axios", "javascript", (".js", ".ts", ".mjs", ".cjs"), "MIT"),
    ("expressjs/express", "javascript", (".js",), "MIT"),
    ("google/gson", "java", (".java",), "Apache-2.0"),
    ("jhy/jsoup", "java", (".java",), "MIT"),
    ("BurntSushi/ripgrep", "rust", (".rs",), "MIT OR Unlicense"),
    ("serde-rs/serde", "rust", (".rs",), "MIT OR Apache-2.0"),
    ("jqlang/jq", "c", (".c", ".h"), "MIT"),
    ("libuv/libuv", "c", (".c", ".h"), "MIT"),
)
PER_REPO = 6


@dataclass(frozen=True)
class Commit:
    repo: str
    language: str
    commit: str
    parent: str
    files: int
    labels: tuple[tuple[str, int], ...]


def load() -> list[Commit]:
    data = json.loads(DATASET.read_text(encoding="utf-8"))
    return [
        Commit(
            c["repo"],
            c["language"],
            c["commit"],
            c["parent"],
            c["files"],
            tuple((p, n) for p, n in c["labels"]),
        )
        for c in data["commits"]
    ]


def mine(mirrors: Path) -> None:
    import defects_mine as dm

    sources = [
        dm.Source(repo, lang, mirrors / repo.replace("/", "+") / "repo", ext, licence)
        for repo, lang, ext, licence in SOURCES
    ]
    found = []
    for src in sources:
        got = dm.mine(src, PER_REPO)
        print(f"{src.repo}: {len(got)} introducing commits", flush=True)
        found += got
    dm.write(found, sources, DATASET)


def checkout_hash(root: Path) -> str:
    h = hashlib.sha256()
    for sub in ("reviewer", "templates"):
        for f in sorted((root / sub).rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                # an older checkout's default order is not hashed: `resolved` names it in each run's key
                data = re.sub(rb"\nPACK_ORDER = [^\n]*", b"", f.read_bytes())
                h.update(str(f.relative_to(root)).encode() + b"\0" + data)
    return h.hexdigest()[:16]


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def build(root: Path, mirrors: Path, c: Commit) -> Path:
    repo = root / c.commit[:12]
    if not repo.exists():
        source = mirrors / c.repo.replace("/", "+") / "repo"
        git("clone", "-q", "--shared", "--no-checkout", str(source), str(repo))
        git("-C", str(repo), "checkout", "-q", "-B", "main", c.parent)
        git("-C", str(repo), "branch", "-f", "feature", c.commit)
        git("-C", str(repo), "checkout", "-q", "-f", "feature")
    return repo


class Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)


def resolved(order: str) -> str:
    """`order` with `default` named as the order it is in the measured checkout."""
    import reviewer.plan

    name, _, flag = order.partition("+")
    if name == "default":
        # older checkouts: PACK_ORDER names their default, or there is none (`risk_per_token`)
        ours = "lines_per_token" if hasattr(reviewer.plan, "pack_keys") else "risk_per_token"
        name = f"default={getattr(reviewer.plan, 'PACK_ORDER', ours)}"
    else:  # an experimental order is defined here, outside the checkout's hash: its cached runs follow it
        orders = (Path(__file__).resolve().parent / "pack_orders.py").read_bytes()
        name = f"{name}@{hashlib.sha256(orders).hexdigest()[:8]}"
    return f"{name}+{flag}" if flag else name


def cache_i18n() -> None:
    """Parse each i18n YAML file once per benchmark process, not once per review (two thirds of a
    review's time without repository context); what a review renders is unchanged."""
    import functools

    import reviewer.render as render

    load = functools.cache(render._load_i18n)

    def cached(path: Path) -> tuple[dict[str, str | dict[str, str]], str]:
        messages, text = load(path)
        return dict(messages), text

    render._load_i18n = cached


def hits(shown: dict[str, set[int]], labels: tuple[tuple[str, int], ...]) -> list[int]:
    return [i for i, (p, n) in enumerate(labels) if n in shown.get(p, set())]


def pr_agent_pass(
    python: str, jobs: list[tuple[Commit, int]], work: Path, mirrors: Path, cache: Cache, tik: str
) -> None:
    """Every (commit, window) job through one PR-Agent process (benchmarks/pr_agent_driver.py)."""
    import bench_planner as bp
    import bench_pr_agent as bpa

    cache_i18n()

    from tests.fakes.model_server import FakeModelServer, text

    with FakeModelServer(count_prompt=bp.openai_count) as server:
        server.handler = lambda body: text(
            bpa.PR_AGENT_ANSWER, prompt_tokens=server.count_prompt(body), completion_tokens=40
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(work),
            "CONFIG.GIT_PROVIDER": "local",
            "CONFIG.MODEL": "gpt-4o-mini",
            "CONFIG.FALLBACK_MODELS": "[]",
            "CONFIG.PUBLISH_OUTPUT": "false",
            "OPENAI.KEY": "sk-bench",
            "OPENAI.API_BASE": server.api_base,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "TIKTOKEN_CACHE_DIR": tik,
        }
        driver = subprocess.Popen(
            ["nice", python, str(HERE / "pr_agent_driver.py")],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert driver.stdin is not None and driver.stdout is not None
        try:
            for n, (c, window) in enumerate(jobs):
                repo = build(work, mirrors, c)
                git("-C", str(repo), "checkout", "-q", "-f", "feature")
                before = len(server.requests)
                driver.stdin.write(json.dumps({"repo": str(repo), "window": window}) + "\n")
                driver.stdin.flush()
                error = ""
                for line in driver.stdout:
                    if line.startswith("@@ERROR@@"):
                        error = line
                    if line.startswith("@@DONE@@"):
                        break
                (repo / "review.md").unlink(missing_ok=True)
                sent = server.requests[before:]
                if not sent:
                    raise SystemExit(f"PR-Agent sent nothing for {c.commit} at {window}: {error}")
                shown = bpa.pr_agent_shown(sent, bpa.PR_AGENT_NEW_SIDE)
                cache.put(
                    f"{c.commit}:{window}",
                    {
                        "tokens": sum(server.count_prompt(b) for b in sent),
                        "calls": len(sent),
                        "hits": hits(shown, c.labels),
                    },
                )
                print(f"PR-Agent [{n + 1}/{len(jobs)}] {c.repo} {c.commit[:10]} {window}", flush=True)
        finally:
            driver.stdin.close()
            driver.wait(timeout=600)


_OWN_PACK_KEYS: dict[str, Any] = {}


def imreview(repo: Path, limit: int | None, order: str, work: Path, c: Commit) -> dict[str, Any]:
    """imreview's CLI at `limit`; an order ending in `+noctx` runs with `context_share: 0`."""
    import bench_planner as bp

    import reviewer.plan
    from reviewer.cli import main
    from tests.fakes.model_server import FakeModelServer, text

    order, _, flag = order.partition("+")
    if hasattr(reviewer.plan, "pack_keys"):
        # the planner's own order, kept before any other replaces it: `default` is measured with it
        own = _OWN_PACK_KEYS.setdefault("own", reviewer.plan.pack_keys)
        if order == "default":
            reviewer.plan.pack_keys = own
        else:
            import pack_orders  # only this checkout's planner has what the orders are built from

            reviewer.plan.pack_keys = pack_orders.pack_keys(order)
    elif order != "default":
        if hasattr(reviewer.plan, "PACK_ORDER"):  # an older checkout
            reviewer.plan.PACK_ORDER = order
        else:
            raise SystemExit(f"this checkout has no reviewer.plan.pack_keys: cannot measure order {order!r}")
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
        args += ["--max-cost-usd", "100", "--max-output-tokens", "100000000", "--max-calls", "1000"]
        args += ["--max-input-tokens", str(limit if limit is not None else 100_000_000)]
        if flag == "noctx":
            (work / "noctx.yml").write_text("context_share: 0\n")
            args += ["--config", str(work / "noctx.yml")]
        with bp.quiet():
            code = main(args)
        if code != 0:
            raise SystemExit(f"imreview exited {code} on {c.commit} at {limit}")
        used = sum(server.count_prompt(b) for b in server.requests if b not in server.refused)
        if limit is not None and used > limit:
            raise SystemExit(f"budget exceeded on {c.commit}: {used} > {limit}")
        return {
            "tokens": used,
            "calls": len(server.requests),
            "hits": hits(bp.new_side_shown(server), c.labels),
        }


def recall(results: list[tuple[Commit, dict[str, Any]]]) -> tuple[float, float, float]:
    """Median and mean of per-commit recall, and recall pooled over all labels."""
    per = [len(r["hits"]) / len(c.labels) for c, r in results]
    pooled = sum(len(r["hits"]) for _, r in results) / sum(len(c.labels) for c, _ in results)
    return statistics.median(per), statistics.mean(per), pooled


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def report(
    commits: list[Commit],
    theirs: dict[tuple[str, str], dict[str, Any]],
    ours: dict[tuple[str, str, str], dict[str, Any]],
    orders: list[str],
    header: list[str],
) -> str:
    out = [*header, "", "## Defect-line recall at the same token spend", ""]
    cols = " | ".join(f"imreview `{o}` median / mean / pooled" for o in orders)
    out += [f"| budget | PR-Agent median / mean / pooled | {cols} | tokens PR-Agent / imreview (sum) |"]
    out += ["|---|---|" + "---|" * len(orders) + "---|"]
    for label, _ in WINDOWS:
        t = [(c, theirs[(c.commit, label)]) for c in commits]
        cells = [" / ".join(pct(x) for x in recall(t))]
        for o in orders:
            cells.append(
                " / ".join(pct(x) for x in recall([(c, ours[(c.commit, label, o)]) for c in commits]))
            )
        mine = sum(ours[(c.commit, label, orders[0])]["tokens"] for c in commits)
        spent = f"{sum(r['tokens'] for _, r in t):,} / {mine:,}"
        out.append(f"| {label} | {' | '.join(cells)} | {spent} |")
    out += ["", "## Per language (mean recall per commit)", ""]
    langs = sorted({c.language for c in commits})
    out += [
        "| language | commits | labels | budget | PR-Agent | " + " | ".join(f"`{o}`" for o in orders) + " |"
    ]
    out += ["|---|---|---|---|---|" + "---|" * len(orders)]
    for lang in langs:
        cs = [c for c in commits if c.language == lang]
        for label, _ in WINDOWS:
            cells = [pct(recall([(c, theirs[(c.commit, label)]) for c in cs])[1])]
            cells += [pct(recall([(c, ours[(c.commit, label, o)]) for c in cs])[1]) for o in orders]
            n = sum(len(c.labels) for c in cs)
            out.append(f"| {lang} | {len(cs)} | {n} | {label} | {' | '.join(cells)} |")
    return "\n".join(out) + "\n"


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pr-agent-python", help="python of a venv with pr-agent==0.49.0 installed")
    parser.add_argument(
        "--repo-root", type=Path, default=HERE.parent, help="the imreview checkout to measure"
    )
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="where the snapshots are")
    parser.add_argument("--orders", default="default", help="comma-separated pack_orders.PACK_ORDERS")
    parser.add_argument("--limit", type=int, default=0, help="only the first N commits (0: all)")
    parser.add_argument("--only-pr-agent", action="store_true", help="fill PR-Agent's cache and stop")
    parser.add_argument(
        "--skip-missing",
        action="store_true",
        help="measure imreview only where PR-Agent's results are cached",
    )
    parser.add_argument("--mine", action="store_true", help="mine the dataset again (SZZ) and stop")
    parser.add_argument("--output", type=Path, default=None, help="write the tables here (markdown)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.mine:
        mine(args.mirrors)
        return
    root = args.repo_root.resolve()
    sys.path[:0] = [str(root / "benchmarks"), str(root)]
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import bench_pr_agent as bpa

    commits = load()[: args.limit or None]
    orders = args.orders.split(",")
    theirs_cache = Cache(CACHE / "pr_agent.json")
    ours_cache = Cache(CACHE / f"imreview-{checkout_hash(root)}.json")
    tik = bpa.tiktoken_cache(args.pr_agent_python) if args.pr_agent_python else ""
    started = time.monotonic()
    theirs: dict[tuple[str, str], dict[str, Any]] = {}
    ours: dict[tuple[str, str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="imreview-defects-") as tmp:
        work = Path(tmp)
        jobs = [(c, w) for c in commits for _, w in WINDOWS if theirs_cache.get(f"{c.commit}:{w}") is None]
        if args.skip_missing:
            commits = [c for c in commits if all(c.commit != j.commit for j, _ in jobs)]
            jobs = []
        if jobs:
            if not args.pr_agent_python:
                raise SystemExit(f"{len(jobs)} PR-Agent results not cached: pass --pr-agent-python")
            pr_agent_pass(args.pr_agent_python, jobs, work, args.mirrors, theirs_cache, tik)
        for c in commits:
            for label, window in WINDOWS:
                theirs[(c.commit, label)] = theirs_cache.get(f"{c.commit}:{window}")
        if args.only_pr_agent:
            return
        for i, c in enumerate(commits):
            whole: dict[str, dict[str, Any]] = {}
            """Per context flag: the run with no input cap (everything sent, whatever the order)."""
            for label, _ in reversed(WINDOWS):
                limit = None if label == "unlimited" else theirs[(c.commit, label)]["tokens"]
                for order in orders:
                    flag = order.partition("+")[2]
                    okey = f"{c.commit}:{label}:{limit}:{resolved(order)}"
                    fits = (
                        flag == "noctx"
                        and flag in whole
                        and (limit is None or whole[flag]["tokens"] <= limit)
                    )
                    if ours_cache.get(okey) is None and fits:
                        ours_cache.put(okey, whole[flag])  # the whole PR fits: every order sends all of it
                    if ours_cache.get(okey) is None:
                        repo = build(work, args.mirrors, c)
                        ours_cache.put(okey, imreview(repo, limit, order, work, c))
                    ours[(c.commit, label, order)] = ours_cache.get(okey)
                    if limit is None:
                        whole.setdefault(flag, ours[(c.commit, label, order)])
            print(
                f"[{i + 1}/{len(commits)}] {c.repo} {c.commit[:10]} {time.monotonic() - started:.0f}s",
                flush=True,
            )
    version = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    header = [
        f"- Measured: imreview at `{version}` (reviewer/ + templates/ hash `{checkout_hash(root)}`), "
        f"{len(commits)} commits, {sum(len(c.labels) for c in commits)} labelled lines; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    ]
    text_out = report(commits, theirs, ours, orders, header)
    print(text_out)
    if args.output:
        args.output.write_text(text_out, encoding="utf-8")


if __name__ == "__main__":
    main_bench()
