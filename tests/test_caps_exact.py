"""Caps hold exactly: a scan's PRs share what the run has left, never its whole limit, and the
limits users set are tested AT their boundary (at, one below, one above), not only far past it
(issue 21's survivors)."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest

from reviewer.budget import EXACT_MARGIN_PERCENT, Budget, BudgetExhausted, Limits
from tests.factories import model_finding
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, text
from tests.test_action_e2e import REPO, Runner, with_model
from tests.test_scan import BASE, PRICES, SCHEDULE, patch_for, sha


def billing_model(model: FakeModelServer) -> list[str]:
    """Each review finds a P1 (so a verification call follows) and bills the whole answer it was
    allowed (`max_tokens`): a PR's spend is its reservations' answer part. Returns the phases called."""
    phases: list[str] = []

    def handler(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        allowed = body["max_tokens"]
        if "verdicts" in prompt:
            phases.append("verify")
            ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.M)
            verdicts = [{"id": i, "holds": True, "reason": "x is read from the request"} for i in ids]
            return text(json.dumps({"verdicts": verdicts}), prompt_tokens=10, completion_tokens=allowed)
        phases.append("review")
        match = re.search(r"m(\d+)\.py", prompt)
        assert match is not None
        n = match.group(1)
        claim = model_finding(
            path=f"m{n}.py", line=2, priority="P1", title="Wrong product", quote=f"y = x * {n}"
        )
        answer = {"findings": [claim], "exclusions": [], "signals": []}
        return text(json.dumps(answer), prompt_tokens=10, completion_tokens=allowed)

    model.handler = handler
    return phases


def test_each_pr_of_a_scan_spends_only_what_the_run_has_left(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    for n in (1, 2):
        gh.add_pull(REPO, n, head_sha=sha(n), base_sha=BASE, files=[diff_entry(f"m{n}.py", patch_for(n))])
        gh.add_content(REPO, sha(n), f"m{n}.py", f"x = {n}\ny = x * {n}\nz = 1\n")
    gh.add_content(REPO, "main", ".github/imreview.yml", PRICES)
    phases = billing_model(model)
    # one PR (review + verification) costs about $0.13, a review alone about $0.045: the second PR's
    # review fits what is left of $0.23, its verification would not (it fits the run's whole limit)
    run = runner.run("schedule", SCHEDULE, max_cost_usd="0.23", **with_model(model))
    assert run.code == 0, run.stderr
    assert phases == ["review", "verify", "review"], "the second PR's verification did not fit what was left"
    assert float(run.outputs["cost-usd"]) <= 0.23
    assert "verification skipped" in run.summary


# --------------------------------------------------------------------------- the context window


def test_a_served_window_larger_than_the_configured_one_is_not_believed() -> None:
    from tests.test_llm import harness

    with FakeModelServer(models_max_len=32_768) as server:
        for configured, expected in ((4096, 4096), (32_767, 32_767), (32_768, 32_768), (32_769, 32_768)):
            client = harness(server, context_window=configured).client
            assert client.context_window() == expected, configured


def test_a_window_a_server_reports_never_grows_the_one_already_learned() -> None:
    from tests.test_llm import harness

    with FakeModelServer(models_max_len=8192) as server:
        client = harness(server).client
        client.learn_window(4000)  # one server behind the endpoint refused at 4000 tokens
        client.learn_window(6000)  # another, answering a request sent before, says 6000
        assert client.context_window() == 4000
        client.learn_window(3999)
        assert client.context_window() == 3999


# --------------------------------------------------------------------------- limits at their boundary


@pytest.mark.parametrize(("asked", "allowed"), [(999, True), (1000, True), (1001, False)])
def test_max_input_tokens_at_one_below_and_one_above(asked: int, allowed: bool) -> None:
    budget = Budget(Limits(input_tokens=1000))
    reserve = functools.partial(
        budget.reserve,
        phase="review",
        max_output_tokens=10,
        cost_usd=0.0,
        margin_percent=EXACT_MARGIN_PERCENT,
    )
    if allowed:
        reserve(input_tokens=asked)
    else:
        with pytest.raises(BudgetExhausted, match=r"input_tokens \(needs 1001 with margin, 1000 left\)"):
            reserve(input_tokens=asked)


@pytest.mark.parametrize(("calls", "made"), [(2, 2), (3, 3), (4, 3)])
def test_max_calls_at_one_below_and_one_above(calls: int, made: int) -> None:
    """Three calls wanted: a limit of 2 makes 2, of 3 (exactly) makes 3, of 4 still makes 3."""
    budget = Budget(Limits(calls=calls))
    done = 0
    for _ in range(3):
        try:
            r = budget.reserve(phase="review", input_tokens=10, max_output_tokens=10, cost_usd=0.0)
        except BudgetExhausted as refused:
            assert refused.limit == "calls"
            break
        budget.settle(r, input_tokens=10, output_tokens=10, cost_usd=0.0)
        done += 1
    assert done == made


@pytest.mark.parametrize(
    ("max_findings", "shown", "more"), [(4, 4, "…and 1 more finding"), (5, 5, ""), (6, 5, "")]
)
def test_max_findings_at_one_below_and_one_above(max_findings: int, shown: int, more: str) -> None:
    """Five findings under max-findings 4, exactly 5, and 6."""
    from reviewer.render import Renderer
    from tests.test_render import build, finding

    report = build(findings=tuple(finding(n, "P2") for n in range(1, 6)))
    comment = Renderer().comment(report, max_findings=max_findings)
    assert len(re.findall(r"\*\*\[P2\] Title \d", comment)) == shown
    assert ("more finding" in comment) == bool(more)
    if more:
        assert more in comment


@pytest.mark.parametrize(("limit", "reviewed"), [(2, 2), (3, 3), (4, 3)])
def test_scan_limit_at_one_below_and_one_above(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner, limit: int, reviewed: int
) -> None:
    """Three open PRs under scan-limit 2, exactly 3, and 4."""
    from tests.test_scan import add_open_prs, quiet_model, reviewed_numbers

    add_open_prs(gh, 3)
    model.handler = quiet_model
    run = runner.run("schedule", SCHEDULE, scan_limit=str(limit), **with_model(model))
    assert run.code == 0, run.stderr
    assert len(reviewed_numbers(gh)) == reviewed
    assert ("past scan-limit" in run.summary) == (limit < 3)
