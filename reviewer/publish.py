"""The GitHub sinks: the sticky comment and the inline review (DESIGN section 6); the runner's sinks
(job summary, outputs, annotations) and the `Sink` interface are in runner_sinks.py.

Each PR-facing sink returns a `Published(sink, ok, detail, url, reason)` and never raises for a
GitHub error; callers branch on `reason`, a machine code, never on `detail`. A read-only token (fork
PR) degrades to the job summary and annotations, with a notice.
Writes are never retried blindly: the sticky comment and the review are found again by their
hidden marker before anything is created, so a rerun or a retried job edits instead of duplicating.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from reviewer.errors import GitHubError, NoWriteAccess, RateLimited, Retryable, Unprocessable
from reviewer.render import fit
from reviewer.report import Finding, Published, Report
from reviewer.runner_sinks import (
    READ_ONLY,
    READ_ONLY_DETAIL,
    PullSink,
    Rendered,
    _packaged_text,
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
    from reviewer.source.github import CommentInfo, GitHubClient, InlineComment, ReviewInfo

COMMENT_LIMIT = 60_000
"""GitHub counts up to 65,536 characters (UTF-16 units); keep a margin."""
GITHUB_BODY_MAX = 65_536
MAX_INLINE_COMMENTS = 30

REVIEW_MARKER_PREFIX = "<!-- imreview:review v1 "
WRITE_ATTEMPTS = 3
"""Tries of one write when GitHub answers with a rate limit (each after the wait it asked for)."""
_T = TypeVar("_T")


# --- size limits -------------------------------------------------------------------------------


def utf16_len(text: str) -> int:
    """GitHub's length: UTF-16 code units, so a non-BMP character (emoji, rare CJK) counts 2."""
    return len(text.encode("utf-16-le")) // 2


def fit_comment(text: str, limit: int = COMMENT_LIMIT) -> str:
    """Cut `text` to `limit` UTF-16 units at a line boundary, with a note; our marker line survives."""
    if utf16_len(text) <= limit:
        return text
    body, tail = text, ""
    head, _, last = text.rstrip().rpartition("\n")
    if last.strip().startswith((MARKER_PREFIX, REVIEW_MARKER_PREFIX)):
        body, tail = head, "\n" + last.strip()
    note = "\n" + _packaged_text("publish.comment_truncated")
    kept, _ = fit(body, max(limit - utf16_len(tail), 0), unit="utf16", note=note)
    return kept + tail


# --- hidden markers ----------------------------------------------------------------------------


def review_marker(head: str, ids: Iterable[str]) -> str:
    """The inline review body's last line: which finding ids this review carried, at which head."""
    if not _is_sha(head):
        raise ValueError(f"review marker: head must be a full 40-character sha, got {head!r}")
    return f"{REVIEW_MARKER_PREFIX}{_marker_json({'head': head, 'ids': list(ids)})}{_MARKER_END}"


def parse_review_marker(body: str | None) -> dict[str, Any] | None:
    return _parse_marker(body, REVIEW_MARKER_PREFIX)


# --- sticky comment ----------------------------------------------------------------------------


INTEGRATION_LOGIN = "github-actions[bot]"


BOUND_REVIEW_KEY = "review"
"""The state key that names the comment's own id: the proof of a sticky comment written without a key."""


def _same_login(user: str | None, login: str) -> bool:
    """The identity we write as. An integration token cannot read `/user`: it is
    `github-actions[bot]` for GITHUB_TOKEN but `<app>[bot]` for a GitHub App's token, so then any
    bot identity may be us; the MAC (`proven_ours`) decides which one is."""
    if not user or not login:
        return False
    if str(user).casefold() == login.casefold():
        return True
    return login == INTEGRATION_LOGIN and str(user).casefold().endswith("[bot]")


