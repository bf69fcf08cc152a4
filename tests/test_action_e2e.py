"""The Docker Action end to end: `entrypoint.py` (in-process, tests/inprocess.py) in an emulated runner.

Each test sets the environment the runner gives a container action (every input declared in
`action.yml` at its default, `GITHUB_EVENT_PATH` pointing at a trimmed real webhook payload, the
file-command paths, `RUNNER_TEMP`), points the Action at a loopback fake GitHub and a loopback
model server, and checks what a user sees: the job summary, the step outputs, the workflow
commands on stdout, and what ended up on the pull request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from reviewer.diff import LineIndex, parse_github_file
from reviewer.schema import load_report_schema
from tests.conftest import ROOT, cli_env
from tests.factories import model_answer, model_finding
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, text
from tests.fakes.runner_files import runner_outputs
from tests.inprocess import run_entrypoint, run_entrypoint_subprocess

EVENTS = ROOT / "tests" / "data" / "events"
REPO = "octo-org/widgets"
FORK = "forker/widgets"
TOKEN = "fake-actions-token"
MODEL = "openai/fake-model"
BASE = "b0" * 20
HEAD = "a1" * 20
HEAD2 = "c2" * 20
HEAD3 = "d3" * 20
PATCH = "@@ -1,3 +1,4 @@\n def div(a, b):\n-    return 0\n+    total = a / b\n+    return total\n # end"
OTHER_PATCH = "@@ -1,2 +1,3 @@\n import os\n+import sys\n x = 1"
DEBUG_PATCH = "@@ -1,2 +1,3 @@\n x = 1\n+breakpoint()\n y = 2"
MARKER = "<!-- imreview:state v1 "
OURS = (
    re.compile(r"::add-mask::.*"),
    re.compile(r"::(warning|notice) file=[^:]+,line=\d+(,endLine=\d+)?,title=[^:]*::.*"),
    re.compile(r"::(error|warning|notice) title=imreview[^:]*::.*"),
    re.compile(r"::group::imreview: [^\n]*"),
    re.compile(r"::endgroup::"),
)
STOP = re.compile(r"::stop-commands::([0-9a-f]{32})")


# --------------------------------------------------------------------------- the runner


@cache
def action_defaults() -> dict[str, str]:
    """Every declared input at its default, as the runner sets them (`${{ ... }}` left to the caller)."""
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    return {name: str(item.get("default", "")) for name, item in spec["inputs"].items()}


def foreign_commands(stdout: str) -> list[str]:
    """Lines the runner would act on that are not commands we emit ourselves."""
    foreign: list[str] = []
    stop_token: str | None = None
    for line in stdout.splitlines():
        bare = line.lstrip()
        if stop_token is not None:
            if bare == f"::{stop_token}::":
                stop_token = None
            continue
        if not bare.startswith("::"):
            continue
        started = STOP.fullmatch(bare)
        if started:
            stop_token = started.group(1)
        elif not any(p.fullmatch(bare) for p in OURS):
            foreign.append(line)
    return foreign


def annotations(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if re.match(r"::(warning|notice) file=", line)]


def event_payload(
    fixture: str,
    *,
    number: int = 7,
    head: str = HEAD,
    base: str = BASE,
    head_repo: str | None = REPO,
) -> dict[str, Any]:
    """A trimmed real payload, rewritten to name the fake's repository, PR and shas."""
    data = json.loads((EVENTS / f"{fixture}.json").read_text(encoding="utf-8"))
    if "repository" in data:
        data["repository"]["full_name"] = REPO
    pull = data.get("pull_request")
    if pull is not None:
        data["number"] = pull["number"] = number
        pull["head"]["sha"], pull["base"]["sha"] = head, base
        pull["base"]["repo"]["full_name"] = REPO
        if pull["head"].get("repo") is not None:
            pull["head"]["repo"]["full_name"] = head_repo
    return data


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    summary: str
    outputs: dict[str, str]

    def report(self) -> dict[str, Any]:
        return json.loads(Path(self.outputs["report-path"]).read_text(encoding="utf-8"))


