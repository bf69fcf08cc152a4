"""Every answer style of the model-answer zoo (benchmarks/answer_zoo.py), through the real CLI path
in-process against the loopback model on a planted PR: what the model said reaches the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.answer_zoo import ISSUE_ROWS, PLANTED, STYLES, Style, planted_repo, review, run_style

NO_QUOTE = {"issues shape, lines off, repeated"}
"""Lines off and no quote: kept, but a drifted line can only be moved back by a quote."""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted PR, built once: every run reads it and writes only its own report."""
    return planted_repo(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "IMREVIEW_MODEL", "IMREVIEW_API_BASE", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def test_the_zoo_has_thirty_sourced_styles_and_the_issue_rows() -> None:
    names = [s.name for s in STYLES]
    assert len(set(names)) == len(names) >= 30
    assert all(s.source for s in STYLES)
    assert set(ISSUE_ROWS) <= set(names)


@pytest.mark.parametrize("style", STYLES, ids=[s.name for s in STYLES])
def test_every_planted_defect_the_answer_named_reaches_the_report(
    style: Style, tmp_path: Path, repo: Path
) -> None:
    result = run_style(style, tmp_path, repo)
    assert result.kept == len(PLANTED), result
    assert result.fabricated == 0, result
    if style.name not in NO_QUOTE:
        assert result.exact_line == len(PLANTED), result
    assert result.verdict == "findings" and result.truncated_gaps == 0, result
    assert result.review_calls <= (2 if style.rest is not None else 1) * result.units, result


def test_a_cut_answer_without_budget_for_the_rest_keeps_what_it_said_and_says_what_is_missing(
    tmp_path: Path, repo: Path
) -> None:
    (cut,) = [s for s in STYLES if s.name == "cut after the third finding"]
    report = review(cut, tmp_path, repo, "--max-calls", "1")
    assert sorted((f["path"], f["line"]) for f in report["findings"]) == sorted(
        (p.path, p.line) for p in PLANTED[:3]
    )
    assert report["budget"]["used"]["calls"] == 1, "no continuation past the budget"
    (gap,) = [g for g in report["gaps"] if g["why"] == "truncated"]
    assert "3 findings kept, 1 cut off" in gap["what"] and "app/db.py" in gap["what"]
    assert report["answers"]["truncated"] == 1 and report["answers"]["findings_cut"] == 1
    assert report["verdict"] == "findings"


def test_what_was_normalised_is_counted_in_the_report(tmp_path: Path, repo: Path) -> None:
    (shape,) = [s for s in STYLES if s.name == "issues shape with code, lines off, repeated"]
    report = review(shape, tmp_path, repo)
    counted = report["answers"]["normalised"]
    assert counted["list_name"] == 1 and counted["priority_word"] == 10 and counted["field_name"] >= 10
    assert len(report["findings"]) == len(PLANTED), "each finding repeated once is kept once"


def test_a_finding_without_trigger_or_fix_says_so_in_the_summary(tmp_path: Path, repo: Path) -> None:
    (dropped,) = [s for s in STYLES if s.name == "issues wrapper, other field names"]
    summary = tmp_path / "summary.md"
    report = review(dropped, tmp_path, repo, "--summary", str(summary))
    assert len(report["findings"]) == len(PLANTED)
    text = summary.read_text(encoding="utf-8")
    assert text.count("**Trigger:** _(not stated by the model)_") == len(PLANTED)
    assert text.count("**Fix:** _(not stated by the model)_") == len(PLANTED)
