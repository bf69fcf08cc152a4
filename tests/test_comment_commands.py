"""Comment commands and dismissal memory (issue 22), end to end in the emulated runner.

The Action runs in-process against the loopback GitHub and model server, on trimmed real
`issue_comment` / `pull_request_review_comment` payloads (tests/data/events/) rewritten to name the
fake's PR and comment. What is checked is what a maintainer sees: reactions on their comment, the
sticky comment, inline comments, whether the model was called, and the job summary.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from reviewer.commands import Command, CommentEvent, decide, parse_command
from reviewer.render import english
from tests.factories import fake_github
from tests.fakes.github_server import ACTIONS_BOT, FakeGitHub
from tests.fakes.model_server import FakeModelServer
from tests.test_action_e2e import (
    EVENTS,
    HEAD2,
    REPO,
    Run,
    Runner,
    add_pull,
    event_payload,
    finding,
    marker_state,
    reviewer_model,
    with_model,
)

PRICES = "prices:\n  openai/fake-model:\n    input_usd_per_mtok: 10\n    output_usd_per_mtok: 20\n"
BASE_SHA = "b0" * 20
DIV = finding()  # "Division by zero when b is 0" on app.py line 2
MAINTAINER = "maint"


# --------------------------------------------------------------------------- payloads


def pr_comment(
    gh: FakeGitHub,
    body: str,
    *,
    association: str = "MEMBER",
    login: str = MAINTAINER,
    kind: str = "User",
    number: int = 7,
    fixture: str = "issue_comment.created.pr",
) -> dict[str, Any]:
    """A real issue_comment payload for a comment the fake holds (so it can be reacted to)."""
    data = json.loads((EVENTS / f"{fixture}.json").read_text(encoding="utf-8"))
    data["repository"]["full_name"] = REPO
    data["issue"]["number"] = number
    comment_id = gh.add_comment(REPO, number, body, login=login, kind=kind)
    data["comment"].update(
        id=comment_id, body=body, author_association=association, user={"login": login, "id": 9, "type": kind}
    )
    return data


def thread_reply(
    gh: FakeGitHub, first_id: int, body: str, *, association: str = "MEMBER", login: str = MAINTAINER
) -> dict[str, Any]:
    """A real pull_request_review_comment payload for a reply in the thread of `first_id`."""
    data = event_payload("pull_request_review_comment.created.reply")
    reply_id = gh.reply_in_thread(first_id, body, login=login, association=association)
    data["comment"].update(
        id=reply_id,
        in_reply_to_id=first_id,
        body=body,
        author_association=association,
        user={"login": login, "id": 9, "type": "User"},
    )
    return data


def sticky(gh: FakeGitHub) -> dict[str, Any]:
    """Our one sticky comment (the PR also holds the maintainers' command comments)."""
    (ours,) = [
        c for c in gh.comments(REPO, 7) if c["user"]["login"] == ACTIONS_BOT and "imreview:state" in c["body"]
    ]
    return ours


def _key_of_div() -> str:
    """The key a forger would compute for the finding (the algorithm is public)."""
    from reviewer.dismissals import dismissal_key
    from reviewer.incremental import fingerprint

    return dismissal_key(
        rule="", title="Division by zero when b is 0", lines=fingerprint(["    total = a / b"])
    )


def dismissed_of(body: str) -> list[dict[str, Any]]:
    packed = marker_state(body).get("dismissed")
    return json.loads(base64.urlsafe_b64decode(packed)) if packed else []


def reviewed_pr(gh: FakeGitHub, model: FakeModelServer, runner: Runner, **inputs: str) -> int:
    """PR 7 reviewed once with inline comments; the id of the finding's inline comment."""
    add_pull(gh)
    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", PRICES)
    model.handler = reviewer_model({"app.py": [DIV]}, prompt_tokens=1000, completion_tokens=500)
    run = runner.run(
        "pull_request",
        event_payload("pull_request.opened"),
        inline_comments="true",
        **with_model(model),
        **inputs,
    )
    assert run.code == 0, run.stderr
    (first,) = gh.review_comment_ids(REPO, 7)
    return first


def push_reviewed(gh: FakeGitHub, model: FakeModelServer, runner: Runner) -> Run:
    """A push to PR 7 (head HEAD2) reviewed with inline comments, as `reviewed_pr` reviewed the first."""
    gh.set_head(REPO, 7, HEAD2)
    return runner.run(
        "pull_request",
        event_payload("pull_request.synchronize", head=HEAD2),
        inline_comments="true",
        **with_model(model),
    )


# --------------------------------------------------------------------------- parsing and judging (pure)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/imreview review", Command("review")),
        ("  /IMREVIEW Full  \nthanks", Command("full")),
        ("\n\n/imreview ignore", Command("ignore")),
        ("/imreview ignore 34b64af400ea", Command("ignore", finding_id="34b64af400ea")),
        ("/imreview ignore `34B64AF400EA`", Command("ignore", finding_id="34b64af400ea")),
        ("/imreview", Command("help")),
        ("/imreview help", Command("help")),
    ],
)
def test_commands_are_read_from_the_first_line(body: str, expected: Command) -> None:
    assert parse_command(body) == expected


