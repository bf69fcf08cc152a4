"""A PR's dismissal memory in a review run: the dismissals our signed state holds plus those the PR's
review threads show (one GraphQL query), removed from the analysis before it is rendered. A reply's
`authorAssociation` says whether it counts; GraphQL gives none for who resolved a thread or reacted
👎, so their permission on the repository decides (`trusted_logins`, bounded).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from reviewer import dismissals, gate
from reviewer.commands import parse_command
from reviewer.diff import DiffFile
from reviewer.errors import GitHubError
from reviewer.events import is_bot
from reviewer.report import Dismissal, DismissalHow
from reviewer.review import Analysis
from reviewer.source.threads import Thread, ThreadReply, read_threads, trusted_logins
from reviewer.state import StickyState

if TYPE_CHECKING:
    from reviewer.source.github import GitHubClient

Warn = Callable[[str], None]
FINDING_MARKER = re.compile(r"<!-- imreview:finding ([0-9a-f]{12}) -->\s*$")


def finding_of(thread: Thread, *, ours: str) -> str | None:
    """The finding id a thread is about: its first comment is ours and ends with our marker."""
    # GraphQL names a bot without REST's `[bot]` suffix (`github-actions` for `github-actions[bot]`)
    first, us = (login.casefold().removesuffix("[bot]") for login in (thread.first_author, ours))
    if not ours or first != us:
        return None
    found = FINDING_MARKER.search(thread.first_body)
    return found.group(1) if found else None


Claim = tuple[str, str, DismissalHow]
"""(finding id, who, how) of someone dismissing a finding."""


def claims(threads: Sequence[Thread], *, ours: str, allowed: Collection[str]) -> list[Claim]:
    """What the threads say, oldest form first: a maintainer's `/imreview ignore` reply (its
    association is GitHub's), then a resolved thread, then 👎 reactions (whose association is
    unknown: their permission must be read before they count)."""
    wanted = {a.upper() for a in allowed}
    out: list[Claim] = []
    for thread in threads:
        fid = finding_of(thread, ours=ours)
        if fid is None:
            continue
        out += [(fid, r.author, "command") for r in thread.replies if _ignores(r, fid, wanted)]
        if thread.resolved and _human(thread.resolved_by):
            out.append((fid, thread.resolved_by, "resolved"))
        out += [(fid, login, "reaction") for login in thread.thumbs_down if _human(login)]
    return out


def _ignores(reply: ThreadReply, finding_id: str, wanted: Collection[str]) -> bool:
    """A reply dismisses the thread's finding when it is `/imreview ignore` (bare, or naming this
    finding) from a person whose association the config trusts."""
    command = parse_command(reply.body)
    return (
        command is not None
        and command.verb == "ignore"
        and command.finding_id in ("", finding_id)
        and reply.association.upper() in wanted
        and _human(reply.author)
    )


def _human(login: str) -> bool:
    """A bot's dismissal never counts, and "" is a deleted account: nobody to credit."""
    return bool(login) and not is_bot(login, "")


def thread_dismissals(
    client: GitHubClient,
    repo: str,
    number: int,
    state: StickyState,
    *,
    ours: str,
    allowed: Collection[str],
    warn: Warn,
) -> tuple[Dismissal, ...]:
    """Dismissals the PR's threads show for findings our state holds; nothing when the read fails."""
    if not state.carried or not ours:
        return ()
    try:
        threads = read_threads(client, repo, number)
        found = claims(threads, ours=ours, allowed=allowed)
        unknown = [by for _, by, how in found if how != "command"]
        trusted = trusted_logins(client, repo, unknown, sorted(allowed)) if unknown else frozenset()
    except GitHubError as exc:
        warn(f"imreview: dismissals: could not read the review threads: {exc}")
        return ()
    made = (
        dismissals.dismiss(state.carried, fid, by=by, how=how)
        for fid, by, how in found
        if how == "command" or by in trusted
    )
    return tuple(d for d in made if d is not None)


def _dropped(analysis: Analysis, filtered: dismissals.Filtered, listed: tuple[Dismissal, ...]) -> Analysis:
    """The analysis keeping only `filtered.kept` (verdict recomputed, nothing dropped carried to the
    next push), with `listed` as the report's dismissals."""
    report = analysis.report
    gone = {f.id for f in filtered.dropped}
    verdict = gate.verdict(
        findings=list(filtered.kept), coverage=report.coverage, gaps=list(report.gaps), head_moved=False
    )
    return dataclasses.replace(
        analysis,
        report=report.replace(findings=filtered.kept, dismissed=listed, verdict=verdict),
        carry=tuple(c for c in analysis.carry if c.id not in gone),
    )


def remember(
    client: GitHubClient,
    repo: str,
    number: int,
    analysis: Analysis,
    files: Sequence[DiffFile],
    state: StickyState | None,
    *,
    ours: str,
    allowed: Collection[str],
    read_threads_too: bool,
    warn: Warn,
) -> Analysis:
    """The review's analysis without what maintainers dismissed on this PR (the state's and the
    threads'), verdict recomputed, every dismissal listed (the config's `ignore:` is the review's)."""
    if state is None:
        return analysis
    new = (
        thread_dismissals(client, repo, number, state, ours=ours, allowed=allowed, warn=warn)
        if read_threads_too
        else ()
    )
    dismissed = dismissals.merged(state.dismissed, new)
    if not dismissed:
        return analysis
    filtered = dismissals.apply(analysis.report.findings, dismissed, files)
    return _dropped(analysis, filtered, dismissals.merged(analysis.report.dismissed, dismissed))


def ignore_lines(state: StickyState, where: str) -> str:
    """YAML for `ignore:` in .github/imreview.yml: one entry per finding dismissed in `state`, by
    its dismissal key, with a reason naming who dismissed it where. Titles are written as YAML
    strings (json.dumps is valid YAML), never as raw PR or model text."""
    import json

    if not state.dismissed:
        return f"# {where}: no finding was dismissed\n"
    lines = ["ignore:"]
    for d in state.dismissed:
        reason = f"dismissed by {d.by} on {where}: {d.title}"
        lines.append(f"  - fingerprint: {d.key}  # {json.dumps(d.path, ensure_ascii=True)}")
        lines.append(f"    reason: {json.dumps(reason, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"
