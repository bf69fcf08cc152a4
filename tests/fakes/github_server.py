"""A stateful loopback GitHub REST server, reached by PyGithub through `base_url` (DESIGN 9).

It speaks only the endpoints imreview uses, with GitHub's response shapes, and checks every
response it sends and every request body it receives against GitHub's OpenAPI description
(`tests/data/github-openapi/subset.json`). What fails lands in `violations`; tests assert it is
empty, so a drift between our requests, the fake and GitHub's contract shows up as a failure.

    with FakeGitHub() as gh:
        gh.add_token("t", login="alice")
        gh.add_repo("o/r")
        gh.add_pull("o/r", 7, head_sha="a" * 40, base_sha="b" * 40, files=[diff_entry("x.py", PATCH)])
        client = GitHubClient("t", gh.url)          # gh.url is the API root, like GITHUB_API_URL
        ...
        assert gh.violations == []

`FakeGitHub(prefix="/api/v3")` serves under a path prefix, as GitHub Enterprise Server does.
`fail()` injects faults: an HTTP status (with headers such as `Retry-After`), or a transport fault
(`mode="reset"`, `"slow"`, `"truncate"`), optionally only on one `page` of a paginated list.
Contents are found by the exact `ref` asked for (add them under a sha or a branch name).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import hashlib
import io
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from reviewer.diff import LineIndex, parse_github_file
from tests.fakes.loopback import LoopbackServer

SPEC_PATH = Path(__file__).resolve().parent.parent / "data" / "github-openapi" / "subset.json"
BODY_LIMIT = 65536
FILES_CAP = 3000
ACTIONS_BOT = "github-actions[bot]"
ACTIONS_BOT_ID = 41898282
NOT_ACCESSIBLE = "Resource not accessible by integration"
TOO_LONG = f"Body is too long (maximum is {BODY_LIMIT} characters)"
NOT_IN_DIFF = "Pull request review thread line must be part of the diff"
WEB = "https://github.com"
SAME_REPO = "<same repo>"
STAMP = "2024-01-01T00:00:00Z"
_SPEC_URI = "urn:imreview:github-openapi"
_REPO_URLS = {
    "archive": "/{archive_format}{/ref}",
    "assignees": "/assignees{/user}",
    "blobs": "/git/blobs{/sha}",
    "branches": "/branches{/branch}",
    "collaborators": "/collaborators{/collaborator}",
    "comments": "/comments{/number}",
    "commits": "/commits{/sha}",
    "compare": "/compare/{base}...{head}",
    "contents": "/contents/{+path}",
    "contributors": "/contributors",
    "deployments": "/deployments",
    "downloads": "/downloads",
    "events": "/events",
    "forks": "/forks",
    "git_commits": "/git/commits{/sha}",
    "git_refs": "/git/refs{/sha}",
    "git_tags": "/git/tags{/sha}",
    "hooks": "/hooks",
    "issue_comment": "/issues/comments{/number}",
    "issue_events": "/issues/events{/number}",
    "issues": "/issues{/number}",
    "keys": "/keys{/key_id}",
    "labels": "/labels{/name}",
    "languages": "/languages",
    "merges": "/merges",
    "milestones": "/milestones{/number}",
    "notifications": "/notifications{?since,all,participating}",
    "pulls": "/pulls{/number}",
    "releases": "/releases{/id}",
    "stargazers": "/stargazers",
    "statuses": "/statuses/{sha}",
    "subscribers": "/subscribers",
    "subscription": "/subscription",
    "tags": "/tags",
    "teams": "/teams",
    "trees": "/git/trees{/sha}",
}
_REVIEW_COMMENT_KEYS = frozenset({"path", "position", "body", "line", "side", "start_line", "start_side"})
_REASONS = {
    400: "Bad Request",
    401: "Bad credentials",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class TokenInfo:
    """`login` None is an integration token (GITHUB_TOKEN, or a GitHub App's when `bot` names the
    app): `GET /user` is a 403 and what it writes is authored by `bot`. `write` False is read-only."""

    token: str
    login: str | None
    write: bool = True
    bot: str = ACTIONS_BOT
    checks: bool = True
    """False: the workflow's `permissions:` leave out `checks: read` (REST and GraphQL refuse CI)."""


@dataclass(frozen=True)
class Recorded:
    """One request as received; `path` is relative to the API root (prefix removed)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]


FAULT_MODES = ("status", "reset", "slow", "truncate", "status_after")
"""`status`: answer `status` and `body`. `status_after`: the request takes effect, then `status`
and `body` are answered instead of its result (a create GitHub made although it answered a rate
limit). `reset`: close the connection with a TCP reset, nothing
sent. `slow`: the real answer after `delay` seconds (longer than the client's timeout makes a
timeout; the request has already taken effect, as on GitHub). `truncate`: the real answer's JSON
cut in half, sent with a matching Content-Length (a proxy that cut the body)."""


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    body: dict[str, Any] | None
    times: int
    headers: dict[str, str]
    mode: str = "status"
    delay: float = 0.0
    page: int | None = None


@dataclass
class _Repo:
    full_name: str
    default_branch: str
    id: int


@dataclass
class _Pull:
    repo: str
    number: int
    id: int
    title: str
    body: str
    author: str
    author_type: str
    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str
    head_repo: str | None
    draft: bool
    state: str
    files: list[dict[str, Any]]
    mergeable: bool | None
    labels: tuple[str, ...]
    changed_files: int | None
    merge_base_sha: str | None
    commits: int
    shas: list[str] = field(default_factory=list)
    updated_at: str = STAMP


@dataclass(frozen=True)
class _Reply:
    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    fault: str = ""
    delay: float = 0.0


class _Unprocessable(Exception):
    def __init__(self, reply: _Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def diff_entry(
    filename: str,
    patch: str | None = None,
    *,
    status: str = "modified",
    previous_filename: str | None = None,
) -> dict[str, Any]:
    """A PR-files entry as `add_pull(files=...)` takes it; counts come from the patch."""
    entry: dict[str, Any] = {"filename": filename, "status": status}
    if patch is not None:
        entry["patch"] = patch
    if previous_filename is not None:
        entry["previous_filename"] = previous_filename
    return entry


def _error(status: int, message: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "message": message or _REASONS.get(status, "Error"),
        "documentation_url": "https://docs.github.com/rest",
        "status": str(status),
        **extra,
    }


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _blob_sha(text: str) -> str:
    raw = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()


def _count(patch: str | None, mark: str) -> int:
    if not patch:
        return 0
    return sum(1 for line in patch.splitlines() if line.startswith(mark))


# --------------------------------------------------------------------------- OpenAPI checking


def _to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema → JSON Schema: `nullable` becomes a null union, refs become absolute."""
    if isinstance(node, list):
        return [_to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_json_schema(v) for k, v in node.items() if k not in ("nullable", "discriminator")}
    if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#/"):
        out["$ref"] = _SPEC_URI + out["$ref"]
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