@pytest.mark.parametrize(
    "body",
    ["please /imreview review", "> /imreview review", "```\n/imreview review\n```", "", "/imreviewer review"],
)
def test_text_that_only_mentions_a_command_is_not_one(body: str) -> None:
    assert parse_command(body) is None


def test_a_bad_verb_or_id_is_named() -> None:
    bad = parse_command("/imreview deploy")
    assert bad is not None and bad.verb is None and bad.problem is not None
    assert bad.problem.words(english) == "unknown command 'deploy' (use review, full, ignore, help)"
    assert parse_command("/imreview ignore not needed here") == Command("ignore"), "words after it: a reason"


def _event(**fields: Any) -> CommentEvent:
    base: dict[str, Any] = dict(
        kind="issue",
        action="created",
        repo=REPO,
        number=7,
        on_pull=True,
        comment_id=1,
        author="maint",
        author_type="User",
        association="MEMBER",
        body="/imreview review",
    )
    return CommentEvent(**{**base, **fields})


@pytest.mark.parametrize(
    ("fields", "reason", "reaction"),
    [
        ({}, "accepted", "eyes"),
        ({"association": "NONE"}, "association", "-1"),
        ({"association": "CONTRIBUTOR"}, "association", "-1"),
        ({"author": "github-actions[bot]", "author_type": "Bot"}, "bot", None),
        ({"author": "helper[bot]", "author_type": "User", "association": "OWNER"}, "bot", None),
        ({"on_pull": False}, "not_a_pull", None),
        ({"action": "edited"}, "not_created", None),
        ({"body": "looks good"}, "not_a_command", None),
        ({"body": "/imreview ignore"}, "no_finding", "-1"),
        ({"body": "/imreview ignore", "kind": "review", "reply_to": 5}, "accepted", "eyes"),
    ],
)
def test_who_may_command_what(fields: dict[str, Any], reason: str, reaction: str | None) -> None:
    decision = decide(_event(**fields), ("OWNER", "MEMBER", "COLLABORATOR"))
    assert (decision.reason, decision.reaction) == (reason, reaction)
    assert decision.accepted == (reason == "accepted")


# --------------------------------------------------------------------------- review / full / refused


def test_a_members_review_command_reviews_once_and_updates_the_sticky_comment(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh)
    model.handler = reviewer_model({"app.py": [DIV]})
    assert runner.run("pull_request", event_payload("pull_request.opened"), **with_model(model)).code == 0
    before = sticky(gh)
    gh.set_head(REPO, 7, HEAD2)  # a push the workflow did not review (say, paths-ignore)
    calls = len(model.requests)

    command = pr_comment(gh, "/imreview review")
    run = runner.run("issue_comment", command, **with_model(model))

    assert run.code == 0, run.stderr
    assert len(model.requests) > calls, "the command reviewed the new head"
    updated = next(c for c in gh.comments(REPO, 7) if c["id"] == before["id"])
    assert marker_state(updated["body"])["head"] == HEAD2
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1, "one sticky comment, edited"
    assert gh.reactions("issue", command["comment"]["id"]) == [(ACTIONS_BOT, "eyes")]
    assert "`/imreview review` by maint (MEMBER) on #7: accepted." in run.summary
    assert gh.violations == []


