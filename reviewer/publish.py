"""The GitHub sinks: the sticky comment and the inline review (DESIGN 6; the runner's sinks are in
runner_sinks.py). Each returns a `Published` and never raises for a GitHub error: callers branch on
its `reason`. Writes are never retried blindly: the comment and the review are found again by their
hidden marker before anything is created, so a rerun edits instead of duplicating."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from reviewer.errors import GitHubError, NoWriteAccess, RateLimited, Retryable, Unprocessable
from reviewer.render import Say, english, fit
from reviewer.report import Finding, Published, Report, published
from reviewer.runner_sinks import (
    READ_ONLY,
    READ_ONLY_KEY,
    PullSink,
    Rendered,
    refused_read_only,
)
from reviewer.state import (
    _MARKER_END,
    MARKER_PREFIX,
    PENDING_REVIEW,
    _is_sha,
    _last_line,
    _marker_json,
    _parse_marker,
    bind_sticky,
    bound_to_itself,
    mark_pending,
    proven_ours,
    sign_sticky,
    state_key,
)

if TYPE_CHECKING:
    from reviewer.diff import LineIndex
    from reviewer.render import Renderer
    from reviewer.source.github import CommentInfo, GitHubClient, InlineComment

COMMENT_LIMIT = 60_000
"""GitHub counts up to 65,536 characters (UTF-16 units); keep a margin."""
GITHUB_BODY_MAX = 65_536
MAX_INLINE_COMMENTS = 30
REVIEW_MARKER_PREFIX = "<!-- imreview:review v1 "
WRITE_ATTEMPTS = 3
INTEGRATION_LOGIN = "github-actions[bot]"
BOUND_REVIEW_KEY = "review"
_T = TypeVar("_T")
_Posted = TypeVar("_Posted", bound="CommentInfo")


def utf16_len(text: str) -> int:
    """GitHub's length: UTF-16 code units, so a non-BMP character (emoji, rare CJK) counts 2."""
    return len(text.encode("utf-16-le")) // 2


def fit_comment(text: str, limit: int = COMMENT_LIMIT, *, say: Say = english) -> str:
    """Cut `text` to `limit` UTF-16 units at a line boundary, with a note; our marker line survives."""
    if utf16_len(text) <= limit:
        return text
    body, tail = text, ""
    head, _, last = text.rstrip().rpartition("\n")
    if last.strip().startswith((MARKER_PREFIX, REVIEW_MARKER_PREFIX)):
        body, tail = head, "\n" + last.strip()
    note = "\n" + say("publish.comment_truncated")
    kept, _ = fit(body, max(limit - utf16_len(tail), 0), unit="utf16", note=note)
    return kept + tail


def review_marker(head: str, ids: Iterable[str], **extra: Any) -> str:
    """The inline review body's last line: the finding ids it carried, at which head; `extra` is its
    MAC, or without a key its own review id."""
    if not _is_sha(head):
        raise ValueError(f"review marker: head must be a full 40-character sha, got {head!r}")
    return f"{REVIEW_MARKER_PREFIX}{_marker_json({'head': head, 'ids': list(ids), **extra})}{_MARKER_END}"


def parse_review_marker(body: str | None) -> dict[str, Any] | None:
    return _parse_marker(body, REVIEW_MARKER_PREFIX)


def _same_login(user: str | None, login: str) -> bool:
    """An integration token cannot read `/user`: it is `github-actions[bot]` for GITHUB_TOKEN but
    `<app>[bot]` for an App's token, so then any bot may be us; the MAC decides which one is."""
    if not user or not login:
        return False
    if str(user).casefold() == login.casefold():
        return True
    return login == INTEGRATION_LOGIN and str(user).casefold().endswith("[bot]")


def _exactly(user: str | None, login: str) -> bool:
    return bool(user and login and user.casefold() == login.casefold())