@dataclass
class Runner:
    """One workflow job: each `run` is a step with its own summary and output files."""

    tmp: Path
    api_url: str
    steps: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    subprocess: bool = False
    """True: `python entrypoint.py` as a real subprocess (tests about the process); else in-process."""

    @property
    def runner_temp(self) -> Path:
        return self.tmp / "runner_temp"

    def run(self, event_name: str, payload: Mapping[str, Any] | None, **inputs: str) -> Run:
        self.steps += 1
        step = self.tmp / f"step{self.steps}"
        step.mkdir(parents=True)
        self.runner_temp.mkdir(exist_ok=True)
        event_path = step / "event.json"
        event_path.write_text(json.dumps(payload if payload is not None else {}), encoding="utf-8")
        values = {**action_defaults(), "github-token": TOKEN}
        values.update({name.replace("_", "-"): value for name, value in inputs.items()})
        env = cli_env(
            self.tmp,
            {
                "GITHUB_ACTIONS": "true",
                "CI": "true",
                "GITHUB_EVENT_NAME": event_name,
                "GITHUB_EVENT_PATH": str(event_path),
                "GITHUB_STEP_SUMMARY": str(step / "summary.md"),
                "GITHUB_OUTPUT": str(step / "output"),
                "GITHUB_API_URL": self.api_url,
                "GITHUB_REPOSITORY": REPO,
                "GITHUB_RUN_ID": "4242",
                "IMREVIEW_STATE_KEY": "e2e-state-key-0123456789abcdefghij",
                "RUNNER_TEMP": str(self.runner_temp),
                **{f"INPUT_{name.upper()}": value for name, value in values.items()},
                **self.extra_env,
            },
        )
        launch = run_entrypoint_subprocess if self.subprocess else run_entrypoint
        proc = launch(cwd=self.tmp, env=env)
        summary = step / "summary.md"
        output = step / "output"
        return Run(
            code=proc.returncode,
            stdout=proc.stdout,
            stderr=proc.stderr,
            summary=summary.read_text(encoding="utf-8") if summary.exists() else "",
            outputs=runner_outputs(output.read_text(encoding="utf-8")) if output.exists() else {},
        )


# --------------------------------------------------------------------------- the model


finding = (
    model_finding  # the shared builder's answer shape (tests/factories.py); its defaults are these tests'
)


OUTSIDE = finding(
    line=40, priority="P3", title="Imagined helper misuse", quote="helper_not_in_this_diff()", confidence=0.5
)


answer = model_answer  # the shared builder of the answer around such findings (tests/factories.py)


def reviewer_model(
    by_path: Mapping[str, list[dict[str, Any]]],
    *,
    on_review: Callable[[], None] | None = None,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
) -> Callable[[dict[str, Any]], Reply]:
    """Answers a review prompt with the findings for the files it shows; verification keeps them all."""

    def handle(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        if '"verdicts"' in prompt:
            return text('{"verdicts": []}')
        if on_review is not None:
            on_review()
        shown = [f for path, items in by_path.items() if path in prompt for f in items]
        return text(answer(*shown), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    return handle


# --------------------------------------------------------------------------- fixtures


def with_model(server: FakeModelServer) -> dict[str, str]:
    return {"model": MODEL, "api_base": server.api_base}


def add_pull(gh: FakeGitHub, number: int = 7, **kwargs: Any) -> None:
    defaults: dict[str, Any] = {"head_sha": HEAD, "base_sha": BASE, "files": [diff_entry("app.py", PATCH)]}
    gh.add_pull(REPO, number, **{**defaults, **kwargs})


def writes(gh: FakeGitHub) -> list[tuple[str, str]]:
    """Requests that change something: not GETs, not GraphQL queries (reads sent as POST)."""
    return [(r.method, r.path) for r in gh.requests if r.method != "GET" and r.path != "/graphql"]


def only_comment(gh: FakeGitHub, number: int = 7) -> dict[str, Any]:
    comments = gh.comments(REPO, number)
    assert len(comments) == 1, [c["body"][:80] for c in comments]
    return comments[0]


def marker_state(body: str) -> dict[str, Any]:
    last = body.rstrip().rpartition("\n")[2]
    assert last.startswith(MARKER) and last.endswith(" -->"), last
    return json.loads(last[len(MARKER) : -len(" -->")])


def live_text(markdown: str) -> str:
    """Markdown with code blocks and code spans removed: what GitHub would link, mention or render."""
    without_fences = re.sub(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$", "", markdown, flags=re.S | re.M)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", without_fences, flags=re.S)


# --------------------------------------------------------------------------- 1. a review


def test_opened_pr_is_reviewed_summarised_commented_and_annotated(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh)
    model.handler = reviewer_model({"app.py": [finding(), OUTSIDE]})
    run = runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model))

    assert run.code == 0, run.stderr
    assert "**findings**" in run.summary
    assert "Division by zero when b is 0" in run.summary and "Imagined helper misuse" in run.summary
    out = run.outputs
    assert (out["verdict"], out["findings"], out["p1"], out["max-priority"], out["publish-ready"]) == (
        "findings",
        "2",
        "0",
        "P2",
        "true",
    )
    assert out["cost-usd"] == "", "the fake model has no price: the cost is unknown, not zero"

    report_path = Path(out["report-path"])
    assert report_path.is_file() and runner.runner_temp in report_path.parents
    report = run.report()
    jsonschema.Draft202012Validator(load_report_schema()).validate(report)
    assert report["snapshot"]["head"]["sha"] == HEAD and report["verdict"] == "findings"

    comment = only_comment(gh)
    state = marker_state(comment["body"])
    assert (state["head"], state["base"]) == (HEAD, BASE)
    assert (state["verdict"], state["findings"], state["max_priority"]) == ("findings", 2, "P2")
    assert out["comment-url"] == comment["html_url"]

    (note,) = annotations(run.stdout)
    assert note.startswith("::warning file=app.py,line=2,") and "Division by zero" in note
    assert foreign_commands(run.stdout) == []
    assert gh.violations == []


