"""What the deterministic rules report on real repositories' history (issue 20 item 2).

For each repository (a local clone), `imreview review` runs without a model over its history:
base = its root commit, head = the given ref, so every line added since the first commit and still
in the tree is checked by the rules. `--code` chooses which checkout of imreview runs (PYTHONPATH),
so the same command measures before and after a change. Prints one row per repository (findings
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


def review(code: Path, repo: Path, ref: str) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "PYTHONPATH": str(code)}
        base = root_commit(repo, ref)
        command = [sys.executable, "-m", "reviewer", "review", str(repo), "--base", base, "--head", ref]
        command += ["--json", str(report), "--summary", os.devnull, "--quiet"]
        subprocess.run(command, env=env, check=False, capture_output=True, timeout=1800)
        data = json.loads(report.read_text(encoding="utf-8"))
    return [f for f in data["findings"] if str(f.get("source", "")).startswith("rule:")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", required=True, type=Path)
    parser.add_argument("repos", nargs="+")
    args = parser.parse_args()
    for spec in args.repos:
        path, _, ref = spec.partition("@")
        findings = review(args.code, Path(path), ref or "HEAD")
        counts = Counter(f"{f['source']} {f['priority']}" for f in findings)
        print(f"## {Path(path).name}: {len(findings)} rule findings: {dict(sorted(counts.items()))}")
        for f in findings:
            print(f"  {f['path']}:{f['line']} {f['source']} {f['priority']} {f['title']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
