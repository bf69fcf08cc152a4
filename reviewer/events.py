"""Runner environment + event payload → what this run reviews (DESIGN sections 1, 3, 10.5).

Pure: callers pass the environment mapping and the parsed `GITHUB_EVENT_PATH` JSON, and get data
back. Only the PR from the event, the dispatch input or a scan of the run's own repository is ever
a target (DESIGN 7); nothing here reads PR text, so nothing untrusted can choose a target.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reviewer.errors import UsageError

REVIEW_ACTIONS: tuple[str, ...] = ("opened", "synchronize", "reopened", "ready_for_review")
PR_EVENTS: tuple[str, ...] = ("pull_request", "pull_request_target")
MODES: tuple[str, ...] = ("auto", "pr", "scan")


def read_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """Every `INPUT_<NAME>` as `name` → trimmed value: the runner upper-cases the declared name and
    keeps its hyphens (`max-cost-usd` arrives as `INPUT_MAX-COST-USD`) but does not trim."""
    return {
        key[6:].lower(): value.strip() for key, value in env.items() if key.startswith("INPUT_") and key[6:]
    }


def label_names(*raw: str) -> tuple[str, ...]:
    """Label names from inputs or flags, each separated by commas or newlines (`scan-labels`,
    `--labels`), blanks dropped."""
    return tuple(part.strip() for text in raw for part in re.split(r"[\n,]", text) if part.strip())


def parse_pr_numbers(raw: str) -> tuple[int, ...]:
    """`"1, 2 #3"` → `(1, 2, 3)`: newlines, commas and spaces separate; a leading `#` is fine."""
    numbers: list[int] = []
    for token in filter(None, re.split(r"[\s,]+", raw.strip())):
        digits = token.removeprefix("#")
        if not digits.isascii() or not digits.isdigit() or int(digits) <= 0:
            raise UsageError(
                f"input 'pr-number': {token!r} is not a pull request number "
                "(expected numbers like '12' or '#12', separated by commas, spaces or newlines)"
            )
        numbers.append(int(digits))
    return tuple(dict.fromkeys(numbers))


@dataclass(frozen=True)
class Why:
    """Why something is not done (a skip, a refused command): the machine `code` callers branch on,
    and the sentence a user reads as its i18n `key` (templates/i18n) with the values it names."""

    code: str
    key: str
    params: tuple[tuple[str, str], ...] = ()

    def words(self, say: Callable[..., str]) -> str:
        """The sentence, worded by `say` (`Renderer.translate`)."""
        return say(self.key, **dict(self.params))


@dataclass(frozen=True)
class RunRequest:
    """What to do: review `numbers` (`pr`), scan open PRs (`scan`), or nothing (`skip`, with `reason`).
    `explicit`: a person named the PRs (dispatch input, `mode: pr` with `pr-number`): drafts are reviewed."""

    kind: Literal["pr", "scan", "skip"]
    repo: str
    numbers: tuple[int, ...] = ()
    reason: Why | None = None
    explicit: bool = False


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


def _dispatch_numbers(inputs: Mapping[str, str], payload: Mapping[str, Any]) -> tuple[int, ...]:
    """The `pr-number` input, else the dispatch event's own `pr-number` input (same string)."""
    raw = inputs.get("pr-number", "")
    event_inputs = payload.get("inputs")
    if not raw and isinstance(event_inputs, Mapping) and isinstance(event_inputs.get("pr-number"), str):
        raw = event_inputs["pr-number"]
    numbers = parse_pr_numbers(raw)
    if not numbers:
        raise UsageError(
            "input 'pr-number' is empty: set `pr-number` to the pull request(s) to review "
            "(e.g. `pr-number: ${{ inputs.pr-number }}`)"
        )
    return numbers


def plan_run(
    event_name: str, payload: Mapping[str, Any], *, repository: str, inputs: Mapping[str, str]
) -> RunRequest:
    """Route one run. `repository` is GITHUB_REPOSITORY, used when the payload names none.

    `mode: auto` follows the event: on a pull_request event only the event's PR is reviewed,
    whatever `pr-number` says. `mode: pr` reviews `pr-number` when set, else the event's PR.
    Drafts, bots and closed PRs are left to `skip_reason`, which needs the PR's current state.
    """
    mode = inputs.get("mode", "").strip().lower() or "auto"
    if mode not in MODES:
        raise UsageError(f"input 'mode': {inputs.get('mode')!r} is not one of {', '.join(MODES)}")
    repo = _repo_name(payload.get("repository")) or repository.strip()
    if not repo:
        raise UsageError("GITHUB_REPOSITORY is not set and the event payload names no repository")
    if mode == "scan" or (mode == "auto" and event_name == "schedule"):
        return RunRequest("scan", repo)
    return _pull_request(event_name, payload, repo, inputs, mode)


def _pull_request(
    event_name: str, payload: Mapping[str, Any], repo: str, inputs: Mapping[str, str], mode: str
) -> RunRequest:
    """`mode: pr` or `auto` on anything but a schedule: the named PRs, the dispatch's, or the event's."""
    pull = payload.get("pull_request") if event_name in PR_EVENTS else None
    number: int | None = None
    if isinstance(pull, Mapping):  # a payload without the fields GitHub always sends is named
        _field(pull, "base.repo.full_name", str)
        number = _field(pull, "number", int)
        _field(pull, "head.sha", str)
    named = parse_pr_numbers(inputs.get("pr-number", "")) if mode == "pr" else ()
    if named or event_name == "workflow_dispatch":
        return RunRequest("pr", repo, named or _dispatch_numbers(inputs, payload), explicit=True)
    if number is None and mode == "pr":
        raise UsageError(
            f"input 'mode' is 'pr' but event '{event_name}' carries no pull request: set `pr-number`"
        )
    if event_name not in PR_EVENTS:
        why = Why("event", "skip.event", (("event", event_name),)) if event_name else _NO_EVENT
        return RunRequest("skip", repo, reason=why)
    if number is None:
        raise UsageError(f"event payload: '{event_name}' has no 'pull_request' object")
    action = payload.get("action")
    if mode == "auto" and action not in REVIEW_ACTIONS:
        values = (("event", event_name), ("action", str(action)), ("actions", ", ".join(REVIEW_ACTIONS)))
        return RunRequest("skip", repo, reason=Why("action", "skip.action", values))
    return RunRequest("pr", repo, (number,))


def is_bot(author: str, author_type: str) -> bool:
    return author_type == "Bot" or author.lower().endswith("[bot]")


@dataclass(frozen=True)
class SkipRules:
    """Which policy skips apply. `explicit` PRs (named by a person) are reviewed even as drafts."""

    drafts: bool = False
    bots: bool = False
    closed: bool = False
    reviewed: bool = False
    explicit: bool = False


def skip_reason(rules: SkipRules, *, state: str, draft: bool, author: str, author_type: str) -> Why | None:
    """Why a policy skip applies to the PR as it is now (verdict `skipped`), or None to review it."""
    if rules.closed and state != "open":
        return Why("closed", "skip.closed", (("state", state),)) if state else _NOT_OPEN
    if draft and rules.drafts and not rules.explicit:
        return Why("draft", "skip.draft")
    if rules.bots and is_bot(author, author_type):
        return Why("bot", "skip.bot", (("author", author),)) if author else _UNNAMED_BOT
    return None


_NO_EVENT = Why("event", "skip.no_event")
_NOT_OPEN = Why("closed", "skip.not_open")
_UNNAMED_BOT = Why("bot", "skip.unnamed_bot")