def _our_stickies(
    comments: Iterable[CommentInfo], login: str, *, repo: str, number: int, key: bytes | None
) -> list[CommentInfo]:
    """Lowest id first: with a key those whose MAC checks; without one the exact login's comments
    whose marker names their own id, edited but never trusted for state."""
    if key is None:
        ours = [c for c in comments if _exactly(c.user, login) and bound_to_itself(c)]
    else:
        ours = [
            c
            for c in comments
            if _same_login(c.user, login) and proven_ours(c, repo=repo, number=number, key=key)
        ]
    return sorted(ours, key=lambda c: c.id)


def find_sticky(
    client: GitHubClient,
    repo: str,
    number: int,
    *,
    login: str,
    comments: Sequence[CommentInfo] | None = None,
) -> CommentInfo | None:
    """Our sticky comment when it is provably ours (its state may skip a review or carry costs):
    None without a key. `comments`: the PR's comments as this run already listed them."""
    if state_key() is None:
        return None
    listed = client.issue_comments(repo, number) if comments is None else comments
    return stickies_by_pull(((number, c) for c in listed), login, repo=repo).get(number)


def stickies_by_pull(
    comments: Iterable[tuple[int, CommentInfo]], login: str, *, repo: str
) -> dict[int, CommentInfo]:
    """`find_sticky` per PR number, over a repository-wide comment list (scan)."""
    key = state_key()
    if key is None:
        return {}
    grouped: dict[int, list[CommentInfo]] = {}
    for number, comment in comments:
        grouped.setdefault(number, []).append(comment)
    ours = {n: _our_stickies(group, login, repo=repo, number=n, key=key) for n, group in grouped.items()}
    return {n: found[0] for n, found in ours.items() if found}


def upsert_sticky(
    client: GitHubClient,
    repo: str,
    number: int,
    *,
    body: str,
    login: str,
    comments: Sequence[CommentInfo] | None = None,
    say: Say = english,
) -> Published:
    """Edit our oldest sticky comment in place, or create it; then delete our own newer duplicates.
    The list is read before any write (`comments`: as this run already read it). `say` words the
    result (`Renderer.translate` in the report's language)."""
    key = state_key()
    body = sign_sticky(body, repo=repo, number=number, key=key)
    size = utf16_len(body)
    if size > GITHUB_BODY_MAX:
        return Published("comment", False, say("publish.comment_too_long", size=size), reason="too_long")
    try:
        listed = client.issue_comments(repo, number) if comments is None else comments
        ours = _our_stickies(listed, login, repo=repo, number=number, key=key)
        if not ours:
            return _create_sticky(client, repo, number, body=body, login=login, key=key, say=say)
        info = _write(
            client, lambda: client.edit_issue_comment(repo, ours[0].id, _bound(body, ours[0].id, key))
        )
        return _sticky_done(client, repo, "updated", info, _deletable(ours[1:], login, key), say)
    except NoWriteAccess:
        return Published("comment", False, say(READ_ONLY_KEY), reason=READ_ONLY)
    except GitHubError as exc:
        return Published(
            "comment", False, say("publish.comment_failed", error=str(exc)), reason="github_error"
        )


def _create_sticky(
    client: GitHubClient, repo: str, number: int, *, body: str, login: str, key: bytes | None, say: Say
) -> Published:
    """Created, then the list read again for a copy a concurrent job created meanwhile: the oldest
    is kept (edited to this body when it is not ours) and the newer go."""
    created = _write(
        client,
        lambda: client.create_issue_comment(repo, number, body),
        lambda: _landed(lambda: client.issue_comments(repo, number), login, lambda c: c.body == body),
    )
    if key is None:
        created = _bind_created(client, repo, created, body)
    try:
        ours = _our_stickies(client.issue_comments(repo, number), login, repo=repo, number=number, key=key)
    except GitHubError as exc:
        detail = say("publish.comment_created_unchecked", error=str(exc))
        return Published("comment", True, detail, created.url, reason="created")
    if all(c.id != created.id for c in ours):
        ours = sorted([*ours, created], key=lambda c: c.id)
    keep = ours[0]
    info = (
        created
        if keep.id == created.id
        else _write(client, lambda: client.edit_issue_comment(repo, keep.id, _bound(body, keep.id, key)))
    )
    extra = _deletable([c for c in ours[1:] if c.id != created.id], login, key)
    mine = [created] if keep.id != created.id else []
    return _sticky_done(client, repo, "created", info, [*mine, *extra], say)


