"""Progress a user sees while a review runs: log groups in Actions, unit lines on a terminal."""

from __future__ import annotations

import io
import re
from pathlib import Path

from reviewer.progress import ActionsProgress, Progress, TerminalProgress, for_environment
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import model_answer, review_args
from tests.fakes.model_server import FakeModelServer, text


def _review(repo: Repo, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    with FakeModelServer() as model:
        model.queue(*[text(model_answer())] * 4)
        return run_cli(
            review_args(repo.path, model.api_base, *args),
            cwd=tmp_path,
            env=cli_env(tmp_path, env),
        )


def test_verbose_prints_a_line_per_unit_and_stage_timings(feature_repo: Repo, tmp_path: Path) -> None:
    proc = _review(feature_repo, tmp_path, "--verbose")
    assert proc.returncode == 0, proc.stderr
    units = re.findall(r"^imreview: \[(\d+)/(\d+)\] ok (.+) \(\d+\.\d s\)$", proc.stderr, re.M)
    assert units and units[-1][0] == units[-1][1], proc.stderr
    assert "app.py" in " ".join(u[2] for u in units)
    for stage in ("deterministic checks", "plan", "model review"):
        assert re.search(rf"^imreview: {stage}[^:]*: \d+\.\d s$", proc.stderr, re.M), stage
    assert "imreview: [" not in proc.stdout, "progress never mixes into the summary"


def test_quiet_and_piped_runs_print_no_progress(feature_repo: Repo, tmp_path: Path) -> None:
    for args in (("--quiet",), ()):
        proc = _review(feature_repo, tmp_path, *args)
        assert proc.returncode == 0, proc.stderr
        assert "imreview: [" not in proc.stderr, args


def test_the_cli_keeps_stdout_for_the_summary_inside_actions(feature_repo: Repo, tmp_path: Path) -> None:
    proc = _review(feature_repo, tmp_path, "--verbose", env={"GITHUB_ACTIONS": "true"})
    assert "::group::" not in proc.stdout
    assert re.search(r"^imreview: \[1/\d+\] ok ", proc.stderr, re.M), proc.stderr


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_reporter_follows_the_environment() -> None:
    assert isinstance(for_environment({"GITHUB_ACTIONS": "true"}), ActionsProgress)
    assert isinstance(for_environment({}, err=_Tty()), TerminalProgress)
    assert type(for_environment({}, err=io.StringIO())) is Progress
    assert type(for_environment({"GITHUB_ACTIONS": "true"}, quiet=True)) is Progress


def test_file_names_cannot_inject_workflow_commands() -> None:
    out = io.StringIO()
    ActionsProgress(out).unit(1, 1, "a.py\n::error::pwned", "ok", 0.1)
    assert all(not line.startswith("::") for line in out.getvalue().splitlines())