def _our_stickies(
    comments: Iterable[CommentInfo], login: str, *, repo: str, number: int, key: bytes | None
) -> list[CommentInfo]:
    """Our sticky comments, lowest id first: with a key, only those whose MAC checks; without one,
    only the exact login's comments whose marker names their own id (`bind_sticky`), which are
    edited but never trusted for state (`find_sticky` returns none)."""
    if key is None:
        ours = [
            c for c in comments if c.user and c.user.casefold() == login.casefold() and bound_to_itself(c)
        ]
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
    """Our sticky comment, when it is provably ours (its state may make a run skip review or carry
    costs forward); a copy of the marker by anyone else, or any comment when there is no key, is None.
    Several → the lowest id. `comments`: the PR's comments as this run already listed them."""
    key = state_key()
    if key is None:
        return None
    listed = client.issue_comments(repo, number) if comments is None else comments
    ours = _our_stickies(listed, login, repo=repo, number=number, key=key)
    return ours[0] if ours else None


def stickies_by_pull(
    comments: Iterable[tuple[int, CommentInfo]], login: str, *, repo: str
) -> dict[int, CommentInfo]:
    """Our sticky comment per PR number, from a repository-wide comment list (scan), decided by
    the same rule as `find_sticky`: none is trusted when no key can prove it ours."""
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
) -> Published:
    """Edit our one comment in place, or create it; then delete our own newer duplicates (a race).

    The list is read before any write, so a retried job edits rather than posts twice; `comments`
    is that list when this run already read it (one request fewer). A lost create is looked for
    again before it is called failed (`_write`).
    """
    key = state_key()
    body = sign_sticky(body, repo=repo, number=number, key=key)
    size = utf16_len(body)
    if size > GITHUB_BODY_MAX:
        return Published(
            "comment",
            False,
            f"comment body is {size:,} UTF-16 units, over GitHub's 65,536",
            reason="too_long",
        )
    try:
        listed = client.issue_comments(repo, number) if comments is None else comments
        ours = _our_stickies(listed, login, repo=repo, number=number, key=key)
        if ours:
            return _edit_sticky(client, repo, ours, body=body, login=login, key=key)
        return _create_sticky(client, repo, number, body=body, login=login, key=key)
    except NoWriteAccess:
        return Published("comment", False, READ_ONLY_DETAIL, reason=READ_ONLY)
    except GitHubError as exc:
        return Published("comment", False, f"sticky comment not posted: {exc}", reason="github_error")


def _edit_sticky(
    client: GitHubClient, repo: str, ours: Sequence[CommentInfo], *, body: str, login: str, key: bytes | None
) -> Published:
    """Our oldest sticky comment edited in place; our own newer duplicates deleted."""
    body = _bound(body, ours[0].id, key)
    info = _write(client, lambda: client.edit_issue_comment(repo, ours[0].id, body))
    duplicates = _deletable(ours[1:], login, key)
    return _sticky_done(client, repo, "updated the sticky comment", info, duplicates, reason="updated")


def _create_sticky(
    client: GitHubClient, repo: str, number: int, *, body: str, login: str, key: bytes | None
) -> Published:
    """A new sticky comment; then the list read again, so a copy a concurrent job created meanwhile
    is found: the oldest is kept (edited to this body when it is not ours) and the newer go."""
    created = _write(
        client,
        lambda: client.create_issue_comment(repo, number, body),
        lambda: _landed(client, repo, number, body, login),
    )
    if key is None:
        created = _bind_created(client, repo, created, body)
    try:
        ours = _our_stickies(client.issue_comments(repo, number), login, repo=repo, number=number, key=key)
    except GitHubError as exc:
        detail = f"created the sticky comment (not re-checked for a racing duplicate: {exc})"
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
    return _sticky_done(client, repo, "created the sticky comment", info, [*mine, *extra], reason="created")


def _deletable(duplicates: Sequence[CommentInfo], login: str, key: bytes | None) -> list[CommentInfo]:
    """The duplicates of our sticky comment this run may delete besides one it created itself.

    Only with a key, and only those of exactly our login: a keyless marker that names its own id
    can still be planted in a comment by a workflow that echoes PR text and edits its comment
    later, and a verbatim copy of our comment by another bot or app is that bot's comment. Either
    is left alone (a racing run deletes the duplicate it created, so a race still ends with one)."""
    if key is None:
        return []
    return [c for c in duplicates if c.user and c.user.casefold() == login.casefold()]


