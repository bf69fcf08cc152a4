"""Issue 9, target 5: importing litellm (seconds on a 2-core runner) is not review time. The review
waits for it only when it needs the model, `max-seconds` counts from then, and the report says how
long the import took.

The first test runs the CLI as a subprocess ON PURPOSE: it is about the import a fresh process pays
for (in-process, litellm is already imported). Its import is made to take longer than the whole
`--max-seconds` budget (a sitecustomize that delays `import litellm`), so the test means the same on
an idle and on a loaded machine, and nothing in it compares timings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema

from reviewer.schema import load_report_schema
from tests.conftest import ROOT, Repo, cli_env, run_cli, run_cli_subprocess
from tests.factories import model_answer
from tests.fakes.model_server import FakeModelServer, text

SLOW_IMPORT = """
import importlib.abc
import sys
import time


class _SlowLitellm(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "litellm":
            sys.meta_path.remove(self)
            open({marker!r}, "w").close()
            time.sleep({seconds})
        return None


sys.meta_path.insert(0, _SlowLitellm())
"""


def test_a_small_seconds_budget_is_not_spent_on_importing_litellm(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    """Subprocess on purpose: litellm's import, made to outlast the 6 s budget, does not spend it."""
    model.queue(text(model_answer()))
    site = tmp_path / "site"
    site.mkdir()
    shim = SLOW_IMPORT.format(seconds=7, marker=str(site / "slowed"))
    (site / "sitecustomize.py").write_text(shim, encoding="utf-8")
    env = cli_env(tmp_path, {"PYTHONPATH": f"{site}{os.pathsep}{ROOT}"})
    report_path, summary_path = tmp_path / "report.json", tmp_path / "summary.md"
    args = ["review", str(feature_repo.path), "--base", "main", "--model", "openai/fake-model"]
    args += ["--api-base", model.api_base, "--max-seconds", "6", "--json", str(report_path)]
    proc = run_cli_subprocess([*args, "--summary", str(summary_path)], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (site / "slowed").exists(), "the import the run paid for was the slowed one"
    report = json.loads(report_path.read_text(encoding="utf-8"))
    why = (report["gaps"], report["budget"]["used"], report["budget"]["startup"])
    assert len(model.requests) == 1, f"the 6 s were there for the model call, whatever the import took: {why}"
    jsonschema.Draft202012Validator(load_report_schema()).validate(report)
    assert report["verdict"] == "clean", "not cut short: the import's 7 s were not charged to the 6 s"
    assert report["budget"]["exhausted"] is False
    startup = report["budget"]["startup"]
    assert isinstance(startup["import_seconds"], float), "the import is reported"
    assert isinstance(startup["import_wait_seconds"], float)
    assert report["budget"]["used"]["calls"] == 1
    assert "Loading the model library" not in summary_path.read_text(encoding="utf-8"), "kept in report.json"


def test_without_a_model_no_import_is_reported(feature_repo: Repo, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    args = ["review", str(feature_repo.path), "--base", "main", "--json", str(report_path)]
    proc = run_cli(args, cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr
    startup = json.loads(report_path.read_text(encoding="utf-8"))["budget"]["startup"]
    assert startup == {"import_seconds": None, "import_wait_seconds": 0.0}
