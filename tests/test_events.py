"""Routing of real (trimmed) webhook payloads, and the runner's input conventions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reviewer.errors import UsageError
from reviewer.events import SkipRules, Why, parse_pr_numbers, plan_run, read_inputs, skip_reason
from reviewer.render import english

EVENTS = Path(__file__).parent / "data" / "events"


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def plan(event_name: str, fixture: str, **inputs: str):
    return plan_run(event_name, load(fixture), repository="fallback/repo", inputs=inputs)


def test_read_inputs_keeps_hyphens_and_trims() -> None:
    env = {
        "INPUT_MAX-COST-USD": " 0.50\n",
        "INPUT_PR-NUMBER": "12",
        "INPUT_GITHUB-TOKEN": "",
        "GITHUB_TOKEN": "not an input",
        "INPUT_": "nameless",
    }
    assert read_inputs(env) == {"max-cost-usd": "0.50", "pr-number": "12", "github-token": ""}


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened", "ready_for_review"])
@pytest.mark.parametrize("event_name", ["pull_request", "pull_request_target"])
def test_review_actions_route_to_the_event_pr(event_name: str, action: str) -> None:
    req = plan(event_name, f"pull_request.{action}.json")
    assert req.kind == "pr"
    assert req.repo == "Codertocat/Hello-World"
    assert req.numbers == (2,)
    assert not req.explicit


def test_closed_action_is_skipped_with_the_action_named() -> None:
    req = plan("pull_request", "pull_request.closed.json")
    assert req.kind == "skip"
    assert req.reason is not None and req.reason.code == "action"
    assert "'closed'" in req.reason.words(english)
    assert req.numbers == ()


def test_fork_pr_is_reviewed_in_the_base_repository() -> None:
    req = plan("pull_request", "pull_request.opened.fork.json")
    assert (req.kind, req.numbers) == ("pr", (2,))
    assert req.repo == "Codertocat/Hello-World"


def test_null_head_repo_is_still_routed() -> None:
    payload = load("pull_request.synchronize.head_repo_null.json")
    assert payload["pull_request"]["head"]["repo"] is None
    req = plan_run("pull_request", payload, repository="o/r", inputs={})
    assert (req.kind, req.numbers) == ("pr", (payload["pull_request"]["number"],))


def test_draft_and_bot_payloads_are_routed_and_left_to_skip_reason() -> None:
    # Skipping needs the PR's current state, which the review reads from the API, not the payload.
    for fixture in ("pull_request.opened.draft.json", "pull_request.opened.bot.json"):
        req = plan("pull_request", fixture)
        assert (req.kind, req.explicit) == ("pr", False)
        assert req.numbers == (load(fixture)["pull_request"]["number"],)


def test_dispatch_reviews_the_named_prs_explicitly() -> None:
    req = plan("workflow_dispatch", "workflow_dispatch.json", **{"pr-number": "1, 2 #3"})
    assert req.kind == "pr"
    assert req.numbers == (1, 2, 3)
    assert req.explicit
    assert req.repo == "octo-org/octo-repo"


def test_dispatch_without_pr_number_says_to_set_it() -> None:
    with pytest.raises(UsageError, match=r"pr-number"):
        plan("workflow_dispatch", "workflow_dispatch.json")


def test_dispatch_falls_back_to_the_events_own_pr_number_input() -> None:
    payload = load("workflow_dispatch.json")
    payload["inputs"] = {"pr-number": "#7"}
    req = plan_run("workflow_dispatch", payload, repository="x/y", inputs={})
    assert req.numbers == (7,)


def test_dispatch_with_a_bad_pr_number_names_the_input_and_token() -> None:
    with pytest.raises(UsageError, match="pr-number") as err:
        plan("workflow_dispatch", "workflow_dispatch.json", **{"pr-number": "4, owner/repo#5"})
    assert "pr-number" in str(err.value)
    assert "owner/repo#5" in str(err.value)


def test_schedule_scans_the_runs_repository() -> None:
    req = plan("schedule", "schedule.json")
    assert req.kind == "scan"
    assert req.repo == "fallback/repo"


@pytest.mark.parametrize("event_name", ["push", "issue_comment", ""])
def test_other_events_are_skipped_naming_the_event(event_name: str) -> None:
    req = plan_run(event_name, {}, repository="o/r", inputs={})
    assert req.kind == "skip"
    assert req.reason is not None and f"'{event_name or '(none)'}'" in req.reason.words(english)


def test_mode_scan_overrides_the_event() -> None:
    req = plan("pull_request", "pull_request.opened.json", mode="scan")
    assert req.kind == "scan"
    assert req.repo == "Codertocat/Hello-World"


def test_mode_pr_on_schedule_uses_pr_number_or_fails_clearly() -> None:
    req = plan("schedule", "schedule.json", mode="PR", **{"pr-number": "9"})
    assert (req.kind, req.numbers, req.explicit) == ("pr", (9,), True)
    with pytest.raises(UsageError, match=r"pr-number"):
        plan("schedule", "schedule.json", mode="pr")


def test_mode_pr_on_a_pull_request_event_reviews_it_even_for_other_actions() -> None:
    req = plan("pull_request", "pull_request.closed.json", mode="pr")
    assert (req.kind, req.numbers, req.explicit) == ("pr", (2,), False)


def test_bad_mode_names_the_input() -> None:
    with pytest.raises(UsageError, match="everything") as err:
        plan("pull_request", "pull_request.opened.json", mode="everything")
    assert "'mode'" in str(err.value)
    assert "everything" in str(err.value)


def test_repository_from_env_when_payload_has_none() -> None:
    with pytest.raises(UsageError, match="GITHUB_REPOSITORY"):
        plan_run("schedule", {"schedule": "0 * * * *"}, repository="", inputs={})


@pytest.mark.parametrize("dotted", ["head.sha", "number", "base.repo.full_name"])
def test_malformed_pull_request_payload_names_the_key(dotted: str) -> None:
    payload = load("pull_request.opened.json")
    *parents, key = dotted.split(".")
    parent = payload["pull_request"]
    for part in parents:
        parent = parent[part]
    del parent[key]
    with pytest.raises(UsageError, match=rf"pull_request\.{dotted}"):
        plan_run("pull_request", payload, repository="o/r", inputs={})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ()),
        ("12", (12,)),
        ("1, 2 #3", (1, 2, 3)),
        ("#4\n5,\n\n6 , 4", (4, 5, 6)),
        ("  7  ", (7,)),
    ],
)
def test_parse_pr_numbers(raw: str, expected: tuple[int, ...]) -> None:
    assert parse_pr_numbers(raw) == expected


@pytest.mark.parametrize("bad", ["abc", "#", "0", "-3", "1.5", "١٢", "##2"])
def test_parse_pr_numbers_rejects(bad: str) -> None:
    with pytest.raises(UsageError, match="pr-number") as err:
        parse_pr_numbers(f"1 {bad}")
    assert "'pr-number'" in str(err.value)
    assert repr(bad) in str(err.value)


def skip(**overrides: Any) -> Why | None:
    args: dict[str, Any] = {
        "draft": False,
        "author": "octocat",
        "author_type": "User",
        "state": "open",
        "explicit": False,
        "skip_drafts": True,
        "skip_bots": True,
    }
    args.update(overrides)
    rules = SkipRules(
        drafts=args["skip_drafts"], bots=args["skip_bots"], closed=True, explicit=args["explicit"]
    )
    return skip_reason(
        rules,
        state=args["state"],
        draft=args["draft"],
        author=args["author"],
        author_type=args["author_type"],
    )


def test_skip_reason_reviews_an_ordinary_open_pr() -> None:
    assert skip() is None


def test_skip_reason_for_closed_pr_even_when_named() -> None:
    reason = skip(state="closed", explicit=True)
    assert reason is not None and reason.code == "closed" and "closed" in reason.words(english)
    assert skip_reason(SkipRules(), state="closed", draft=False, author="a", author_type="User") is None


def test_skip_reason_for_drafts_respects_explicit_and_the_input() -> None:
    reason = skip(draft=True)
    assert reason is not None and reason.code == "draft" and "draft" in reason.words(english)
    assert skip(draft=True, explicit=True) is None
    assert skip(draft=True, skip_drafts=False) is None


@pytest.mark.parametrize(("author", "author_type"), [("dependabot[bot]", "Bot"), ("renovate[bot]", "User")])
def test_skip_reason_for_bots(author: str, author_type: str) -> None:
    reason = skip(author=author, author_type=author_type)
    assert reason is not None and reason.code == "bot" and author in reason.words(english)
    assert skip(author=author, author_type=author_type, skip_bots=False) is None


def test_skip_reason_from_the_bot_fixture() -> None:
    pull = load("pull_request.opened.bot.json")["pull_request"]
    rules = SkipRules(drafts=True, bots=True, closed=True)
    user = pull["user"]
    reason = skip_reason(
        rules, state=pull["state"], draft=pull["draft"], author=user["login"], author_type=user["type"]
    )
    assert reason is not None and "dependabot[bot]" in reason.words(english)


def test_label_lists_split_alike_from_an_input_and_from_flags() -> None:
    """`scan-labels` (one input: newlines or commas) and `--labels` (repeatable) name the same labels."""
    from reviewer.events import label_names

    assert label_names("bug,\n needs review \n\n,ui") == ("bug", "needs review", "ui")
    assert label_names("bug, needs review", "ui\nx") == ("bug", "needs review", "ui", "x")
    assert label_names("", " , ") == ()
