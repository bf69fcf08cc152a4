"""The first run, as a new user meets it: no model, a dead endpoint, a missing key, a big PR.

The rendered Markdown is checked through GitHub's own renderer (cmarkgfm), not by regex.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from reviewer.render import Renderer
from tests.conftest import Repo
from tests.factories import closed_port, review_with_outputs
from tests.fakes.model_server import FakeModelServer, status

GFM = Options.CMARK_OPT_UNSAFE


def html(markdown: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=GFM)


def test_no_model_reads_as_deterministic_checks_with_findings_first(repo: Repo, tmp_path: Path) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "debug")
    proc, _, comment = review_with_outputs(repo, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# imreview — deterministic checks only · 1 finding (1 P2)"
    assert "**Deterministic checks only** — no model is configured" in proc.stdout
    assert "To add a model review: set the `model` input" in proc.stdout
    out = proc.stdout
    assert out.index("## Findings (1)") < out.index("## Run") < out.index("## Coverage")
    assert "Debugger breakpoint left in" in out[: out.index("## Run")]
    assert comment.startswith("### imreview — deterministic checks only · 1 finding (1 P2)\n")
    assert "To add a model review" in comment
    assert "publish ready" not in comment.splitlines()[0]


def test_no_model_and_nothing_found_never_reads_as_success(feature_repo: Repo, tmp_path: Path) -> None:
    proc, report, comment = review_with_outputs(feature_repo, tmp_path)
    assert report["verdict"] == "incomplete" and report["gate"]["publish_ready"] is True
    assert proc.stdout.splitlines()[0] == "# imreview — deterministic checks only: nothing found"
    assert "publish ready ✔" not in proc.stdout and "publish ready ✔" not in comment
    verdict_row = next(line for line in proc.stdout.splitlines() if line.startswith("| Verdict |"))
    assert "**incomplete**" in verdict_row and "still incomplete" in verdict_row
    assert "That does not make the review complete." in proc.stdout


def test_the_summary_has_no_empty_table_header(feature_repo: Repo, tmp_path: Path) -> None:
    proc, _, _ = review_with_outputs(feature_repo, tmp_path)
    page = html(proc.stdout)
    assert "<th></th>" not in page
    first_table = page[page.index("<table>") : page.index("</table>")]
    assert ">Repository</th>" in first_table


def _report(tmp_path: Path, n_files: int, *, source: str = "github") -> dict[str, Any]:
    sample = json.loads((Path(__file__).resolve().parent.parent / "docs" / "sample-report.json").read_text())
    sample["snapshot"]["source"] = source
    sample["coverage"]["files"] = [
        {"path": f"src/m{i}.py", "status": "listed", "reason": "budget"}
        | {"hunks_total": 1, "hunks_reviewed": 0}
        for i in range(n_files)
    ]
    return sample


@pytest.mark.parametrize("n_files, folded", [(20, False), (21, True)])
def test_the_coverage_table_folds_past_20_rows(tmp_path: Path, n_files: int, folded: bool) -> None:
    page = html(Renderer().summary(_report(tmp_path, n_files)))
    coverage = page[page.index("Coverage</h2>") :]
    table = coverage.index("<table>")
    assert ("<details>" in coverage[:table]) is folded
    rows = coverage[table : coverage.index("</table>")]
    assert rows.count("<tr>") == n_files + 1, "every file is still listed"


def test_findings_link_to_the_reviewed_sha_and_files_to_the_pr_files_view(tmp_path: Path) -> None:
    report = _report(tmp_path, 1)
    head, base = report["snapshot"]["head"]["sha"], report["snapshot"]["base"]["sha"]
    finding = report["findings"][0]
    summary = html(Renderer().summary(report))
    expected = f'href="https://github.com/octo-org/widgets/blob/{head}/{finding["path"]}#L{finding["line"]}'
    assert expected in summary
    assert 'href="https://github.com/octo-org/widgets/pull/42/files#diff-' in summary
    comment = html(Renderer().comment(report, max_findings=6))
    assert expected in comment
    removed = dict(finding, side="LEFT", line=3, end_line=5)
    report["findings"] = [removed]
    left = html(Renderer().summary(report))
    assert f"/blob/{base}/{finding['path']}#L3-L5" in left
    local = _report(tmp_path, 1, source="local")
    assert "/blob/" not in Renderer().summary(local) and "/files#diff-" not in Renderer().summary(local)


def test_zh_cn_labels_are_localized(feature_repo: Repo, tmp_path: Path) -> None:
    proc, _, _ = review_with_outputs(feature_repo, tmp_path, "--language", "zh-CN")
    out = proc.stdout
    assert out.splitlines()[0] == "# imreview — 仅确定性检查：未发现问题"
    gate = out[out.index("## 完成门") : out.index("## 预算")]
    for english in ("reviewed", "listed", "parsed", "| ok |", "hunks |"):
        assert english not in gate, english
    assert "失败阈值 从不" in out
    assert "代码块（hunk）" in out


def test_a_dead_endpoint_is_one_loud_line_and_the_headline_names_it(
    feature_repo: Repo, tmp_path: Path
) -> None:
    api_base = f"http://127.0.0.1:{closed_port()}"
    args = ("--model", "openai/gpt-4o-mini", "--api-base", api_base, "--max-concurrency", "1")
    proc, report, _ = review_with_outputs(feature_repo, tmp_path, *args)
    assert report["verdict"] == "incomplete"
    unreachable = [line for line in proc.stderr.splitlines() if "could not be reached" in line]
    assert len(unreachable) == 1, proc.stderr
    assert proc.stdout.splitlines()[0] == "# imreview — incomplete: model endpoint unreachable"
    failures = [g["why"] for g in report["gaps"] if g["why"].startswith("model_") and not g.get("path")]
    assert failures == ["model_unreachable"], "one gap for the failure, not one per call"


def test_a_refused_key_is_named_in_the_headline(feature_repo: Repo, tmp_path: Path) -> None:
    with FakeModelServer() as server:
        server.queue(*[status(401, message="Incorrect API key provided")] * 6)
        proc, _, _ = review_with_outputs(
            feature_repo, tmp_path, "--model", "openai/gpt-4o-mini", "--api-base", server.api_base
        )
    assert proc.stdout.splitlines()[0] == "# imreview — incomplete: model API key refused", proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "refused the API key" in line]) == 1


def test_a_missing_key_names_the_variable(feature_repo: Repo, tmp_path: Path) -> None:
    proc, report, comment = review_with_outputs(feature_repo, tmp_path, "--model", "openai/gpt-4o-mini")
    assert report["verdict"] == "incomplete"
    (gap,) = [g for g in report["gaps"] if g["why"] == "no_credentials"]
    assert "OPENAI_API_KEY is unset or empty" in gap["what"]
    assert "OPENAI_API_KEY" in proc.stderr
    assert "OPENAI_API_KEY" in comment