def _deletable(duplicates: Sequence[CommentInfo], login: str, key: bytes | None) -> list[CommentInfo]:
    """Duplicates this run may delete besides its own: only with a key, and only exactly our login's.
    A keyless marker naming its own id can be planted by a workflow that echoes PR text and edits its
    comment later, and a copy by another bot is that bot's comment (a racing run deletes its own)."""
    if key is None:
        return []
    return [c for c in duplicates if _exactly(c.user, login)]


def _write(client: GitHubClient, send: Callable[[], _T], landed: Callable[[], _T | None] | None = None) -> _T:
    """One write, tried again after a rate limit when the wait GitHub asks for fits the time left, at
    most WRITE_ATTEMPTS times. A create is looked for (`landed`) before each new try and before its
    failure is reported: one whose answer was lost (GitHub may have made it anyway) is never made
    twice, nor called failed while it is on the PR."""
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            return send()
        except RateLimited as exc:
            wait = client.write_wait(exc.retry_after)
            if wait is None or attempt == WRITE_ATTEMPTS:
                return _landed_or_raise(landed, exc)
            time.sleep(wait)
            found = landed() if landed is not None else None
            if found is not None:
                return found
        except Retryable as exc:
            return _landed_or_raise(landed, exc)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _landed_or_raise(landed: Callable[[], _T | None] | None, error: Exception) -> _T:
    found = landed() if landed is not None else None
    if found is None:
        raise error
    return found


def _landed(
    listing: Callable[[], Sequence[_Posted]], login: str, sent: Callable[[_Posted], bool]
) -> _Posted | None:
    """What a lost create made after all: the newest of our login's that is what we `sent` (a review
    is created whole, with its inline comments, or not at all)."""
    try:
        same = [c for c in listing() if sent(c) and _same_login(c.user, login)]
    except GitHubError:
        return None
    return max(same, key=lambda c: c.id) if same else None


def _bind_created(client: GitHubClient, repo: str, created: CommentInfo, body: str) -> CommentInfo:
    """Without a key, edited once to name its own id (`bind_sticky`); deleted when that fails, or it
    would never be found again and the next run would post a second one."""
    try:
        return _write(
            client, lambda: client.edit_issue_comment(repo, created.id, bind_sticky(body, created.id))
        )
    except GitHubError:
        with contextlib.suppress(GitHubError):
            client.delete_issue_comment(repo, created.id)
        raise


def _bound(body: str, comment_id: int, key: bytes | None) -> str:
    return bind_sticky(body, comment_id) if key is None else body


def _sticky_done(
    client: GitHubClient,
    repo: str,
    done: str,
    info: CommentInfo,
    duplicates: Sequence[CommentInfo],
    say: Say,
) -> Published:
    failed = []
    for dup in duplicates:
        try:
            client.delete_issue_comment(repo, dup.id)
        except GitHubError as exc:
            failed.append(f"{dup.id} ({exc})")
    detail = say(f"publish.comment_{done}")
    if duplicates:
        detail += say("publish.duplicates_removed", n=len(duplicates) - len(failed))
    if failed:
        detail += say("publish.duplicates_kept", ids=", ".join(failed))
    return Published("comment", True, detail, info.url, reason=done)


