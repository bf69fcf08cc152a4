"""Comment commands (`/imreview review|full|ignore [id]|help`, docs/commands.md): read, parsed and
judged here, pure. Who may give one is the commenter's `author_association` as GitHub puts it in the
payload, against a set from the workflow or the base branch's config, never from the PR; bots never.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reviewer.errors import UsageError
from reviewer.events import Why, is_bot

COMMAND_EVENTS: tuple[str, ...] = ("issue_comment", "pull_request_review_comment")
VERBS: tuple[str, ...] = ("review", "full", "ignore", "help")
ASSOCIATIONS: tuple[str, ...] = (
    "OWNER",
    "MEMBER",
    "COLLABORATOR",
    "CONTRIBUTOR",
    "FIRST_TIME_CONTRIBUTOR",
    "FIRST_TIMER",
    "MANNEQUIN",
    "NONE",
)
"""GitHub's `author_association` values (webhooks schema `author-association`)."""
PREFIX = "/imreview"
MAX_BODY_CHARS = 2_000
"""Only a comment's beginning is read: a command is one short line."""

_FINDING_ID = re.compile(r"[0-9a-f]{12}")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")

Verb = Literal["review", "full", "ignore", "help"]
Kind = Literal["issue", "review"]


@dataclass(frozen=True)
class Command:
    """A parsed command; `problem` says why it cannot run as written (unknown verb, bad id)."""

    verb: Verb | None
    finding_id: str = ""
    problem: Why | None = None


def parse_command(body: str) -> Command | None:
    """The command starting a comment's first non-blank line (a quote mid-comment, or one in a code
    block, is none); after `ignore`, a 12-hex finding id, or else the maintainer's reason."""
    for raw in body[:MAX_BODY_CHARS].replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        if _FENCE.match(raw):
            return None
        words = [w.lower() for w in line.split()]
        if words[0] != PREFIX:
            return None
        verb = words[1] if len(words) > 1 else "help"
        if verb not in VERBS:
            named = (("verb", repr(verb[:40])), ("verbs", ", ".join(VERBS)))
            return Command(None, problem=Why("malformed", "command_refusal.unknown", named))
        if verb != "ignore" or len(words) < 3:
            return Command(verb)  # type: ignore[arg-type]  # checked against VERBS
        ident = words[2].lstrip("#`").rstrip("`")
        # anything else after `ignore` is the maintainer's reason, not an id
        return Command("ignore", finding_id=ident if _FINDING_ID.fullmatch(ident) else "")
    return None


@dataclass(frozen=True)
class CommentEvent:
    """The fields of an `issue_comment` or `pull_request_review_comment` payload commands need."""

    kind: Kind
    action: str
    repo: str
    number: int
    on_pull: bool
    comment_id: int
    author: str
    author_type: str
    association: str
    body: str
    reply_to: int | None = None
    """For a reply in a review thread: the thread's first comment (`in_reply_to_id`)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UsageError(f"event payload: '{where}.{key}' is missing or not a positive number")
    return value


def read_comment_event(event_name: str, payload: Mapping[str, Any], *, repository: str) -> CommentEvent:
    """The comment event's fields; a payload without them exits 2 naming the missing key."""
    comment = _mapping(payload.get("comment"))
    user = _mapping(comment.get("user"))
    repo = _mapping(payload.get("repository")).get("full_name")
    on_issue = event_name == "issue_comment"
    where = "issue" if on_issue else "pull_request"
    parent = _mapping(payload.get(where))
    reply = comment.get("in_reply_to_id")
    body = comment.get("body")
    return CommentEvent(
        kind="issue" if on_issue else "review",
        action=str(payload.get("action") or ""),
        repo=repo if isinstance(repo, str) and repo else repository,
        number=_int(parent, "number", where),
        on_pull=not on_issue or isinstance(parent.get("pull_request"), Mapping),
        comment_id=_int(comment, "id", "comment"),
        author=str(user.get("login") or ""),
        author_type=str(user.get("type") or ""),
        association=str(comment.get("author_association") or "NONE").upper(),
        body=body if isinstance(body, str) else "",
        reply_to=reply if not on_issue and isinstance(reply, int) and not isinstance(reply, bool) else None,
    )


Reaction = Literal["eyes", "-1"]


@dataclass(frozen=True)
class Decision:
    """What to do with a comment: run `command` (`accepted`), refuse it (one 👎 reaction, the reason
    in the summary), or ignore it silently (`reaction` None: not a command, a bot, an edit)."""

    accepted: bool
    reason: str
    """`accepted`, or why not: `not_created`, `bot`, `not_a_pull`, `not_a_command`, `association`,
    `malformed`, `no_finding`."""
    detail: Why | None = None
    """The sentence saying why not (`command_refusal.*` in templates/i18n)."""
    command: Command | None = None
    reaction: Reaction | None = None


def _refused(code: str, key: str, command: Command | None = None, **named: str) -> Decision:
    """A refusal: silent (no reaction) before a command is parsed, a 👎 after."""
    reaction: Reaction | None = "-1" if command is not None else None
    return Decision(False, code, Why(code, f"command_refusal.{key}", tuple(named.items())), command, reaction)


def decide(event: CommentEvent, allowed: Collection[str]) -> Decision:
    """Whether `event` is a command this commenter may give. Only `created` comments count (an edit
    would let one comment command twice); a bot's comment, ours included, is never a command."""
    if event.action != "created":
        if not event.action:
            return _refused("not_created", "not_created_unnamed")
        return _refused("not_created", "not_created", action=event.action)
    if is_bot(event.author, event.author_type):
        return _refused("bot", "bot", author=event.author) if event.author else _refused("bot", "unnamed_bot")
    if not event.on_pull:
        return _refused("not_a_pull", "not_a_pull")
    command = parse_command(event.body)
    if command is None:
        return _refused("not_a_command", "not_a_command")
    if event.association not in {a.upper() for a in allowed}:
        who = {"author": event.author, "association": event.association}
        if not allowed:
            return _refused("association", "association_nobody", command, **who)
        return _refused("association", "association", command, **who, allowed=", ".join(sorted(allowed)))
    if command.problem is not None:
        return Decision(False, "malformed", command.problem, command, "-1")
    if command.verb == "ignore" and not command.finding_id and event.reply_to is None:
        return _refused("no_finding", "no_finding", command)
    return Decision(True, "accepted", None, command, "eyes")