# --------------------------------------------------------------------------- 2. one comment


PRICES = "prices:\n  openai/fake-model:\n    input_usd_per_mtok: 10\n    output_usd_per_mtok: 20\n"


def test_three_runs_keep_one_comment_and_a_rerun_at_the_same_head_calls_no_model(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh)
    gh.add_content(REPO, BASE, ".github/imreview.yml", PRICES)
    model.handler = reviewer_model(
        {"app.py": [finding(), OUTSIDE]}, prompt_tokens=1000, completion_tokens=500
    )
    first = runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model))
    assert first.code == 0, first.stderr
    cost = first.report()["budget"]["used"]["cost_usd"]
    assert cost > 0 and first.outputs["cost-usd"] == f"{cost:.4f}"
    assert re.fullmatch(r"\d+\.\d{4}", first.outputs["cost-usd"])
    comment = only_comment(gh)
    calls = len(model.requests)
    requests_before = len(gh.requests)

    second = runner.run("pull_request", event_payload("pull_request.synchronize"), **with_model(model))
    assert second.code == 0, second.stderr
    assert len(model.requests) == calls, "a rerun at a reviewed head must not call the model"
    assert f"already reviewed at {HEAD[:12]}" in second.summary
    assert not [r for r in gh.requests[requests_before:] if r.method != "GET" and r.path != "/graphql"]
    out = second.outputs
    assert (out["verdict"], out["findings"], out["p1"], out["max-priority"], out["publish-ready"]) == (
        "findings",
        "2",
        "0",
        "P2",
        "true",
    )
    assert out["comment-url"] == comment["html_url"]
    assert out["cost-usd"] == "0.0000", "no model call was made on this run"

    gh.set_head(REPO, 7, HEAD2)
    third = runner.run(
        "pull_request", event_payload("pull_request.synchronize", head=HEAD2), **with_model(model)
    )
    assert third.code == 0, third.stderr
    assert len(model.requests) > calls
    edited = only_comment(gh)
    assert edited["id"] == comment["id"]
    state = marker_state(edited["body"])
    assert state["head"] == HEAD2 and state["reviewed_heads"] == [HEAD, HEAD2]
    assert state["total_cost_usd"] == pytest.approx(cost + third.report()["budget"]["used"]["cost_usd"])
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1
    assert gh.requests_to("PATCH", rf"/issues/comments/{comment['id']}$")
    assert gh.violations == []


# --------------------------------------------------------------------------- 3-4. inline review


def commentable(patch: str, path: str = "app.py") -> LineIndex:
    return LineIndex.build([parse_github_file(filename=path, status="modified", patch=patch)])


