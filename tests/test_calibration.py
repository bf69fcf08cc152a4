"""Issue 18 item 3: a model litellm cannot count starts from the stand-in estimate; the provider's
`usage.prompt_tokens` of the first answer calibrates every later count (in both directions) and
what is left is re-planned with it. The loopback server reports 15 % more, or 15 % fewer, prompt
tokens than our local count; the CLI runs in-process against real git."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from reviewer.budget import held_tokens
from tests.fakes import pr_shapes
from tests.fakes.model_server import FakeModelServer
from tests.test_planner import UNKNOWN, all_reviewed, answering, build, cl100k_count, review, served

WINDOW = 8192


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "IMREVIEW_MODEL", "IMREVIEW_API_BASE", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def counting(factor: float) -> Any:
    """The provider's count: ours (litellm's stand-in for an unknown model) times `factor`."""
    return lambda body: math.ceil(cl100k_count(body) * factor)


def run(tmp_path: Path, factor: float, *args: str) -> tuple[dict[str, Any], FakeModelServer]:
    repo = build(tmp_path, pr_shapes.large(), name=f"repo-{len(list(tmp_path.iterdir()))}")
    with FakeModelServer(count_prompt=counting(factor), models_max_len=WINDOW) as s:
        s.handler = answering(s)
        report = review(repo, s, tmp_path, *args, model=UNKNOWN)
    return report, s


@pytest.mark.parametrize("factor", [0.85, 1.15])
def test_the_first_answer_calibrates_every_later_count(tmp_path: Path, factor: float) -> None:
    report, server = run(tmp_path, factor, "--max-input-tokens", "1000000")
    calls = report["budget"]["calls"]
    assert len(calls) == len(server.requests) >= 3
    first, *later = calls
    assert first["calibrated_input_tokens"] == first["estimated_input_tokens"], "nothing known yet"
    assert first["reserved_input_tokens"] == held_tokens(first["estimated_input_tokens"], 110)
    for call in calls:
        assert call["input_tokens"] == math.ceil(call["estimated_input_tokens"] * factor)
    for call in later:
        ratio = call["calibrated_input_tokens"] / call["estimated_input_tokens"]
        assert abs(ratio - factor) < 0.01, (ratio, factor)
        assert call["reserved_input_tokens"] == held_tokens(call["calibrated_input_tokens"], 103)
        assert call["input_tokens"] <= call["reserved_input_tokens"], "the calibrated hold covers usage"
    assert all_reviewed(report)


def test_a_pr_that_fits_by_the_calibrated_count_is_reviewed_whole(tmp_path: Path) -> None:
    """The server counts 15 % fewer tokens than we do. Before the first answer the plan holds our
    count plus the 10 % stand-in margin and cannot take the whole PR in the budget; once the first
    answer calibrates the count, the rest is re-planned and fits."""
    need_report, need_server = run(tmp_path, 0.85, "--max-input-tokens", "1000000")
    need = served(need_server)
    limit = int(need * 1.08)
    estimated = sum(c["estimated_input_tokens"] for c in need_report["budget"]["calls"])
    assert estimated * 1.10 > limit, "uncalibrated, the whole review does not fit this budget"
    report, server = run(tmp_path, 0.85, "--max-input-tokens", str(limit))
    assert all_reviewed(report), report["coverage"]
    assert report["budget"]["used"]["input_tokens"] == served(server) <= limit
    assert report["budget"]["exhausted"] is False and report["budget"]["overrun"] == []


def test_a_server_counting_more_than_we_do_never_takes_the_budget_over(tmp_path: Path) -> None:
    """The server counts 15 % more than we do, beyond the 10 % stand-in margin: after the first
    answer every hold is calibrated, so the budget is filled and never exceeded."""
    _, need_server = run(tmp_path, 1.15, "--max-input-tokens", "1000000")
    limit = int(served(need_server) * 0.6)
    report, server = run(tmp_path, 1.15, "--max-input-tokens", str(limit))
    used = report["budget"]["used"]["input_tokens"]
    assert used == served(server) <= limit and report["budget"]["overrun"] == []
    assert used >= 0.8 * limit, (used, limit)
    assert report["budget"]["exhausted"] is True


def test_an_implausible_prompt_count_calibrates_nothing(tmp_path: Path) -> None:
    """A server that reports a tenth of our count is broken or lying, not a different tokenizer:
    every call keeps the stand-in estimate and its 10 % margin."""
    report, _ = run(tmp_path, 0.1, "--max-input-tokens", "1000000")
    for call in report["budget"]["calls"]:
        assert call["calibrated_input_tokens"] == call["estimated_input_tokens"]
        assert call["reserved_input_tokens"] == held_tokens(call["estimated_input_tokens"], 110)
