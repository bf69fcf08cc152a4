"""Runs PR-Agent's CLI (`--pr_url main review`, local git provider) for many jobs in one process.

Run with the python of PR-Agent's own venv (3.12) by benchmarks/bench_defects.py: importing
PR-Agent and litellm takes longer than a review, so one process takes every job. Each stdin line is
a JSON job {"repo": path, "window": tokens}; the review runs with the repository as the working
directory and `config.max_model_tokens` set to the window (every other setting from the
environment, as the one-shot CLI reads them); then a line `@@DONE@@` is printed. This is
`pr_agent.cli.run`, the function `python -m pr_agent.cli` calls, and each call gets its own
settings scope (PR-Agent's `_cli_settings_scope`).
"""

from __future__ import annotations

import json
import os
import sys

from pr_agent import cli
from pr_agent.config_loader import get_settings


def main() -> None:
    for line in sys.stdin:
        job = json.loads(line)
        os.chdir(job["repo"])
        get_settings().set("CONFIG.MAX_MODEL_TOKENS", int(job["window"]))
        try:
            cli.run(["--pr_url", "main", "review"])
        except Exception as exc:  # reported to the benchmark, which stops on it
            print(f"@@ERROR@@ {exc!r}", flush=True)
        print("@@DONE@@", flush=True)


if __name__ == "__main__":
    main()