def test_inline_review_comments_only_on_anchored_lines_and_never_twice(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh)
    moved = finding(line=1, priority="P3", title="Result name hides intent", quote="return total")
    model.handler = reviewer_model({"app.py": [finding(), moved, OUTSIDE]})
    run = runner.run(
        "pull_request", event_payload("pull_request.opened"), inline_comments="true", **with_model(model)
    )
    assert run.code == 0, run.stderr

    (post,) = gh.requests_to("POST", r"/pulls/7/reviews$")
    assert post.body["event"] == "COMMENT" and post.body["commit_id"] == HEAD
    index = commentable(PATCH)
    placed = {(c["path"], c["line"], c.get("side", "RIGHT")) for c in post.body["comments"]}
    assert placed == {("app.py", 2, "RIGHT"), ("app.py", 3, "RIGHT")}
    assert all(index.commentable(path, line, side) for path, line, side in placed)
    assert not any("Imagined helper misuse" in c["body"] for c in post.body["comments"])
    (review,) = gh.reviews(REPO, 7)
    assert len(review["comments"]) == 2
    assert gh.violations == []

    gh.set_head(REPO, 7, HEAD2)
    calls = len(model.requests)
    again = runner.run(
        "pull_request",
        event_payload("pull_request.synchronize", head=HEAD2),
        inline_comments="true",
        **with_model(model),
    )
    assert again.code == 0, again.stderr
    assert len(model.requests) > calls, "a new head is reviewed again"
    assert len(gh.requests_to("POST", r"/pulls/7/reviews$")) == 1, "same finding ids: no second review"
    assert len(gh.reviews(REPO, 7)) == 1 and len(gh.comments(REPO, 7)) == 1
    assert gh.violations == []


def test_a_rejected_review_is_retried_once_with_the_findings_in_its_body(
    gh: FakeGitHub, runner: Runner
) -> None:
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    gh.fail("POST", r"/pulls/\d+/reviews", 422, times=1)
    run = runner.run("pull_request", event_payload("pull_request.opened"), inline_comments="true")
    assert run.code == 0, run.stderr
    first, retry = gh.requests_to("POST", r"/pulls/7/reviews$")
    ((inline,),) = [first.body["comments"]]
    assert (inline["path"], inline["line"]) == ("app.py", 2)
    assert not retry.body.get("comments")
    assert "Debugger breakpoint left in" in inline["body"]
    assert "Debugger breakpoint left in" in retry.body["body"]
    (review,) = gh.reviews(REPO, 7)
    assert review["comments"] == [] and review["state"] == "COMMENTED"
    assert gh.violations == []


# --------------------------------------------------------------------------- 5-6. no write access


def test_fork_pr_gets_a_summary_and_a_notice_and_no_write_attempt(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh, head_repo=FORK, author="forker", files=[diff_entry("app.py", DEBUG_PATCH)])
    run = runner.run(
        "pull_request", event_payload("pull_request.opened.fork", head_repo=FORK), inline_comments="true"
    )
    assert run.code == 0, run.stderr
    assert "Debugger breakpoint left in" in run.summary and "**findings**" in run.summary
    assert any(line.startswith("::notice ") and "read-only token" in line for line in run.stdout.splitlines())
    assert writes(gh) == []
    assert run.outputs["verdict"] == "findings" and run.outputs["comment-url"] == ""
    assert annotations(run.stdout), "annotations still carry the review"
    assert gh.violations == []


def test_read_only_token_on_a_same_repo_pr_stops_writing_after_the_first_403(
    gh: FakeGitHub, runner: Runner
) -> None:
    gh.add_token("read-only-token", write=False)
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    run = runner.run(
        "pull_request",
        event_payload("pull_request.opened"),
        github_token="read-only-token",
        inline_comments="true",
    )
    assert run.code == 0, run.stderr
    assert writes(gh) == [("POST", f"/repos/{REPO}/issues/7/comments")], "one 403, then no more writes"
    assert gh.comments(REPO, 7) == [] and gh.reviews(REPO, 7) == []
    assert "read-only token" in run.summary
    assert any(line.startswith("::notice ") and "read-only" in line for line in run.stdout.splitlines())
    assert run.outputs["verdict"] == "findings"
    assert gh.violations == []


def test_head_repo_null_is_treated_as_a_fork(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh, head_repo=None, files=[diff_entry("app.py", DEBUG_PATCH)])
    run = runner.run("pull_request", event_payload("pull_request.synchronize.head_repo_null", head_repo=None))
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "findings" and "breakpoint" in run.summary
    assert writes(gh) == []
    assert any(line.startswith("::notice ") and "read-only token" in line for line in run.stdout.splitlines())
    assert gh.violations == []


# --------------------------------------------------------------------------- 7. skipped runs


