"""How many requests a PR costs (issue 9, target 3): file contents in one GraphQL query per batch,
the base's config file in the same query, no `GET /user` with an installation token.

Everything goes through real PyGithub to the loopback fake GitHub, which answers the one GraphQL
shape we send (`repository { alias: object(expression: $var) { ... on Blob { text } } }`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reviewer.source.github import ACTIONS_BOT, CONFIG_PATH, CONTENTS_BATCH, GitHubClient, GitHubSource
from tests.factories import fake_github, github_client
from tests.fakes.github_server import FakeGitHub, diff_entry

HEAD = "a" * 40
BASE = "b" * 40
REPO = "octo/widgets"
PATCH = "@@ -1,3 +1,4 @@\n a\n-b\n+c\n+d\n e"
INSTALLATION = "ghs_" + "x" * 36


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with fake_github({"user-token": {"login": "alice"}, INSTALLATION: {}}, repo=REPO, strict=True) as server:
        yield server


def client(gh: FakeGitHub, token: str = "user-token") -> GitHubClient:
    return github_client(gh, token)


def pull_with(gh: FakeGitHub, count: int, *, removed: int = 0) -> list[str]:
    paths = [f"src/m{i:04d}.py" for i in range(count)]
    files = [diff_entry(p, PATCH) for p in paths]
    files += [diff_entry(f"old/r{i}.py", "@@ -1 +0,0 @@\n-x", status="removed") for i in range(removed)]
    gh.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=files)
    for p in paths:
        gh.add_content(REPO, HEAD, p, f"# {p}\nc\nd\n")
    gh.add_content(REPO, BASE, CONFIG_PATH, "max-findings: 3\n")
    return paths


def contents_gets(gh: FakeGitHub) -> int:
    return len(gh.requests_to("GET", r"/contents/"))


def test_a_hundred_files_and_the_config_cost_one_query(gh: FakeGitHub) -> None:
    paths = pull_with(gh, 100, removed=3)
    api = client(gh)
    source = GitHubSource(api, REPO, 7)
    source.change()
    texts = {p: source.read_file(p, HEAD) for p in paths}
    assert texts == {p: f"# {p}\nc\nd\n" for p in paths}
    assert api.file_text(REPO, CONFIG_PATH, BASE) == "max-findings: 3\n"
    assert len(gh.graphql_requests()) == 1
    assert contents_gets(gh) == 0
    asked = str(gh.graphql_requests()[0].body)
    assert "old/r0.py" not in asked, "a removed file has no head to read"


def test_a_large_pr_reads_its_contents_in_batches_not_per_file(gh: FakeGitHub) -> None:
    paths = pull_with(gh, 3 * CONTENTS_BATCH)
    source = GitHubSource(client(gh), REPO, 7)
    source.change()
    for p in reversed(paths):
        assert source.read_file(p, HEAD) == f"# {p}\nc\nd\n"
    assert len(gh.graphql_requests()) <= 4
    assert contents_gets(gh) == 0


def test_absent_files_and_other_refs_answer_none_or_take_the_contents_api(gh: FakeGitHub) -> None:
    pull_with(gh, 2)
    gh.add_content(REPO, BASE, "src/m0000.py", "base text\n")
    source = GitHubSource(client(gh), REPO, 7)
    source.change()
    assert source.read_file("src/nope.py", HEAD) is None
    assert source.read_file("src/m0000.py", BASE) == "base text\n"
    assert contents_gets(gh) == 2, "files outside the PR's head batch use the contents API"


def test_a_path_is_a_variable_never_query_text(gh: FakeGitHub) -> None:
    odd = 'src/a"b) { x } c.py'
    gh.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=[diff_entry(odd, PATCH)])
    gh.add_content(REPO, HEAD, odd, "odd\n")
    source = GitHubSource(client(gh), REPO, 7)
    source.change()
    assert source.read_file(odd, HEAD) == "odd\n"
    query = gh.graphql_requests()[0].body["query"]
    assert 'a\\"b' not in query and 'a"b' not in query


def test_a_failed_query_falls_back_to_the_contents_api(gh: FakeGitHub) -> None:
    paths = pull_with(gh, 3)
    gh.fail("POST", r"/graphql$", 502, times=10)
    source = GitHubSource(client(gh), REPO, 7)
    source.change()
    assert [source.read_file(p, HEAD) for p in paths] == [f"# {p}\nc\nd\n" for p in paths]
    assert contents_gets(gh) == 3


def test_an_installation_token_never_asks_for_the_user(gh: FakeGitHub) -> None:
    assert client(gh, INSTALLATION).viewer_login() == ACTIONS_BOT
    assert client(gh).viewer_login() == "alice"
    assert len(gh.requests_to("GET", r"^/user$")) == 1, "only the personal token asked who it is"
