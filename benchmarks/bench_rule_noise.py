"""What the deterministic rules report on real repositories' history (issue 20 item 2).

For each repository (a local clone), `imreview review` runs without a model over its history, two
ways: once over the whole tree (base = its root commit, head = the given ref: every line added
since the first commit and still there), and once per commit for the last `--commits` first-parent
commits (each against its first parent, as the pull request that made it would be reviewed; lines
added and later removed count here). A finding seen in both is counted once.
`--code` chooses which checkout of imreview runs (its directory and PYTHONPATH), so the same
command measures before and after a change. Prints one row per repository (findings
by rule and priority) and every rule finding (path:line, rule, priority, title), for a reader to
judge which are false positives.

    python benchmarks/bench_rule_noise.py --code /path/to/imreview REPO[@REF] ...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


def root_commit(repo: Path, ref: str) -> str:
    out = subprocess.run(
        ["git", "rev-list", "--max-parents=0", ref], cwd=repo, check=True, capture_output=True, text=True
    )
    return out.stdout.split()[-1]


DRIVER = """
import json, sys
from reviewer.cli import main
repo, out, pairs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
found = []
for base, head in pairs:
    main(["review", repo, "--base", base, "--head", head, "--json", out, "--summary", "/dev/null", "--quiet"])
    with open(out, encoding="utf-8") as fh:
        found += [f for f in json.load(fh)["findings"] if str(f.get("source", "")).startswith("rule:")]
print(json.dumps(found))
"""


def _git(repo: Path, *args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.split()


def review(code: Path, repo: Path, ref: str, commits: int) -> list[dict[str, object]]:
    """Every rule finding of the whole-tree review and of each commit's review, in one process of
    the chosen checkout (run from its directory, so `reviewer` is that checkout's)."""
    pairs = [(root_commit(repo, ref), ref)]
    for sha in _git(repo, "rev-list", "--first-parent", f"--max-count={commits}", ref):
        parents = _git(repo, "rev-list", "--parents", "-n", "1", sha)[1:]
        if parents:
            pairs.append((parents[0], sha))
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "PYTHONPATH": str(code)}
        command = [sys.executable, "-c", DRIVER, str(repo), str(Path(tmp) / "r.json"), json.dumps(pairs)]
        done = subprocess.run(command, cwd=code, env=env, check=True, capture_output=True, text=True)
    seen: dict[tuple[object, ...], dict[str, object]] = {}
    for f in json.loads(done.stdout.splitlines()[-1]):
        seen.setdefault((f["path"], f["source"], f["quote"], f["title"]), f)
    return list(seen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", required=True, type=Path)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("repos", nargs="+")
    args = parser.parse_args()
    for spec in args.repos:
        path, _, ref = spec.partition("@")
        findings = review(args.code.resolve(), Path(path).resolve(), ref or "HEAD", args.commits)
        counts = Counter(f"{f['source']} {f['priority']}" for f in findings)
        print(f"## {Path(path).name}: {len(findings)} rule findings: {dict(sorted(counts.items()))}")
        for f in findings:
            print(f"  {f['path']}:{f['line']} {f['source']} {f['priority']} {f['title']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
