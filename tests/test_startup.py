"""`imreview --help` answers without loading the heavy libraries (issue 9, target 1).

The time itself is measured in benchmarks/bench_perf.py; here a fresh interpreter runs each help
screen and lists which of litellm, PyGithub and their HTTP stacks ended up imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "github", "openai", "httpx", "requests", "tiktoken", "tokenizers", "jinja2", "unidiff")

PROBE = """
import json, sys
from reviewer.cli import main
code = main(sys.argv[1:])
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.stdin.read())))
print("\\n" + json.dumps({"code": code, "heavy": heavy}))
"""


@pytest.mark.parametrize(
    "argv", [["--help"], ["--version"], ["review", "--help"], ["pr", "--help"], ["action", "--help"]]
)
def test_help_imports_neither_litellm_nor_pygithub(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        input=json.dumps(HEAVY),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert result["heavy"] == [], f"`imreview {' '.join(argv)}` imported {result['heavy']}"
    assert "Usage:" in proc.stdout or "imreview" in proc.stdout
