"""A PR's review threads, reactions and who may dismiss: the few GitHub calls comment commands need.
Threads cost ONE GraphQL query per run; GraphQL gives no association for who resolved a thread or
reacted, so each such user's permission costs one request, at most `MAX_IDENTITY_CHECKS` a run
(docs/commands.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reviewer.commands import Kind, Reaction
from reviewer.errors import GitHubError

if TYPE_CHECKING:
    from reviewer.source.github import GitHubClient

THREADS = 100
REPLIES = 20
REACTIONS = 20
MAX_IDENTITY_CHECKS = 10
"""Distinct resolvers and reactors whose permission one run asks GitHub for; others wait a run."""

THREADS_QUERY = (
    "query($owner: String!, $name: String!, $number: Int!) "
    "{ repository(owner: $owner, name: $name) { pullRequest(number: $number) "
    f"{{ reviewThreads(last: {THREADS}) {{ nodes {{ isResolved resolvedBy {{ login }} "
    "first: comments(first: 1) { nodes { databaseId body author { login } "
    f"reactions(content: THUMBS_DOWN, last: {REACTIONS}) {{ nodes {{ user {{ login }} }} }} }} }} "
    f"replies: comments(last: {REPLIES}) "
    "{ nodes { databaseId body authorAssociation author { login } } } "
    "} } } } }"
)
PERMISSION_ASSOCIATIONS: Mapping[str, frozenset[str]] = {
    "admin": frozenset({"OWNER", "MEMBER", "COLLABORATOR"}),
    "write": frozenset({"MEMBER", "COLLABORATOR"}),
}
"""What a permission stands for when GraphQL gives no association: write access is what a member or
collaborator with a say over the code has; `admin` also stands for an owner."""


@dataclass(frozen=True)
class ThreadReply:
    comment_id: int
    author: str
    association: str
    body: str


@dataclass(frozen=True)
class Thread:
    """One review thread as the query reads it (logins are "" for deleted accounts)."""

    first_id: int
    first_author: str
    first_body: str
    resolved: bool
    resolved_by: str
    thumbs_down: tuple[str, ...]
    replies: tuple[ThreadReply, ...]


def _login(node: Any) -> str:
    login = node.get("login") if isinstance(node, Mapping) else None
    return login if isinstance(login, str) else ""


def _nodes(node: Any, key: str) -> list[Mapping[str, Any]]:
    value = node.get(key) if isinstance(node, Mapping) else None
    items = value.get("nodes") if isinstance(value, Mapping) else None
    return [n for n in items if isinstance(n, Mapping)] if isinstance(items, list) else []


def _id(node: Mapping[str, Any]) -> int:
    value = node.get("databaseId")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_threads(answer: Mapping[str, Any]) -> tuple[Thread, ...]:
    """The threads in a GraphQL answer; anything malformed is left out."""
    data = answer.get("data")
    repo = data.get("repository") if isinstance(data, Mapping) else None
    pull = repo.get("pullRequest") if isinstance(repo, Mapping) else None
    threads: list[Thread] = []
    for node in _nodes(pull, "reviewThreads"):
        for head in _nodes(node, "first")[:1]:
            replies = [r for r in _nodes(node, "replies") if _id(r) != _id(head)]
            thread = Thread(
                _id(head),
                _login(head.get("author")),
                _text(head.get("body")),
                node.get("isResolved") is True,
                _login(node.get("resolvedBy")),
                tuple(_login(r.get("user")) for r in _nodes(head, "reactions")),
                tuple(
                    ThreadReply(
                        _id(r),
                        _login(r.get("author")),
                        str(r.get("authorAssociation") or "NONE"),
                        str(r.get("body") or ""),
                    )
                    for r in replies
                ),
            )
            threads.append(thread)
    return tuple(threads)


def read_threads(client: GitHubClient, repo: str, number: int) -> tuple[Thread, ...]:
    """The PR's newest review threads, each with its first comment (our finding marker, author, 👎
    reactions) and its last replies, in one GraphQL request."""
    owner, _, name = repo.partition("/")
    what = f"read the review threads of {repo}#{number} through GraphQL"
    answer = client.graphql(THREADS_QUERY, {"owner": owner, "name": name, "number": number}, what)
    errors = [e for e in answer.get("errors") or () if isinstance(e, Mapping)]
    if errors:
        raise GitHubError(f"{what}: {'; '.join(str(e.get('message') or e.get('type')) for e in errors)}")
    return parse_threads(answer)


def react(client: GitHubClient, repo: str, kind: Kind, comment_id: int, content: Reaction) -> None:
    """One reaction on a command comment (👀 accepted, 👎 refused; GitHub answers 200 when it is
    already there)."""
    where = "issues" if kind == "issue" else "pulls"
    client.rest(
        "POST",
        f"/repos/{repo}/{where}/comments/{int(comment_id)}/reactions",
        f"react {content} to comment {comment_id} in {repo}",
        body={"content": content},
        write=True,
    )


def trusted_logins(
    client: GitHubClient, repo: str, logins: Sequence[str], allowed: Sequence[str]
) -> frozenset[str]:
    """Those of `logins` (the first MAX_IDENTITY_CHECKS distinct ones) whose permission (`admin`,
    `write`, `read`; not a collaborator is `none`) stands for an association in `allowed`; one
    request each; a failed read trusts nobody."""
    wanted = {a.upper() for a in allowed}
    trusted: set[str] = set()
    for login in list(dict.fromkeys(logins))[:MAX_IDENTITY_CHECKS]:
        try:
            what = f"read {login}'s permission on {repo}"
            data = client.rest("GET", f"/repos/{repo}/collaborators/{login}/permission", what)
        except GitHubError as exc:
            if exc.status != 404:
                raise
            data = {}
        level = data.get("permission") if isinstance(data, Mapping) else None
        if PERMISSION_ASSOCIATIONS.get(str(level), frozenset()) & wanted:
            trusted.add(login)
    return frozenset(trusted)
