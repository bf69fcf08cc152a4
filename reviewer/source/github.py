"""GitHub through PyGithub: the only module that talks to the REST API. PyGithub objects never leave
it; callers get frozen dataclasses and errors from `reviewer.errors`. Reads are retried on 5xx and
bounded rate-limit waits; writes are sent once, since GitHub may have made what it answered 5xx for
(the caller re-lists by marker first: DESIGN 6, platform facts D2)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any

from github import Auth, Github, GithubException, GithubRetry, RateLimitExceededException
from github.File import File
from github.GithubObject import NotSet
from github.IssueComment import IssueComment

from reviewer import context as ctx
from reviewer.diff import DiffFile, parse_github_file
from reviewer.errors import GitHubError, NoWriteAccess, RateLimited, Retryable, Unprocessable, UsageError
from reviewer.render import Say, english
from reviewer.report import CheckResult, CiState, Gap, Ref, Snapshot
from reviewer.source import Change

if TYPE_CHECKING:
    from urllib3.response import BaseHTTPResponse

DEFAULT_API_URL = "https://api.github.com"
ACTIONS_BOT = "github-actions[bot]"
FILES_LIMIT = 3000
"""GitHub's own cap on a PR's files list."""
REVIEW_FILES_LIMIT = 300
"""Files one review reads (3 requests of 100): a run stays within 15 requests however large the PR."""
CONTENTS_BATCH = 250
"""Files per GraphQL query, where the contents API costs one request per file (issue 9)."""
CONTEXT_FILES = 2 * CONTENTS_BATCH
"""Head files read for context, in at most two GraphQL queries."""
CONFIG_PATH = ".github/imreview.yml"
INSTALLATION_TOKEN_PREFIX = "ghs_"
"""Installation tokens (`GITHUB_TOKEN` included) cannot read /user."""
TIMEOUT_ENV = "IMREVIEW_GITHUB_TIMEOUT"
DEFAULT_TIMEOUT = 30
MAX_RATE_LIMIT_WAIT = 120.0
SECONDARY_RATE_WAIT = 60.0
"""What GitHub's docs ask to wait after a secondary rate limit that names no wait."""
RETRY_BACKOFF_SECONDS = 0.5
"""urllib3's backoff factor for a GET that failed with a 5xx or a 429 (the tests' conftest sets 0)."""
WRITE_SPACING_SECONDS = 0.5
"""The least time between two writes: GitHub's secondary rate limit counts writes per minute."""
_BLOB_FIELDS = "__typename ... on Blob { text isBinary isTruncated }"
_ROLLUP_FIELDS = (
    "... on Commit { statusCheckRollup { contexts(first: 100) { pageInfo { hasNextPage } nodes { "
    "__typename ... on CheckRun { name status conclusion detailsUrl } "
    "... on StatusContext { context state } } } } }"
)
_FAILED = frozenset({"failure", "error", "timed_out", "cancelled", "action_required", "startup_failure"})
_COUNTS = ("changed_files", "additions", "deletions", "commits", "mergeable")
"""What a full read of a PR has and its list omits."""
_PASSED = frozenset({"success", "neutral", "skipped"})
_USER_PROBE_403 = re.compile(r"Request GET \S*/user failed with 403\b")

# An Actions or App token always gets 403 on GET /user, which `viewer_login` expects; PyGithub's
# retry logs it anyway, and every job log would show a "failure" that is not one.
logging.getLogger("github.GithubRetry").addFilter(
    lambda record: not _USER_PROBE_403.search(record.getMessage())
)


@dataclass(frozen=True)
class PullInfo:
    """One PR as the API shows it; the counts are None when read from the PR list, which omits them."""

    number: int
    title: str
    body: str
    author: str
    author_type: str
    url: str
    state: str
    draft: bool
    head_sha: str
    head_ref: str
    head_repo: str | None
    base_sha: str
    base_ref: str
    base_repo: str
    cross_repo: bool
    labels: tuple[str, ...]
    changed_files: int | None
    additions: int | None
    deletions: int | None
    commits: int | None
    mergeable: bool | None
    created_at: str = ""


@dataclass(frozen=True)
class CommentInfo:
    id: int
    user: str
    body: str
    url: str


@dataclass(frozen=True)
class ReviewInfo(CommentInfo):
    commit_id: str = ""


@dataclass(frozen=True)
class InlineComment:
    """One inline note of a review; `side` is RIGHT (added/context lines) or LEFT (removed)."""

    path: str
    line: int
    side: str
    body: str
    start_line: int | None = None
    start_side: str | None = None


