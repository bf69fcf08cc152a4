"""Issue 9, target 5: importing litellm (seconds on a 2-core runner) is not review time. The review
waits for it only when it needs the model, `max-seconds` counts from then, and the report says how
long the import took. The CLI runs as a subprocess against the loopback model server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from reviewer.schema import load_report_schema
from tests.conftest import Repo, cli_env, run_cli
from tests.fakes.model_server import FakeModelServer, text

ANSWER = json.dumps({"findings": [], "exclusions": [], "signals": []})


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def test_a_small_seconds_budget_is_not_spent_on_importing_litellm(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text(ANSWER))
    report_path, summary_path = tmp_path / "report.json", tmp_path / "summary.md"
    args = ["review", str(feature_repo.path), "--base", "main", "--model", "openai/fake-model"]
    args += ["--api-base", model.api_base, "--max-seconds", "3", "--json", str(report_path)]
    proc = run_cli([*args, "--summary", str(summary_path)], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 1, "the 3 s were there for the model call, whatever the import took"
    report = json.loads(report_path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(load_report_schema()).validate(report)
    startup = report["budget"]["startup"]
    assert (
        startup["import_seconds"] > 0
        and 0 <= startup["import_wait_seconds"] <= startup["import_seconds"] + 0.01
    )
    assert report["budget"]["used"]["calls"] == 1
    assert "Loading the model library" not in summary_path.read_text(encoding="utf-8"), "kept in report.json"


def test_without_a_model_no_import_is_reported(feature_repo: Repo, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    args = ["review", str(feature_repo.path), "--base", "main", "--json", str(report_path)]
    proc = run_cli(args, cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr
    startup = json.loads(report_path.read_text(encoding="utf-8"))["budget"]["startup"]
    assert startup == {"import_seconds": None, "import_wait_seconds": 0.0}