@pytest.mark.parametrize(
    ("event_name", "fixture", "pull", "why"),
    [
        ("pull_request", "pull_request.opened.draft", {"draft": True}, "draft"),
        (
            "pull_request",
            "pull_request.opened.bot",
            {"author": "dependabot[bot]", "author_type": "Bot"},
            "opened by the bot dependabot[bot]",
        ),
        ("pull_request", "pull_request.closed", {"state": "closed"}, "action 'closed' is not reviewed"),
        ("push", None, {}, "event 'push' is not reviewed"),
        ("schedule", "schedule", {"draft": True}, "draft (skip-drafts)"),
    ],
)
def test_runs_that_review_nothing_by_policy_are_skipped_with_the_reason(
    gh: FakeGitHub,
    model: FakeModelServer,
    runner: Runner,
    event_name: str,
    fixture: str | None,
    pull: dict[str, Any],
    why: str,
) -> None:
    add_pull(gh, **pull)
    payload = (
        event_payload(fixture) if fixture else {"ref": "refs/heads/main", "repository": {"full_name": REPO}}
    )
    run = runner.run(event_name, payload, **with_model(model))
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "skipped"
    assert "skipped" in run.summary and why in run.summary
    assert model.requests == []
    assert writes(gh) == []
    assert gh.violations == []


# --------------------------------------------------------------------------- 8. dispatch


