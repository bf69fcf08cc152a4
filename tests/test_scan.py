"""Scheduled scans of open PRs: the Action's schedule mode and `imreview scan`, end to end.

The Action runs as a subprocess in the emulated runner of test_action_e2e; GitHub and the model are
the loopback fakes. What a maintainer would notice is asserted: which PRs got a model call, what
the job summary lists, the step outputs, and how many REST requests a scan costs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from reviewer.config import build_config, parse_config_text
from reviewer.render import Renderer
from reviewer.review import planned_cost
from reviewer.scan import MATRIX_MAX
from reviewer.source.github import GitHubClient, GitHubSource
from reviewer.state import sign_sticky, state_key
from tests.conftest import cli_env, run_cli
from tests.factories import model_answer
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, text
from tests.test_action_e2e import MODEL, REPO, TOKEN, Runner, marker_state, with_model

BASE = "b0" * 20
PRICES = "prices:\n  openai/fake-model:\n    input_usd_per_mtok: 10\n    output_usd_per_mtok: 20\n"
SCHEDULE: dict[str, Any] = {"schedule": "17 * * * *"}


def sha(n: int, salt: str = "a") -> str:
    return f"{salt}{n:039x}"[:40]


def patch_for(n: int) -> str:
    return f"@@ -1,2 +1,3 @@\n x = {n}\n+y = x * {n}\n z = 1"


def quiet_model(body: dict[str, Any]) -> Reply:
    """No findings, fixed usage: each PR costs exactly one call of 10 + 5 tokens."""
    return text(model_answer(), prompt_tokens=10, completion_tokens=5)


def add_open_prs(gh: FakeGitHub, count: int, *, start: int = 1) -> None:
    for n in range(start, start + count):
        gh.add_pull(
            REPO,
            n,
            head_sha=sha(n),
            base_sha=BASE,
            title=f"change {n}",
            files=[diff_entry(f"m{n}.py", patch_for(n))],
        )


def add_mixed_pull(gh: FakeGitHub, n: int, labels: list[str]) -> None:
    """PR `n` at sha(n) with `labels`, in the state n % 10 picks: 1 a draft, 2 opened by a bot,
    any other an open PR by octocat."""
    kind = n % 10
    gh.add_pull(
        REPO,
        n,
        head_sha=sha(n),
        base_sha=BASE,
        draft=kind == 1,
        author="renovate[bot]" if kind == 2 else "octocat",
        author_type="Bot" if kind == 2 else "User",
        labels=labels,
        files=[diff_entry(f"m{n}.py", patch_for(n))],
    )


def add_reviewed_sticky(
    gh: FakeGitHub, n: int, state: dict[str, Any], *, head: str, key: bytes | None
) -> None:
    """Our signed sticky comment on PR `n`: `state` (a real run's) saying `head` was reviewed."""
    body = "## imreview\n\n<!-- imreview:state v1 " + json.dumps({**state, "head": head}) + " -->"
    gh.add_comment(REPO, n, sign_sticky(body, repo=REPO, number=n, key=key))


def reviewed_numbers(gh: FakeGitHub) -> set[int]:
    """PRs whose files the scan read: the ones it reviewed."""
    found = set()
    for r in gh.requests_to("GET", r"/pulls/\d+/files$"):
        match = re.search(r"/pulls/(\d+)/files$", r.path)
        assert match is not None
        found.add(int(match.group(1)))
    return found


def model_prompts_for(model: FakeModelServer) -> list[str]:
    return [r["messages"][-1]["content"] for r in model.requests]


# --------------------------------------------------------------------------- the Action's schedule mode


def test_two_scans_in_a_row_review_once_and_then_only_what_changed(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_open_prs(gh, 8)
    gh.add_pull(REPO, 9, head_sha=sha(9), base_sha=BASE, draft=True, files=[diff_entry("d.py", patch_for(9))])
    gh.add_pull(
        REPO,
        10,
        head_sha=sha(10),
        base_sha=BASE,
        author="dependabot[bot]",
        author_type="Bot",
        files=[diff_entry("b.py", patch_for(10))],
    )
    model.handler = quiet_model

    first = runner.run("schedule", SCHEDULE, **with_model(model))
    assert first.code == 0, first.stderr
    assert reviewed_numbers(gh) == set(range(1, 9)), "drafts and bots are skipped, the rest reviewed"
    assert len(model.requests) == 8
    assert all(len(gh.comments(REPO, n)) == 1 for n in range(1, 9))
    assert gh.comments(REPO, 9) == [] and gh.comments(REPO, 10) == []
    assert first.summary.count("# imreview — scan of") == 1, "one run table"
    assert "8 reviewed" in first.summary and "2 skipped" in first.summary
    assert "draft (skip-drafts)" in first.summary and "opened by a bot" in first.summary
    assert first.outputs["verdict"] == "clean" and first.outputs["findings"] == "0"
    assert len(json.loads(Path(first.outputs["report-path"]).read_text())["reports"]) == 8

    mark = len(gh.requests)
    second = runner.run("schedule", SCHEDULE, **with_model(model))
    assert second.code == 0, second.stderr
    assert len(model.requests) == 8, "an unchanged PR costs no model call"
    later = gh.requests[mark:]
    assert not [r for r in later if "/contents/" in r.path and "imreview.yml" not in r.path]
    assert not [r for r in later if re.search(r"/pulls/\d+", r.path)], (
        "no request of its own per unchanged PR"
    )
    assert not [r for r in later if r.method != "GET"]
    assert len(later) <= 6, [r.path for r in later]
    assert "already reviewed at this head" in second.summary and "0 reviewed" in second.summary
    assert second.outputs["verdict"] == "skipped"

    gh.set_head(REPO, 3, sha(3, "c"), files=[diff_entry("m3.py", patch_for(33))])
    third = runner.run("schedule", SCHEDULE, **with_model(model))
    assert third.code == 0, third.stderr
    assert len(model.requests) == 9, "only the pushed PR is reviewed again"
    assert "y = x * 33" in model_prompts_for(model)[-1]
    assert marker_state(gh.comments(REPO, 3)[0]["body"])["head"] == sha(3, "c")
    assert gh.violations == []


def test_two_scans_of_300_prs_in_mixed_states_leave_unchanged_prs_alone(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """Drafts, bots, unlabelled, already reviewed, changed since and never reviewed, mixed: the first
    scan reviews exactly the changed and new ones; the second makes no model call, reads no file
    contents and sends no request for any single PR."""
    model.handler = quiet_model
    label = {"scan_labels": "review-me"}
    gh.add_pull(
        REPO,
        1,
        head_sha=sha(1),
        base_sha=BASE,
        labels=["review-me"],
        files=[diff_entry("m1.py", patch_for(1))],
    )
    seeded = runner.run("schedule", SCHEDULE, **label, **with_model(model))
    assert seeded.code == 0, seeded.stderr
    state = marker_state(gh.comments(REPO, 1)[0]["body"])
    key = state_key({"IMREVIEW_STATE_KEY": "e2e-state-key-0123456789abcdefghij"})
    expected: set[int] = set()
    for n in range(2, 301):
        kind = n % 10
        add_mixed_pull(gh, n, labels=[] if kind == 3 else ["review-me"])
        if kind in (1, 2, 3):
            continue
        if kind == 5 and n <= 60:
            expected.add(n)  # never reviewed
            continue
        changed = kind == 4 and n <= 100
        if changed:
            expected.add(n)
        add_reviewed_sticky(gh, n, state, head=sha(n, "f") if changed else sha(n), key=key)
    calls = len(model.requests)
    mark = len(gh.requests)
    first = runner.run("schedule", SCHEDULE, **label, **with_model(model))
    assert first.code == 0, first.stderr
    assert reviewed_numbers(gh) - {1} == expected and len(expected) == 16
    assert len(model.requests) - calls == 16
    assert f"{len(expected)} reviewed" in first.summary

    calls = len(model.requests)
    mark = len(gh.requests)
    second = runner.run("schedule", SCHEDULE, **label, **with_model(model))
    assert second.code == 0, second.stderr
    later = gh.requests[mark:]
    print(f"\nREST requests for a second scan of 300 open PRs: {len(later)}")
    assert len(model.requests) == calls, "no model call for unchanged PRs"
    assert not [r for r in later if "/contents/" in r.path and "imreview.yml" not in r.path]
    assert not [r for r in later if r.path == "/graphql"], "no file contents read"
    assert not [r for r in later if re.search(r"/pulls/\d+", r.path)]
    assert "0 reviewed" in second.summary
    assert gh.violations == []


def test_scan_limit_labels_and_oldest_updated_first(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    for n in range(1, 7):
        gh.add_pull(
            REPO,
            n,
            head_sha=sha(n),
            base_sha=BASE,
            labels=["review-me"] if n % 2 == 0 else [],
            files=[diff_entry(f"m{n}.py", patch_for(n))],
            updated_at=f"2025-01-0{7 - n}T00:00:00Z",
        )
    model.handler = quiet_model
    run = runner.run(
        "schedule", SCHEDULE, scan_limit="2", scan_labels="other, review-me", **with_model(model)
    )
    assert run.code == 0, run.stderr
    assert reviewed_numbers(gh) == {6, 4}, "labelled PRs, least recently updated first, at most scan-limit"
    assert "past scan-limit" in run.summary and "none of the scan labels" in run.summary
    assert gh.violations == []


def test_bad_scan_limit_exits_2_naming_the_input(gh: FakeGitHub, runner: Runner) -> None:
    run = runner.run("schedule", SCHEDULE, scan_limit="many")
    assert run.code == 2
    assert "scan-limit" in run.summary and "scan-limit" in run.stdout


def test_run_budget_that_fits_three_prs_reviews_three_and_defers_seven(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_open_prs(gh, 10)
    gh.add_content(REPO, "main", ".github/imreview.yml", PRICES)
    model.handler = quiet_model
    config = build_config(
        file_layer=parse_config_text(PRICES, "imreview.yml"), env={}, overrides=with_model(model)
    )
    price = (10 / 1e6, 20 / 1e6)
    change = GitHubSource(GitHubClient(TOKEN, gh.url), REPO, 1).change()
    needed = planned_cost(change, config, renderer=Renderer())
    assert needed is not None and needed > 0
    per_pr = 10 * price[0] + 5 * price[1]
    run_budget = 2 * per_pr + needed + per_pr / 2
    run = runner.run(
        "schedule", SCHEDULE, max_cost_usd=f"{run_budget:.8f}", scan_limit="10", **with_model(model)
    )
    assert run.code == 0, run.stderr
    reviewed = {n for n in range(1, 11) if gh.comments(REPO, n)}
    assert len(model.requests) == 3 and len(reviewed) == 3
    assert run.summary.count("the run budget left would not cover its review") == 7
    assert "3 reviewed" in run.summary and "7 deferred" in run.summary
    spent = float(run.outputs["cost-usd"])
    assert spent <= run_budget and spent == pytest.approx(3 * per_pr, abs=1e-4)
    assert all(gh.comments(REPO, n) == [] for n in set(range(1, 11)) - reviewed), "deferred: nothing posted"


def test_matrix_output_drives_a_fan_out_of_two_prs(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_open_prs(gh, 2)
    gh.add_pull(REPO, 3, head_sha=sha(3), base_sha=BASE, draft=True, files=[diff_entry("d.py", patch_for(3))])
    model.handler = quiet_model
    plan = runner.run("schedule", SCHEDULE, scan_matrix="true", **with_model(model))
    assert plan.code == 0, plan.stderr
    assert model.requests == [] and reviewed_numbers(gh) == set(), "the plan job reviews nothing"
    matrix = json.loads(plan.outputs["matrix"])
    assert matrix == {"include": [{"pr": 1}, {"pr": 2}]}
    assert "a job of the fan-out matrix" in plan.summary

    for entry in matrix["include"]:
        job = runner.run("schedule", SCHEDULE, mode="pr", pr_number=str(entry["pr"]), **with_model(model))
        assert job.code == 0, job.stderr
        assert job.outputs["verdict"] == "clean"
    assert len(model.requests) == 2 and reviewed_numbers(gh) == {1, 2}
    assert all(len(gh.comments(REPO, n)) == 1 for n in (1, 2))

    again = runner.run("schedule", SCHEDULE, scan_matrix="true", **with_model(model))
    assert json.loads(again.outputs["matrix"]) == {"include": []}, "reviewed heads leave the matrix"
    assert gh.violations == []


def test_a_rate_limited_pr_is_waited_out_or_deferred(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_open_prs(gh, 3)
    model.handler = quiet_model
    gh.fail("GET", r"/pulls/1$", 429, {"message": "secondary rate limit"}, headers={"Retry-After": "1"})
    gh.fail(
        "GET",
        r"/pulls/2$",
        403,
        {"message": "You have exceeded a secondary rate limit"},
        times=10,
        headers={"Retry-After": "3600"},
    )
    run = runner.run("schedule", SCHEDULE, **with_model(model))
    assert run.code == 0, run.stderr
    assert reviewed_numbers(gh) == {1, 3}, "a short Retry-After is waited out; a long one defers the PR"
    assert "GitHub rate limit; try the next run" in run.summary
    assert gh.comments(REPO, 2) == []


def test_a_rate_limit_wait_longer_than_the_run_has_left_defers_the_pr(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """A 60 s Retry-After is under the fixed 120 s ceiling, but a run with 45 s in all cannot sit
    it out: the PR is deferred at once instead of sleeping past the run's time budget."""
    add_open_prs(gh, 2)
    model.handler = quiet_model
    gh.fail(
        "GET",
        r"/pulls/1$",
        403,
        {"message": "You have exceeded a secondary rate limit"},
        times=10,
        headers={"Retry-After": "60"},
    )
    run = runner.run("schedule", SCHEDULE, max_seconds="45", **with_model(model))
    assert run.code == 0, run.stderr
    assert reviewed_numbers(gh) == {2}
    assert "GitHub rate limit; try the next run" in run.summary
    assert len(gh.requests_to("GET", r"/pulls/1$")) == 1, "no second try after a wait the run cannot afford"


def test_a_run_that_cannot_pay_for_one_call_defers_every_pr_without_reading_its_diff(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_open_prs(gh, 5)
    gh.add_content(REPO, "main", ".github/imreview.yml", PRICES)
    model.handler = quiet_model
    run = runner.run("schedule", SCHEDULE, max_cost_usd="0.001", **with_model(model))
    assert run.code == 0, run.stderr
    assert "5 deferred" in run.summary
    assert model.requests == []
    assert not gh.requests_to("GET", r"/pulls/\d+"), "a deferred PR costs no request of its own"


# --------------------------------------------------------------------------- request counts


def test_a_scan_of_500_open_prs_stays_within_20_requests_before_reviewing(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    """300 PRs in mixed states plus 200 already reviewed: the triage reads lists, never a PR."""
    model.handler = quiet_model
    add_open_prs(gh, 1)
    env = cli_env(
        tmp_path,
        {
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_API_URL": gh.url,
            "IMREVIEW_STATE_KEY": "scan-state-key-0123456789abcdefghij",
        },
    )
    model_args = ["--model", MODEL, "--api-base", model.api_base]
    seeded = run_cli(["scan", REPO, "--review", "--post-comment", *model_args], cwd=tmp_path, env=env)
    assert seeded.returncode == 0, seeded.stderr
    state = marker_state(gh.comments(REPO, 1)[0]["body"])

    for n in range(2, 501):
        kind = n % 10
        add_mixed_pull(gh, n, labels=["wip"] if kind == 3 else [])
        if n <= 300 and kind in (4, 5):
            gh.add_comment(REPO, n, "looks good to me", login="alice", kind="User")
        if n > 300 or kind == 6:
            add_reviewed_sticky(gh, n, state, head=sha(n, "f") if n == 26 else sha(n), key=state_key(env))
    mark = len(gh.requests)
    planned = run_cli(
        ["scan", REPO, "--limit", "50", "--json", "scan.json", *model_args], cwd=tmp_path, env=env
    )
    assert planned.returncode == 0, planned.stderr
    requests = gh.requests[mark:]
    print(f"\nREST requests for a scan of 500 open PRs before the first review: {len(requests)}")
    assert len(requests) <= 20, [r.path for r in requests]
    assert not [r for r in requests if re.search(r"/pulls/\d+", r.path)]
    data = json.loads((tmp_path / "scan.json").read_text())
    status = {p["number"]: (p["status"], p["reason"]) for p in data["pulls"]}
    assert len(status) == 500
    assert status[11] == ("skipped", "draft") and status[12] == ("skipped", "bot")
    assert status[305] == ("skipped", "already_reviewed") and status[1] == ("skipped", "already_reviewed")
    assert status[16] == ("skipped", "already_reviewed") and status[26] == ("planned", "matrix"), "head moved"
    assert sum(1 for s, _ in status.values() if s == "planned") == 50
    assert gh.violations == []


# --------------------------------------------------------------------------- imreview scan


def test_imreview_scan_lists_by_default_and_prints_the_matrix(gh: FakeGitHub, tmp_path: Path) -> None:
    add_open_prs(gh, 3)
    env = cli_env(tmp_path, {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url})
    listed = run_cli(["scan", REPO], cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "3 planned for the fan-out" in listed.stdout and "#1" in listed.stdout
    assert not [r for r in gh.requests if r.method != "GET"]

    matrix = run_cli(["scan", REPO, "--matrix", "--limit", "2"], cwd=tmp_path, env=env)
    assert matrix.returncode == 0, matrix.stderr
    assert json.loads(matrix.stdout.strip().splitlines()[0]) == {"include": [{"pr": 1}, {"pr": 2}]}

    bad = run_cli(["scan", "not-a-repo"], cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "OWNER/REPO" in bad.stderr
    assert MATRIX_MAX == 256


# --------------------------------------------------------------------------- the per-PR cost cap


def test_twenty_pushes_never_take_a_pr_past_max_pr_cost_usd(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    from tests.test_action_e2e import event_payload

    cap = 0.5
    gh.add_pull(REPO, 7, head_sha=sha(0), base_sha=BASE, files=[diff_entry("m.py", patch_for(0))])
    gh.add_content(REPO, BASE, ".github/imreview.yml", PRICES)
    model.handler = lambda body: text(  # a real server never answers past max_tokens
        model_answer(),
        prompt_tokens=1000,
        completion_tokens=min(4000, body["max_tokens"]),
    )
    totals = []
    for push in range(20):
        head = sha(push)
        if push:
            gh.set_head(REPO, 7, head, files=[diff_entry("m.py", patch_for(push))])
        run = runner.run(
            "pull_request",
            event_payload("pull_request.synchronize", head=head, base=BASE),
            max_pr_cost_usd=str(cap),
            **with_model(model),
        )
        assert run.code == 0, run.stderr
        state = marker_state(gh.comments(REPO, 7)[0]["body"])
        assert state["head"] == head
        totals.append(state["total_cost_usd"])
        assert state["total_cost_usd"] <= cap, (push, state)
    assert totals[0] > 0 and totals == sorted(totals)
    assert max(totals) > cap / 2, "reviews continue while a call still fits the cap"
    assert cap - totals[-1] < 0.1, "pushes keep spending only what the cap has left, never past it"
    assert gh.violations == []


def test_one_pr_that_breaks_the_review_does_not_cost_the_scan_the_others(
    model: FakeModelServer, tmp_path: Path
) -> None:
    """Whatever goes wrong inside one PR's review (here a file entry GitHub's contract does not
    allow: a `patch` that is a number) is that PR's `failed` row, named in the log; the scan goes on."""
    with FakeGitHub() as server:
        server.add_token(TOKEN)
        server.add_repo(REPO)
        server.add_pull(
            REPO, 1, head_sha=sha(1), base_sha=BASE, title="odd", files=[diff_entry("a.py", patch_for(1))]
        )
        server._pulls[(REPO, 1)].files[0]["patch"] = 12345
        add_open_prs(server, 2, start=2)
        model.handler = quiet_model
        run = Runner(tmp_path, server.url).run("schedule", SCHEDULE, **with_model(model))
        assert run.code == 0, run.stderr
        assert [len(server.comments(REPO, n)) for n in (1, 2, 3)] == [0, 1, 1]
        assert "#1 failed: " in run.stdout + run.stderr
        assert "Traceback" not in run.summary
        row = next(line for line in run.summary.splitlines() if line.startswith("| [#1]"))
        assert "| failed | its review broke on an unexpected error" in row


def test_a_scan_in_a_language_only_its_templates_give_is_reviewed_in_it(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    """docs/templates.md: a language is added by an i18n file in the template directory; a scan
    speaks it in every PR's comment (the run's own table falls back to no language it lacks)."""
    add_open_prs(gh, 2)
    model.handler = quiet_model
    (tmp_path / "tpl" / "i18n").mkdir(parents=True)
    en = Path(__file__).resolve().parent.parent / "templates" / "i18n" / "en.yml"
    french = en.read_text(encoding="utf-8").replace("  clean: clean\n", "  clean: rien à signaler\n", 1)
    (tmp_path / "tpl" / "i18n" / "fr.yml").write_text(french, encoding="utf-8")
    env = cli_env(tmp_path, {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url})
    argv = ["scan", REPO, "--review", "--post-comment", "--model", MODEL, "--api-base", model.api_base]
    run = run_cli([*argv, "--language", "fr", "--template-dir", "tpl"], cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    bodies = [c["body"] for n in (1, 2) for c in gh.comments(REPO, n)]
    assert len(bodies) == 2 and all(b.startswith("### imreview — rien à signaler") for b in bodies), bodies


def test_a_scan_in_a_language_no_template_gives_stops_before_any_call(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    add_open_prs(gh, 2)
    model.handler = quiet_model
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "comment.md.j2").write_text("ours", encoding="utf-8")
    env = cli_env(tmp_path, {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url})
    argv = ["scan", REPO, "--review", "--post-comment", "--model", MODEL, "--api-base", model.api_base]
    run = run_cli([*argv, "--language", "fr", "--template-dir", "tpl"], cwd=tmp_path, env=env)
    assert run.returncode == 2 and "unknown language 'fr'" in run.stderr, run.stderr
    assert model.requests == [] and [len(gh.comments(REPO, n)) for n in (1, 2)] == [0, 0]