class ApiSpec:
    """The trimmed OpenAPI subset: which operations exist and what their bodies must look like."""

    def __init__(self, path: Path = SPEC_PATH) -> None:
        raw = json.loads(path.read_text(encoding="utf-8"))
        doc = _to_json_schema(raw)
        self._patch_known_gaps(doc)
        self.doc = doc
        self.registry: Registry[Any] = Registry().with_resource(
            _SPEC_URI, Resource.from_contents(doc, default_specification=DRAFT7)
        )
        self.routes: list[tuple[re.Pattern[str], str]] = []
        for template in doc["paths"]:
            regex = re.sub(
                r"\{(\w+)\}",
                lambda m: (
                    f"(?P<{m.group(1)}>.+)"
                    if m.group(1) in ("path", "basehead")
                    else f"(?P<{m.group(1)}>[^/]+)"
                ),
                template,
            )
            self.routes.append((re.compile(regex), template))
        self._validators: dict[int, Draft7Validator] = {}

    @staticmethod
    def _patch_known_gaps(doc: dict[str, Any]) -> None:
        """Where the description is stricter than GitHub: `head.repo` is null once a fork is gone
        (the webhook schema says so; the REST description does not)."""
        schemas = doc["components"]["schemas"]
        for name in ("pull-request", "pull-request-simple"):
            head = schemas[name]["properties"]["head"]["properties"]
            head["repo"] = {"anyOf": [head["repo"], {"type": "null"}]}

    def match(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        for regex, template in self.routes:
            m = regex.fullmatch(path)
            if m and method.lower() in self.doc["paths"][template]:
                return template, {k: unquote(v) for k, v in m.groupdict().items()}
        return None

    def operation(self, template: str, method: str) -> dict[str, Any]:
        return self.doc["paths"][template][method.lower()]

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            pointer = node["$ref"].removeprefix(_SPEC_URI + "#/").split("/")
            target: Any = self.doc
            for part in pointer:
                target = target[part]
            node = target
        return node

    def query_names(self, template: str, method: str) -> set[str]:
        names = set()
        for param in self.operation(template, method).get("parameters", []):
            resolved = self._resolve(param)
            if resolved.get("in") == "query":
                names.add(resolved["name"])
        return names

    def _check(self, schema: dict[str, Any], instance: Any, where: str) -> list[str]:
        validator = self._validators.get(id(schema))
        if validator is None:
            validator = Draft7Validator(schema, registry=self.registry)
            self._validators[id(schema)] = validator
        problems = []
        for err in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
            at = "/".join(str(p) for p in err.absolute_path) or "(root)"
            problems.append(f"{where}: {at}: {err.message[:300]}")
        return problems

    def check_request(self, template: str, method: str, body: Any) -> list[str]:
        request_body = self.operation(template, method).get("requestBody")
        where = f"request {method} {template}"
        if request_body is None:
            return [f"{where}: the operation takes no body"] if body is not None else []
        content = request_body.get("content", {}).get("application/json")
        if body is None:
            return [f"{where}: a body is required"] if request_body.get("required") else []
        return self._check(content["schema"], body, where) if content else []

    def check_response(self, template: str, method: str, status: int, body: Any) -> list[str]:
        responses = self.operation(template, method)["responses"]
        where = f"response {status} to {method} {template}"
        spec = responses.get(str(status))
        if spec is None:
            return [f"{where}: status not documented"] if 200 <= status < 300 else []
        spec = self._resolve(spec)
        content = spec.get("content", {}).get("application/json")
        if content is None:
            return [f"{where}: documented without a body"] if body is not None else []
        return self._check(content["schema"], body, where)


_SPEC: ApiSpec | None = None
_SPEC_LOCK = threading.Lock()


def api_spec() -> ApiSpec:
    """The subset, loaded once per process (about 0.1 s)."""
    global _SPEC
    with _SPEC_LOCK:
        if _SPEC is None:
            _SPEC = ApiSpec()
        return _SPEC


# --------------------------------------------------------------------------- the server


class FakeGitHub:
    """A threaded stdlib HTTP server on 127.0.0.1 with an ephemeral port; see the module doc."""

    def __init__(self, *, prefix: str = "") -> None:
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.tokens: dict[str, TokenInfo] = {}
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.spec = api_spec()
        self._lock = threading.RLock()
        self._repos: dict[str, _Repo] = {}
        self._pulls: dict[tuple[str, int], _Pull] = {}
        self._contents: dict[tuple[str, str, str], str] = {}
        self._symlinks: dict[tuple[str, str, str], str] = {}
        self._git: dict[str, Any] = {}
        self._statuses: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._check_runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._comments: dict[int, tuple[str, int, dict[str, Any]]] = {}
        self._reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._review_comments: dict[int, list[dict[str, Any]]] = {}
        self._reactions: dict[tuple[str, int], list[tuple[str, str]]] = {}
        self._permissions: dict[tuple[str, str], str] = {}
        self._threads: dict[int, dict[str, Any]] = {}
        self._extra_review_comments: set[int] = set()
        self._failures: list[_Failure] = []
        self._user_ids: dict[str, int] = {ACTIONS_BOT: ACTIONS_BOT_ID}
        self._next_id = 1000
        self._ticks = 0
        self._server: LoopbackServer | None = None

    # ----------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake GitHub server is not running")
        return self._server.port

    @property
    def url(self) -> str:
        """The API root, as `GITHUB_API_URL` would hold it."""
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def start(self) -> FakeGitHub:
        self._server = LoopbackServer(_make_handler(self), name="fake-github")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- state set-up

    def _new_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def _now(self) -> str:
        """A fake clock: every event is one second after the last, so `updated_at` orders strictly."""
        with self._lock:
            self._ticks += 1
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_735_689_600 + self._ticks))

    def _user_id(self, login: str) -> int:
        with self._lock:
            if login not in self._user_ids:
                self._user_ids[login] = 100 + len(self._user_ids)
            return self._user_ids[login]

    def add_token(
        self,
        token: str,
        login: str | None = None,
        write: bool = True,
        bot: str = ACTIONS_BOT,
        *,
        checks: bool = True,
    ) -> TokenInfo:
        info = TokenInfo(token=token, login=login, write=write, bot=bot, checks=checks)
        with self._lock:
            self.tokens[token] = info
        return info

    def add_repo(self, full_name: str, default_branch: str = "main") -> None:
        if full_name.count("/") != 1:
            raise ValueError(f"add_repo: {full_name!r} is not OWNER/NAME")
        with self._lock:
            self._repos[full_name] = _Repo(full_name, default_branch, self._new_id())

    def add_pull(
        self,
        repo: str,
        number: int,
        *,
        title: str = "T",
        body: str = "",
        author: str = "octocat",
        author_type: str = "User",
        head_sha: str,
        base_sha: str,
        head_ref: str = "feature",
        base_ref: str = "main",
        head_repo: str | None = SAME_REPO,
        draft: bool = False,
        state: str = "open",
        files: Iterable[Mapping[str, Any]] = (),
        mergeable: bool | None = True,
        labels: Iterable[str] = (),
        changed_files: int | None = None,
        merge_base_sha: str | None = None,
        commits: int = 1,
        updated_at: str | None = None,
    ) -> dict[str, Any]:
        """Add (or replace) a PR; `head_repo` defaults to `repo`, None is a deleted fork.
        `updated_at` defaults to the fake clock's next tick."""
        if repo not in self._repos:
            self.add_repo(repo)
        pull = _Pull(
            repo=repo,
            number=number,
            id=self._new_id(),
            title=title,
            body=body,
            author=author,
            author_type=author_type,
            head_sha=head_sha,
            base_sha=base_sha,
            head_ref=head_ref,
            base_ref=base_ref,
            head_repo=repo if head_repo == SAME_REPO else head_repo,
            draft=draft,
            state=state,
            files=[self._complete_entry(repo, head_sha, f) for f in files],
            mergeable=mergeable,
            labels=tuple(labels),
            changed_files=changed_files,
            merge_base_sha=merge_base_sha,
            commits=commits,
            shas=[head_sha],
            updated_at=updated_at or self._now(),
        )
        with self._lock:
            self._pulls[(repo, number)] = pull
            return self._pull_json(pull)

    def set_head(
        self, repo: str, number: int, sha: str, files: Iterable[Mapping[str, Any]] | None = None
    ) -> None:
        """Simulate a push: the PR's head moves to `sha` (and its files, when given)."""
        with self._lock:
            pull = self._pulls[(repo, number)]
            pull.head_sha = sha
            pull.shas.append(sha)
            pull.updated_at = self._now()
            if files is not None:
                pull.files = [self._complete_entry(repo, sha, f) for f in files]

    def set_base(self, repo: str, number: int, sha: str) -> None:
        """The base branch moved: GitHub reports its new tip as the PR's `base.sha`."""
        with self._lock:
            self._pulls[(repo, number)].base_sha = sha

    def add_comment(
        self, repo: str, number: int, body: str, *, login: str = ACTIONS_BOT, kind: str = "Bot"
    ) -> int:
        """Store an issue comment as if `login` had posted it (no request is recorded)."""
        comment_id = self._new_id()
        with self._lock:
            data = self._comment_json(repo, number, comment_id, body, self._user(login, kind))
            self._comments[comment_id] = (repo, number, data)
        return comment_id

    # --- review threads, reactions and permissions (comment commands, dismissals) ---

    def set_permission(self, repo: str, login: str, level: str) -> None:
        """`login`'s permission on `repo` (`admin`, `write`, `read`); anyone else is no collaborator."""
        with self._lock:
            self._permissions[(repo, login)] = level

    def review_comment_ids(self, repo: str, number: int) -> list[int]:
        """The inline comments of every review on the PR (each starts a thread), oldest first."""
        with self._lock:
            return [
                c["id"]
                for r in self._reviews.get((repo, number), [])
                for c in self._review_comments.get(r["id"], [])
            ]

    def _review_thread(self, first_id: int) -> dict[str, Any]:
        with self._lock:
            return self._threads.setdefault(first_id, {"resolved_by": None, "replies": []})

    def reply_in_thread(self, first_id: int, body: str, *, login: str, association: str) -> int:
        """A reply in the thread of inline comment `first_id`, as `login` (no request recorded)."""
        reply_id = self._new_id()
        with self._lock:
            self._review_thread(first_id)["replies"].append(
                {"id": reply_id, "body": body, "login": login, "association": association}
            )
        return reply_id

    def resolve_thread(self, first_id: int, *, by: str) -> None:
        with self._lock:
            self._review_thread(first_id)["resolved_by"] = by

    def react_as(self, kind: str, comment_id: int, *, login: str, content: str = "-1") -> None:
        """A reaction by a person (`kind`: `issue` or `review` comment), as the web page makes it."""
        with self._lock:
            self._reactions.setdefault((kind, comment_id), []).append((login, content))

    def reactions(self, kind: str, comment_id: int) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._reactions.get((kind, comment_id), []))

    def use_git(self, repo: str, git: Any) -> None:
        """Answer `compare/{a}...{b}` for shas of this repo from a real repository
        (`tests.fakes.git_repo.GitRepo`): status by ancestry, files as git diffs them."""
        with self._lock:
            self._git[repo] = git

    def add_content(self, repo: str, ref: str, path: str, text: str) -> None:
        with self._lock:
            self._contents[(repo, ref, path.strip("/"))] = text

    def add_symlink(self, repo: str, ref: str, path: str, target: str) -> None:
        """A committed symlink: git objects (the tree, GraphQL's Blob) hold its target path as text,
        while the REST contents API answers with the target's content when the target is a normal
        file of the repository (GitHub's documented behaviour), described as that file."""
        with self._lock:
            self._contents[(repo, ref, path.strip("/"))] = target
            self._symlinks[(repo, ref, path.strip("/"))] = target.strip("/")

    def add_status(self, repo: str, sha: str, context: str, state: str) -> None:
        with self._lock:
            self._statuses.setdefault((repo, sha), {})[context] = {
                "url": f"{self.url}/repos/{repo}/statuses/{sha}",
                "avatar_url": None,
                "id": self._new_id(),
                "node_id": "SC_fake",
                "state": state,
                "description": None,
                "target_url": None,
                "context": context,
                "created_at": STAMP,
                "updated_at": STAMP,
            }

    def add_check_run(
        self,
        repo: str,
        sha: str,
        name: str,
        status: str = "completed",
        conclusion: str | None = "success",
        details_url: str = "",
    ) -> None:
        run_id = self._new_id()
        done = status == "completed"
        with self._lock:
            self._check_runs.setdefault((repo, sha), []).append(
                {
                    "id": run_id,
                    "node_id": "CR_fake",
                    "head_sha": sha,
                    "external_id": "",
                    "url": f"{self.url}/repos/{repo}/check-runs/{run_id}",
                    "html_url": f"{WEB}/{repo}/runs/{run_id}",
                    "details_url": details_url or None,
                    "status": status,
                    "conclusion": conclusion if done else None,
                    "started_at": STAMP,
                    "completed_at": STAMP if done else None,
                    "output": {
                        "title": None,
                        "summary": None,
                        "text": None,
                        "annotations_count": 0,
                        "annotations_url": f"{self.url}/repos/{repo}/check-runs/{run_id}/annotations",
                    },
                    "name": name,
                    "check_suite": {"id": run_id + 1},
                    "app": None,
                    "pull_requests": [],
                }
            )

    def fail(
        self,
        method: str,
        path_regex: str,
        status: int = 500,
        body: dict[str, Any] | None = None,
        times: int = 1,
        headers: Mapping[str, str] | None = None,
        *,
        mode: str = "status",
        delay: float = 0.0,
        page: int | None = None,
    ) -> None:
        """Answer the next `times` requests whose method matches (`*` = any) and whose path
        (relative to the API root) matches `path_regex` (re.search) with `status` and `body`, or
        with the transport fault `mode` names (FAULT_MODES). `page` limits it to that page of a
        paginated list (page 1 is also a request without `page`)."""
        if mode not in FAULT_MODES:
            raise ValueError(f"fail: mode {mode!r} is not one of {FAULT_MODES}")
        with self._lock:
            self._failures.append(
                _Failure(
                    method.upper(),
                    re.compile(path_regex),
                    status,
                    body,
                    times,
                    dict(headers or {}),
                    mode=mode,
                    delay=delay,
                    page=page,
                )
            )

    # ----------------------------------------------------------------- state read-back

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [
                copy.deepcopy(c)
                for _, (r, n, c) in sorted(self._comments.items())
                if (r, n) == (repo, number)
            ]

    def reviews(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Reviews as GitHub returns them, each with its inline comments under `comments`."""
        with self._lock:
            return [
                {**copy.deepcopy(r), "comments": copy.deepcopy(self._review_comments.get(r["id"], []))}
                for r in self._reviews.get((repo, number), [])
            ]

    def requests_to(self, method: str, path_regex: str) -> list[Recorded]:
        """Recorded requests with this method whose path matches `path_regex` (re.search)."""
        pattern = re.compile(path_regex)
        return [r for r in list(self.requests) if r.method == method.upper() and pattern.search(r.path)]

    # ----------------------------------------------------------------- JSON shapes

    def _api(self, tail: str) -> str:
        return f"{self.url}{tail}"

    def _user(self, login: str, kind: str = "User") -> dict[str, Any]:
        api = self._api(f"/users/{login}")
        return {
            "login": login,
            "id": self._user_id(login),
            "node_id": f"U_{login}",
            "avatar_url": f"https://avatars.example/{login}",
            "gravatar_id": "",
            "url": api,
            "html_url": f"{WEB}/{login}",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": kind,
            "site_admin": False,
            "user_view_type": "public",
        }

    def _token_user(self, token: TokenInfo) -> dict[str, Any]:
        return self._user(token.bot, "Bot") if token.login is None else self._user(token.login)

    def _repo_json(self, full_name: str) -> dict[str, Any]:
        known = self._repos.get(full_name)
        owner, name = full_name.split("/", 1)
        api = self._api(f"/repos/{full_name}")
        data: dict[str, Any] = {f"{key}_url": f"{api}{suffix}" for key, suffix in _REPO_URLS.items()}
        data.update(
            {
                "id": known.id if known else 1,
                "node_id": f"R_{full_name}",
                "name": name,
                "full_name": full_name,
                "owner": self._user(owner),
                "private": False,
                "html_url": f"{WEB}/{full_name}",
                "description": None,
                "fork": known is None or False,
                "url": api,
                "clone_url": f"{WEB}/{full_name}.git",
                "git_url": f"git://github.com/{full_name}.git",
                "ssh_url": f"git@github.com:{full_name}.git",
                "svn_url": f"{WEB}/{full_name}",
                "mirror_url": None,
                "homepage": None,
                "language": None,
                "default_branch": known.default_branch if known else "main",
                "forks": 0,
                "forks_count": 0,
                "stargazers_count": 0,
                "watchers": 0,
                "watchers_count": 0,
                "open_issues": 0,
                "open_issues_count": 0,
                "size": 1,
                "has_issues": True,
                "has_projects": False,
                "has_wiki": False,
                "has_pages": False,
                "has_downloads": False,
                "has_discussions": False,
                "archived": False,
                "disabled": False,
                "license": None,
                "pushed_at": STAMP,
                "created_at": STAMP,
                "updated_at": STAMP,
                "network_count": 0,
                "subscribers_count": 0,
            }
        )
        return data

    def _complete_entry(self, repo: str, sha: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        if "filename" not in entry or "status" not in entry:
            raise ValueError(f"a files entry needs filename and status: {dict(entry)!r}")
        patch = entry.get("patch")
        additions = entry.get("additions", _count(patch, "+"))
        deletions = entry.get("deletions", _count(patch, "-"))
        name = entry["filename"]
        out: dict[str, Any] = {
            "sha": hashlib.sha1(f"{sha}:{name}".encode()).hexdigest(),
            "filename": name,
            "status": entry["status"],
            "additions": additions,
            "deletions": deletions,
            "changes": entry.get("changes", additions + deletions),
            "blob_url": f"{WEB}/{repo}/blob/{sha}/{name}",
            "raw_url": f"{WEB}/{repo}/raw/{sha}/{name}",
            "contents_url": self._api(f"/repos/{repo}/contents/{name}?ref={sha}"),
        }
        if patch is not None:
            out["patch"] = patch
        if entry.get("previous_filename"):
            out["previous_filename"] = entry["previous_filename"]
        return out

    def _label(self, repo: str, name: str) -> dict[str, Any]:
        return {
            "id": int(hashlib.sha1(name.encode()).hexdigest()[:8], 16),
            "node_id": f"LA_{name}",
            "url": self._api(f"/repos/{repo}/labels/{name}"),
            "name": name,
            "description": "",
            "color": "ededed",
            "default": False,
        }

    def _pull_json(self, pull: _Pull, *, simple: bool = False) -> dict[str, Any]:
        api = self._api(f"/repos/{pull.repo}")
        html = f"{WEB}/{pull.repo}/pull/{pull.number}"
        links = {
            "self": f"{api}/pulls/{pull.number}",
            "html": html,
            "issue": f"{api}/issues/{pull.number}",
            "comments": f"{api}/issues/{pull.number}/comments",
            "review_comments": f"{api}/pulls/{pull.number}/comments",
            "review_comment": f"{api}/pulls/comments{{/number}}",
            "commits": f"{api}/pulls/{pull.number}/commits",
            "statuses": f"{api}/statuses/{pull.head_sha}",
        }
        head_owner = (pull.head_repo or pull.repo).split("/", 1)[0]
        base_owner = pull.repo.split("/", 1)[0]
        data: dict[str, Any] = {
            "url": links["self"],
            "id": pull.id,
            "node_id": f"PR_{pull.id}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": links["issue"],
            "commits_url": links["commits"],
            "review_comments_url": links["review_comments"],
            "review_comment_url": links["review_comment"],
            "comments_url": links["comments"],
            "statuses_url": links["statuses"],
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "user": self._user(pull.author, pull.author_type),
            "body": pull.body or None,
            "labels": [self._label(pull.repo, name) for name in pull.labels],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": STAMP,
            "updated_at": STAMP,
            "closed_at": None if pull.state == "open" else STAMP,
            "merged_at": None,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": {
                "label": f"{head_owner}:{pull.head_ref}",
                "ref": pull.head_ref,
                "sha": pull.head_sha,
                "user": self._user(head_owner),
                "repo": self._repo_json(pull.head_repo) if pull.head_repo else None,
            },
            "base": {
                "label": f"{base_owner}:{pull.base_ref}",
                "ref": pull.base_ref,
                "sha": pull.base_sha,
                "user": self._user(base_owner),
                "repo": self._repo_json(pull.repo),
            },
            "_links": {k: {"href": v} for k, v in links.items()},
            "author_association": "CONTRIBUTOR",
            "auto_merge": None,
            "draft": pull.draft,
        }
        if simple:
            return data
        comments = sum(1 for r, n, _ in self._comments.values() if (r, n) == (pull.repo, pull.number))
        data.update(
            {
                "merged": False,
                "mergeable": pull.mergeable,
                "rebaseable": pull.mergeable,
                "mergeable_state": {True: "clean", False: "dirty", None: "unknown"}[pull.mergeable],
                "merged_by": None,
                "comments": comments,
                "review_comments": sum(
                    len(self._review_comments.get(r["id"], []))
                    for r in self._reviews.get((pull.repo, pull.number), [])
                ),
                "maintainer_can_modify": False,
                "commits": pull.commits,
                "additions": sum(f["additions"] for f in pull.files),
                "deletions": sum(f["deletions"] for f in pull.files),
                "changed_files": pull.changed_files if pull.changed_files is not None else len(pull.files),
            }
        )
        return data

    def _comment_json(
        self, repo: str, number: int, comment_id: int, body: str, user: dict[str, Any]
    ) -> dict[str, Any]:
        stamp = self._now()
        return {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "url": self._api(f"/repos/{repo}/issues/comments/{comment_id}"),
            "html_url": f"{WEB}/{repo}/pull/{number}#issuecomment-{comment_id}",
            "body": body,
            "user": user,
            "created_at": stamp,
            "updated_at": stamp,
            "issue_url": self._api(f"/repos/{repo}/issues/{number}"),
            "author_association": "CONTRIBUTOR" if user["type"] == "User" else "NONE",
            "performed_via_github_app": None,
        }

    def _commit_json(self, repo: str, sha: str) -> dict[str, Any]:
        api = self._api(f"/repos/{repo}")
        person = {"name": "Fake", "email": "fake@example.invalid", "date": STAMP}
        return {
            "url": f"{api}/commits/{sha}",
            "sha": sha,
            "node_id": f"C_{sha}",
            "html_url": f"{WEB}/{repo}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}",
                "author": person,
                "committer": person,
                "message": "fake commit",
                "comment_count": 0,
                "tree": {"sha": hashlib.sha1(sha.encode()).hexdigest(), "url": f"{api}/git/trees/x"},
            },
            "author": None,
            "committer": None,
            "parents": [],
        }

    # ----------------------------------------------------------------- request handling

    def _take_failure(
        self, method: str, path: str, query: Mapping[str, str] | None = None
    ) -> _Failure | None:
        page = int((query or {}).get("page") or 1)
        with self._lock:
            for failure in self._failures:
                if (
                    failure.times > 0
                    and failure.method in (method, "*")
                    and failure.pattern.search(path)
                    and failure.page in (None, page)
                ):
                    failure.times -= 1
                    return failure
        return None

    @staticmethod
    def _faulty(failure: _Failure, answer: Callable[[], _Reply]) -> _Reply:
        """The reply for an injected fault; transport faults wrap the real answer (`answer()`)."""
        if failure.mode == "status":
            return _Reply(failure.status, failure.body or _error(failure.status), failure.headers)
        if failure.mode == "reset":
            return _Reply(0, fault="reset")
        real = answer()
        if failure.mode == "status_after":
            return _Reply(failure.status, failure.body or _error(failure.status), failure.headers)
        return dataclasses.replace(real, fault=failure.mode, delay=failure.delay)

    def _rate_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "4999",
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
            "X-RateLimit-Used": "1",
            "X-RateLimit-Resource": "core",
        }

    def handle(self, method: str, raw_path: str, headers: Mapping[str, str], raw_body: bytes) -> _Reply:
        parts = urlsplit(raw_path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        body: Any = None
        if raw_body:
            try:
                body = json.loads(raw_body)
            except ValueError:
                body = {"_unparsed": raw_body.decode("utf-8", "replace")}
        if method == "POST" and parts.path == self._graphql_path():
            return self._graphql_request(parts.path, headers, body)
        inside = parts.path == self.prefix or parts.path.startswith(self.prefix + "/")
        path = (parts.path[len(self.prefix) :] or "/") if inside else parts.path
        with self._lock:
            self.requests.append(Recorded(method, path, query, body, dict(headers)))
        if not inside:
            self._violation(f"{method} {parts.path}: outside the API root {self.prefix!r}")
            return _Reply(404, _error(404))

        failure = self._take_failure(method, path, query)
        if failure is not None:
            return self._faulty(failure, lambda: self._answer(method, path, query, headers, body))
        return self._answer(method, path, query, headers, body)

    def _answer(
        self, method: str, path: str, query: dict[str, str], headers: Mapping[str, str], body: Any
    ) -> _Reply:
        token = self._authenticate(headers.get("Authorization", ""))
        if token is None:
            return _Reply(401, _error(401, "Bad credentials"))

        matched = self.spec.match(method, path)
        if matched is None:
            self._violation(f"{method} {path}: no such operation in the OpenAPI subset")
            return _Reply(404, _error(404))
        template, params = matched
        unknown = set(query) - self.spec.query_names(template, method)
        if unknown:
            self._violation(f"{method} {template}: undocumented query parameters {sorted(unknown)}")
        problems = self.spec.check_request(template, method, body) if method != "GET" else []
        if problems:
            self._violation(*problems)
            return _Reply(422, _error(422, "Invalid request.\n\n" + "\n".join(problems)))
        if method != "GET" and not token.write:
            return _Reply(403, _error(403, NOT_ACCESSIBLE))

        handler = self._routes().get((method, template))
        if handler is None:
            self._violation(f"{method} {template}: the fake has no handler")
            return _Reply(404, _error(404))
        try:
            reply = handler(token=token, query=query, body=body, request_path=path, **params)
        except _Unprocessable as exc:
            reply = exc.reply
        except (KeyError, ValueError):
            reply = _Reply(404, _error(404))
        self._violation(*self.spec.check_response(template, method, reply.status, reply.body))
        return reply

    # --- GraphQL: only `repository { alias: object(expression: $var) { ... on Blob { ... } } }` ---

    def _graphql_path(self) -> str:
        """Where PyGithub sends GraphQL: the API root without a trailing /v3, plus /graphql."""
        root = self.prefix[: -len("/v3")] if self.prefix.endswith("/v3") else self.prefix
        return f"{root}/graphql"

    def _graphql_request(self, path: str, headers: Mapping[str, str], body: Any) -> _Reply:
        with self._lock:
            self.requests.append(Recorded("POST", path, {}, body, dict(headers)))
        failure = self._take_failure("POST", path)
        if failure is not None:
            return self._faulty(failure, lambda: self._graphql_answer_request(headers, body))
        return self._graphql_answer_request(headers, body)

    def _graphql_answer_request(self, headers: Mapping[str, str], body: Any) -> _Reply:
        if self._authenticate(headers.get("Authorization", "")) is None:
            return _Reply(401, _error(401, "Bad credentials"))
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            self._violation("POST /graphql: the body is not {query, variables}")
            return _Reply(400, {"message": "Problems parsing JSON"})
        token = self._authenticate(headers.get("Authorization", ""))
        return _Reply(200, self._graphql_answer(body["query"], body.get("variables") or {}, token))

    def _graphql_answer(
        self, query: str, variables: Mapping[str, Any], token: TokenInfo | None = None
    ) -> dict[str, Any]:
        """GitHub's shapes: a missing object is null; a Blob has text (null when binary); a commit's
        `statusCheckRollup` is null when it has neither statuses nor check runs, else its contexts
        (check runs and status contexts, GraphQL's upper-case enums), and null with a FORBIDDEN
        error when the token may not read checks."""
        repo_args = re.search(r"repository\(owner: \$(\w+), name: \$(\w+)\)", query)
        if repo_args is None:
            self._violation(f"POST /graphql: a query the fake does not know: {query[:200]}")
            return {"errors": [{"message": "the fake knows only repository { object(expression) }"}]}
        full = f"{variables.get(repo_args.group(1))}/{variables.get(repo_args.group(2))}"
        if full not in self._repos:
            message = f"Could not resolve to a Repository with the name '{full}'."
            return {"data": {"repository": None}, "errors": [{"type": "NOT_FOUND", "message": message}]}
        if "pullRequest(number: $" in query:
            return self._threads_answer(full, query, variables)
        found: dict[str, Any] = {}
        errors: list[dict[str, Any]] = []
        for match in re.finditer(r"(\w+): object\(expression: \$(\w+)\) \{ ", query):
            alias, var = match.group(1), match.group(2)
            expression = str(variables.get(var, ""))
            if query.startswith("... on Commit { statusCheckRollup", match.end()):
                rollup, error = self._rollup(full, expression, query[match.end() :], token, alias)
                found[alias] = {"statusCheckRollup": rollup}
                errors += error
                continue
            ref, _, path = expression.partition(":")
            text = self._contents.get((full, ref, path))
            found[alias] = (
                None
                if text is None
                else {"__typename": "Blob", "text": text, "isBinary": False, "isTruncated": False}
            )
        answer: dict[str, Any] = {"data": {"repository": found}}
        if errors:
            answer["errors"] = errors
        return answer

    def _rollup(
        self, full: str, sha: str, selection: str, token: TokenInfo | None, alias: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            self._violation(f"POST /graphql: statusCheckRollup asked of {sha!r}, not a commit sha")
        first = re.match(r"... on Commit \{ statusCheckRollup \{ contexts\(first: (\d+)\)", selection)
        if first is None or not 1 <= int(first.group(1)) <= 100:
            self._violation("POST /graphql: statusCheckRollup.contexts needs `first` from 1 to 100")
        if token is not None and not token.checks:
            return None, [
                {
                    "type": "FORBIDDEN",
                    "path": ["repository", alias, "statusCheckRollup"],
                    "message": NOT_ACCESSIBLE,
                }
            ]
        with self._lock:
            statuses = copy.deepcopy(list(self._statuses.get((full, sha), {}).values()))
            runs = copy.deepcopy(self._check_runs.get((full, sha), []))
        if not statuses and not runs:
            return None, []
        nodes: list[dict[str, Any]] = [
            {
                "__typename": "CheckRun",
                "name": run["name"],
                "status": str(run["status"]).upper(),
                "conclusion": str(run["conclusion"]).upper() if run["conclusion"] else None,
                "detailsUrl": run["details_url"],
            }
            for run in runs
        ]
        nodes += [
            {"__typename": "StatusContext", "context": st["context"], "state": str(st["state"]).upper()}
            for st in statuses
        ]
        limit = int(first.group(1)) if first is not None else 100
        return {"contexts": {"pageInfo": {"hasNextPage": len(nodes) > limit}, "nodes": nodes[:limit]}}, []

    _THREADS_SHAPE = re.compile(
        r"pullRequest\(number: \$(\w+)\) \{ reviewThreads\(last: (\d+)\) \{ nodes \{ isResolved "
        r"resolvedBy \{ login \} first: comments\(first: 1\) \{ nodes \{ databaseId body author \{ login \} "
        r"reactions\(content: THUMBS_DOWN, last: (\d+)\) \{ nodes \{ user \{ login \} \} \} \} \} "
        r"replies: comments\(last: (\d+)\) "
        r"\{ nodes \{ databaseId body authorAssociation author \{ login \} \} \} "
        r"\} \} \} \} \}$"
    )

    def _threads_answer(self, full: str, query: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """`pullRequest(number) { reviewThreads(last: N) {...} }`: GitHub's connection limits (1 to
        100 per page) are checked; each of our inline comments starts a thread."""
        shape = self._THREADS_SHAPE.search(query)
        if shape is None:
            self._violation(f"POST /graphql: a reviewThreads query the fake does not know: {query[:300]}")
            return {"errors": [{"message": "unknown selection"}]}
        number = variables.get(shape.group(1))
        if not isinstance(number, int) or isinstance(number, bool):
            self._violation("POST /graphql: pullRequest(number:) needs an Int")
            return {"errors": [{"message": "number must be an Int"}]}
        threads_n, reactions_n, replies_n = (int(shape.group(i)) for i in (2, 3, 4))
        if not all(1 <= n <= 100 for n in (threads_n, reactions_n, replies_n)):
            self._violation("POST /graphql: `first`/`last` must be from 1 to 100")
        pull = self._pulls.get((full, number))
        if pull is None:
            message = f"Could not resolve to a PullRequest with the number of {number}."
            return {
                "data": {"repository": {"pullRequest": None}},
                "errors": [{"type": "NOT_FOUND", "message": message}],
            }
        with self._lock:
            firsts = [
                c
                for r in self._reviews.get((full, number), [])
                for c in self._review_comments.get(r["id"], [])
            ]
            nodes = []
            for c in firsts[-threads_n:]:
                thread = copy.deepcopy(self._threads.get(c["id"], {"resolved_by": None, "replies": []}))
                head = {
                    "databaseId": c["id"],
                    "body": c["body"],
                    "authorAssociation": "NONE",
                    # GraphQL names a bot without REST's "[bot]" suffix
                    "author": {"login": c["user"]["login"].removesuffix("[bot]")},
                }
                reactors = [
                    login
                    for login, content in self._reactions.get(("review", c["id"]), [])
                    if content == "-1"
                ]
                replies = [
                    {
                        "databaseId": r["id"],
                        "body": r["body"],
                        "authorAssociation": r["association"],
                        "author": {"login": r["login"]},
                    }
                    for r in thread["replies"]
                ]
                nodes.append(
                    {
                        "isResolved": thread["resolved_by"] is not None,
                        "resolvedBy": {"login": thread["resolved_by"]} if thread["resolved_by"] else None,
                        "first": {
                            "nodes": [
                                {
                                    **{k: head[k] for k in ("databaseId", "body", "author")},
                                    "reactions": {
                                        "nodes": [{"user": {"login": u}} for u in reactors[-reactions_n:]]
                                    },
                                }
                            ]
                        },
                        "replies": {"nodes": ([head, *replies])[-replies_n:]},
                    }
                )
        return {"data": {"repository": {"pullRequest": {"reviewThreads": {"nodes": nodes}}}}}

    def graphql_requests(self) -> list[Recorded]:
        return [r for r in list(self.requests) if r.method == "POST" and r.path == self._graphql_path()]

    def _violation(self, *problems: str) -> None:
        if problems:
            with self._lock:
                self.violations.extend(problems)

    def _authenticate(self, header: str) -> TokenInfo | None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        return self.tokens.get(value.strip())

    def _routes(self) -> dict[tuple[str, str], Callable[..., _Reply]]:
        r = "/repos/{owner}/{repo}"
        return {
            ("GET", r): self._get_repo,
            ("GET", f"{r}/pulls"): self._list_pulls,
            ("GET", f"{r}/pulls/{{pull_number}}"): self._get_pull,
            ("GET", f"{r}/pulls/{{pull_number}}/files"): self._list_files,
            ("GET", f"{r}/pulls/{{pull_number}}/reviews"): self._list_reviews,
            ("POST", f"{r}/pulls/{{pull_number}}/reviews"): self._create_review,
            ("PUT", f"{r}/pulls/{{pull_number}}/reviews/{{review_id}}"): self._update_review,
            ("GET", f"{r}/issues/comments"): self._list_repo_comments,
            ("GET", f"{r}/issues/{{issue_number}}/comments"): self._list_comments,
            ("POST", f"{r}/issues/{{issue_number}}/comments"): self._create_comment,
            ("GET", f"{r}/issues/comments/{{comment_id}}"): self._get_comment,
            ("PATCH", f"{r}/issues/comments/{{comment_id}}"): self._edit_comment,
            ("DELETE", f"{r}/issues/comments/{{comment_id}}"): self._delete_comment,
            ("POST", f"{r}/issues/comments/{{comment_id}}/reactions"): self._react_issue_comment,
            ("POST", f"{r}/pulls/comments/{{comment_id}}/reactions"): self._react_review_comment,
            ("GET", f"{r}/collaborators/{{username}}/permission"): self._permission,
            ("GET", f"{r}/commits/{{ref}}/status"): self._combined_status,
            ("GET", f"{r}/commits/{{ref}}/check-runs"): self._list_check_runs,
            ("GET", f"{r}/contents/{{path}}"): self._get_content,
            ("GET", f"{r}/compare/{{basehead}}"): self._compare,
            ("GET", f"{r}/git/trees/{{tree_sha}}"): self._get_tree,
            ("GET", "/user"): self._get_user,
            ("GET", "/rate_limit"): self._rate_limit,
        }

    def _paginate(
        self, items: list[Any], query: Mapping[str, str], path: str
    ) -> tuple[list[Any], dict[str, str]]:
        per_page = max(1, min(int(query.get("per_page") or 30), 100))
        page = max(1, int(query.get("page") or 1))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(n: int) -> str:
            return f"{self.url}{path}?{urlencode({**query, 'per_page': per_page, 'page': n})}"

        rels = []
        if page < last:
            rels += [f'<{link(page + 1)}>; rel="next"', f'<{link(last)}>; rel="last"']
        if page > 1:
            rels += [f'<{link(1)}>; rel="first"', f'<{link(page - 1)}>; rel="prev"']
        return chunk, ({"Link": ", ".join(rels)} if rels else {})

    def _repo(self, owner: str, repo: str) -> str:
        full = f"{owner}/{repo}"
        if full not in self._repos:
            raise KeyError(full)
        return full

    def _pull(self, owner: str, repo: str, number: str) -> _Pull:
        return self._pulls[(self._repo(owner, repo), int(number))]

    # ----------------------------------------------------------------- handlers

    def _get_repo(self, *, owner: str, repo: str, **_: Any) -> _Reply:
        return _Reply(200, self._repo_json(self._repo(owner, repo)))

    def _list_pulls(
        self, *, owner: str, repo: str, query: Mapping[str, str], request_path: str, **_: Any
    ) -> _Reply:
        full = self._repo(owner, repo)
        state = query.get("state", "open")
        with self._lock:
            pulls = sorted(
                (p for (r, _n), p in self._pulls.items() if r == full and state in (p.state, "all")),
                key=(lambda p: (p.updated_at, p.number))
                if query.get("sort") == "updated"
                else (lambda p: p.number),
                reverse=query.get("direction", "desc") != "asc",
            )
            items = [self._pull_json(p, simple=True) for p in pulls]
        chunk, links = self._paginate(items, query, request_path)
        return _Reply(200, chunk, links)

    def _get_pull(self, *, owner: str, repo: str, pull_number: str, **_: Any) -> _Reply:
        with self._lock:
            return _Reply(200, self._pull_json(self._pull(owner, repo, pull_number)))

    def _list_files(
        self,
        *,
        owner: str,
        repo: str,
        pull_number: str,
        query: Mapping[str, str],
        request_path: str,
        **_: Any,
    ) -> _Reply:
        files = copy.deepcopy(self._pull(owner, repo, pull_number).files[:FILES_CAP])
        chunk, links = self._paginate(files, query, request_path)
        return _Reply(200, chunk, links)

    def _review_json(
        self, pull: _Pull, review_id: int, body: str, event: str | None, commit_id: str, user: dict[str, Any]
    ) -> dict[str, Any]:
        html = f"{WEB}/{pull.repo}/pull/{pull.number}"
        state = {
            "COMMENT": "COMMENTED",
            "APPROVE": "APPROVED",
            "REQUEST_CHANGES": "CHANGES_REQUESTED",
            None: "PENDING",
        }
        data = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": user,
            "body": body,
            "state": state[event],
            "html_url": f"{html}#pullrequestreview-{review_id}",
            "pull_request_url": self._api(f"/repos/{pull.repo}/pulls/{pull.number}"),
            "_links": {
                "html": {"href": f"{html}#pullrequestreview-{review_id}"},
                "pull_request": {"href": self._api(f"/repos/{pull.repo}/pulls/{pull.number}")},
            },
            "commit_id": commit_id,
            "author_association": "CONTRIBUTOR" if user["type"] == "User" else "NONE",
        }
        if event is not None:
            data["submitted_at"] = STAMP
        return data

    def _list_reviews(
        self,
        *,
        owner: str,
        repo: str,
        pull_number: str,
        query: Mapping[str, str],
        request_path: str,
        **_: Any,
    ) -> _Reply:
        pull = self._pull(owner, repo, pull_number)
        with self._lock:
            items = copy.deepcopy(self._reviews.get((pull.repo, pull.number), []))
        chunk, links = self._paginate(items, query, request_path)
        return _Reply(200, chunk, links)

    @staticmethod
    def _rejected(*messages: str) -> _Unprocessable:
        return _Unprocessable(_Reply(422, _error(422, "Unprocessable Entity", errors=list(messages))))

    def _check_review_comment(
        self, index: LineIndex, patches: Mapping[str, str | None], c: Mapping[str, Any]
    ) -> None:
        extra = sorted(set(c) - _REVIEW_COMMENT_KEYS)
        if extra:
            raise self._rejected(f"{extra[0]} is not a permitted key.")
        if _utf16_len(c["body"]) > BODY_LIMIT:
            raise self._rejected(TOO_LONG)
        path = c["path"]
        if path not in patches:
            raise self._rejected("Path could not be resolved")
        if "line" not in c:
            patch = patches[path] or ""
            position = c.get("position")
            if not isinstance(position, int) or not 1 <= position < len(patch.split("\n")):
                raise self._rejected("Pull request review thread position is invalid")
            return
        side = c.get("side", "RIGHT")
        if side not in ("LEFT", "RIGHT"):
            raise self._rejected(f"Pull request review thread side must be LEFT or RIGHT, not {side}")
        line = c["line"]
        if not index.commentable(path, line, side):
            raise self._rejected(NOT_IN_DIFF)
        if "start_line" in c:
            start_side = c.get("start_side", side)
            start = c["start_line"]
            if start >= line:
                raise self._rejected("Pull request review thread start line must precede the end line")
            start_hunk = index.side(path, start_side).get(start)
            if start_hunk is None or start_hunk != index.side(path, side)[line]:
                raise self._rejected(
                    "Pull request review thread start line must be part of the same hunk as the line"
                )

    def _create_review(
        self, *, owner: str, repo: str, pull_number: str, token: TokenInfo, body: Any, **_: Any
    ) -> _Reply:
        pull = self._pull(owner, repo, pull_number)
        payload = body or {}
        event = payload.get("event")
        text = payload.get("body", "")
        if event in ("COMMENT", "REQUEST_CHANGES") and not text:
            raise self._rejected("Body is required when the review event is COMMENT or REQUEST_CHANGES")
        if _utf16_len(text) > BODY_LIMIT:
            raise self._rejected(TOO_LONG)
        commit_id = payload.get("commit_id", pull.head_sha)
        if commit_id not in pull.shas:
            raise self._rejected("Commit is not part of the pull request")
        parsed = [
            parse_github_file(
                filename=f["filename"],
                status=f["status"],
                patch=f.get("patch"),
                previous_filename=f.get("previous_filename"),
            )
            for f in pull.files
        ]
        index = LineIndex.build(parsed)
        patches = {f["filename"]: f.get("patch") for f in pull.files}
        comments = payload.get("comments", [])
        for c in comments:
            self._check_review_comment(index, patches, c)
        user = self._token_user(token)
        review_id = self._new_id()
        review = self._review_json(pull, review_id, text, event, commit_id, user)
        stored = [
            {
                "id": self._new_id(),
                "pull_request_review_id": review_id,
                "commit_id": commit_id,
                "user": user,
                **{k: v for k, v in c.items() if k in _REVIEW_COMMENT_KEYS},
                "side": c.get("side", "RIGHT"),
            }
            for c in comments
        ]
        with self._lock:
            self._reviews.setdefault((pull.repo, pull.number), []).append(review)
            self._review_comments[review_id] = stored
        return _Reply(200, copy.deepcopy(review))

    def _update_review(
        self,
        *,
        owner: str,
        repo: str,
        pull_number: str,
        review_id: str,
        token: TokenInfo,
        body: Any,
        **_: Any,
    ) -> _Reply:
        """GitHub lets only the review's author edit it; the inline comments are kept."""
        pull = self._pull(owner, repo, pull_number)
        text = body["body"]
        if _utf16_len(text) > BODY_LIMIT:
            raise self._rejected(TOO_LONG)
        with self._lock:
            review = next(
                r for r in self._reviews.get((pull.repo, pull.number), []) if r["id"] == int(review_id)
            )
            if review["user"]["login"] != self._token_user(token)["login"]:
                return _Reply(403, _error(403, NOT_ACCESSIBLE))
            review["body"] = text
            return _Reply(200, copy.deepcopy(review))

    def _list_comments(
        self,
        *,
        owner: str,
        repo: str,
        issue_number: str,
        query: Mapping[str, str],
        request_path: str,
        **_: Any,
    ) -> _Reply:
        pull = self._pull(owner, repo, issue_number)
        chunk, links = self._paginate(self.comments(pull.repo, pull.number), query, request_path)
        return _Reply(200, chunk, links)

    def _list_repo_comments(
        self, *, owner: str, repo: str, query: Mapping[str, str], request_path: str, **_: Any
    ) -> _Reply:
        full = self._repo(owner, repo)
        since = query.get("since", "")
        with self._lock:
            items = [copy.deepcopy(c) for r, _n, c in self._comments.values() if r == full]
        items = [c for c in items if c["updated_at"] >= since]
        key = "updated_at" if query.get("sort") == "updated" else "created_at"
        items.sort(key=lambda c: (c[key], c["id"]), reverse=query.get("direction", "asc") == "desc")
        chunk, links = self._paginate(items, query, request_path)
        return _Reply(200, chunk, links)

    def _check_comment_body(self, body: Any) -> str:
        text = body["body"]
        if _utf16_len(text) > BODY_LIMIT:
            raise _Unprocessable(
                _Reply(
                    422,
                    _error(
                        422,
                        "Validation Failed",
                        errors=[
                            {
                                "resource": "IssueComment",
                                "code": "custom",
                                "field": "body",
                                "message": TOO_LONG,
                            }
                        ],
                    ),
                )
            )
        return text

    def _create_comment(
        self, *, owner: str, repo: str, issue_number: str, token: TokenInfo, body: Any, **_: Any
    ) -> _Reply:
        pull = self._pull(owner, repo, issue_number)
        text = self._check_comment_body(body)
        comment_id = self._new_id()
        data = self._comment_json(pull.repo, pull.number, comment_id, text, self._token_user(token))
        with self._lock:
            self._comments[comment_id] = (pull.repo, pull.number, data)
        location = data["url"]
        return _Reply(201, copy.deepcopy(data), {"Location": location})

    def _stored_comment(self, owner: str, repo: str, comment_id: str) -> tuple[str, int, dict[str, Any]]:
        full = self._repo(owner, repo)
        stored = self._comments[int(comment_id)]
        if stored[0] != full:
            raise KeyError(comment_id)
        return stored

    def _get_comment(self, *, owner: str, repo: str, comment_id: str, **_: Any) -> _Reply:
        with self._lock:
            return _Reply(200, copy.deepcopy(self._stored_comment(owner, repo, comment_id)[2]))

    def _edit_comment(self, *, owner: str, repo: str, comment_id: str, body: Any, **_: Any) -> _Reply:
        text = self._check_comment_body(body)
        with self._lock:
            data = self._stored_comment(owner, repo, comment_id)[2]
            data["body"] = text
            data["updated_at"] = self._now()
            return _Reply(200, copy.deepcopy(data))

    def _delete_comment(self, *, owner: str, repo: str, comment_id: str, **_: Any) -> _Reply:
        with self._lock:
            self._stored_comment(owner, repo, comment_id)
            del self._comments[int(comment_id)]
        return _Reply(204)

    def _reaction(self, kind: str, comment_id: int, token: TokenInfo, content: str) -> _Reply:
        user = self._token_user(token)
        with self._lock:
            given = self._reactions.setdefault((kind, comment_id), [])
            status = 200 if (user["login"], content) in given else 201
            if status == 201:
                given.append((user["login"], content))
        data = {
            "id": self._new_id(),
            "node_id": "REA_1",
            "user": user,
            "content": content,
            "created_at": STAMP,
        }
        return _Reply(status, data)

    def _react_issue_comment(
        self, *, owner: str, repo: str, comment_id: str, token: TokenInfo, body: Any, **_: Any
    ) -> _Reply:
        with self._lock:
            self._stored_comment(owner, repo, comment_id)
        return self._reaction("issue", int(comment_id), token, body["content"])

    def _react_review_comment(
        self, *, owner: str, repo: str, comment_id: str, token: TokenInfo, body: Any, **_: Any
    ) -> _Reply:
        full = self._repo(owner, repo)
        wanted = int(comment_id)
        with self._lock:
            known = {
                c["id"]
                for (r, _n), reviews in self._reviews.items()
                if r == full
                for rv in reviews
                for c in self._review_comments.get(rv["id"], [])
            }
            known |= {reply["id"] for t in self._threads.values() for reply in t["replies"]}
            known |= self._extra_review_comments
        if wanted not in known:
            raise KeyError(comment_id)
        return self._reaction("review", wanted, token, body["content"])

    def add_review_comment_id(self, comment_id: int) -> None:
        """A review comment the event payload names that no review of the fake holds (a reply
        posted before the test began): reactions to it are accepted."""
        with self._lock:
            self._extra_review_comments.add(comment_id)

    def _permission(self, *, owner: str, repo: str, username: str, **_: Any) -> _Reply:
        full = self._repo(owner, repo)
        with self._lock:
            level = self._permissions.get((full, username))
        if level is None:
            return _Reply(404, _error(404))
        user = {
            **self._user(username),
            "role_name": level,
            "permissions": {"admin": level == "admin", "push": level in ("admin", "write"), "pull": True},
        }
        return _Reply(200, {"permission": level, "role_name": level, "user": user})

    def _combined_status(self, *, owner: str, repo: str, ref: str, **_: Any) -> _Reply:
        full = self._repo(owner, repo)
        with self._lock:
            statuses = copy.deepcopy(list(self._statuses.get((full, ref), {}).values()))
        states = {s["state"] for s in statuses}
        if states & {"error", "failure"}:
            state = "failure"
        elif not statuses or "pending" in states:
            state = "pending"
        else:
            state = "success"
        return _Reply(
            200,
            {
                "state": state,
                "statuses": statuses,
                "sha": ref,
                "total_count": len(statuses),
                "repository": self._repo_json(full),
                "commit_url": self._api(f"/repos/{full}/commits/{ref}"),
                "url": self._api(f"/repos/{full}/commits/{ref}/status"),
            },
        )

    def _list_check_runs(
        self,
        *,
        owner: str,
        repo: str,
        ref: str,
        query: Mapping[str, str],
        request_path: str,
        token: TokenInfo,
        **_: Any,
    ) -> _Reply:
        full = self._repo(owner, repo)
        if not token.checks:
            return _Reply(403, _error(403, NOT_ACCESSIBLE))
        with self._lock:
            runs = copy.deepcopy(self._check_runs.get((full, ref), []))
        chunk, links = self._paginate(runs, query, request_path)
        return _Reply(200, {"total_count": len(runs), "check_runs": chunk}, links)

    def _get_tree(
        self, *, owner: str, repo: str, tree_sha: str, query: Mapping[str, str], **_: Any
    ) -> _Reply:
        """The files added with `add_content` at a commit, as GitHub lists a tree (`recursive` for
        every level, directories included)."""
        full = self._repo(owner, repo)
        with self._lock:
            files = sorted(path for (name, ref, path) in self._contents if name == full and ref == tree_sha)
        if not files:
            return _Reply(404, _error(404))
        recursive = query.get("recursive", "") not in ("", "0", "false")
        dirs = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
        entries: list[dict[str, Any]] = [
            {"path": d, "mode": "040000", "type": "tree", "sha": hashlib.sha1(d.encode()).hexdigest()}
            for d in dirs
            if recursive or "/" not in d
        ]
        for p in files:
            if recursive or "/" not in p:
                text = self._contents[(full, tree_sha, p)]
                entries.append(
                    {
                        "path": p,
                        "mode": "100644",
                        "type": "blob",
                        "sha": _blob_sha(text),
                        "size": len(text.encode()),
                    }
                )
        entries.sort(key=lambda e: str(e["path"]))
        url = self._api(f"/repos/{full}/git/trees/{tree_sha}")
        return _Reply(200, {"sha": tree_sha, "url": url, "truncated": False, "tree": entries})

    def _get_content(self, *, owner: str, repo: str, path: str, query: Mapping[str, str], **_: Any) -> _Reply:
        full = self._repo(owner, repo)
        file_path = path.strip("/")
        ref = query.get("ref") or self._repos[full].default_branch
        target = self._symlinks.get((full, ref, file_path))
        if target is not None and (full, ref, target) in self._contents:
            file_path = target
        text = self._contents.get((full, ref, file_path.strip("/")))
        if text is None:
            return _Reply(404, _error(404))
        raw = text.encode()
        encoded = base64.b64encode(raw).decode()
        api = self._api(f"/repos/{full}/contents/{file_path}?ref={ref}")
        sha = _blob_sha(text)
        html = f"{WEB}/{full}/blob/{ref}/{file_path}"
        git = self._api(f"/repos/{full}/git/blobs/{sha}")
        return _Reply(
            200,
            {
                "type": "file",
                "encoding": "base64",
                "size": len(raw),
                "name": file_path.rsplit("/", 1)[-1],
                "path": file_path,
                "content": "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n",
                "sha": sha,
                "url": api,
                "git_url": git,
                "html_url": html,
                "download_url": f"https://raw.githubusercontent.com/{full}/{ref}/{file_path}",
                "_links": {"self": api, "git": git, "html": html},
            },
        )

    def _compare(self, *, owner: str, repo: str, basehead: str, **_: Any) -> _Reply:
        full = self._repo(owner, repo)
        base, sep, head = basehead.partition("...")
        if not sep:
            return _Reply(404, _error(404))
        if full in self._git:
            return self._git_compare(full, base, head)
        with self._lock:
            pull = next(
                (
                    p
                    for (r, _n), p in self._pulls.items()
                    if r == full
                    and (head in p.shas or head.split(":")[-1] == p.head_ref)
                    and base.split(":")[-1] in (p.base_sha, p.base_ref)
                ),
                None,
            )
        if pull is None:
            return _Reply(404, _error(404))
        merge_base = pull.merge_base_sha or pull.base_sha
        return _Reply(
            200,
            {
                "url": self._api(f"/repos/{full}/compare/{basehead}"),
                "html_url": f"{WEB}/{full}/compare/{basehead}",
                "permalink_url": f"{WEB}/{full}/compare/{basehead}",
                "diff_url": f"{WEB}/{full}/compare/{basehead}.diff",
                "patch_url": f"{WEB}/{full}/compare/{basehead}.patch",
                "base_commit": self._commit_json(full, pull.base_sha),
                "merge_base_commit": self._commit_json(full, merge_base),
                "status": "ahead" if merge_base == pull.base_sha else "diverged",
                "ahead_by": pull.commits,
                "behind_by": 0 if merge_base == pull.base_sha else 1,
                "total_commits": pull.commits,
                "commits": [self._commit_json(full, pull.head_sha)],
                "files": [],
            },
        )

    def _git_compare(self, full: str, base: str, head: str) -> _Reply:
        git = self._git[full]
        try:
            status = git.status(base, head)
            merge_base = git.git("merge-base", base, head).strip()
            entries = git.entries(base, head)
        except Exception:  # an unknown sha: GitHub says 404
            return _Reply(404, _error(404))
        basehead = f"{base}...{head}"
        return _Reply(
            200,
            {
                "url": self._api(f"/repos/{full}/compare/{basehead}"),
                "html_url": f"{WEB}/{full}/compare/{basehead}",
                "permalink_url": f"{WEB}/{full}/compare/{basehead}",
                "diff_url": f"{WEB}/{full}/compare/{basehead}.diff",
                "patch_url": f"{WEB}/{full}/compare/{basehead}.patch",
                "base_commit": self._commit_json(full, base),
                "merge_base_commit": self._commit_json(full, merge_base),
                "status": status,
                "ahead_by": 1 if status in ("ahead", "diverged") else 0,
                "behind_by": 1 if status in ("behind", "diverged") else 0,
                "total_commits": 1,
                "commits": [self._commit_json(full, head)],
                "files": [self._complete_entry(full, head, e) for e in entries],
            },
        )

    def _get_user(self, *, token: TokenInfo, **_: Any) -> _Reply:
        if token.login is None:
            return _Reply(403, _error(403, NOT_ACCESSIBLE))
        user = self._user(token.login)
        user.update(
            {
                "user_view_type": "private",
                "name": token.login,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "hireable": None,
                "bio": None,
                "public_repos": 1,
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": STAMP,
                "updated_at": STAMP,
                "private_gists": 0,
                "total_private_repos": 0,
                "owned_private_repos": 0,
                "disk_usage": 0,
                "collaborators": 0,
                "two_factor_authentication": True,
            }
        )
        return _Reply(200, user)

    def _rate_limit(self, **_: Any) -> _Reply:
        reset = int(time.time()) + 3600
        core = {"limit": 5000, "remaining": 4999, "reset": reset, "used": 1}
        return _Reply(200, {"resources": {"core": core, "search": {**core, "limit": 30}}, "rate": core})


def _make_handler(server: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes; no 40 ms stalls

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                reply = server.handle(self.command, self.path, dict(self.headers.items()), raw)
            except Exception as exc:  # a bug in the fake must fail the test, not hang the client
                server._violation(f"{self.command} {self.path}: the fake raised {exc!r}")
                reply = _Reply(500, _error(500))
            if reply.delay:
                time.sleep(reply.delay)
            if reply.fault == "reset":
                self._reset()
                return
            payload = b"" if reply.body is None else json.dumps(reply.body).encode()
            if reply.fault == "truncate":
                payload = payload[: len(payload) // 2]
            try:
                self.send_response(reply.status)
                headers = {**server._rate_headers(), **dict(reply.headers)}
                if reply.body is not None:
                    headers["Content-Type"] = "application/json; charset=utf-8"
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def handle(self) -> None:
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                super().handle()  # a client that gave up on a slow or reset answer closed its socket

        def _reset(self) -> None:
            """Close with SO_LINGER 0: the client reads a TCP reset, not a response."""
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.rfile.close()  # the socket closes for real only once its file objects are closed
                self.connection.close()
            self.rfile, self.wfile = io.BytesIO(), io.BytesIO()

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return _Handler
