"""Subprocess on purpose: the few end-to-end runs that start a real process.

Every other end-to-end test drives `imreview` and the Action's entrypoint in-process
(tests/inprocess.py). These check that nothing is lost that way: the console command and
`entrypoint.py` as real processes give the same exit codes and the same text as the in-process runs
(after `normalise_volatile`), and the Action's full round trip works in a fresh interpreter. Other
tests about the process itself: test_startup.py (what a bare start imports),
test_model_startup.py (litellm's import outside the seconds budget), test_packaging.py, and the
import probes in test_llm.py and test_cli_review.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Repo, cli_env, run_cli, run_cli_subprocess
from tests.fakes.github_server import FakeGitHub
from tests.fakes.model_server import FakeModelServer
from tests.test_action_e2e import (
    OUTSIDE,
    Runner,
    add_pull,
    annotations,
    event_payload,
    finding,
    foreign_commands,
    only_comment,
    reviewer_model,
    with_model,
)
from tests.test_golden import normalise_volatile


def test_imreview_review_as_a_subprocess_says_what_the_in_process_run_says(
    repo: Repo, tmp_path: Path
) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "debug")
    args = ["review", str(repo.path), "--base", "main", "--fail-on", "P3"]
    env = cli_env(tmp_path)
    real = run_cli_subprocess(args, cwd=tmp_path, env=env)
    inside = run_cli(args, cwd=tmp_path, env=env)
    assert real.returncode == 1, real.stderr
    assert "Debugger breakpoint left in" in real.stdout
    assert inside.returncode == real.returncode
    assert normalise_volatile(inside.stdout, tmp=tmp_path, ports={}) == normalise_volatile(
        real.stdout, tmp=tmp_path, ports={}
    )


def test_entrypoint_as_a_subprocess_reviews_comments_and_annotates(gh: FakeGitHub, tmp_path: Path) -> None:
    add_pull(gh)
    with FakeModelServer() as model:
        model.handler = reviewer_model({"app.py": [finding(), OUTSIDE]})
        runner = Runner(tmp_path, gh.url, subprocess=True)
        run = runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model))
    assert run.code == 0, run.stderr
    assert "Division by zero when b is 0" in run.summary and "Imagined helper misuse" in run.summary
    assert (run.outputs["verdict"], run.outputs["findings"]) == ("findings", "2")
    assert run.outputs["comment-url"] == only_comment(gh)["html_url"]
    (note,) = annotations(run.stdout)
    assert note.startswith("::warning file=app.py,line=2,")
    assert foreign_commands(run.stdout) == []
    assert gh.violations == []
