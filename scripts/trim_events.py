"""Regenerate tests/data/events/ from octokit's webhook examples, plus the synthesized variants.

The examples package has only same-repo PRs and no `schedule`/`pull_request_target` payloads
(those are Actions-only events), so a fork PR, a null `head.repo`, a draft, a bot author and a
schedule payload are derived here. Tests read only the trimmed copies, never ../shared:

    python scripts/trim_events.py [EXAMPLES_JSON] [--out tests/data/events]
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared/vendor-data/octokit-webhooks-examples-7.6.1/api.github.com.index.json"
DEFAULT_OUT = ROOT / "tests" / "data" / "events"

# Shape to keep: a key maps to True (keep the value as is) or to a nested shape.
_USER = {"login": True, "id": True, "type": True}
_REPO = {
    "id": True,
    "name": True,
    "full_name": True,
    "private": True,
    "owner": _USER,
    "html_url": True,
    "fork": True,
    "default_branch": True,
}
_BRANCH = {"label": True, "ref": True, "sha": True, "user": _USER, "repo": _REPO}
_PULL = {
    "url": True,
    "id": True,
    "html_url": True,
    "number": True,
    "state": True,
    "locked": True,
    "title": True,
    "user": _USER,
    "body": True,
    "created_at": True,
    "updated_at": True,
    "closed_at": True,
    "merged_at": True,
    "head": _BRANCH,
    "base": _BRANCH,
    "author_association": True,
    "draft": True,
    "merged": True,
    "mergeable": True,
    "commits": True,
    "additions": True,
    "deletions": True,
    "changed_files": True,
}
SHAPES: Mapping[str, Mapping[str, Any]] = {
    "pull_request": {
        "action": True,
        "number": True,
        "before": True,
        "after": True,
        "pull_request": _PULL,
        "repository": _REPO,
        "sender": _USER,
    },
    "issue_comment": {
        "action": True,
        "issue": {
            "url": True,
            "id": True,
            "number": True,
            "title": True,
            "user": _USER,
            "state": True,
            "locked": True,
            "author_association": True,
            "pull_request": True,
        },
        "comment": {
            "url": True,
            "html_url": True,
            "id": True,
            "user": _USER,
            "created_at": True,
            "updated_at": True,
            "author_association": True,
            "body": True,
        },
        "repository": _REPO,
        "sender": _USER,
    },
    "pull_request_review_comment": {
        "action": True,
        "comment": {
            "url": True,
            "pull_request_review_id": True,
            "id": True,
            "path": True,
            "commit_id": True,
            "user": _USER,
            "body": True,
            "created_at": True,
            "updated_at": True,
            "html_url": True,
            "author_association": True,
            "in_reply_to_id": True,
            "line": True,
            "side": True,
        },
        "pull_request": _PULL,
        "repository": _REPO,
        "sender": _USER,
    },
    "workflow_dispatch": {
        "inputs": True,
        "ref": True,
        "repository": _REPO,
        "sender": _USER,
        "workflow": True,
    },
}
ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review", "closed")


def trim(node: Any, shape: Mapping[str, Any] | bool) -> Any:
    """Keep only the keys named in `shape`, recursively; null stays null (e.g. `head.repo`)."""
    if shape is True or not isinstance(node, Mapping):
        return node
    return {key: trim(node[key], sub) for key, sub in shape.items() if key in node}


def _first(events: list[dict[str, Any]], name: str, action: str | None = None) -> dict[str, Any]:
    for event in events:
        if event["name"] == name:
            for example in event["examples"]:
                if action is None or example.get("action") == action:
                    return copy.deepcopy(example)
    raise SystemExit(f"no {name} example with action {action!r} in the source file")


def _fork(opened: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(opened)
    pull = event["pull_request"]
    forker = {"login": "forker", "id": 5551212, "type": "User"}
    head_repo = pull["head"]["repo"]
    head_repo.update(
        id=555121201,
        full_name="forker/Hello-World",
        fork=True,
        owner=forker,
        html_url="https://github.com/forker/Hello-World",
    )
    pull["head"].update(label="forker:changes", user=forker)
    pull["user"] = forker
    pull["author_association"] = "CONTRIBUTOR"
    event["sender"] = forker
    return event


def _head_repo_null(synchronize: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(synchronize)
    pull = event["pull_request"]
    pull["head"]["repo"] = None
    pull["head"]["label"] = "unknown repository"
    return event


def _draft(opened: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(opened)
    event["pull_request"]["draft"] = True
    return event


def _bot(opened: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(opened)
    bot = {"login": "dependabot[bot]", "id": 49699333, "type": "Bot"}
    pull = event["pull_request"]
    pull["user"] = bot
    pull["title"] = "Bump requests from 2.31.0 to 2.32.0"
    pull["head"]["ref"] = "dependabot/pip/requests-2.32.0"
    pull["head"]["label"] = "Codertocat:dependabot/pip/requests-2.32.0"
    pull["author_association"] = "NONE"
    event["sender"] = bot
    return event


def _on_pull(issue_comment: dict[str, Any]) -> dict[str, Any]:
    """The examples' issue_comment is on an issue: the same comment on a PR has `issue.pull_request`."""
    event = copy.deepcopy(issue_comment)
    issue = event["issue"]
    base = issue["url"].replace("/issues/", "/pulls/")
    issue["pull_request"] = {
        "url": base,
        "html_url": issue["url"].replace("api.github.com/repos", "github.com").replace("/issues/", "/pull/"),
        "diff_url": None,
        "patch_url": None,
    }
    return event


def _reply(review_comment: dict[str, Any]) -> dict[str, Any]:
    """A reply in the thread of the example's review comment (`in_reply_to_id` names the first)."""
    event = copy.deepcopy(review_comment)
    comment = event["comment"]
    comment["in_reply_to_id"] = comment["id"]
    comment["id"] += 1
    comment["html_url"] = comment["html_url"].rsplit("_r", 1)[0] + f"_r{comment['id']}"
    comment["url"] = comment["url"].rsplit("/", 1)[0] + f"/{comment['id']}"
    return event


def build(events: list[dict[str, Any]]) -> dict[str, Any]:
    """File name → payload, for every fixture in tests/data/events/."""
    out: dict[str, Any] = {}
    for action in ACTIONS:
        example = _first(events, "pull_request", action)
        out[f"pull_request.{action}.json"] = trim(example, SHAPES["pull_request"])
    out["workflow_dispatch.json"] = trim(_first(events, "workflow_dispatch"), SHAPES["workflow_dispatch"])
    opened = out["pull_request.opened.json"]
    out["pull_request.opened.fork.json"] = _fork(opened)
    synchronize = out["pull_request.synchronize.json"]
    out["pull_request.synchronize.head_repo_null.json"] = _head_repo_null(synchronize)
    out["pull_request.opened.draft.json"] = _draft(opened)
    out["pull_request.opened.bot.json"] = _bot(opened)
    out["schedule.json"] = {"schedule": "*/15 * * * *"}
    issue_comment = trim(_first(events, "issue_comment", "created"), SHAPES["issue_comment"])
    out["issue_comment.created.json"] = issue_comment
    out["issue_comment.created.pr.json"] = _on_pull(issue_comment)
    review_comment = trim(
        _first(events, "pull_request_review_comment", "created"), SHAPES["pull_request_review_comment"]
    )
    out["pull_request_review_comment.created.json"] = review_comment
    out["pull_request_review_comment.created.reply.json"] = _reply(review_comment)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    events = json.loads(args.source.read_text(encoding="utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, payload in build(events).items():
        text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        (args.out / name).write_text(text, encoding="utf-8")
        print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