@dataclass(frozen=True)
class CheckRunInfo:
    """A check run, or a commit status read as a completed run whose conclusion is its state."""

    name: str
    status: str
    conclusion: str | None
    details_url: str = ""


CiRead = tuple[tuple[CheckRunInfo, ...], bool]
"""The checks at a commit, statuses first, and whether they are all of them."""


@dataclass(frozen=True)
class PushedChange:
    """The compare API between an earlier reviewed head and the PR's head (incremental review)."""

    status: str
    files: tuple[DiffFile, ...]


@dataclass
class WaitCap:
    """The longest rate-limit wait still worth sitting out: `ceiling`, lowered to the time left before
    `deadline` (a review's or scan's budget); past it the request raises and the PR is deferred."""

    ceiling: float
    deadline: float | None = None

    def seconds(self) -> float:
        if self.deadline is None:
            return self.ceiling
        return max(0.0, min(self.ceiling, self.deadline - time.monotonic()))


class _BoundedRetry(GithubRetry):
    """GithubRetry whose waits, `Retry-After` included (urllib3 honours any), obey the shared `WaitCap`."""

    def __init__(self, *, wait_cap: WaitCap, **kwargs: Any) -> None:
        self.wait_cap = wait_cap
        super().__init__(**kwargs)

    @property
    def max_rate_limit_wait(self) -> float:
        return self.wait_cap.seconds()

    @max_rate_limit_wait.setter
    def max_rate_limit_wait(self, value: float | None) -> None:
        """GithubRetry sets it; the shared cap decides."""

    def new(self, **kw: Any) -> _BoundedRetry:
        kw["wait_cap"] = self.wait_cap
        return super().new(**kw)

    def sleep_for_retry(self, response: BaseHTTPResponse) -> bool:
        wait = self.get_retry_after(response)
        if wait is not None and wait > self.max_rate_limit_wait:
            raise RateLimitExceededException(
                response.status, {"message": f"Retry-After {wait:.0f}s exceeds the wait we allow"}, {}
            )
        return super().sleep_for_retry(response)


