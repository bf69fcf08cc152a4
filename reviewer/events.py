"""Runner environment + event payload → what this run reviews (DESIGN sections 1, 3, 10.5).

Pure: callers pass the environment mapping and the parsed `GITHUB_EVENT_PATH` JSON, and get data
back. Only the PR from the event, the dispatch input or a scan of the run's own repository is ever
a target (DESIGN 7); nothing here reads PR text, so nothing untrusted can choose a target.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reviewer.errors import UsageError

INPUT_PREFIX = "INPUT_"
REVIEW_ACTIONS: tuple[str, ...] = ("opened", "synchronize", "reopened", "ready_for_review")
PR_EVENTS: tuple[str, ...] = ("pull_request", "pull_request_target")
MODES: tuple[str, ...] = ("auto", "pr", "scan")

_PR_SEPARATORS = re.compile(r"[\s,]+")


def read_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """Every `INPUT_<NAME>` as `name` → trimmed value.

    The runner upper-cases the declared name and keeps its hyphens (`max-cost-usd` arrives as
    `INPUT_MAX-COST-USD`) but does not trim, so we lower-case and trim here.
    """
    return {
        key[len(INPUT_PREFIX) :].lower(): value.strip()
        for key, value in env.items()
        if key.startswith(INPUT_PREFIX) and len(key) > len(INPUT_PREFIX)
    }


def parse_pr_numbers(raw: str) -> tuple[int, ...]:
    """`"1, 2 #3"` → `(1, 2, 3)`: newlines, commas and spaces separate; a leading `#` is fine."""
    numbers: list[int] = []
    for token in _PR_SEPARATORS.split(raw.strip()):
        if not token:
            continue
        digits = token.removeprefix("#")
        if not digits.isascii() or not digits.isdigit() or int(digits) <= 0:
            raise UsageError(
                f"input 'pr-number': {token!r} is not a pull request number "
                "(expected numbers like '12' or '#12', separated by commas, spaces or newlines)"
            )
        number = int(digits)
        if number not in numbers:
            numbers.append(number)
    return tuple(numbers)


@dataclass(frozen=True)
class EventPull:
    """The few fields of the payload's `pull_request` that routing and skipping need."""

    number: int
    draft: bool
    state: str
    author: str
    author_type: str
    head_sha: str
    head_repo: str | None
    base_repo: str
    cross_repo: bool


@dataclass(frozen=True)
class RunRequest:
    """What to do: review `numbers` (`pr`), scan open PRs (`scan`), or nothing (`skip`, with `reason`).

    `explicit` is true when a person named the PRs (dispatch input, `mode: pr` with `pr-number`),
    so `skip-drafts` does not apply. `pull` is set when the event itself carried the PR.
    """

    kind: Literal["pr", "scan", "skip"]
    repo: str
    numbers: tuple[int, ...] = ()
    reason: str = ""
    event_name: str = ""
    explicit: bool = False
    pull: EventPull | None = None


def _field(data: Mapping[str, Any], dotted: str, kind: type) -> Any:
    value: Any = data
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UsageError(f"event payload: 'pull_request.{dotted}' is missing or not a {kind.__name__}")
    return value


def _repo_name(repo: Any) -> str | None:
    if isinstance(repo, Mapping) and isinstance(repo.get("full_name"), str) and repo["full_name"]:
        return str(repo["full_name"])
    return None


def pull_from_payload(pull: Mapping[str, Any]) -> EventPull:
    """Read a webhook `pull_request` object; `head.repo` may be null (a deleted fork)."""
    head = pull.get("head")
    head_repo = _repo_name(head.get("repo")) if isinstance(head, Mapping) else None
    base_repo = _field(pull, "base.repo.full_name", str)
    user = pull.get("user")
    author = user.get("login") if isinstance(user, Mapping) else None
    author_type = user.get("type") if isinstance(user, Mapping) else None
    return EventPull(
        number=_field(pull, "number", int),
        draft=bool(pull.get("draft", False)),
        state=str(pull.get("state") or "open"),
        author=author if isinstance(author, str) else "",
        author_type=author_type if isinstance(author_type, str) else "",
        head_sha=_field(pull, "head.sha", str),
        head_repo=head_repo,
        base_repo=base_repo,
        cross_repo=head_repo is None or head_repo.lower() != base_repo.lower(),
    )


def _mode(inputs: Mapping[str, str]) -> str:
    mode = inputs.get("mode", "").strip().lower() or "auto"
    if mode not in MODES:
        raise UsageError(f"input 'mode': {inputs.get('mode')!r} is not one of {', '.join(MODES)}")
    return mode