def _write(client: GitHubClient, send: Callable[[], _T], landed: Callable[[], _T | None] | None = None) -> _T:
    """One write, tried again after a rate limit (secondary limits come from writing fast) when the
    wait GitHub asks for fits the time left, at most WRITE_ATTEMPTS times. A create is looked for
    (`landed`) before each new try and before its failure is reported, so a create whose answer was
    lost (a timeout, a reset, a 5xx: GitHub may have made it anyway) is never made twice, nor
    called failed while it is on the PR."""
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


def _landed(client: GitHubClient, repo: str, number: int, body: str, login: str) -> CommentInfo | None:
    """The comment a lost create made after all: the newest of our login with exactly the body we sent."""
    try:
        same = [
            c for c in client.issue_comments(repo, number) if c.body == body and _same_login(c.user, login)
        ]
    except GitHubError:
        return None
    return max(same, key=lambda c: c.id) if same else None


def _bind_created(client: GitHubClient, repo: str, created: CommentInfo, body: str) -> CommentInfo:
    """Without a key, a new sticky comment is edited once to name its own id (see `bind_sticky`).
    If that edit fails, the unprovable comment is deleted: left, it would never be found again and
    the next run would post a second one."""
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
    detail: str,
    info: CommentInfo,
    duplicates: Sequence[CommentInfo],
    *,
    reason: str,
) -> Published:
    failed = []
    for dup in duplicates:
        try:
            client.delete_issue_comment(repo, dup.id)
        except GitHubError as exc:
            failed.append(f"{dup.id} ({exc})")
    if duplicates:
        detail += f"; removed {len(duplicates) - len(failed)} duplicate(s)"
    if failed:
        detail += f"; could not delete {', '.join(failed)}"
    return Published("comment", True, detail, info.url, reason=reason)


# --- inline review -----------------------------------------------------------------------------


def _inline(finding: Finding, text: str, index: LineIndex) -> InlineComment | None:
    """A comment GitHub will accept, or None: every (path, line, side) is checked against the diff."""
    from reviewer.source.github import InlineComment

    if not finding.anchored or finding.line is None:
        return None
    path, line, side, end = finding.path, finding.line, finding.side, finding.end_line
    body = fit_comment(text)
    if end is not None and end > line and index.range_commentable(path, line, end, side):
        return InlineComment(path=path, line=end, side=side, body=body, start_line=line, start_side=side)
    if index.commentable(path, line, side):
        return InlineComment(path=path, line=line, side=side, body=body)
    return None


def _review_mac(key: bytes, repo: str, number: int, head: Any, ids: Any) -> str:
    message = json.dumps(["imreview-review-v1", repo.casefold(), number, head, ids], separators=(",", ":"))
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def _bound_review_marker(marker: str, review_id: int) -> str:
    """A keyless review marker that names its own review's id (see `bind_sticky` for why)."""
    state = parse_review_marker(marker) or {}
    return f"{REVIEW_MARKER_PREFIX}{_marker_json({**state, BOUND_REVIEW_KEY: int(review_id)})}{_MARKER_END}"


def _signed_review_marker(head: str, ids: list[str], *, repo: str, number: int, key: bytes | None) -> str:
    marker = review_marker(head, ids)
    if key is None:
        return marker
    mac = _review_mac(key, repo, number, head, ids)
    return f"{REVIEW_MARKER_PREFIX}{_marker_json({'head': head, 'ids': ids, 'mac': mac})}{_MARKER_END}"