def test_dispatch_reviews_every_named_pr_and_aggregates_the_outputs(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh, 7)
    add_pull(gh, 8, head_sha=HEAD2, draft=True, files=[diff_entry("lib/other.py", OTHER_PATCH)])
    model.handler = reviewer_model({"app.py": [finding(), OUTSIDE], "lib/other.py": []})
    run = runner.run(
        "workflow_dispatch", event_payload("workflow_dispatch"), pr_number="7, 8", **with_model(model)
    )
    assert run.code == 0, run.stderr

    out = run.outputs
    assert (out["verdict"], out["findings"], out["max-priority"]) == ("findings", "2", "P2")
    urls = out["comment-url"].split("\n")
    assert urls == [only_comment(gh, 7)["html_url"], only_comment(gh, 8)["html_url"]]
    index = json.loads(Path(out["report-path"]).read_text(encoding="utf-8"))
    assert [entry["number"] for entry in index["reports"]] == [7, 8]
    verdicts = {}
    for entry in index["reports"]:
        report = json.loads(Path(entry["report_path"]).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator(load_report_schema()).validate(report)
        verdicts[report["snapshot"]["number"]] = (report["verdict"], report["snapshot"]["draft"])
    assert verdicts == {7: ("findings", False), 8: ("clean", True)}, "a draft named in a dispatch is reviewed"
    assert "#7" in run.summary and "#8" in run.summary
    assert gh.violations == []


def test_dispatch_with_a_missing_pr_still_reviews_the_other(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh, 7, files=[diff_entry("app.py", DEBUG_PATCH)])
    run = runner.run("workflow_dispatch", event_payload("workflow_dispatch"), pr_number="99 7")
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "incomplete", "an unreadable PR makes the run incomplete, never clean"
    assert run.outputs["findings"] == "1" and run.outputs["comment-url"] == only_comment(gh, 7)["html_url"]
    assert "could not read pull request" in run.summary and "99" in run.summary
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert errors and "#99" in errors[0]


# --------------------------------------------------------------------------- 9. stale head


def test_head_moving_during_the_review_posts_nothing(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """No review of a stale head reaches the PR. What the run cost does: the sticky comment holding
    the run's max-pr-cost-usd reservation (created before the model was called) says the review was
    not published and records the run's real cost (docs/state-and-caps.md)."""
    add_pull(gh)
    gh.add_content(REPO, BASE, ".github/imreview.yml", PRICES)
    model.handler = reviewer_model({"app.py": [finding()]}, on_review=lambda: gh.set_head(REPO, 7, HEAD2))
    run = runner.run(
        "pull_request", event_payload("pull_request.opened"), inline_comments="true", **with_model(model)
    )
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "incomplete" and run.outputs["publish-ready"] == "false"
    assert gh.reviews(REPO, 7) == []
    body = only_comment(gh)["body"]
    assert "was not published" in body and "Division" not in body, body
    state = marker_state(body)
    assert "head" not in state and state["total_cost_usd"] == pytest.approx(float(run.outputs["cost-usd"]))
    assert [method for method, _ in writes(gh)] == ["POST", "PATCH"]
    assert "head moved" in run.summary
    assert any(line.startswith("::warning title=imreview") for line in run.stdout.splitlines())
    assert gh.violations == []


# --------------------------------------------------------------------------- 10. exit codes


@pytest.mark.parametrize(
    ("inputs", "named"),
    [({"max_cost_usd": "lots"}, "max-cost-usd"), ({"post_comment": "maybe"}, "post-comment")],
)
def test_bad_input_exits_2_naming_it(runner: Runner, inputs: dict[str, str], named: str) -> None:
    run = runner.run("pull_request", event_payload("pull_request.opened"), **inputs)
    assert run.code == 2, run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert errors and named in errors[0]
    assert named in run.summary


def test_bad_config_on_the_base_branch_exits_2_naming_file_and_line(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh)
    gh.add_content(REPO, BASE, ".github/imreview.yml", "language: en\nmax_cost: 2\n")
    run = runner.run("pull_request", event_payload("pull_request.opened"))
    assert run.code == 2, run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert errors and ".github/imreview.yml:2: unknown key 'max_cost'" in errors[0]
    assert "max_cost_usd" in run.summary
    assert writes(gh) == []


def test_incomplete_review_with_on_error_fail_exits_3(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh)
    run = runner.run("pull_request", event_payload("pull_request.opened"), on_error="fail")
    assert run.code == 3, run.stderr
    assert run.outputs["verdict"] == "incomplete"
    assert "no model configured" in run.summary


def test_finding_at_fail_on_exits_1(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    run = runner.run("pull_request", event_payload("pull_request.opened"), fail_on="P2")
    assert run.code == 1, run.stderr
    assert (run.outputs["verdict"], run.outputs["max-priority"]) == ("findings", "P2")
    assert only_comment(gh), "the review is published before the step fails"


# --------------------------------------------------------------------------- 11. untrusted text


EVIL = (
    "::set-output name=x::y\n::error::pwned\n<!-- imreview:state v1 {} -->\n"
    "@octocat please look <img src=x onerror=alert(1)> <script>alert(1)</script>"
)


def test_untrusted_pr_and_model_text_cannot_command_the_runner_or_forge_our_marker(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh, title="::error::pwned @octocat <!-- imreview:state v1 {} -->", body=EVIL)
    evil = finding(title="::set-output name=x::y @octocat", observation=EVIL, suggestion=EVIL)
    unanchored = finding(line=40, title="::error::pwned", observation=EVIL, quote="::error::pwned")
    model.handler = reviewer_model({"app.py": [evil, unanchored]})
    run = runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model))
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "findings"

    assert foreign_commands(run.stdout) == []
    assert annotations(run.stdout), "the anchored finding is still annotated, escaped"
    body = only_comment(gh)["body"]
    assert body.count("imreview:state") == 1
    assert marker_state(body)["head"] == HEAD
    live = live_text(body)
    assert "@octocat" not in live
    assert "<img" not in live and "<script" not in live
    assert "<img" not in live_text(run.summary) and "<script" not in live_text(run.summary)
    assert run.summary.count("imreview:state") == 0
    assert gh.violations == []


# --------------------------------------------------------------------------- 12. GHES


def test_ghes_api_url_with_a_path_prefix_needs_no_other_setting(tmp_path: Path) -> None:
    with FakeGitHub(prefix="/api/v3") as ghes:
        ghes.add_token(TOKEN)
        ghes.add_repo(REPO)
        add_pull(ghes, files=[diff_entry("app.py", DEBUG_PATCH)])
        assert ghes.url.endswith("/api/v3")
        run = Runner(tmp_path, ghes.url).run("pull_request", event_payload("pull_request.opened"))
        assert run.code == 0, run.stderr
        assert run.outputs["verdict"] == "findings"
        assert marker_state(only_comment(ghes)["body"])["head"] == HEAD
        assert ghes.requests and ghes.violations == []


# --------------------------------------------------------------------------- 13. secrets


SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_a_secret_quoted_by_the_model_is_redacted_everywhere(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    patch = f"@@ -1,2 +1,3 @@\n x = 1\n+TOKEN = '{SECRET}'\n y = 2"
    add_pull(gh, files=[diff_entry("settings.py", patch)])
    leak = finding(
        path="settings.py",
        title=f"Token {SECRET} is committed",
        observation=f"anyone with read access can use {SECRET}",
        suggestion="rotate it and read it from the environment",
        quote=f"TOKEN = '{SECRET}'",
    )
    model.handler = reviewer_model({"settings.py": [leak]})
    run = runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model))
    assert run.code == 0, run.stderr

    body = only_comment(gh)["body"]
    report = Path(run.outputs["report-path"]).read_text(encoding="utf-8")
    for where, content in {
        "comment": body,
        "summary": run.summary,
        "report": report,
        "stdout": run.stdout,
        "outputs": json.dumps(run.outputs),
    }.items():
        assert SECRET not in content, where
    assert SECRET[:4] + "…" in run.summary  # the comment no longer quotes code; the summary does
    assert SECRET not in json.dumps(model.requests)
    assert gh.violations == []