def _message(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    parts = [str(data.get("message") or exc.message or "").strip()]
    for error in data.get("errors") or ():
        text = error.get("message") or error.get("code") if isinstance(error, dict) else str(error)
        if text:
            parts.append(str(text))
    return ": ".join(p for p in parts if p) or "no message"


@contextmanager
def _translated(what: str, *, write: bool = False) -> Iterator[None]:
    """PyGithub and transport errors → our tree, keeping the HTTP status."""
    try:
        yield
    except RateLimitExceededException as exc:
        raise RateLimited(
            f"{what}: GitHub rate limit ({_message(exc)})", exc.status, retry_after=_retry_after(exc)
        ) from exc
    except GithubException as exc:
        status = exc.status
        text = f"{what}: HTTP {status}: {_message(exc)}"
        if status == 429:
            raise RateLimited(text, status, retry_after=_retry_after(exc)) from exc
        if write and status in (403, 404):
            raise NoWriteAccess(text, status) from exc
        if status == 422:
            raise Unprocessable(text, status) from exc
        if status >= 500:
            raise Retryable(text, status) from exc
        raise GitHubError(text, status) from exc
    except json.JSONDecodeError as exc:  # PyGithub parses with json.loads: a body cut short
        raise Retryable(f"{what}: GitHub's answer was not complete JSON ({exc.msg}, byte {exc.pos})") from exc
    except OSError as exc:  # requests' ConnectionError and Timeout are OSErrors
        raise Retryable(f"{what}: {_transport_reason(exc)}") from exc


def _retry_after(exc: GithubException) -> float | None:
    """`Retry-After` seconds, else until `X-RateLimit-Reset` when no requests remain."""
    headers = {str(k).lower(): str(v) for k, v in (exc.headers or {}).items()}
    after = headers.get("retry-after", "").strip()
    if after.isdigit():
        return float(after)
    reset = headers.get("x-ratelimit-reset", "").strip()
    if headers.get("x-ratelimit-remaining", "").strip() == "0" and reset.isdigit():
        return max(0.0, float(reset) - time.time())
    return None


def _transport_reason(exc: BaseException) -> str:
    """One short line; requests' own text nests urllib3's whole retry story."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = (
            current.__cause__
            or current.__context__
            or next((a for a in getattr(current, "args", ()) if isinstance(a, BaseException)), None)
        )
    names = " ".join(type(e).__name__ for e in seen) + " " + " ".join(str(e) for e in seen)
    if "ConnectionResetError" in names or "reset by peer" in names:
        return "the connection was reset before GitHub answered"
    if "Timeout" in names or "timed out" in names:
        return "GitHub did not answer within the timeout"
    if "ConnectionRefusedError" in names or "refused" in names.lower():
        return "the connection to GitHub was refused"
    return f"the connection to GitHub failed ({type(exc).__name__})"


def github_timeout(env: Mapping[str, str]) -> int:
    """`IMREVIEW_GITHUB_TIMEOUT` seconds, else 30 (a slow GHES may need more)."""
    text = (env.get(TIMEOUT_ENV) or "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 600:
        raise UsageError(f"{TIMEOUT_ENV}: expected whole seconds from 1 to 600, got {text!r}")
    return int(text)


def _login(user: Any) -> str:
    return user.login if user is not None else "ghost"


class GitHubClient:
    """The REST calls imreview makes. `api_url` is `GITHUB_API_URL` as is (GHES: https://HOST/api/v3)."""

    def __init__(
        self,
        token: str,
        api_url: str = DEFAULT_API_URL,
        *,
        seconds_between_writes: float | None = None,
        timeout: int = DEFAULT_TIMEOUT,
        retries: int = 3,
    ) -> None:
        if not token.strip():
            raise UsageError("the GitHub token is empty: set the `github-token` input or GITHUB_TOKEN")
        base = (api_url or DEFAULT_API_URL).strip().rstrip("/")
        if not re.match(r"https?://[^/]+", base):
            raise UsageError(f"GITHUB_API_URL {api_url!r} is not an http(s) URL")
        self.wait_cap = WaitCap(MAX_RATE_LIMIT_WAIT)
        retry = _BoundedRetry(
            wait_cap=self.wait_cap,
            total=retries,
            backoff_factor=RETRY_BACKOFF_SECONDS,
            allowed_methods={"GET"},
            status_forcelist=[429, *range(500, 600)],
            raise_on_status=False,
            secondary_rate_wait=SECONDARY_RATE_WAIT,
        )
        self._gh = Github(
            auth=Auth.Token(token.strip()),
            base_url=base,
            per_page=100,
            lazy=True,
            retry=retry,
            timeout=timeout,
            seconds_between_requests=0.0,
            seconds_between_writes=WRITE_SPACING_SECONDS
            if seconds_between_writes is None
            else seconds_between_writes,
        )
        self._viewer = ACTIONS_BOT if token.strip().startswith(INSTALLATION_TOKEN_PREFIX) else None
        self._texts: dict[tuple[str, str, str], str | None] = {}

    def wait_within(self, seconds: float | None) -> None:
        """Rate-limit waits from now on end within `seconds` (None: only the fixed ceiling)."""
        self.wait_cap.deadline = None if seconds is None else time.monotonic() + max(seconds, 0.0)

    def write_wait(self, retry_after: float | None) -> float | None:
        """How long to sit out a rate limit on a write before trying again (GitHub's `Retry-After`,
        else a minute); None when that does not fit the time left: the write then fails for good."""
        wait = SECONDARY_RATE_WAIT if retry_after is None else max(retry_after, 0.0)
        return wait if wait <= self.wait_cap.seconds() else None

    def _repo(self, repo: str) -> Any:
        _owner_name(repo)
        return self._gh.get_repo(repo)

    def pull(self, repo: str, number: int) -> PullInfo:
        with _translated(f"read pull request {repo}#{number}"):
            return _pull_info(repo, self._repo(repo).get_pull(number), full=True)

    def open_pull_list(self, repo: str) -> list[PullInfo]:
        """Every open PR, least recently updated first, 100 per request; counts are None."""
        with _translated(f"list open pull requests of {repo}"):
            pulls = self._repo(repo).get_pulls(state="open", sort="updated", direction="asc")
            return [_pull_info(repo, pr, full=False) for pr in pulls]

    def repo_issue_comments(
        self, repo: str, *, since: datetime | None, max_pages: int
    ) -> tuple[list[tuple[int, CommentInfo]], bool]:
        """(number, comment) on every issue and PR, newest first, in at most `max_pages` requests."""
        found: list[tuple[int, CommentInfo]] = []
        with _translated(f"list the issue comments of {repo}"):
            after = NotSet if since is None else since
            listing = self._repo(repo).get_issues_comments(sort="updated", direction="desc", since=after)
            for page in range(max_pages):
                items = listing.get_page(page)
                for comment in items:
                    number = int(str(comment.issue_url).rstrip("/").rpartition("/")[2])
                    found.append((number, _comment_info(comment)))
                if len(items) < 100:
                    return found, True
        return found, False

    def viewer_login(self) -> str:
        """Whose comments are ours; an Actions token cannot read /user and is github-actions[bot]."""
        if self._viewer is None:
            try:
                with _translated("read the authenticated user"):
                    self._viewer = self._gh.get_user().login
            except GitHubError as exc:
                if exc.status != 403:
                    raise
                self._viewer = ACTIONS_BOT
        return self._viewer

    def file_text(self, repo: str, path: str, ref: str | None) -> str | None:
        """A file at `ref` (None: the default branch), from an earlier `file_texts` batch or the
        contents API; None when absent, not a file, binary, over 1 MB or a symlink (answered with its
        target's file: a PR's `notes.txt -> .env` would read the committed `.env`)."""
        if ref is not None and (repo, ref, path) in self._texts:
            return self._texts[(repo, ref, path)]
        text: str | None = None
        try:
            with _translated(f"read {path} at {ref or 'the default branch'} in {repo}"):
                content = self._repo(repo).get_contents(path, ref=ref or NotSet)
                if (
                    not isinstance(content, list)
                    and content.type == "file"
                    and content.encoding == "base64"
                    and content.path == path.strip("/")  # a symlink is answered with its target's file
                ):
                    text = content.decoded_content.decode("utf-8", errors="replace")
        except GitHubError as exc:
            if exc.status != 404:
                raise
        if ref:
            self._texts[(repo, ref, path)] = text  # a later GraphQL batch does not ask again
        return text

    def file_texts(self, repo: str, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
        """Many `(ref, path)` files in one GraphQL query per CONTENTS_BATCH, kept for `file_text`."""
        todo = self._unread(repo, wanted)
        for start in range(0, len(todo), CONTENTS_BATCH):
            self._blob_query(repo, todo[start : start + CONTENTS_BATCH], ci_sha=None)
        return {(ref, path): self._texts.get((repo, ref, path)) for ref, path in wanted}

    def texts_and_ci(self, repo: str, wanted: Sequence[tuple[str, str]], *, ci_sha: str) -> CiRead:
        """The first CONTENTS_BATCH of `wanted` and the checks at `ci_sha` in ONE GraphQL query (issue 9)."""
        return self._blob_query(repo, self._unread(repo, wanted)[:CONTENTS_BATCH], ci_sha=ci_sha) or (
            (),
            False,
        )

    def _unread(self, repo: str, wanted: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(
            dict.fromkeys((ref, path) for ref, path in wanted if (repo, ref, path) not in self._texts)
        )

    def _blob_query(
        self, repo: str, chunk: Sequence[tuple[str, str]], *, ci_sha: str | None
    ) -> CiRead | None:
        what = f"read {len(chunk)} files{' and the CI state' if ci_sha else ''} of {repo} through GraphQL"
        with _translated(what):
            _, data = self._gh.requester.requestJsonAndCheck(
                "POST", self._gh.requester.graphql_url, input=_blob_request(repo, chunk, ci_sha)
            )
        found, ci_failed = _graphql_repository(data, what)
        for i, (ref, path) in enumerate(chunk):
            node = found.get(f"f{i}")
            if not (isinstance(node, dict) and node.get("isTruncated")):  # cut: the contents API reads it
                self._texts[(repo, ref, path)] = _blob_text(node)
        if ci_sha is None:
            return None
        return ((), False) if ci_failed else _rollup(found.get("ci"))

    def tree_paths(self, repo: str, sha: str) -> list[str]:
        """Every file path at `sha`, in one request (GitHub cuts a tree of over 100,000 entries)."""
        _owner_name(repo)
        with _translated(f"list the files of {repo} at {sha[:12]}"):
            _, data = self._gh.requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/git/trees/{sha}", parameters={"recursive": 1}
            )
        # read raw: PyGithub's GitTree fails with AttributeError on an answer that is not an object
        entries = data.get("tree") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise GitHubError(f"list the files of {repo} at {sha[:12]}: no tree in the answer")
        return [
            str(e["path"])
            for e in entries
            if isinstance(e, dict) and e.get("type") == "blob" and isinstance(e.get("path"), str)
        ]

    def has_text(self, repo: str, ref: str, path: str) -> bool:
        return (repo, ref, path) in self._texts

    def issue_comments(self, repo: str, number: int) -> list[CommentInfo]:
        with _translated(f"list comments of {repo}#{number}"):
            return [_comment_info(c) for c in self._repo(repo).get_issue(number).get_comments()]

    def create_issue_comment(self, repo: str, number: int, body: str) -> CommentInfo:
        with _translated(f"comment on {repo}#{number}", write=True):
            return _comment_info(self._repo(repo).get_issue(number).create_comment(body))

    def _comment(self, repo: str, comment_id: int) -> IssueComment:
        url = f"{self._repo(repo).url}/issues/comments/{int(comment_id)}"
        return IssueComment(self._gh.requester, url=url)

    def edit_issue_comment(self, repo: str, comment_id: int, body: str) -> CommentInfo:
        with _translated(f"edit comment {comment_id} in {repo}", write=True):
            comment = self._comment(repo, comment_id)
            comment.edit(body)
            return _comment_info(comment)

    def delete_issue_comment(self, repo: str, comment_id: int) -> None:
        with _translated(f"delete comment {comment_id} in {repo}", write=True):
            self._comment(repo, comment_id).delete()

    def reviews(self, repo: str, number: int) -> list[ReviewInfo]:
        with _translated(f"list reviews of {repo}#{number}"):
            return [_review_info(r) for r in self._repo(repo).get_pull(number).get_reviews()]

    def create_review(
        self, repo: str, number: int, *, commit_sha: str, body: str, comments: Sequence[InlineComment]
    ) -> ReviewInfo:
        """One review, event COMMENT, pinned to `commit_sha`; never APPROVE or REQUEST_CHANGES."""
        payload: list[Any] = []
        for c in comments:
            item: dict[str, Any] = {"path": c.path, "body": c.body, "line": c.line, "side": c.side}
            if c.start_line is not None and c.start_line < c.line:
                item["start_line"] = c.start_line
                item["start_side"] = c.start_side or c.side
            payload.append(item)
        with _translated(f"post a review on {repo}#{number}", write=True):
            gh_repo = self._repo(repo)
            review = gh_repo.get_pull(number).create_review(
                commit=gh_repo.get_commit(commit_sha), body=body, event="COMMENT", comments=payload
            )
            return _review_info(review)

    def edit_review_body(self, repo: str, number: int, review_id: int, body: str) -> None:
        """Replace a submitted review's body (its inline comments stay as they are)."""
        with _translated(f"edit review {review_id} on {repo}#{number}", write=True):
            url = f"{self._repo(repo).url}/pulls/{int(number)}/reviews/{int(review_id)}"
            self._gh.requester.requestJsonAndCheck("PUT", url, input={"body": body})

    def rest(
        self, method: str, path: str, what: str, *, body: Mapping[str, Any] | None = None, write: bool = False
    ) -> Any:
        """One REST request to `path` (under the API root), for the small modules that add a call or two."""
        with _translated(what, write=write):
            _, data = self._gh.requester.requestJsonAndCheck(
                method, path, input=dict(body) if body is not None else None
            )
        return data

    def graphql(self, query: str, variables: Mapping[str, Any], what: str) -> dict[str, Any]:
        """One GraphQL query; the answer as GitHub sent it (`data`, `errors`)."""
        with _translated(what):
            _, data = self._gh.requester.requestJsonAndCheck(
                "POST", self._gh.requester.graphql_url, input={"query": query, "variables": dict(variables)}
            )
        return data if isinstance(data, dict) else {}

    def ci_checks(self, repo: str, sha: str) -> CiRead:
        """The checks at `sha` through REST; incomplete when GitHub would not let us read a part."""
        commit = self._repo(repo).get_commit(sha)
        parts: dict[str, Callable[[], list[CheckRunInfo]]] = {
            f"read commit statuses of {sha} in {repo}": lambda: [
                CheckRunInfo(s.context, "completed", s.state) for s in commit.get_combined_status().statuses
            ],
            f"read check runs of {sha} in {repo}": lambda: [
                CheckRunInfo(run.name, run.status, run.conclusion, run.details_url or "")
                for run in commit.get_check_runs()
            ],
        }
        checks: list[CheckRunInfo] = []
        complete = True
        for what, read in parts.items():
            try:
                with _translated(what):
                    checks += read()
            except GitHubError as exc:
                if exc.status not in (403, 404):
                    raise
                complete = False
        return tuple(checks), complete

    def merge_base(self, repo: str, base: str, head: str) -> str:
        with _translated(f"compare {base}...{head} in {repo}"):
            return str(self._repo(repo).compare(base, head).merge_base_commit.sha)

    def pushed_since(self, repo: str, earlier: str, head: str) -> PushedChange | None:
        """Whether `head` descends from `earlier` and what changed since; None when `earlier` is gone."""
        with _translated(f"compare {earlier[:12]}...{head[:12]} in {repo}"):
            try:
                found = self._repo(repo).compare(earlier, head)
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise
            return PushedChange(status=str(found.status), files=tuple(_diff_file(f) for f in found.files))

    def pull_files(self, repo: str, number: int, *, limit: int = FILES_LIMIT) -> list[DiffFile]:
        """The PR files list (GitHub stops at 3000), parsed; a file without a patch is listed."""
        with _translated(f"list files of {repo}#{number}"):
            if limit <= 0:
                return []
            files = self._repo(repo).get_pull(number).get_files()
            return [_diff_file(f) for f in islice(files, limit)]  # asks for no page past the limit


def _diff_file(f: File) -> DiffFile:
    """A file of a compare or of a PR's files list, parsed the one way both are read."""
    return parse_github_file(
        filename=f.filename,
        status=f.status,
        patch=f.patch,
        previous_filename=f.previous_filename,
        changes=f.changes,
    )


def _owner_name(repo: str) -> tuple[str, str]:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise UsageError(f"{repo!r} is not OWNER/REPO")
    owner, name = repo.split("/")
    return owner, name


def _blob_request(repo: str, chunk: Sequence[tuple[str, str]], ci_sha: str | None) -> dict[str, Any]:
    """One aliased `object` field per file, plus `ci`; every value is a variable, never spliced in."""
    owner, name = _owner_name(repo)
    declared = "".join(f", $e{i}: String!" for i in range(len(chunk)))
    fields = [f"f{i}: object(expression: $e{i}) {{ {_BLOB_FIELDS} }}" for i in range(len(chunk))]
    variables: dict[str, Any] = {"owner": owner, "name": name}
    variables.update({f"e{i}": f"{ref}:{path}" for i, (ref, path) in enumerate(chunk)})
    if ci_sha is not None:
        declared += ", $ci: String!"
        fields.append(f"ci: object(expression: $ci) {{ {_ROLLUP_FIELDS} }}")
        variables["ci"] = ci_sha
    query = (
        f"query($owner: String!, $name: String!{declared}) "
        f"{{ repository(owner: $owner, name: $name) {{ {' '.join(fields)} }} }}"
    )
    return {"query": query, "variables": variables}


def _graphql_repository(data: Any, what: str) -> tuple[dict[str, Any], bool]:
    """The answer's `repository`, and whether the CI part failed: an error under `ci` only loses the
    CI state, any other loses the read (a NOT_FOUND one carries status 404, as REST's would)."""
    answer = _mapping(data)
    errors = [e for e in answer.get("errors") or () if isinstance(e, dict)]
    ci_errors = [e for e in errors if list(e.get("path") or ())[:2] == ["repository", "ci"]]
    others = [e for e in errors if e not in ci_errors]
    found = _mapping(answer.get("data")).get("repository")
    if others or not isinstance(found, dict):
        raise _graphql_error(others, what)
    return found, bool(ci_errors)


def _graphql_error(errors: Sequence[dict[str, Any]], what: str) -> GitHubError:
    reason = "; ".join(str(e.get("message") or e.get("type") or "") for e in errors)
    status = 404 if any(e.get("type") == "NOT_FOUND" for e in errors) else None
    return GitHubError(f"{what}: {reason or 'no repository in the answer'}", status)


def _rollup(node: Any) -> CiRead:
    """`statusCheckRollup` → the checks REST lists, with REST's lower-case values."""
    rollup = _mapping(node).get("statusCheckRollup")
    if not isinstance(rollup, dict):
        return (), True
    contexts = _mapping(rollup.get("contexts"))
    items = [item for item in contexts.get("nodes") or () if isinstance(item, dict)]
    statuses = [
        CheckRunInfo(str(i.get("context") or ""), "completed", str(i.get("state") or "").lower())
        for i in items
        if i.get("__typename") == "StatusContext"
    ]
    runs = [
        CheckRunInfo(
            str(i.get("name") or ""),
            str(i.get("status") or "").lower(),
            str(i["conclusion"]).lower() if i.get("conclusion") else None,
            str(i.get("detailsUrl") or ""),
        )
        for i in items
        if i.get("__typename") == "CheckRun"
    ]
    return (*statuses, *runs), not _mapping(contexts.get("pageInfo")).get("hasNextPage")


def _mapping(value: Any) -> dict[str, Any]:
    """A GraphQL object, or {} for null or anything unexpected."""
    return value if isinstance(value, dict) else {}


def _blob_text(node: Any) -> str | None:
    if not isinstance(node, dict) or node.get("__typename") != "Blob":
        return None
    if node.get("isBinary") or node.get("isTruncated") or not isinstance(node.get("text"), str):
        return None
    return str(node["text"])


def _pull_info(repo: str, pr: Any, *, full: bool) -> PullInfo:
    head_repo = pr.head.repo.full_name if pr.head.repo is not None else None
    base_repo = pr.base.repo.full_name if pr.base.repo is not None else repo
    created = pr.created_at
    return PullInfo(
        number=pr.number,
        title=pr.title or "",
        body=pr.body or "",
        author=_login(pr.user),
        author_type=pr.user.type if pr.user is not None else "User",
        url=pr.html_url,
        state=pr.state,
        draft=bool(pr.draft),
        head_sha=pr.head.sha,
        head_ref=pr.head.ref,
        head_repo=head_repo,
        base_sha=pr.base.sha,
        base_ref=pr.base.ref,
        base_repo=base_repo,
        cross_repo=head_repo is None or head_repo.lower() != base_repo.lower(),
        labels=tuple(label.name for label in pr.labels),
        **{k: getattr(pr, k) if full else None for k in _COUNTS},
        created_at=created.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(created, datetime) else "",
    )


def _comment_info(comment: Any) -> CommentInfo:
    return CommentInfo(comment.id, _login(comment.user), comment.body or "", comment.html_url)


def _review_info(review: Any) -> ReviewInfo:
    return ReviewInfo(
        review.id, _login(review.user), review.body or "", review.html_url, review.commit_id or ""
    )


def ci_state(checks: Sequence[CheckRunInfo], *, run_id: str | None, complete: bool = True) -> CiState:
    """The checks at a commit → one state (DESIGN 10.10). Our own run, still in progress while it
    asks, is left out: its details_url holds /actions/runs/<run_id>. A failure anywhere is `failure`;
    otherwise an incomplete read is `unknown`; nothing at all is `none`."""
    own = re.compile(rf"/actions/runs/{re.escape(run_id)}(?![0-9])") if run_id else None
    read: list[tuple[CheckResult, str]] = []
    for run in checks:
        if own is not None and own.search(run.details_url):
            continue
        done = run.status == "completed"
        read.append(
            (
                CheckResult(run.name, run.conclusion if done else run.status),
                _outcome(run.conclusion) if done else "pending",
            )
        )
    outcomes = {outcome for _, outcome in read}
    if "failed" in outcomes:
        state = "failure"
    elif not complete:
        state = "unknown"
    elif "pending" in outcomes:
        state = "pending"
    else:
        state = "success" if outcomes else "none"
    return CiState(state=state, checks=tuple(check for check, _ in read))


def _outcome(conclusion: str | None) -> str:
    if conclusion in _FAILED:
        return "failed"
    return "ok" if conclusion in _PASSED else "pending"


def _files_gap(listed: int, total: int, max_files: int, say: Say) -> Gap:
    capped = listed >= max_files and max_files < min(total, FILES_LIMIT)
    counts = {"listed": str(listed), "total": str(total), "rest": str(total - listed), "max": str(max_files)}
    what = say("gap.files_capped" if capped else "gap.files_listed", **counts)
    return Gap(what=what, why="too_many_files")


def _unlisted(listed: int, total: int, max_files: int) -> list[Callable[[Say], Gap]]:
    """The gap of files GitHub did not list (or the review did not read), to be worded."""
    return [functools.partial(_files_gap, listed, total, max_files)] if total > listed else []


def _merge_base_gap(error: str, say: Say) -> Gap:
    return Gap(what=say("gap.merge_base_error", error=error), why="merge_base_unknown")


class GitHubSource:
    """A PR read through the API; implements `reviewer.source.Source`."""

    def __init__(
        self,
        client: GitHubClient,
        repo: str,
        number: int,
        *,
        run_id: str | None = None,
        max_files: int = FILES_LIMIT,
        config_path: str = CONFIG_PATH,
    ) -> None:
        self.client = client
        self.repo = repo
        self.number = number
        self.run_id = run_id
        self.max_files = max_files
        self.config_path = config_path
        self._info: PullInfo | None = None
        self._context: list[str] = []
        self._files: tuple[DiffFile, ...] = ()
        self._position: dict[str, int] = {}
        self._gaps: list[Callable[[Say], Gap]] = []
        """The gaps `change` found, to be worded again in the PR's language (`worded`)."""

    def pull_info(self) -> PullInfo:
        """The PR as first read (cached): drafts, bots, cross-repo and labels are decided on it."""
        if self._info is None:
            self._info = self.client.pull(self.repo, self.number)
        return self._info

    def change(self) -> Change:
        info = self.pull_info()
        files = self.client.pull_files(self.repo, self.number, limit=self.max_files)
        total = info.changed_files or 0
        self._gaps = _unlisted(len(files), total, self.max_files)
        self._files = tuple(files)
        self._context = [f.path for f in files if f.status != "removed" and f.has_patch]
        self._position = {p: i for i, p in enumerate(self._context)}
        # The CI state and the first CONTENTS_BATCH head files (with the base's config file) in one
        # query; when it fails, `read_file` batches the files and CI is read through REST.
        wanted = [(info.head_sha, p) for p in self._context]
        if (info.base_repo or self.repo).lower() == self.repo.lower():
            wanted = [(info.base_sha, self.config_path), *wanted]
        try:
            ci: CiRead | None = self.client.texts_and_ci(self.repo, wanted, ci_sha=info.head_sha)
        except GitHubError:
            ci = None
        try:
            merge_base = self.client.merge_base(self.repo, info.base_sha, info.head_sha)
        except GitHubError as exc:
            merge_base = ""
            self._gaps.append(functools.partial(_merge_base_gap, str(exc)))
        checks, complete = ci if ci is not None else self.client.ci_checks(self.repo, info.head_sha)
        snapshot = Snapshot(
            source="github",
            repo=self.repo,
            number=self.number,
            title=info.title,
            author=info.author,
            url=info.url,
            base=Ref(info.base_ref, info.base_sha),
            head=Ref(info.head_ref, info.head_sha),
            merge_base=merge_base,
            draft=info.draft,
            state=info.state,
            files=total,
            additions=info.additions or 0,
            deletions=info.deletions or 0,
            commits=info.commits or 0,
            ci=ci_state(checks, run_id=self.run_id, complete=complete),
            mergeable=info.mergeable,
        )
        return Change(snapshot=snapshot, files=tuple(files), body=info.body, gaps=self.worded_gaps(english))

    def worded_gaps(self, say: Say) -> tuple[Gap, ...]:
        """What `change` could not read, worded by `say`: the diff is read before the PR's language
        is known, so its gaps are English until the flow words them again in that language."""
        return tuple(gap(say) for gap in self._gaps)

    def head_sha(self) -> str:
        return self.client.pull(self.repo, self.number).head_sha

    def context_corpus(self) -> ctx.MemoryCorpus:
        """The head for context: one tree listing, then the PR's unread files and likely neighbours."""
        sha = self.pull_info().head_sha
        paths = self.client.tree_paths(self.repo, sha)
        names = ctx.mentioned(self._files)
        unread = [p for p in self._context if not self.client.has_text(self.repo, sha, p)][:CONTEXT_FILES]
        picked = ctx.candidate_paths(paths, set(self._context), CONTEXT_FILES - len(unread), names)
        texts = self.client.file_texts(self.repo, [(sha, p) for p in [*self._context, *picked]])
        return ctx.MemoryCorpus({path: text for (_, path), text in texts.items() if text is not None})

    def read_file(self, path: str, sha: str) -> str | None:
        """A head file not fetched yet brings up to CONTENTS_BATCH - 1 other unread files of the PR
        with it (those after it first), so a PR costs ceil(files / batch) queries."""
        info, position = self._info, self._position.get(path)
        if (
            info is not None
            and sha == info.head_sha
            and position is not None
            and not self.client.has_text(self.repo, sha, path)
        ):
            ring = (*self._context[position:], *self._context[:position])
            unread = (p for p in ring if not self.client.has_text(self.repo, sha, p))
            with contextlib.suppress(GitHubError):
                self.client.file_texts(self.repo, [(sha, p) for p in islice(unread, CONTENTS_BATCH)])
        return self.client.file_text(self.repo, path, sha)