def _dispatch_numbers(inputs: Mapping[str, str], payload: Mapping[str, Any]) -> tuple[int, ...]:
    """The `pr-number` input, else the dispatch event's own `pr-number` input (same string)."""
    raw = inputs.get("pr-number", "")
    if not raw:
        event_inputs = payload.get("inputs")
        if isinstance(event_inputs, Mapping) and isinstance(event_inputs.get("pr-number"), str):
            raw = event_inputs["pr-number"]
    return parse_pr_numbers(raw)


def plan_run(
    event_name: str, payload: Mapping[str, Any], *, repository: str, inputs: Mapping[str, str]
) -> RunRequest:
    """Route one run. `repository` is GITHUB_REPOSITORY, used when the payload names none.

    `mode: auto` follows the event: on a pull_request event only the event's PR is reviewed,
    whatever `pr-number` says. `mode: pr` reviews `pr-number` when set, else the event's PR.
    Drafts, bots and closed PRs are left to `skip_reason`, which needs the PR's current state.
    """
    mode = _mode(inputs)
    repo = _repo_name(payload.get("repository")) or repository.strip()
    if not repo:
        raise UsageError("GITHUB_REPOSITORY is not set and the event payload names no repository")

    if mode == "scan":
        return RunRequest(kind="scan", reason="input 'mode' is 'scan'", repo=repo, event_name=event_name)

    pull_obj = payload.get("pull_request") if event_name in PR_EVENTS else None
    pull = pull_from_payload(pull_obj) if isinstance(pull_obj, Mapping) else None
    if mode == "pr":
        return _pr_mode(event_name, payload, inputs, pull, repo)
    if event_name in PR_EVENTS:
        return _pr_event(event_name, payload, pull, repo)
    if event_name == "workflow_dispatch":
        return _dispatch(inputs, payload, repo, event_name)
    if event_name == "schedule":
        return RunRequest(kind="scan", reason="scheduled run", repo=repo, event_name=event_name)
    return RunRequest(
        kind="skip",
        reason=f"event '{event_name or '(none)'}' is not reviewed "
        "(use pull_request, pull_request_target, workflow_dispatch or schedule)",
        repo=repo,
        event_name=event_name,
    )


def _pr_mode(
    event_name: str, payload: Mapping[str, Any], inputs: Mapping[str, str], pull: EventPull | None, repo: str
) -> RunRequest:
    """`mode: pr`: the `pr-number` PRs, else the dispatch's or the event's PR."""
    numbers = parse_pr_numbers(inputs.get("pr-number", ""))
    if numbers:
        return RunRequest(kind="pr", numbers=numbers, explicit=True, repo=repo, event_name=event_name)
    if event_name == "workflow_dispatch":
        return _dispatch(inputs, payload, repo, event_name)
    if pull is None:
        raise UsageError(
            f"input 'mode' is 'pr' but event '{event_name}' carries no pull request: set `pr-number`"
        )
    return RunRequest(kind="pr", numbers=(pull.number,), pull=pull, repo=repo, event_name=event_name)


def _pr_event(event_name: str, payload: Mapping[str, Any], pull: EventPull | None, repo: str) -> RunRequest:
    """A pull_request(_target) event: its PR, when the action is one that is reviewed."""
    action = payload.get("action")
    if pull is None:
        raise UsageError(f"event payload: '{event_name}' has no 'pull_request' object")
    if action not in REVIEW_ACTIONS:
        return RunRequest(
            kind="skip",
            reason=f"{event_name} action '{action}' is not reviewed (only {', '.join(REVIEW_ACTIONS)})",
            pull=pull,
            repo=repo,
            event_name=event_name,
        )
    return RunRequest(kind="pr", numbers=(pull.number,), pull=pull, repo=repo, event_name=event_name)


def _dispatch(
    inputs: Mapping[str, str], payload: Mapping[str, Any], repo: str, event_name: str
) -> RunRequest:
    numbers = _dispatch_numbers(inputs, payload)
    if not numbers:
        raise UsageError(
            "input 'pr-number' is empty: set `pr-number` to the pull request(s) to review "
            "(e.g. `pr-number: ${{ inputs.pr-number }}`)"
        )
    return RunRequest(kind="pr", numbers=numbers, explicit=True, repo=repo, event_name=event_name)


def is_bot(author: str, author_type: str) -> bool:
    return author_type == "Bot" or author.lower().endswith("[bot]")


def skip_reason(
    *,
    draft: bool,
    author: str,
    author_type: str,
    state: str,
    explicit: bool,
    skip_drafts: bool,
    skip_bots: bool,
) -> str | None:
    """Why a PR is not reviewed by policy (verdict `skipped`), or None to review it."""
    if state != "open":
        return f"the pull request is {state or 'not open'}"
    if draft and skip_drafts and not explicit:
        return "the pull request is a draft (skip-drafts is true; mark it ready for review)"
    if skip_bots and is_bot(author, author_type):
        return f"the pull request was opened by the bot {author or '(unknown)'} (skip-bots is true)"
    return None