def _review_mac(key: bytes, repo: str, number: int, head: Any, ids: Any) -> str:
    message = json.dumps(["imreview-review-v1", repo.casefold(), number, head, ids], separators=(",", ":"))
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def _carried_ids(client: GitHubClient, repo: str, number: int, login: str, key: bytes | None) -> set[str]:
    """The finding ids our earlier reviews carried, from provably ours only (a forged list would
    silence our inline comments): with a key its MAC checks, without one the exact login's review
    whose marker names its own id."""
    carried: set[str] = set()
    for review in client.reviews(repo, number):
        state = parse_review_marker(review.body)
        if state is None:
            continue
        if key is None:
            bound = state.get(BOUND_REVIEW_KEY)
            ours = _exactly(review.user, login) and isinstance(bound, int) and bound == review.id
        else:
            mac = state.get("mac")
            expected = _review_mac(key, repo, number, state.get("head"), state.get("ids"))
            ours = (
                _same_login(review.user, login)
                and isinstance(mac, str)
                and hmac.compare_digest(mac, expected)
            )
        if ours and isinstance(state.get("ids"), list):
            carried.update(str(i) for i in state["ids"])
    return carried


def _new_inline(
    comments: Sequence[tuple[Finding, str]], carried: set[str], index: LineIndex, say: Say
) -> list[tuple[Finding, InlineComment]]:
    """Findings no earlier review carried, on lines of the diff GitHub accepts."""
    from reviewer.source.github import InlineComment

    planned: list[tuple[Finding, InlineComment]] = []
    for finding, text in comments:
        if finding.id in carried or not finding.anchored or finding.line is None:
            continue
        path, line, side, end = finding.path, finding.line, finding.side, finding.end_line
        body = fit_comment(text, say=say)
        if end is not None and end > line and index.range_commentable(path, line, end, side):
            planned.append((finding, InlineComment(path, end, side, body, start_line=line, start_side=side)))
        elif index.commentable(path, line, side):
            planned.append((finding, InlineComment(path, line, side, body)))
        else:
            continue
        carried.add(finding.id)
    return planned


def post_inline_review(
    client: GitHubClient,
    repo: str,
    number: int,
    *,
    head_sha: str,
    body: str,
    comments: Sequence[tuple[Finding, str]],
    index: LineIndex,
    login: str,
    fold: Callable[[Sequence[Finding]], str],
    say: Say = english,
) -> Published:
    """One `COMMENT` review (never APPROVE or REQUEST_CHANGES) with inline comments for findings no
    earlier review of ours carried. On 422 (GitHub never says which comment it disliked) it retries
    once with no inline comments and `fold(findings)` in the body."""
    try:
        key = state_key()
        planned = _new_inline(comments, _carried_ids(client, repo, number, login, key), index, say)
        if not planned:
            return Published("review", True, say("publish.no_new_findings"), reason="no_new_findings")
        ids = [f.id for f, _ in planned]
        mac = {} if key is None else {"mac": _review_mac(key, repo, number, head_sha, ids)}
        marker = review_marker(head_sha, ids, **mac)

        def send(extra: str, inline: list[InlineComment]) -> tuple[str | None, str]:
            """Created (looked for by its marker when the answer was lost), then bound without a key."""
            text = _review_body(body, extra, marker, say)
            info = _write(
                client,
                lambda: client.create_review(repo, number, commit_sha=head_sha, body=text, comments=inline),
                lambda: _landed(
                    lambda: client.reviews(repo, number), login, lambda r: _last_line(r.body) == marker
                ),
            )
            if key is not None:
                return info.url, ""
            bound = review_marker(head_sha, ids, **{BOUND_REVIEW_KEY: int(info.id)})
            return info.url, _bind_review(
                client, repo, number, info.id, text.removesuffix(marker) + bound, say
            )

        posted, overflow = planned[:MAX_INLINE_COMMENTS], planned[MAX_INLINE_COMMENTS:]
        try:
            url, note = send(fold([f for f, _ in overflow]) if overflow else "", [c for _, c in posted])
            detail = say("publish.review_posted", n=len(posted))
            if overflow:
                detail += say("publish.review_overflow", n=len(overflow))
            return Published("review", True, detail + note, url, reason="posted")
        except Unprocessable as exc:
            url, note = send(fold([f for f, _ in planned]), [])
            detail = say("publish.review_folded", error=str(exc), n=len(planned))
            return Published("review", True, detail + note, url, reason="folded")
    except NoWriteAccess:
        return Published("review", False, say(READ_ONLY_KEY), reason=READ_ONLY)
    except GitHubError as exc:
        return Published("review", False, say("publish.review_failed", error=str(exc)), reason="github_error")


