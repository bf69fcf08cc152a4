"""The plan + fan-out schedule of examples/fan-out.yml, emulated job by job (runner emulation: each
step is the entrypoint in a subprocess with the job's inputs and env, secrets resolved as the
runner would). The plan job must decide skips exactly as the review jobs would (issue 21, item 2):
a second scheduled run starts no job for a PR already reviewed at its head, nor for a PR whose
max-pr-cost-usd is spent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from reviewer.state import StickyState, sign_sticky, state_key
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer
from tests.test_action_e2e import REPO, Runner
from tests.test_scan import (
    BASE,
    SCHEDULE,
    add_open_prs,
    patch_for,
    quiet_model,
    reviewed_numbers,
    sha,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fan-out.yml"
SECRETS = {
    "OPENAI_API_KEY": "sk-fan-out-test-0123456789",
    "IMREVIEW_STATE_KEY": "fan-out-state-secret-0123456789abcdef",
}
_EXPRESSION = re.compile(r"\$\{\{\s*(secrets|matrix)\.([A-Za-z_]+)\s*\}\}")


def job_step(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(inputs, env) of the job's imreview step as the example writes them."""
    workflow: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    step = next(s for s in workflow["jobs"][name]["steps"] if "imreview-action" in str(s.get("uses")))
    return dict(step.get("with") or {}), dict(step.get("env") or {})


def resolve(values: dict[str, str], matrix: dict[str, Any]) -> dict[str, str]:
    def one(match: re.Match[str]) -> str:
        scope, key = match.groups()
        return str(SECRETS.get(key, "") if scope == "secrets" else matrix[key])

    return {name: _EXPRESSION.sub(one, str(value)) for name, value in values.items()}


def run_job(runner: Runner, name: str, model: FakeModelServer, matrix: dict[str, Any] | None = None) -> Any:
    inputs, env = job_step(name)
    runner.extra_env = {"IMREVIEW_STATE_KEY": "", **resolve(env, matrix or {})}  # only what the job holds
    run = runner.run("schedule", SCHEDULE, **resolve(inputs, matrix or {}), **{"api-base": model.api_base})
    assert run.code == 0, run.stderr
    return run


def scheduled_run(runner: Runner, model: FakeModelServer) -> list[int]:
    """The plan job, then one review job per matrix entry; the PRs that got a job."""
    plan = run_job(runner, "plan", model)
    entries = json.loads(plan.outputs["matrix"])["include"]
    for entry in entries:
        run_job(runner, "review", model, entry)
    return [int(e["pr"]) for e in entries]


def test_a_second_scheduled_run_starts_no_job_for_prs_reviewed_at_their_head(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    add_open_prs(gh, 3)
    gh.add_pull(REPO, 4, head_sha=sha(4), base_sha=BASE, files=[diff_entry("m4.py", patch_for(4))])
    spent = StickyState(head=sha(4, "f"), base=BASE, config="old", verdict="clean", total_cost_usd=5.0)
    key = state_key({"IMREVIEW_STATE_KEY": SECRETS["IMREVIEW_STATE_KEY"]})
    gh.add_comment(REPO, 4, sign_sticky(spent.body("## imreview"), repo=REPO, number=4, key=key))
    model.handler = quiet_model
    runner = Runner(tmp_path, gh.url)

    assert scheduled_run(runner, model) == [1, 2, 3], "PR 4's max-pr-cost-usd (5.00) is spent"
    assert reviewed_numbers(gh) == {1, 2, 3} and len(model.requests) == 3

    assert scheduled_run(runner, model) == [], "every PR was reviewed at its head: no job"
    assert len(model.requests) == 3

    gh.set_head(REPO, 2, sha(22), files=[diff_entry("m2.py", patch_for(22))])
    assert scheduled_run(runner, model) == [2], "a push brings its PR back"
    assert gh.violations == []
