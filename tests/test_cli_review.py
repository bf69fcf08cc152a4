"""`imreview review` end to end: a real git repo, the CLI as a subprocess, a loopback model server."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reviewer.schema import load_report_schema
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import model_answer, model_finding
from tests.fakes.model_server import FakeModelServer, delayed, status, text
from tests.gfm import parse, pings

MODEL = "openai/fake-model"


_finding = functools.partial(
    model_finding, path="lib/util.py", priority="P3", quote="return a / b", confidence=0.7
)


def _review(repo: Repo, server: FakeModelServer | None, tmp_path: Path, *args: str):
    model_args = ["--model", MODEL, "--api-base", server.api_base] if server else []
    report = tmp_path / "out" / "report.json"
    proc = run_cli(
        ["review", str(repo.path), "--base", "main", "--json", str(report), *model_args, *args],
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    data = json.loads(report.read_text()) if report.exists() else None
    if data is not None:
        jsonschema.Draft202012Validator(load_report_schema()).validate(data)
    return proc, data


def test_good_answer_becomes_an_anchored_finding(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text(model_answer(_finding()), prompt_tokens=900, completion_tokens=120))
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["verdict"] == "findings"
    (finding,) = report["findings"]
    assert (finding["path"], finding["line"], finding["anchored"]) == ("lib/util.py", 2, True)
    assert "[P3] Division by zero when b is 0" in proc.stdout
    (request,) = model.requests
    assert request["model"] == "fake-model" and request["max_tokens"] > 0
    assert "return a / b" in request["messages"][-1]["content"]
    assert report["budget"]["used"]["calls"] == 1
    assert report["budget"]["used"]["input_tokens"] == 900
    assert report["gate"]["publish_ready"] is True
    assert {f["path"]: f["status"] for f in report["coverage"]["files"]} == {
        "app.py": "reviewed",
        "lib/util.py": "reviewed",
    }


def test_fenced_json_with_prose_is_accepted(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text(f"Sure! Here is my review.\n```json\n{model_answer(_finding())}\n```\nThanks."))
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(report["findings"]) == 1 and len(model.requests) == 1


def test_invalid_json_then_good_answer_uses_one_repair_call(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text('{"findings": [{"path": "lib/util.py", "line": 2,'), text(model_answer(_finding())))
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 2
    assert report["budget"]["by_phase"]["repair"]["calls"] == 1
    assert report["verdict"] == "findings"
    assert report["gate"]["checks"][2] == {"name": "answers_parsed", "ok": True, "detail": "1/1 parsed"}


def test_rate_limit_then_success(feature_repo: Repo, model: FakeModelServer, tmp_path: Path) -> None:
    model.queue(status(429, retry_after="0"), text(model_answer(_finding())))
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 2
    assert report["verdict"] == "findings" and report["budget"]["used"]["calls"] == 2


def test_timeout_is_a_gap_and_the_review_is_incomplete(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(delayed(8, text(model_answer())))
    proc, report = _review(feature_repo, model, tmp_path, "--max-seconds", "3", "--on-error", "fail")
    assert proc.returncode == 3, proc.stderr
    assert report["verdict"] == "incomplete"
    whys = {g["why"] for g in report["gaps"]}
    assert whys and whys <= {"budget", "model_error"}, "the timed-out unit is a disclosed gap"
    assert {f["status"] for f in report["coverage"]["files"]} == {"listed"}
    assert "the model did not review this change" in proc.stdout, "a timed-out model reviewed nothing"


def test_finding_outside_the_diff_stays_summary_only(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    # the quoted code exists at head, but outside every hunk: summary only, marked unverified
    outside = _finding(path="app.py", line=1, quote="def add(a, b):", title="Unchecked add", priority="P3")
    imagined = _finding(path="lib/util.py", line=40, quote="return something_else()", title="Imagined bug")
    model.queue(text(model_answer(outside, imagined)))
    proc, report = _review(feature_repo, model, tmp_path, "--comment", str(tmp_path / "comment.md"))
    assert proc.returncode == 0, proc.stderr
    (finding,) = report["findings"]
    assert finding["anchored"] is False and finding["anchor_reason"] == "quote_not_found"
    assert finding["verified"] is False
    assert "Unchecked add" in proc.stdout
    # a quote that is nowhere at head is refuted by the deterministic check (changed on purpose, issue 8.4)
    (refuted,) = report["exclusions"]
    assert refuted["claim"] == "Imagined bug" and "not in lib/util.py at the head commit" in refuted["reason"]


def test_quote_three_lines_from_the_stated_line_is_moved(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    repo.commit({"calc.py": "x = 1\n"}, "base")
    repo.branch("feature")
    body = "".join(f"step_{i} = {i}\n" for i in range(1, 10)) + "total = step_1 / 0\n"
    repo.commit({"calc.py": "x = 1\n" + body}, "calc")
    model.queue(
        text(model_answer(_finding(path="calc.py", line=8, quote="total = step_1 / 0", title="Divides by 0")))
    )
    proc, report = _review(repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    (finding,) = report["findings"]
    assert (finding["line"], finding["anchored"], finding["anchor_reason"]) == (11, True, "moved_by_quote")


def _five_unit_repo(repo: Repo) -> None:
    config = "context_window: 3000\nmax_output_tokens_per_call: 256\n"
    repo.commit({"README.md": "base\n", ".github/imreview.yml": config}, "base")
    repo.branch("feature")
    files = {
        f"pkg/mod_{n}.py": "\n".join(
            f"def func_{n}_{i}(value):\n    return value * {i} + compute_something_else(value, {i}, {n})"
            for i in range(16)
        )
        + "\n"
        for n in range(5)
    }
    repo.commit(files, "five modules")


def test_max_calls_two_with_five_units(repo: Repo, model: FakeModelServer, tmp_path: Path) -> None:
    _five_unit_repo(repo)
    model.handler = lambda body: text(model_answer())
    proc, report = _review(repo, model, tmp_path, "--max-calls", "2", "--exclude", ".github/**")
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 2
    # the planner packs the two calls it has (issue 6): files not fully carried are `budget` gaps
    unreviewed = [f for f in report["coverage"]["files"] if f["status"] in ("listed", "partial")]
    assert unreviewed and {f["reason"] for f in unreviewed} == {"budget"}
    assert report["plan"]["units"] == 2
    assert report["verdict"] == "incomplete"
    assert report["budget"]["exhausted"] is True
    assert len([g for g in report["gaps"] if g["why"] == "budget"]) == len(unreviewed)


def test_no_model_still_reports_rules_and_the_gap(repo: Repo, tmp_path: Path) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "debug")
    proc, report = _review(repo, None, tmp_path, "--fail-on", "P2")
    assert proc.returncode == 1, proc.stderr
    assert report["verdict"] == "findings"
    assert report["findings"][0]["source"] == "rule:debugger"
    assert any(g["why"] == "no_model" and "no model configured" in g["what"] for g in report["gaps"])
    assert report["coverage"]["files"][0]["reason"] == "no_model"


def test_the_base_configs_ignore_list_quiets_a_local_review_too(repo: Repo, tmp_path: Path) -> None:
    """`ignore:` in the config at `--base` is the same review's config locally as on a PR: the rule
    it names raises nothing (listed as dismissed by the config), so `--fail-on` does not fail."""
    ignore = "ignore:\n  - rule: debugger\n    reason: scripts may stop here\n"
    repo.commit({"app.py": "x = 1\n", ".github/imreview.yml": ignore}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "debug")
    proc, report = _review(repo, None, tmp_path, "--fail-on", "P2")
    assert proc.returncode == 0, proc.stderr
    assert report["findings"] == []
    assert [(d["how"], d["by"]) for d in report["dismissed"]] == [("config", "scripts may stop here")]


def test_no_model_and_nothing_found_is_incomplete_not_clean(feature_repo: Repo, tmp_path: Path) -> None:
    proc, report = _review(feature_repo, None, tmp_path)
    assert proc.returncode == 0
    assert report["verdict"] == "incomplete"
    assert "LLM review not run: no model configured" in proc.stdout
    proc, _ = _review(feature_repo, None, tmp_path, "--on-error", "fail")
    assert proc.returncode == 3


def test_secret_never_reaches_the_model_or_the_report(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    repo.commit({"cfg.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"cfg.py": f"x = 1\nTOKEN = '{token}'\n"}, "token")
    model.queue(text(model_answer()))
    proc, report = _review(repo, model, tmp_path)
    assert token not in json.dumps(model.requests)
    assert token not in json.dumps(report) and token not in proc.stdout
    assert report["findings"][0]["source"] == "rule:secret" and report["findings"][0]["anchored"]


def test_bad_config_names_file_and_line(feature_repo: Repo, tmp_path: Path) -> None:
    cfg = tmp_path / "imreview.yml"
    cfg.write_text("model: openai/x\nmax_cost: 2\n")
    proc, _ = _review(feature_repo, None, tmp_path, "--config", str(cfg))
    assert proc.returncode == 2
    assert re.search(
        r"imreview\.yml:2: unknown key 'max_cost' \(did you mean 'max_cost_usd'\?\)", proc.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["review", "{tmp}"], "not a git repository"),
        (["review", "{repo}", "--base", "nope"], "--base 'nope'"),
        (["review", "{repo}", "--base", "feature"], "nothing to review"),
        (["review", "{repo}", "--max-calls", "-1"], "--max-calls"),
    ],
)
def test_usage_errors_exit_2(feature_repo: Repo, tmp_path: Path, args: list[str], message: str) -> None:
    filled = [a.format(tmp=tmp_path, repo=feature_repo.path) for a in args]
    proc = run_cli(filled, cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_help_imports_neither_litellm_nor_pygithub(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom reviewer.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'litellm' not in sys.modules and 'github' not in sys.modules\n"
        "print('light')\n"
    )
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "light" in proc.stdout


def test_render_reproduces_the_summary(feature_repo: Repo, tmp_path: Path) -> None:
    proc, _ = _review(feature_repo, None, tmp_path)
    again = run_cli(["render", str(tmp_path / "out" / "report.json")], cwd=tmp_path, env=cli_env(tmp_path))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == proc.stdout.strip()


def test_summary_on_stdout_inside_actions_cannot_run_workflow_commands(repo: Repo, tmp_path: Path) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "::error::pwned\n\n::set-output name=x::y")
    proc = run_cli(
        ["review", str(repo.path), "--base", "main"],
        cwd=tmp_path,
        env=cli_env(tmp_path, {"GITHUB_ACTIONS": "true"}),
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert lines[0].startswith("::stop-commands::") and len(token) >= 16
    assert lines[-1] == f"::{token}::"
    assert "Debugger breakpoint left in" in proc.stdout


def test_verification_pass_confirms_one_finding_and_refutes_another(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    real = _finding(priority="P2")
    wrong = _finding(
        priority="P1", path="app.py", line=6, quote="return a - b - 1", title="Off by one in sub"
    )

    def handler(body: dict[str, Any]):
        prompt = body["messages"][-1]["content"]
        if '"verdicts"' not in prompt:
            return text(model_answer(real, wrong))
        ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.MULTILINE)
        verdicts = [
            {"id": ids[0], "holds": False, "reason": "sub() is documented to subtract one more"},
            {"id": ids[1], "holds": True, "reason": "b may be 0"},
        ]
        return text(json.dumps({"verdicts": verdicts}))

    model.handler = handler
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 2
    assert report["budget"]["by_phase"]["verify"]["calls"] == 1
    (kept,) = report["findings"]
    assert (kept["title"], kept["verified"]) == ("Division by zero when b is 0", True)
    assert report["exclusions"][0]["claim"] == "Off by one in sub"
    assert "subtract one more" in report["exclusions"][0]["reason"]


def test_verification_without_budget_leaves_findings_unverified(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text(model_answer(_finding(priority="P1"))))
    proc, report = _review(feature_repo, model, tmp_path, "--max-calls", "1")
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 1
    assert report["findings"][0]["verified"] is None
    assert report["verdict"] == "findings"


def test_known_model_gets_the_json_schema_and_a_real_cost(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text(model_answer(_finding()), prompt_tokens=1_000_000, completion_tokens=100_000))
    report_path = tmp_path / "r.json"
    proc = run_cli(
        [
            "review",
            str(feature_repo.path),
            "--base",
            "main",
            "--json",
            str(report_path),
            "--model",
            "openai/gpt-4o-mini",
            "--api-base",
            model.api_base,
            "--max-cost-usd",
            "5",
        ],
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    fmt = model.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["required"] == ["findings", "exclusions", "signals", "unverified"]
    report = json.loads(report_path.read_text())
    assert report["budget"]["used"]["cost_usd"] == pytest.approx(0.15 + 0.06), (
        "gpt-4o-mini: $0.15/M in, $0.60/M out"
    )
    # the server reported 1,000,000 prompt tokens against a 200,000 limit: disclosed, still published
    assert [o["limit"] for o in report["budget"]["overrun"]] == ["input_tokens", "output_tokens"]
    assert len(report["warnings"]) == 1 and "more usage than was reserved" in report["warnings"][0]
    check = next(c for c in report["gate"]["checks"] if c["name"] == "budget_respected")
    assert check["ok"] and "disclosed" in check["detail"]


def test_finding_on_a_file_the_call_did_not_show_is_summary_only(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    _five_unit_repo(repo)
    guess = _finding(
        path="pkg/mod_0.py", line=2, quote="return value * 0 + compute_something_else(value, 0, 0)"
    )

    def handler(body: dict[str, Any]):
        prompt = body["messages"][-1]["content"]
        shows_mod_0 = "## File: pkg/mod_0.py" in prompt
        return text(model_answer() if shows_mod_0 else model_answer(guess))

    model.handler = handler
    proc, report = _review(repo, model, tmp_path, "--exclude", ".github/**")
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 5
    (finding,) = report["findings"]
    assert (finding["anchored"], finding["anchor_reason"]) == (False, "not_in_unit")


def test_render_with_a_template_file_and_a_bad_report(feature_repo: Repo, tmp_path: Path) -> None:
    _review(feature_repo, None, tmp_path)
    own = tmp_path / "mine.md.j2"
    own.write_text("verdict={{ report.verdict }} files={{ report.coverage.files | length }}")
    proc = run_cli(
        ["render", str(tmp_path / "out" / "report.json"), "--template", str(own)],
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "verdict=incomplete files=2")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"schema": "imreview.report/v1", "verdict": "great"}))
    proc = run_cli(["render", str(broken)], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 2 and "does not match imreview.report/v1" in proc.stderr


def test_two_unparsable_answers_are_a_disclosed_gap(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text("I think the code is fine."), text("Still no JSON, sorry."))
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 2
    assert report["verdict"] == "incomplete"
    assert {(f["status"], f["reason"]) for f in report["coverage"]["files"]} == {("listed", "unparsed")}
    unit_gap = next(g for g in report["gaps"] if g["why"] == "unparsed" and g["path"] is None)
    assert "even after one repair" in unit_gap["what"]
    checks = {c["name"]: c for c in report["gate"]["checks"]}
    assert checks["answers_parsed"]["ok"] and "1 reported as gaps" in checks["answers_parsed"]["detail"]


def test_server_errors_on_every_attempt_are_a_model_error_gap(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.handler = lambda body: status(500)
    proc, report = _review(feature_repo, model, tmp_path, "--fallback-model", "openai/other-model")
    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 6, "3 attempts on the model, then 3 on its fallback"
    assert {r["model"] for r in model.requests} == {"fake-model", "other-model"}
    assert report["verdict"] == "incomplete"
    assert any(g["why"] == "model_error" and "other-model" in g["what"] for g in report["gaps"])


def test_verification_never_reads_a_skipped_file_for_context(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\ny = x / 0\n", ".env": "DB_PASSWORD=correcthorsebatterystaple\n"}, "env")
    on_env = _finding(path=".env", line=1, priority="P1", quote="DB_PASSWORD", title="Password in env file")
    model.handler = lambda body: text(model_answer(on_env))
    proc, report = _review(repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "correcthorse" not in json.dumps(model.requests)
    assert len(model.requests) == 1, "no verification call for a finding on a file the model never saw"
    assert report["findings"][0]["anchor_reason"] == "not_in_unit"


def test_a_verification_answer_cannot_clear_a_rule_finding(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    key = "AKIA" + "Q7XR2M4TZP9KWB3N"
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": f"x = 1\nKEY = '{key}'\ny = x / 0\n"}, "key")
    _, first = _review(repo, None, tmp_path)
    rule_id = first["findings"][0]["id"]
    llm = _finding(path="app.py", line=3, priority="P2", quote="y = x / 0", title="Division by zero")

    def handler(body: dict[str, Any]):
        prompt = body["messages"][-1]["content"]
        if '"verdicts"' not in prompt:
            return text(model_answer(llm))
        ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.MULTILINE)
        refute = [{"id": i, "holds": False, "reason": "not a bug"} for i in [rule_id, *ids]]
        return text(json.dumps({"verdicts": refute}))

    model.handler = handler
    proc, report = _review(repo, model, tmp_path, "--fail-on", "P1")
    assert proc.returncode == 1, "the committed key still fails the step"
    assert [f["source"] for f in report["findings"]] == ["rule:secret"]
    assert [e["claim"] for e in report["exclusions"]] == ["Division by zero"]


def test_an_answer_without_findings_is_never_a_clean_review(
    feature_repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    model.queue(text("{}"), text('{"error": "I refuse to review this"}'))
    proc, report = _review(feature_repo, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["verdict"] == "incomplete"
    assert "unparsed" in {g["why"] for g in report["gaps"]}


def test_rule_findings_follow_the_language_and_keep_their_ids(repo: Repo, tmp_path: Path) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\nbreakpoint()\n"}, "debug")
    _, english = _review(repo, None, tmp_path)
    proc, chinese = _review(repo, None, tmp_path, "--language", "zh-CN")
    assert proc.returncode == 0, proc.stderr
    en_finding, zh_finding = english["findings"][0], chinese["findings"][0]
    assert en_finding["id"] == zh_finding["id"]
    assert en_finding["title"] != zh_finding["title"]
    assert re.search(r"[\u4e00-\u9fff]", zh_finding["observation"])
    assert zh_finding["title"] in proc.stdout


UNVERIFIED = [
    {
        "what": "Whether any caller passes b=0 to div()",
        "how": "read the callers of lib/util.py div in app.py",
    },
    {"what": "The <img src=x onerror=alert(1)> path @octocat #12", "how": "run `pytest tests/test_util.py`"},
    {
        "what": "<what the code shown cannot confirm>",
        "how": "<the test to run, the caller to read or the path to exercise that would confirm it>",
    },
    "Whether sub() is used by the billing job",
    {"what": "Whether div() is called with floats", "how": "exercise the CLI end to end with 1.5"},
    {"what": "Whether the result is rounded by callers", "how": "read app.py"},
    {"what": "A sixth valid gap beyond the five kept", "how": "never shown"},
]


@pytest.mark.parametrize(
    ("language", "heading", "intro", "how"),
    [
        ("en", "## Not verified (5)", "The model could not confirm these", "to check: read the callers"),
        ("zh-CN", "## 验证缺口 (5)", "模型仅凭所见代码无法确认以下各项", "验证方法：read the callers"),
    ],
)
def test_the_models_verification_gaps_reach_the_report_summary_and_comment(
    feature_repo: Repo,
    model: FakeModelServer,
    tmp_path: Path,
    language: str,
    heading: str,
    intro: str,
    how: str,
) -> None:
    model.queue(text(model_answer(unverified=UNVERIFIED)))
    summary, comment = tmp_path / "summary.md", tmp_path / "comment.md"
    proc, report = _review(
        feature_repo,
        model,
        tmp_path,
        "--language",
        language,
        "--summary",
        str(summary),
        "--comment",
        str(comment),
    )
    assert proc.returncode == 0, proc.stderr
    kept = report["unverified"]
    assert [u["what"] for u in kept] == [
        "Whether any caller passes b=0 to div()",
        "The <img src=x onerror=alert(1)> path @octocat #12",
        "Whether sub() is used by the billing job",
        "Whether div() is called with floats",
        "Whether the result is rounded by callers",
    ], "five kept, the echoed placeholder dropped, a bare string taken as what"
    assert kept[2]["how"] == "" and report["verdict"] == "clean", "a verification gap is not a defect"
    system, user = (m["content"] for m in model.requests[0]["messages"])
    assert '"unverified"' in user and "verification gaps" in system, "the model is asked for them"
    body = summary.read_text()
    section = body[body.index(heading) :]
    assert intro in section and how in section and "Whether div() is called with floats" in section
    text_ = comment.read_text()
    folded = text_[text_.index("<details>") : text_.index("</details>")]
    assert "Whether any caller passes b=0 to div()" in folded and how in folded
    for rendered in (parse(body), parse(text_)):
        assert "img" not in rendered.tags and not pings(rendered)