def _review_body(body: str, extra: str, marker: str, say: Say) -> str:
    text = "\n\n".join(part.strip("\n") for part in (body, extra) if part.strip())
    return fit_comment(text, COMMENT_LIMIT - utf16_len(marker) - 2, say=say) + "\n\n" + marker


def _bind_review(client: GitHubClient, repo: str, number: int, review_id: int, bound: str, say: Say) -> str:
    """A note when the new review's marker could not be edited to name its id (the review stands, but
    the next run cannot tell it is ours and may repeat its comments)."""
    try:
        _write(client, lambda: client.edit_review_body(repo, number, review_id, bound))
    except GitHubError as exc:
        return say("publish.review_unbound", error=str(exc))
    return ""


@dataclass(frozen=True)
class PullTarget:
    """One PR, as `login`; `comments` as this run listed them (None: list them afresh)."""

    client: GitHubClient
    repo: str
    number: int
    login: str
    comments: Sequence[CommentInfo] | None = None


@dataclass(frozen=True)
class StickyComment(PullSink):
    target: PullTarget
    say: Say = english

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        t = self.target
        return upsert_sticky(
            t.client,
            t.repo,
            t.number,
            body=rendered.comment,
            login=t.login,
            comments=t.comments,
            say=self.say,
        )


@dataclass(frozen=True)
class InlineReview(PullSink):
    """Inline comments on the published, anchored findings not carried from an earlier review; not
    tried after a read-only refusal. When it fails for a reason a rerun can mend after the sticky
    comment was posted, the comment's state marks the review pending, so a rerun publishes it."""

    target: PullTarget
    renderer: Renderer
    max_findings: int
    index: LineIndex

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        say = self.renderer.translate
        if report is None:
            return Published("review", False, say("publish.no_review"), reason="no_report")
        if refused_read_only(report):
            return Published("review", False, say(READ_ONLY_KEY), reason=READ_ONLY)
        t, renderer, data = self.target, self.renderer, report.to_dict()
        by_id = {f["id"]: f for f in data["findings"]}
        review = post_inline_review(
            t.client,
            t.repo,
            t.number,
            head_sha=report.snapshot.head.sha,
            body=renderer.review_body(data),
            comments=[
                (f, renderer.inline(by_id[f.id]))
                for f in published_inline(report.findings, self.max_findings)
            ],
            index=self.index,
            login=t.login,
            fold=lambda fs: renderer.review_body(data, folded=[by_id[f.id] for f in fs]),
            say=say,
        )
        comment = next((p for p in report.published if p.sink == "comment"), None)
        if not review.ok and review.reason != READ_ONLY and comment is not None and comment.ok:
            pending = mark_pending(rendered.comment, [PENDING_REVIEW])
            marked = upsert_sticky(t.client, t.repo, t.number, body=pending, login=t.login, say=say)
            if not marked.ok:
                unmarked = say("publish.review_not_pending", why=marked.detail)
                review = replace(review, detail=review.detail + unmarked)
        return review


def published_inline(findings: Sequence[Finding], limit: int) -> list[Finding]:
    """Anchored published findings, never one carried from an earlier review (it is on the PR)."""
    return [f for f in published(findings, limit) if f.anchored and f.carried_from is None]
