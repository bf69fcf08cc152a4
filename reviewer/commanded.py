"""A comment command, run (docs/commands.md). A comment that is not a command costs no request; the
base branch's config says whose commands count; a refused one gets one 👎 and its reason in the job
summary; an accepted one one 👀, then a review through `review_pull` (same budgets and caps as any
run) or, for `ignore`, the dismissal written into our signed sticky state (no model call).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from reviewer.commands import ASSOCIATIONS, CommentEvent, Decision, Reaction, decide
from reviewer.dismissals import dismiss
from reviewer.errors import GitHubError
from reviewer.events import SkipRules
from reviewer.publish import find_sticky, upsert_sticky
from reviewer.pull import PrOutcome, PullJob, job_config, list_comments, review_pull, run_text
from reviewer.render import Renderer, code_span, untrusted_line
from reviewer.state import StickyState, visible_text

if TYPE_CHECKING:
    from reviewer.source.github import GitHubClient

Warn = Callable[[str], None]
SILENT = frozenset({"not_created", "bot", "not_a_pull", "not_a_command"})
"""Comments that are no command for us: no request, no reaction, only a line in the job summary."""


def run_command(
    client: GitHubClient, event: CommentEvent, job: PullJob, *, warn: Warn, notices: TextIO | None
) -> PrOutcome:
    """Judge and run one comment command on the PR `event.number` (`job` is that PR's)."""
    plain = job.messages()
    first = decide(event, ASSOCIATIONS)
    if first.reason in SILENT:
        why = first.detail.words(plain.translate) if first.detail is not None else ""
        text = plain.translate("command.ignored", number=event.number, reason=untrusted_line(why, 300))
        return _outcome(event, plain, text, reason=first.reason)
    from reviewer.source.github import GitHubSource

    source = GitHubSource(client, job.repo, event.number, run_id=job.run_id, config_path=job.config_path)
    config = job_config(client, job, source)
    renderer = job.messages(config.language)
    decision = decide(event, config.maintainer_associations)
    if not decision.accepted:
        why = decision.detail.words(renderer.translate) if decision.detail is not None else ""
        detail = untrusted_line(why, 300)
        return _refuse(client, event, renderer, detail, decision.reason, warn)
    verb = decision.command.verb if decision.command is not None else None
    if verb == "ignore":
        return _ignore(client, event, decision, renderer, warn)
    _react(client, event, "eyes", warn)
    accepted = renderer.translate(
        "command.accepted",
        verb=verb,
        author=untrusted_line(event.author, 60),
        association=untrusted_line(event.association, 30),
        number=event.number,
    )
    if verb == "help":
        text = renderer.translate("command.help", allowed=", ".join(config.maintainer_associations) or "-")
        try:
            client.create_issue_comment(job.repo, event.number, text)
        except GitHubError as exc:
            warn(f"imreview: help: could not reply: {exc}")
        return _outcome(event, renderer, f"{accepted}\n\n{text}", reason="help")
    commanded = dataclasses.replace(
        job,
        number=event.number,
        config=job.config or config,
        skip=SkipRules(closed=True, reviewed=verb == "review", explicit=True),
        full_review=verb == "full",
    )
    outcome = review_pull(client, commanded, warn=warn, notices=notices)
    return dataclasses.replace(
        outcome, summary=f"{run_text(renderer, 'command', text=accepted)}\n{outcome.summary}"
    )


def _ignore(
    client: GitHubClient, event: CommentEvent, decision: Decision, renderer: Renderer, warn: Warn
) -> PrOutcome:
    """Write the dismissal into our signed state; refuse (👎) what names no finding we hold."""
    listed = list_comments(client, event.repo, event.number)
    sticky = None
    if listed.comments is not None:
        sticky = find_sticky(client, event.repo, event.number, login=listed.login, comments=listed.comments)
    state = StickyState.parse(sticky.body) if sticky is not None else None
    if sticky is None or state is None:
        why = renderer.translate("command.no_state", number=event.number)
        return _refuse(client, event, renderer, why, "no_state", warn)
    finding_id = decision.command.finding_id if decision.command is not None else ""
    if not finding_id:
        from reviewer.memory import finding_of
        from reviewer.source.threads import read_threads

        threads = read_threads(client, event.repo, event.number)
        thread = next((t for t in threads if t.first_id == event.reply_to), None)
        finding_id = (finding_of(thread, ours=listed.login) if thread is not None else None) or ""
        if not finding_id:
            return _refuse(client, event, renderer, renderer.translate("command.not_ours"), "not_ours", warn)
    made = dismiss(state.carried, finding_id, by=event.author, how="command")
    if made is None:
        why = renderer.translate("command.not_found", id=finding_id, number=event.number)
        return _refuse(client, event, renderer, why, "not_found", warn)
    body = state.with_dismissed([made]).body(visible_text(sticky.body))
    upsert_sticky(
        client,
        event.repo,
        event.number,
        body=body,
        login=listed.login,
        comments=listed.comments,
        say=renderer.translate,
    )
    _react(client, event, "eyes", warn)
    title, path = untrusted_line(made.title, 160), code_span(made.path, 200)
    text = renderer.translate("command.dismissed", title=title, id=made.id, path=path, number=event.number)
    return _outcome(event, renderer, text, reason="dismissed")


def _refuse(
    client: GitHubClient, event: CommentEvent, renderer: Renderer, why: str, reason: str, warn: Warn
) -> PrOutcome:
    _react(client, event, "-1", warn)
    text = renderer.translate(
        "command.refused", author=untrusted_line(event.author, 60), number=event.number, reason=why
    )
    return _outcome(event, renderer, text, reason=reason)


def _react(client: GitHubClient, event: CommentEvent, content: Reaction, warn: Warn) -> None:
    """One reaction on the command's comment; a failure is a warning (the summary says the rest)."""
    from reviewer.source.threads import react

    try:
        react(client, event.repo, event.kind, event.comment_id, content)
    except GitHubError as exc:
        warn(f"imreview: could not react to comment {event.comment_id}: {exc}")


def _outcome(event: CommentEvent, renderer: Renderer, text: str, *, reason: str) -> PrOutcome:
    return PrOutcome(event.number, "skipped", run_text(renderer, "command", text=text), reason=reason)
