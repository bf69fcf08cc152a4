"""What a user reads first (issue 20 items 1, 3, 6): the headline and the comment's first lines never
read as success when the model did not review; the summary without noise; the CLI's silent
acceptances turned into one-line errors or warnings.

Every test runs the real CLI against a real git repository and, where a model is configured, the
loopback model server (or a closed port), and reads what a user sees: stdout, the comment file,
stderr and the exit code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reviewer.budget import DEFAULT_LIMITS
from reviewer.config import Config
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import closed_port, model_answer, review_with_outputs
from tests.fakes.model_server import FakeModelServer, status, text

MODEL = "openai/fake-model"
PROVIDER_NAMES = re.compile(r"litellm\.|openai\.|\w+(Error|Exception)\b")


@pytest.fixture
def debug_repo(repo: Repo) -> Repo:
    """One changed file whose added `breakpoint()` the deterministic rules report as P2."""
    repo.commit({"app.py": "def add(a, b):\n    return a + b\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "def add(a, b):\n    breakpoint()\n    return a + b\n"}, "debug")
    return repo


# --- item 1: a configured model that did not review is never a success -------------------------


def test_a_missing_key_with_a_rule_finding_is_incomplete_and_says_how_to_fix_it(
    debug_repo: Repo, tmp_path: Path
) -> None:
    proc, report, comment = review_with_outputs(debug_repo, tmp_path, "--model", "openai/gpt-4o-mini")
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["verdict"] == "incomplete"
    assert [f["source"] for f in report["findings"]] == ["rule:debugger"], "rule findings are still shown"
    headline = proc.stdout.splitlines()[0]
    assert headline == "# imreview — incomplete: model credentials missing · 1 finding (1 P2)"
    assert "publish ready ✔" not in proc.stdout and "every check passed" not in proc.stdout
    first, second = comment.splitlines()[:2]
    assert first == "### imreview — incomplete: model credentials missing · 1 finding (1 P2)"
    assert "the model did not review this change" in second
    assert "set `OPENAI_API_KEY` as a secret and pass it in `env:`" in second
    assert "**[P2] Debugger breakpoint left in" in comment


def test_fail_on_still_applies_to_rule_findings_and_on_error_to_the_missing_review(
    debug_repo: Repo, tmp_path: Path
) -> None:
    proc, report, _ = review_with_outputs(
        debug_repo, tmp_path, "--model", "openai/gpt-4o-mini", "--fail-on", "P2"
    )
    assert (proc.returncode, report and report["verdict"]) == (1, "incomplete"), proc.stderr
    proc, _, _ = review_with_outputs(debug_repo, tmp_path, "--model", "openai/gpt-4o-mini", "--fail-on", "P1")
    assert proc.returncode == 0, "no finding at P1 and on-error warn: the headline carries the warning"
    proc, _, _ = review_with_outputs(
        debug_repo, tmp_path, "--model", "openai/gpt-4o-mini", "--on-error", "fail"
    )
    assert proc.returncode == 3


def test_a_dead_endpoint_is_one_human_line_whose_call_count_matches_the_budget(
    debug_repo: Repo, tmp_path: Path
) -> None:
    api_base = f"http://127.0.0.1:{closed_port()}"
    args = ("--model", "openai/gpt-4o-mini", "--api-base", api_base, "--max-concurrency", "1")
    proc, report, comment = review_with_outputs(debug_repo, tmp_path, *args)
    assert report is not None and report["verdict"] == "incomplete"
    assert (
        proc.stdout.splitlines()[0]
        == "# imreview — incomplete: model endpoint unreachable · 1 finding (1 P2)"
    )
    (line,) = [x for x in proc.stderr.splitlines() if "could not be reached" in x]
    assert not PROVIDER_NAMES.search(line), line
    calls = report["budget"]["used"]["calls"]
    assert calls >= 1 and line.endswith(f"gave up after {calls} call{'s' if calls > 1 else ''}"), line
    assert "check `api-base`" in comment.splitlines()[1]


def test_every_call_failing_is_incomplete_even_with_rule_findings(debug_repo: Repo, tmp_path: Path) -> None:
    with FakeModelServer() as server:
        server.queue(*[status(500, message="upstream overloaded")] * 12)
        proc, report, comment = review_with_outputs(
            debug_repo, tmp_path, "--model", MODEL, "--api-base", server.api_base
        )
        sent = len(server.requests)
    assert report is not None and report["verdict"] == "incomplete"
    assert proc.stdout.splitlines()[0] == "# imreview — incomplete: model errors · 1 finding (1 P2)"
    (line,) = [x for x in proc.stderr.splitlines() if "failed after retries" in x]
    assert not PROVIDER_NAMES.search(line), line
    assert f"gave up after {sent} calls" in line and report["budget"]["used"]["calls"] == sent
    assert "the model did not review this change" in comment.splitlines()[1]


def _review_with_a_quiet_model(repo: Repo, tmp_path: Path) -> tuple[Any, dict[str, Any] | None, str]:
    """`repo` reviewed by a model that answers once, with no finding of its own (500 + 40 tokens)."""
    with FakeModelServer() as server:
        server.queue(text(model_answer(), prompt_tokens=500, completion_tokens=40))
        return review_with_outputs(repo, tmp_path, "--model", MODEL, "--api-base", server.api_base)


def test_a_model_that_reviewed_keeps_the_findings_verdict(debug_repo: Repo, tmp_path: Path) -> None:
    proc, report, _ = _review_with_a_quiet_model(debug_repo, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["verdict"] == "findings"
    assert proc.stdout.splitlines()[0] == "# imreview — 1 finding (1 P2)"


# --- item 3: a reader's summary -----------------------------------------------------------------


def test_the_summary_and_comment_carry_no_noise(debug_repo: Repo, tmp_path: Path) -> None:
    proc, report, comment = _review_with_a_quiet_model(debug_repo, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["gaps"] == [] and report["gate"]["publish_ready"]
    out = proc.stdout
    finding = out[out.index("### 1. [P2]") : out.index("## Run")]
    for metadata in ("source", "confidence", "id `", "anchored", "re-checked"):
        assert metadata not in finding, metadata
    assert report["findings"][0]["id"] and report["findings"][0]["source"] == "rule:debugger"
    assert "## Not verified" not in out
    assert "Loading the model library" not in out
    budget = out[out.index("## Budget") : out.index("## Published")]
    assert "| review | 1 |" in budget and "| repair |" not in budget and "| verify |" not in budget
    gate = out[out.index("## Gate") : out.index("## Budget")]
    assert "<details><summary>The 5 checks</summary>" in gate, "a passed gate is folded"
    assert not re.search(r"\$\d+\.\d{3,}", out.replace("$0.00", "")), "dollars have cents"
    assert len(re.findall(r"\bCost\b", comment.split("<!--")[0])) == 1


def test_dollars_show_cents_and_more_digits_only_under_a_cent() -> None:
    from reviewer.render import usd

    assert [usd(v) for v in (0, 0.07, 1.005, 0.0042, 0.00003149)] == [
        "$0.00",
        "$0.07",
        "$1.00",
        "$0.0042",
        "$0.000031",
    ]


# --- item 6: the CLI as a user meets it -----------------------------------------------------------


def test_an_include_that_matches_nothing_is_named_in_the_headline(debug_repo: Repo, tmp_path: Path) -> None:
    proc, report, comment = review_with_outputs(debug_repo, tmp_path, "--include", "src/**")
    assert report is not None and report["verdict"] == "incomplete"
    headline = "imreview — nothing reviewed: `include` matches no changed file · 1 finding (1 P2)"
    assert proc.stdout.splitlines()[0] == f"# {headline}"
    assert comment.splitlines()[0] == f"### {headline}"
    assert "`include` (`src/**`) does not match the only changed file" in proc.stderr


def test_an_include_glob_that_matches_nothing_beside_one_that_does_is_a_warning(
    debug_repo: Repo, tmp_path: Path
) -> None:
    proc, report, _ = review_with_outputs(debug_repo, tmp_path, "--include", "src/**", "--include", "*.py")
    assert report is not None and "include_unmatched" not in {g["why"] for g in report["gaps"]}
    assert "`include` globs that match no changed file: `src/**`" in proc.stderr


def test_a_template_dir_without_templates_is_a_one_line_error(debug_repo: Repo, tmp_path: Path) -> None:
    empty = tmp_path / "my-templates"
    empty.mkdir()
    proc, _, _ = review_with_outputs(debug_repo, tmp_path, "--template-dir", str(empty))
    assert proc.returncode == 2
    (error,) = [line for line in proc.stderr.splitlines() if "error" in line]
    assert error.startswith("imreview: error: template-dir: ") and "holds no templates" in error


@pytest.mark.parametrize(
    "flag", ["--max-seconds", "--max-cost-usd", "--max-calls", "--max-input-tokens", "--max-output-tokens"]
)
@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_budget_of_zero_or_less_is_an_error(
    debug_repo: Repo, tmp_path: Path, flag: str, value: str
) -> None:
    proc, report, _ = review_with_outputs(debug_repo, tmp_path, flag, value)
    assert proc.returncode == 2 and report is None
    assert f"Invalid value for '{flag}'" in proc.stderr


def test_a_zero_budget_in_the_config_file_is_an_error(debug_repo: Repo, tmp_path: Path) -> None:
    config = tmp_path / "imreview.yml"
    config.write_text("max_seconds: 0\n")
    proc, _, _ = review_with_outputs(debug_repo, tmp_path, "--config", str(config))
    assert proc.returncode == 2
    assert f"{config}:1: key 'max_seconds': must be more than 0, got 0" in proc.stderr


def test_quiet_prints_nothing_but_warnings(debug_repo: Repo, tmp_path: Path) -> None:
    proc, _, _ = review_with_outputs(debug_repo, tmp_path, "-q")
    assert proc.returncode == 0 and proc.stderr == ""
    proc, _, _ = review_with_outputs(debug_repo, tmp_path, "-q", "--model", "openai/gpt-4o-mini")
    assert "reviewing" not in proc.stderr and "OPENAI_API_KEY is unset" in proc.stderr


def test_fail_on_accepts_the_priorities_as_every_output_spells_them(debug_repo: Repo, tmp_path: Path) -> None:
    for spelled in ("P2", "p2"):
        proc, report, _ = review_with_outputs(debug_repo, tmp_path, "--fail-on", spelled)
        assert proc.returncode == 1 and report is not None and report["settings"]["fail_on"] == "P2"


def test_help_shows_units_defaults_and_every_command_in_full(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    top = run_cli(["--help"], cwd=tmp_path, env=env).stdout
    commands = top[top.index("Commands:") :]
    assert "..." not in commands and "…" not in commands
    for name in ("action", "eval", "pr", "render", "review", "scan"):
        assert re.search(rf"^  {name}\s+\S", commands, re.M), name
    review = " ".join(run_cli(["review", "--help"], cwd=tmp_path, env=env).stdout.split())
    limits, config = DEFAULT_LIMITS, Config()
    assert f"US dollars the model calls may cost (default {limits.cost_usd:.2f})" in review
    assert f"seconds the whole review may take (default {limits.seconds:g})" in review
    assert f"(default {limits.calls})" in review and f"(default {limits.input_tokens:,})" in review
    assert f"(default {limits.output_tokens:,})" in review and f"(default {config.max_concurrency})" in review
    assert "Budget: max_seconds." not in review
    assert "--fail-on [never|P1|P2|P3]" in review
    scan = " ".join(run_cli(["scan", "--help"], cwd=tmp_path, env=env).stdout.split())
    assert "Needs a GitHub token in GITHUB_TOKEN" in scan