def test_an_outsiders_command_calls_no_model_and_gets_one_thumbs_down(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh)
    model.handler = reviewer_model({"app.py": [DIV]})
    command = pr_comment(gh, "/imreview full", association="NONE", login="drive-by")
    run = runner.run("issue_comment", command, **with_model(model))

    assert run.code == 0, run.stderr
    assert model.requests == []
    assert gh.reactions("issue", command["comment"]["id"]) == [(ACTIONS_BOT, "-1")]
    writes = [(r.method, r.path) for r in gh.requests if r.method != "GET" and r.path != "/graphql"]
    assert writes == [("POST", f"/repos/{REPO}/issues/comments/{command['comment']['id']}/reactions")]
    assert "drive-by is NONE on this repository" in run.summary
    assert run.outputs["verdict"] == "skipped"
    assert gh.violations == []


@pytest.mark.parametrize(
    ("body", "login", "kind", "fixture"),
    [
        ("/imreview review", "github-actions[bot]", "Bot", "issue_comment.created.pr"),
        ("/imreview review", MAINTAINER, "User", "issue_comment.created"),  # an issue, not a PR
        ("Thanks, looks good to me", MAINTAINER, "User", "issue_comment.created.pr"),
    ],
)
def test_comments_that_are_no_command_cost_no_request(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner, body: str, login: str, kind: str, fixture: str
) -> None:
    add_pull(gh)
    command = pr_comment(gh, body, login=login, kind=kind, fixture=fixture)
    run = runner.run("issue_comment", command, **with_model(model))
    assert run.code == 0, run.stderr
    assert gh.requests == [] and model.requests == []
    assert "not a command for imreview" in run.summary