def test_config_and_template_overrides_come_from_the_base_branch_only(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    tdir = ".github/imreview-templates"
    gh.add_content(REPO, BASE, f"{tdir}/comment.md.j2", "Base-branch comment: {{ report.verdict }}")
    gh.add_content(REPO, HEAD, f"{tdir}/comment.md.j2", "PR-controlled comment")
    gh.add_content(REPO, BASE, ".github/imreview.yml", "language: zh-CN\n")
    gh.add_content(REPO, HEAD, ".github/imreview.yml", "language: en\nmax_findings: 0\n")
    run = runner.run("pull_request", event_payload("pull_request.opened"), template_dir=tdir)
    assert run.code == 0, run.stderr
    body = only_comment(gh)["body"]
    assert body.startswith("Base-branch comment: findings")
    assert "PR-controlled" not in body
    assert marker_state(body)["head"] == HEAD
    report = json.loads(Path(run.outputs["report-path"]).read_text(encoding="utf-8"))
    assert report["settings"]["language"] == "zh-CN" and report["settings"]["max_findings"] == 6


@pytest.mark.parametrize(
    ("event_name", "fixture", "head_repo"),
    [
        ("pull_request", "pull_request.reopened", REPO),
        ("pull_request", "pull_request.ready_for_review", REPO),
        ("pull_request_target", "pull_request.opened.fork", "someone/widgets-fork"),
    ],
)
def test_reviewed_actions_and_pull_request_target_on_a_fork_post_the_comment(
    gh: FakeGitHub, runner: Runner, event_name: str, fixture: str, head_repo: str
) -> None:
    add_pull(gh, head_repo=head_repo, files=[diff_entry("app.py", DEBUG_PATCH)])
    run = runner.run(event_name, event_payload(fixture, head_repo=head_repo))
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "findings"
    body = only_comment(gh)["body"]
    assert "breakpoint" in body and marker_state(body)["head"] == HEAD
    assert gh.violations == []


def test_a_rerun_of_a_failing_step_at_the_same_head_still_fails(gh: FakeGitHub, runner: Runner) -> None:
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    first = runner.run("pull_request", event_payload("pull_request.opened"), fail_on="P2")
    again = runner.run("pull_request", event_payload("pull_request.synchronize"), fail_on="P2")
    assert (first.code, again.code) == (1, 1)
    assert "already reviewed" in again.summary and again.outputs["max-priority"] == "P2"


def test_a_github_app_token_keeps_one_comment(gh: FakeGitHub, runner: Runner) -> None:
    gh.add_token("app-token", login=None, bot="imreview-app[bot]")
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    for _ in range(2):
        run = runner.run("pull_request", event_payload("pull_request.opened"), github_token="app-token")
        assert run.code == 0, run.stderr
    assert only_comment(gh)["user"]["login"] == "imreview-app[bot]"
    assert "already reviewed" in run.summary


def test_a_failing_contents_read_costs_context_not_the_review(
    gh: FakeGitHub, runner: Runner, model: FakeModelServer
) -> None:
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    gh.fail("POST", r"/graphql$", 502, times=20)
    gh.fail("GET", r"/contents/app\.py", 502, times=20)
    model.handler = reviewer_model({})
    run = runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model))
    assert run.code == 0, run.stderr
    assert run.outputs["verdict"] == "findings"
    assert "could not read app.py" in run.stdout