def _our_review_state(
    review: ReviewInfo, login: str, *, repo: str, number: int, key: bytes | None
) -> dict[str, Any] | None:
    """The ids an earlier review of ours carried: with a key only when its MAC checks (a forged list
    would silence our inline comments), without one only from the exact login and when the marker
    names the review's own id (`_bound_review_marker`)."""
    body, user = review.body, review.user
    state = parse_review_marker(body)
    if state is None:
        return None
    if key is None:
        bound = state.get(BOUND_REVIEW_KEY)
        same = bool(user and login and user.casefold() == login.casefold())
        return state if same and isinstance(bound, int) and bound == review.id else None
    mac = state.get("mac")
    expected = _review_mac(key, repo, number, state.get("head"), state.get("ids"))
    if _same_login(user, login) and isinstance(mac, str) and hmac.compare_digest(mac, expected):
        return state
    return None


def _review_landed(
    client: GitHubClient, repo: str, number: int, marker: str, login: str
) -> ReviewInfo | None:
    """The review a lost create made after all: ours, ending in the marker we sent (its finding ids
    and head make it unique). A review is created whole, with all its inline comments, or not at all."""
    try:
        reviews = client.reviews(repo, number)
    except GitHubError:
        return None
    same = [r for r in reviews if _last_line(r.body) == marker and _same_login(r.user, login)]
    return max(same, key=lambda r: r.id) if same else None


def _bind_review(client: GitHubClient, repo: str, number: int, info: ReviewInfo, sent: str) -> str:
    """Without a key, edit the new review once so its marker names its id; a note when that failed
    (the review stands, but the next run cannot tell it is ours and may repeat its comments)."""
    above, _, marker = sent.rstrip().rpartition("\n")
    try:
        bound = f"{above}\n{_bound_review_marker(marker, info.id)}"
        _write(client, lambda: client.edit_review_body(repo, number, info.id, bound))
    except GitHubError as exc:
        return f"; its marker could not be bound to it ({exc})"
    return ""


def _review_body(body: str, extra: str, marker: str) -> str:
    text = "\n\n".join(part.strip("\n") for part in (body, extra) if part.strip())
    return fit_comment(text, COMMENT_LIMIT - utf16_len(marker) - 2) + "\n\n" + marker


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
) -> Published:
    """One `COMMENT` review with inline comments for findings no earlier review of ours carried.

    On 422 (GitHub never says which comment it disliked) it retries exactly once with no inline
    comments and `fold(findings)` in the body. Never APPROVE or REQUEST_CHANGES.
    """
    try:
        key = state_key()
        planned = _new_inline(comments, _carried_ids(client, repo, number, login, key), index)
        if not planned:
            return Published("review", True, "no new findings", reason="no_new_findings")
        marker = _signed_review_marker(
            head_sha, [f.id for f, _ in planned], repo=repo, number=number, key=key
        )
        send = functools.partial(
            _send_review, client, repo, number, head_sha=head_sha, marker=marker, login=login, key=key
        )
        posted, overflow = planned[:MAX_INLINE_COMMENTS], planned[MAX_INLINE_COMMENTS:]
        extra = fold([f for f, _ in overflow]) if overflow else ""
        try:
            url, note = send(_review_body(body, extra, marker), [c for _, c in posted])
            detail = f"review with {len(posted)} inline comment(s)"
            if overflow:
                detail += f"; {len(overflow)} more folded into the review body"
            return Published("review", True, detail + note, url, reason="posted")
        except Unprocessable as exc:
            url, note = send(_review_body(body, fold([f for f, _ in planned]), marker), [])
            detail = (
                f"GitHub rejected the inline comments ({exc}); "
                f"{len(planned)} finding(s) posted in the review body instead"
            )
            return Published("review", True, detail + note, url, reason="folded")
    except NoWriteAccess:
        return Published("review", False, READ_ONLY_DETAIL, reason=READ_ONLY)
    except GitHubError as exc:
        return Published("review", False, f"review not posted: {exc}", reason="github_error")


def _carried_ids(client: GitHubClient, repo: str, number: int, login: str, key: bytes | None) -> set[str]:
    """The finding ids our earlier reviews of this PR carried (provably ours: see `_our_review_state`)."""
    carried: set[str] = set()
    for review in client.reviews(repo, number):
        state = _our_review_state(review, login, repo=repo, number=number, key=key)
        if state and isinstance(state.get("ids"), list):
            carried.update(str(i) for i in state["ids"])
    return carried