def test_the_base_branch_config_decides_who_may_command(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    add_pull(gh)
    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", "maintainer_associations: [OWNER]\n")
    command = pr_comment(gh, "/imreview review", association="MEMBER")
    run = runner.run("issue_comment", command, **with_model(model))
    assert run.code == 0 and model.requests == []
    assert gh.reactions("issue", command["comment"]["id"]) == [(ACTIONS_BOT, "-1")]
    assert "commands are taken from OWNER" in run.summary


def test_help_replies_once_with_the_commands(gh: FakeGitHub, model: FakeModelServer, runner: Runner) -> None:
    add_pull(gh)
    run = runner.run("issue_comment", pr_comment(gh, "/imreview help", association="OWNER"))
    assert run.code == 0 and model.requests == []
    (reply,) = [c for c in gh.comments(REPO, 7) if c["user"]["login"] == ACTIONS_BOT]
    assert "`/imreview ignore`" in reply["body"] and "OWNER, MEMBER, COLLABORATOR" in reply["body"]


# --------------------------------------------------------------------------- dismissals


def test_ignore_in_a_findings_thread_dismisses_it_for_later_pushes_and_full_reviews(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    first = reviewed_pr(gh, model, runner)
    reply = thread_reply(gh, first, "/imreview ignore — this is guarded by the caller")
    calls = len(model.requests)
    run = runner.run("pull_request_review_comment", reply, **with_model(model))
    assert run.code == 0, run.stderr
    assert len(model.requests) == calls, "a dismissal calls no model"
    assert gh.reactions("review", reply["comment"]["id"]) == [(ACTIONS_BOT, "eyes")], run.summary
    (dismissed,) = dismissed_of(sticky(gh)["body"])
    assert (dismissed["t"], dismissed["by"], dismissed["how"]) == (
        "Division by zero when b is 0",
        MAINTAINER,
        "command",
    )

    pushed = push_reviewed(gh, model, runner)  # a push that keeps the line; the model still reports it
    assert pushed.code == 0, pushed.stderr
    assert len(model.requests) > calls, "the push was reviewed"
    body = sticky(gh)["body"]
    assert "Division by zero" not in body.split("<details><summary>1 dismissed")[0]
    assert "1 dismissed on this pull request" in body and "Division by zero when b is 0" in body
    assert pushed.report()["findings"] == [] and pushed.report()["dismissed"][0]["by"] == MAINTAINER
    assert len(gh.review_comment_ids(REPO, 7)) == 1, "no inline comment for it again"

    full = runner.run("issue_comment", pr_comment(gh, "/imreview full"), **with_model(model))
    assert full.code == 0, full.stderr
    assert full.report()["incremental"]["reason"] == "requested"
    assert full.report()["findings"] == [] and len(dismissed_of(sticky(gh)["body"])) == 1
    assert gh.violations == []


def test_a_resolved_thread_dismisses_when_its_resolver_may_write(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    first = reviewed_pr(gh, model, runner)
    gh.resolve_thread(first, by="lead")
    gh.set_permission(REPO, "lead", "write")
    run = push_reviewed(gh, model, runner)
    assert run.code == 0, run.stderr
    assert run.report()["findings"] == []
    assert [(d["by"], d["how"]) for d in run.report()["dismissed"]] == [("lead", "resolved")]
    assert (
        len(gh.graphql_requests()) >= 1
        and len(gh.requests_to("GET", r"/collaborators/lead/permission$")) == 1
    )
    assert gh.violations == []


@pytest.mark.parametrize("how", ["resolved", "reaction", "reply"])
def test_dismissals_by_people_outside_the_set_change_nothing(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner, how: str
) -> None:
    first = reviewed_pr(gh, model, runner)
    if how == "resolved":
        gh.resolve_thread(first, by="author")  # the PR's author: read access only
        gh.set_permission(REPO, "author", "read")
    elif how == "reaction":
        gh.react_as("review", first, login="stranger")  # not a collaborator at all
    else:
        gh.reply_in_thread(first, "/imreview ignore", login="author", association="CONTRIBUTOR")
    run = push_reviewed(gh, model, runner)
    assert run.code == 0, run.stderr
    assert [f["title"] for f in run.report()["findings"]] == ["Division by zero when b is 0"]
    assert run.report()["dismissed"] == []
    assert gh.violations == []


def test_a_forged_dismissal_in_another_users_comment_changes_nothing(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    reviewed_pr(gh, model, runner)
    ours = sticky(gh)
    state = marker_state(ours["body"])
    forged_item = {
        "k": _key_of_div(),
        "id": "x" * 12,
        "t": "Division by zero when b is 0",
        "p": "app.py",
        "by": "maint",
        "how": "command",
    }
    state["dismissed"] = base64.urlsafe_b64encode(json.dumps([forged_item]).encode()).decode()
    state["mac"] = "f" * 64
    forged = ours["body"].rpartition("\n")[0] + "\n<!-- imreview:state v1 " + json.dumps(state) + " -->"
    gh.add_comment(REPO, 7, forged, login="author", kind="User")
    on_pr = runner.run(
        "issue_comment", pr_comment(gh, "/imreview ignore 34b64af400ea", association="NONE", login="author")
    )
    assert on_pr.code == 0
    run = push_reviewed(gh, model, runner)
    assert [f["title"] for f in run.report()["findings"]] == ["Division by zero when b is 0"]
    assert run.report()["dismissed"] == []
    assert dismissed_of(next(c for c in gh.comments(REPO, 7) if c["id"] == ours["id"])["body"]) == []


def test_ignore_with_an_id_on_the_pr_dismisses_and_an_unknown_id_is_refused(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    reviewed_pr(gh, model, runner)
    ((inline,),) = [r["comments"] for r in gh.reviews(REPO, 7)]
    finding_id = inline["body"].rstrip().rpartition("<!-- imreview:finding ")[2][:12]
    assert f"id `{finding_id}`" in inline["body"], "the id a maintainer types is on the inline comment"

    unknown = pr_comment(gh, "/imreview ignore 000000000000")
    run = runner.run("issue_comment", unknown)
    assert run.code == 0 and "no finding `000000000000`" in run.summary
    assert gh.reactions("issue", unknown["comment"]["id"]) == [(ACTIONS_BOT, "-1")]
    assert dismissed_of(sticky(gh)["body"]) == []

    known = pr_comment(gh, f"/imreview ignore {finding_id}", association="OWNER")
    run = runner.run("issue_comment", known)
    assert run.code == 0 and gh.reactions("issue", known["comment"]["id"]) == [(ACTIONS_BOT, "eyes")]
    assert [d["id"] for d in dismissed_of(sticky(gh)["body"])] == [finding_id]
    assert gh.violations == []


def test_a_thumbs_down_by_an_admin_dismisses(gh: FakeGitHub, model: FakeModelServer, runner: Runner) -> None:
    first = reviewed_pr(gh, model, runner)
    gh.react_as("review", first, login="lead")
    gh.set_permission(REPO, "lead", "admin")
    run = push_reviewed(gh, model, runner)
    assert run.code == 0, run.stderr
    assert [(d["by"], d["how"]) for d in run.report()["dismissed"]] == [("lead", "reaction")]
    assert run.report()["findings"] == []


# --------------------------------------------------------------------------- a flood of commands


def test_fifty_commands_in_a_row_never_bill_past_the_pr_cap(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """`/imreview full` fifty times: each run reserves its allowance against max-pr-cost-usd in the
    signed state before calling the model, so the bill at the model server stays within the cap."""
    add_pull(gh)
    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", PRICES)
    bill: list[float] = []

    def billed(body: dict[str, Any]) -> Any:
        reply = reviewer_model({"app.py": [DIV]}, prompt_tokens=1000, completion_tokens=500)(body)
        usage = json.loads(reply.body)["usage"]  # billed as the provider reports it, at PRICES
        bill.append((usage["prompt_tokens"] * 10 + usage["completion_tokens"] * 20) / 1_000_000)
        return reply

    model.handler = billed
    cap = 0.3
    calls_per_run = []
    for _ in range(50):
        before = len(bill)
        run = runner.run(
            "issue_comment",
            pr_comment(gh, "/imreview full"),
            max_cost_usd="0.20",
            max_pr_cost_usd=f"{cap}",
            **with_model(model),
        )
        assert run.code == 0, run.stderr
        calls_per_run.append(len(bill) - before)
    assert 0 < sum(bill) <= cap + 1e-9, f"billed {sum(bill)} against the cap {cap}"
    assert calls_per_run[0] > 0 and calls_per_run[-10:] == [0] * 10, calls_per_run
    assert marker_state(sticky(gh)["body"])["total_cost_usd"] <= cap + 1e-9
    assert gh.violations == []


# --------------------------------------------------------------------------- the example workflow


EXAMPLE = EVENTS.parents[2] / "examples" / "comment-commands.yml"


def _value(path: str, context: dict[str, Any]) -> Any:
    node: Any = context
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """The subset of the Actions expression language the example's `if:` and `concurrency` use:
    `||`, `&&`, `==`, `!=`, parentheses, `startsWith()`, property paths and '...' strings."""
    import re

    tokens = re.findall(r"\|\||&&|==|!=|\(|\)|,|'[^']*'|[A-Za-z_][\w.-]*", expression)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> Any:
        token = take()
        if token == "(":
            value = either()
            assert take() == ")"
            return value
        if token.startswith("'"):
            return token[1:-1]
        if token == "startsWith":
            assert take() == "("
            text = either()
            assert take() == ","
            prefix = either()
            assert take() == ")"
            return isinstance(text, str) and text.lower().startswith(str(prefix).lower())
        return _value(token, context)

    def compare() -> Any:
        left = atom()
        while peek() in ("==", "!="):
            op, right = take(), atom()
            left = (left == right) if op == "==" else (left != right)
        return left

    def both() -> Any:
        left = compare()
        while peek() == "&&":
            take()
            right = compare()
            left = left and right
        return left

    def either() -> Any:
        left = both()
        while peek() == "||":
            take()
            right = both()
            left = left or right
        return left

    value = either()
    assert pos == len(tokens), expression
    return value


def workflow_context(event_name: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"github": {"event_name": event_name, "event": payload}}


def test_the_example_workflow_guards_runs_and_needs_no_more_than_it_asks(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    import re

    import yaml

    workflow = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert set(workflow[True]) == {"issue_comment", "pull_request_review_comment"}  # YAML's `on:`
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "issues": "write"}
    (job,) = workflow["jobs"].values()
    (step,) = job["steps"]
    assert not any(
        "checkout" in str(s.get("uses", "")) for j in workflow["jobs"].values() for s in j["steps"]
    )
    guard = job["if"]
    group = workflow["concurrency"]["group"]

    def expression(text: str) -> str:
        found = re.fullmatch(r"[^$]*\$\{\{(.*)\}\}", text.strip())
        return found.group(1) if found else text

    add_pull(gh)
    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", PRICES)
    model.handler = reviewer_model({"app.py": [DIV]})
    cases = [
        ("issue_comment", pr_comment(gh, "/imreview review"), True),
        ("issue_comment", pr_comment(gh, "/imreview review", fixture="issue_comment.created"), False),
        ("issue_comment", pr_comment(gh, "/imreview review", login="github-actions[bot]", kind="Bot"), False),
        ("issue_comment", pr_comment(gh, "nice work"), False),
        ("pull_request_review_comment", event_payload("pull_request_review_comment.created.reply"), False),
    ]
    for event_name, payload, runs in cases:
        context = workflow_context(event_name, payload)
        assert bool(evaluate(guard, context)) is runs, (event_name, payload["comment"]["body"])
        assert (
            group.replace(f"${{{{{expression(group)}}}}}", str(evaluate(expression(group), context)))
            == "imreview-7"
        )
    inputs = {k.replace("-", "_"): str(v) for k, v in step["with"].items() if k != "model"}
    runner.extra_env = {
        "OPENAI_API_KEY": "sk-example-secret-0123456789",
        "IMREVIEW_STATE_KEY": "example-state-0123456789abcdefghijkl",
    }
    run = runner.run("issue_comment", cases[0][1], **inputs, **with_model(model))
    assert run.code == 0, run.stderr
    assert len(sticky(gh)["body"]) > 0 and model.requests
    assert gh.reactions("issue", cases[0][1]["comment"]["id"]) == [(ACTIONS_BOT, "eyes")]
    assert gh.violations == []


# --------------------------------------------------------------------------- repository memory


def test_imreview_dismissed_prints_ignore_lines_that_quiet_the_finding_on_other_prs(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner, tmp_path: Any
) -> None:
    from tests.conftest import cli_env, run_cli

    first = reviewed_pr(gh, model, runner)
    runner.run(
        "pull_request_review_comment", thread_reply(gh, first, "/imreview ignore"), **with_model(model)
    )
    env = cli_env(
        tmp_path,
        {
            "GITHUB_TOKEN": "fake-actions-token",
            "GITHUB_API_URL": gh.url,
            "IMREVIEW_STATE_KEY": "e2e-state-key-0123456789abcdefghij",
        },
    )
    printed = run_cli(["dismissed", f"{REPO}#7"], cwd=tmp_path, env=env)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith("ignore:\n  - fingerprint: ")
    assert (
        'reason: "dismissed by maint on octo-org/widgets#7: Division by zero when b is 0"' in printed.stdout
    )

    gh.add_token("maintainer-own-token", login="maint")  # a maintainer's own token, run on their machine
    personal = run_cli(
        ["dismissed", f"{REPO}#7"], cwd=tmp_path, env={**env, "GITHUB_TOKEN": "maintainer-own-token"}
    )
    assert personal.returncode == 0, personal.stderr
    assert personal.stdout == printed.stdout

    unkeyed = run_cli(
        ["dismissed", f"{REPO}#7"],
        cwd=tmp_path,
        env={**env, "IMREVIEW_STATE_KEY": "another-key-0123456789abcdefghijklmn"},
    )
    assert unkeyed.returncode == 2 and "IMREVIEW_STATE_KEY" in unkeyed.stderr

    # the printed lines in the base branch's config: PR 8 with the same code does not raise it
    add_pull(gh, 8)
    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", PRICES + printed.stdout)
    other = runner.run(
        "pull_request",
        event_payload("pull_request.opened", number=8),
        inline_comments="true",
        **with_model(model),
    )
    assert other.code == 0, other.stderr
    assert other.report()["findings"] == []
    ((listed,),) = [[d for d in other.report()["dismissed"] if d["how"] == "config"]]
    assert listed["title"] == "Division by zero when b is 0"
    assert (
        "`ignore:` in .github/imreview.yml"
        in next(c for c in gh.comments(REPO, 8) if "imreview:state" in c["body"])["body"]
    )


def test_the_ignore_list_quiets_a_rule_by_id_and_names_a_bad_entry(gh: FakeGitHub, runner: Runner) -> None:
    from tests.fakes.github_server import diff_entry
    from tests.test_action_e2e import DEBUG_PATCH

    add_pull(gh, files=[diff_entry("app.py", DEBUG_PATCH)])
    gh.add_content(
        REPO,
        BASE_SHA,
        ".github/imreview.yml",
        "ignore:\n  - rule: debugger\n    reason: scripts may stop here\n",
    )
    run = runner.run("pull_request", event_payload("pull_request.opened"))
    assert run.code == 0, run.stderr
    assert run.report()["findings"] == [] and run.report()["dismissed"][0]["how"] == "config"
    assert "dismissed" not in marker_state(sticky(gh)["body"]), "config ignores: not in the state"

    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", "ignore:\n  - rule: debugger\n")
    bad = runner.run("pull_request", event_payload("pull_request.opened"))
    assert bad.code == 2 and "ignore" in bad.summary and "`reason` is required" in bad.summary


def test_a_resolved_finding_stays_out_of_an_incremental_review_when_its_lines_move(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real repository behind the loopback GitHub (tests/test_incremental.py's PR): after the
    division's thread is resolved, a push that moves its lines down is reviewed incrementally, the
    finding is carried, re-anchored and left out as dismissed."""
    from tests import test_incremental as inc

    monkeypatch.setenv("IMREVIEW_STATE_KEY", "incremental-test-key-0123456789abcdef")
    with (
        fake_github({inc.TOKEN: {"login": "alice"}}, repo=inc.REPO) as gh,
        FakeModelServer(handler=inc.consistent_reviewer) as model,
    ):
        pr = inc.Pr(tmp_path, gh)
        _, first = inc.first_review(pr, gh, model)
        ((division,),) = [
            [c["id"] for r in gh.reviews(inc.REPO, 7) for c in r["comments"] if c["path"] == "util.py"]
        ]
        gh.resolve_thread(division, by="lead")
        gh.set_permission(inc.REPO, "lead", "write")

        h2 = pr.git.commit({"util.py": "import math\n\n" + inc.UTIL_BASE + inc.DIVIDE}, "move it down")
        pr.push(h2)
        report = inc.report_of(inc.review(gh, model))

        assert report.incremental is not None and report.incremental.mode == "incremental"
        assert [f.path for f in report.findings] == ["app.py"]
        assert [(d.by, d.how, d.path) for d in report.dismissed] == [("lead", "resolved", "util.py")]
        assert {f.path for f in first.findings} == {"util.py", "app.py"}
        assert gh.violations == []