@pytest.mark.parametrize("given", ["input", "config"])
def test_a_language_only_the_base_branchs_templates_provide_is_reviewed_in(
    gh: FakeGitHub, runner: Runner, given: str
) -> None:
    """docs/templates.md: "To add a language, copy en.yml to i18n/<tag>.yml in your template
    directory". The run's own messages are built before the base's templates are read; a language
    they alone provide must not fail the run, and the review speaks it."""
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    tdir = ".github/imreview-templates"
    french = "headline:\n  rules_only: vérifications déterministes\n"
    gh.add_content(REPO, BASE, f"{tdir}/i18n/fr.yml", french)
    inputs = {"template_dir": tdir}
    if given == "input":
        inputs["language"] = "fr"
    else:
        gh.add_content(REPO, BASE, ".github/imreview.yml", "language: fr\n")
    run = runner.run("pull_request", event_payload("pull_request.opened"), **inputs)
    assert run.code == 0, run.stderr
    body = only_comment(gh)["body"]
    assert body.startswith("### imreview — vérifications déterministes · 1 "), body
    report = json.loads(Path(run.outputs["report-path"]).read_text(encoding="utf-8"))
    assert report["settings"]["language"] == "fr"


@pytest.mark.parametrize(
    ("language", "file"),
    [("zh-TW", "zh-TW.yml"), ("pt-br", "pt-BR.yml"), ("FR", "fr.yml"), ("fr-CA", "fr.yml")],
)
def test_the_base_branchs_language_file_is_picked_as_a_local_one_would_be(
    gh: FakeGitHub, runner: Runner, language: str, file: str
) -> None:
    """A tag whose primary subtag the package has (zh-TW beside zh-CN) or written in another case
    than the file's name picks the template directory's file, as `--template-dir` does locally."""
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    tdir = ".github/imreview-templates"
    gh.add_content(REPO, BASE, f"{tdir}/i18n/{file}", "headline:\n  rules_only: ours-only headline\n")
    run = runner.run(
        "pull_request", event_payload("pull_request.opened"), template_dir=tdir, language=language
    )
    assert run.code == 0, run.stderr
    assert only_comment(gh)["body"].startswith("### imreview — ours-only headline · 1 ")


def test_a_language_no_template_provides_still_stops_the_run_naming_it(
    gh: FakeGitHub, runner: Runner
) -> None:
    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    tdir = ".github/imreview-templates"
    gh.add_content(REPO, BASE, f"{tdir}/i18n/fr.yml", "section:\n  findings: Constats\n")
    gh.add_content(REPO, BASE, f"{tdir}/comment.md.j2", "Base-branch comment")
    run = runner.run(
        "pull_request", event_payload("pull_request.opened"), template_dir=tdir, language="xx-typo"
    )
    assert run.code == 2, run.stderr
    assert "unknown language 'xx-typo'" in run.summary, run.summary
    assert writes(gh) == []


def test_every_packaged_template_is_overridable_from_the_base_branch_in_one_query(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """docs/templates.md: `prompts/*.j2` are overridable; a partial the review prompt includes (not
    only the top-level files) comes from the base branch, and no file costs a contents request."""
    add_pull(gh)
    tdir = ".github/imreview-templates"
    gh.add_content(REPO, BASE, f"{tdir}/prompts/findings_schema.j2", "OUR-HOUSE-FIELD-RULES\n")
    model.handler = reviewer_model({"app.py": [finding()]})
    run = runner.run(
        "pull_request", event_payload("pull_request.opened"), template_dir=tdir, **with_model(model)
    )
    assert run.code == 0, run.stderr
    assert "OUR-HOUSE-FIELD-RULES" in json.dumps(model.requests[0])
    assert gh.requests_to("GET", rf"/contents/{re.escape(tdir)}/") == []


def test_a_translation_naming_a_value_it_is_never_given_stops_the_run_before_any_write(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """The sinks word what they did after writing; a base-branch translation with a placeholder its
    sentence is never given would fail there, after the comment was posted. It is refused when the
    templates are read, before any model call or write, naming the key."""
    add_pull(gh)
    tdir = ".github/imreview-templates"
    french = 'publish:\n  review_posted: "revue avec {nombre} commentaire(s)"\n'
    gh.add_content(REPO, BASE, f"{tdir}/i18n/fr.yml", french)
    model.handler = reviewer_model({"app.py": [finding()]})
    run = runner.run(
        "pull_request",
        event_payload("pull_request.opened"),
        template_dir=tdir,
        language="fr",
        inline_comments="true",
        **with_model(model),
    )
    assert run.code == 2, run.stderr
    assert "'publish.review_posted' names {nombre}, which it is never given (it has: {n})" in run.summary
    assert writes(gh) == [] and model.requests == []