def _new_inline(
    comments: Sequence[tuple[Finding, str]], carried: set[str], index: LineIndex
) -> list[tuple[Finding, InlineComment]]:
    """The inline comments to post: findings no earlier review carried, on lines GitHub accepts."""
    planned: list[tuple[Finding, InlineComment]] = []
    for finding, text in comments:
        if finding.id in carried:
            continue
        inline = _inline(finding, text, index)
        if inline is not None:
            carried.add(finding.id)
            planned.append((finding, inline))
    return planned


def _send_review(
    client: GitHubClient,
    repo: str,
    number: int,
    body: str,
    comments: list[InlineComment],
    *,
    head_sha: str,
    marker: str,
    login: str,
    key: bytes | None,
) -> tuple[str | None, str]:
    """One review created (looked for by its marker when the answer was lost) and, without a key,
    bound to its id: its url, and a note when the binding failed."""
    info = _write(
        client,
        lambda: client.create_review(repo, number, commit_sha=head_sha, body=body, comments=comments),
        lambda: _review_landed(client, repo, number, marker, login),
    )
    return info.url, (_bind_review(client, repo, number, info, body) if key is None else "")


# --- the GitHub sinks --------------------------------------------------------------------------


@dataclass(frozen=True)
class PullTarget:
    """Where the GitHub sinks write: one PR, as `login`. `comments`: the PR's comments as this run
    listed them (None: list them afresh, e.g. after this run created its comment)."""

    client: GitHubClient
    repo: str
    number: int
    login: str
    comments: Sequence[CommentInfo] | None = None


@dataclass(frozen=True)
class StickyComment(PullSink):
    """The one sticky comment, edited in place (`upsert_sticky`): `rendered.comment`."""

    target: PullTarget

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        t = self.target
        return upsert_sticky(
            t.client, t.repo, t.number, body=rendered.comment, login=t.login, comments=t.comments
        )


@dataclass(frozen=True)
class InlineReview(PullSink):
    """One `COMMENT` review with inline comments on the published, anchored findings not carried
    from an earlier review. After a read-only refusal it is not tried. When it fails for a reason a
    rerun can mend while this run's sticky comment was posted, the comment's state is edited to say
    the review is pending, so a rerun at the same head publishes it instead of skipping."""

    target: PullTarget
    renderer: Renderer
    max_findings: int
    index: LineIndex

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        if report is None:
            return Published("review", False, "no review", reason="no_report")
        if refused_read_only(report):
            return Published("review", False, READ_ONLY_DETAIL, reason=READ_ONLY)
        review = self._post(report)
        comment = next((p for p in report.published if p.sink == "comment"), None)
        if not review.ok and review.reason != READ_ONLY and comment is not None and comment.ok:
            t = self.target
            pending = mark_pending(rendered.comment, [PENDING_REVIEW])
            marked = upsert_sticky(t.client, t.repo, t.number, body=pending, login=t.login)
            if not marked.ok:
                review = replace(
                    review, detail=f"{review.detail}; could not mark it pending: {marked.detail}"
                )
        return review

    def _post(self, report: Report) -> Published:
        t, renderer = self.target, self.renderer
        data = report.to_dict()
        by_id = {f["id"]: f for f in data["findings"]}
        published = published_inline(report.findings, self.max_findings)
        return post_inline_review(
            t.client,
            t.repo,
            t.number,
            head_sha=report.snapshot.head.sha,
            body=renderer.review_body(data),
            comments=[(f, renderer.inline(by_id[f.id])) for f in published],
            index=self.index,
            login=t.login,
            fold=lambda fs: renderer.review_body(data, folded=[by_id[f.id] for f in fs]),
        )


def published_inline(findings: Sequence[Finding], limit: int) -> list[Finding]:
    """Inline candidates: anchored findings among those published, never one carried from an
    earlier review (its inline comment, if any, is already on the PR)."""
    return [f for f in findings[: max(0, limit)] if f.anchored and f.carried_from is None]
