"""The fake GitHub keeps GitHub's contract: the OpenAPI subset checks it, and its rules match GitHub's.

Other tests trust the fake; these make sure that trust is earned, by talking to it over raw HTTP
and by feeding its validator bodies that GitHub would reject.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from reviewer.source.github import GitHubSource, InlineComment
from tests.factories import fake_github, github_client
from tests.fakes.github_server import SPEC_PATH, FakeGitHub, api_spec, diff_entry

REPO = "octo/widgets"
HEAD = "a" * 40
BASE = "b" * 40
PATCH = "@@ -1,3 +1,4 @@\n a\n-b\n+c\n+d\n e"
TWO_HUNKS = "@@ -1,2 +1,2 @@\n-x\n+y\n z\n@@ -10,2 +10,3 @@\n q\n+r\n s"


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with fake_github({"tok": {"login": "alice"}, "bot": {}}, repo=REPO) as server:
        server.add_pull(
            REPO,
            7,
            head_sha=HEAD,
            base_sha=BASE,
            files=[diff_entry("app.py", PATCH), diff_entry("lib.py", TWO_HUNKS)],
        )
        yield server


def call(
    gh: FakeGitHub, method: str, path: str, body: Any = None, token: str | None = "tok", scheme: str = "token"
) -> tuple[int, Any, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(gh.url + path, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"{scheme} {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None, dict(response.headers)
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else None, dict(err.headers)


def review(gh: FakeGitHub, *comments: dict[str, Any], **extra: Any) -> tuple[int, Any]:
    body = {"commit_id": HEAD, "body": "summary", "event": "COMMENT", "comments": list(comments), **extra}
    status, data, _ = call(gh, "POST", f"/repos/{REPO}/pulls/7/reviews", body)
    return status, data


# --------------------------------------------------------------------------- the subset itself


def test_the_subset_is_small_licensed_and_self_contained() -> None:
    assert SPEC_PATH.stat().st_size < 1_000_000
    folder = SPEC_PATH.parent
    assert "MIT License" in (folder / "LICENSE").read_text(encoding="utf-8")
    assert "trim_openapi.py" in (folder / "README.md").read_text(encoding="utf-8")
    spec = api_spec()
    text = json.dumps(spec.doc)
    for ref in set(part.split('"')[0] for part in text.split('"$ref": "')[1:]):
        pointer = ref.split("#/", 1)[1].split("/")
        node: Any = spec.doc
        for key in pointer:
            node = node[key]
    assert spec.match("POST", f"/repos/{REPO}/pulls/7/reviews") is not None
    assert spec.match("GET", f"/repos/{REPO}/contents/a/b/c.py") == (
        "/repos/{owner}/{repo}/contents/{path}",
        {"owner": "octo", "repo": "widgets", "path": "a/b/c.py"},
    )


def test_the_validator_rejects_a_response_github_would_not_send() -> None:
    spec = api_spec()
    good = {"total_count": 0, "check_runs": []}
    assert spec.check_response("/repos/{owner}/{repo}/commits/{ref}/check-runs", "GET", 200, good) == []
    bad_pull = {"number": "7", "title": None}
    problems = spec.check_response("/repos/{owner}/{repo}/pulls/{pull_number}", "GET", 200, bad_pull)
    assert any("'head' is a required property" in p for p in problems)
    assert spec.check_response("/repos/{owner}/{repo}/issues/comments/{comment_id}", "DELETE", 200, None)


def test_nullable_fields_accept_null_and_only_null(gh: FakeGitHub) -> None:
    spec = api_spec()
    status, pull, _ = call(gh, "GET", f"/repos/{REPO}/pulls/7")
    assert status == 200 and pull["body"] is None and pull["merged_by"] is None
    template = "/repos/{owner}/{repo}/pulls/{pull_number}"
    assert spec.check_response(template, "GET", 200, pull) == []
    assert spec.check_response(template, "GET", 200, {**pull, "body": 5}) != []


# --------------------------------------------------------------------------- request validation


def test_a_malformed_request_body_is_caught_and_rejected(gh: FakeGitHub) -> None:
    status, data, _ = call(gh, "POST", f"/repos/{REPO}/issues/7/comments", {"body": 5})
    assert status == 422 and "Invalid request" in data["message"]
    assert any("issue_number}/comments" in v and "5 is not of type 'string'" in v for v in gh.violations)


def test_a_review_with_an_unknown_event_or_pathless_comment_is_caught(gh: FakeGitHub) -> None:
    assert review(gh, event="SHIP_IT")[0] == 422
    assert review(gh, {"line": 2, "body": "no path"})[0] == 422
    assert len(gh.violations) == 2 and all("pulls/{pull_number}/reviews" in v for v in gh.violations)
    assert gh.reviews(REPO, 7) == []


def test_an_endpoint_outside_the_subset_or_the_prefix_is_a_violation() -> None:
    with FakeGitHub(prefix="/api/v3") as ghes:
        ghes.add_token("tok", login="alice")
        assert call(ghes, "GET", "/repos/o/r/branches")[0] == 404
        request = urllib.request.Request(
            f"http://127.0.0.1:{ghes.port}/user", headers={"Authorization": "token tok"}
        )
        with pytest.raises(urllib.error.HTTPError, match="HTTP Error 404"):
            urllib.request.urlopen(request, timeout=10)
        assert len(ghes.violations) == 2
        assert "no such operation" in ghes.violations[0] and "outside the API root" in ghes.violations[1]


# --------------------------------------------------------------------------- GitHub's rules


def test_auth_needs_a_known_token_in_either_scheme(gh: FakeGitHub) -> None:
    assert call(gh, "GET", "/user", token=None)[0] == 401
    assert call(gh, "GET", "/user", token="wrong")[0] == 401
    assert call(gh, "GET", "/user", scheme="Bearer")[1]["login"] == "alice"
    status, data, _ = call(gh, "GET", "/user", token="bot")
    assert (status, data["message"]) == (403, "Resource not accessible by integration")
    assert gh.violations == []


def test_review_lines_must_be_commentable(gh: FakeGitHub) -> None:
    assert review(gh, {"path": "app.py", "line": 3, "side": "RIGHT", "body": "added"})[0] == 200
    assert review(gh, {"path": "app.py", "line": 2, "side": "LEFT", "body": "removed"})[0] == 200
    assert review(gh, {"path": "app.py", "line": 1, "body": "context, side defaults to RIGHT"})[0] == 200
    status, data = review(gh, {"path": "app.py", "line": 9, "side": "RIGHT", "body": "x"})
    assert (status, data["errors"]) == (422, ["Pull request review thread line must be part of the diff"])
    assert review(gh, {"path": "app.py", "line": 3, "side": "LEFT", "body": "x"})[0] == 422
    assert review(gh, {"path": "nope.py", "line": 1, "body": "x"})[0] == 422
    assert len(gh.reviews(REPO, 7)) == 3
    assert gh.violations == []


def test_review_ranges_follow_githubs_rules(gh: FakeGitHub) -> None:
    ok = {"path": "lib.py", "start_line": 10, "line": 12, "side": "RIGHT", "body": "range"}
    assert review(gh, ok)[0] == 200
    status, data = review(gh, {**ok, "start_line": 12})
    assert status == 422 and "precede" in data["errors"][0]
    status, data = review(gh, {**ok, "start_line": 1})
    assert status == 422 and "same hunk" in data["errors"][0]
    status, data = review(gh, {"path": "app.py", "line": 3, "body": "x", "subject_type": "line"})
    assert status == 422 and data["errors"] == ["subject_type is not a permitted key."]
    assert gh.violations == []


def test_review_event_and_body_rules(gh: FakeGitHub) -> None:
    assert review(gh, body="")[0] == 422
    assert review(gh, commit_id="f" * 40)[0] == 422
    status, data = review(gh, event="APPROVE")
    assert (status, data["state"]) == (200, "APPROVED")
    status, data, _ = call(gh, "POST", f"/repos/{REPO}/pulls/7/reviews", {"body": "pending"})
    assert (status, data["state"], data["commit_id"]) == (200, "PENDING", HEAD)
    assert gh.violations == []


def test_body_limit_counts_utf16_units(gh: FakeGitHub) -> None:
    path = f"/repos/{REPO}/issues/7/comments"
    assert call(gh, "POST", path, {"body": "x" * 65536})[0] == 201
    status, data, _ = call(gh, "POST", path, {"body": "x" * 65537})
    assert status == 422 and data["errors"][0]["message"] == "Body is too long (maximum is 65536 characters)"
    emoji = "\U0001f600" * 32769
    assert len(emoji) < 65536 and call(gh, "POST", path, {"body": emoji})[0] == 422
    assert review(gh, body="y" * 65537)[0] == 422
    assert gh.violations == []


def test_issue_comments_paginate_in_ascending_order_with_links(gh: FakeGitHub) -> None:
    for i in range(5):
        call(gh, "POST", f"/repos/{REPO}/issues/7/comments", {"body": f"c{i}"}, token="bot")
    status, page1, headers = call(gh, "GET", f"/repos/{REPO}/issues/7/comments?per_page=2")
    assert status == 200 and [c["body"] for c in page1] == ["c0", "c1"]
    assert page1[0]["id"] < page1[1]["id"] and page1[0]["user"]["login"] == "github-actions[bot]"
    assert 'rel="next"' in headers["Link"] and "page=2" in headers["Link"]
    _, page3, headers = call(gh, "GET", f"/repos/{REPO}/issues/7/comments?per_page=2&page=3")
    assert [c["body"] for c in page3] == ["c4"] and 'rel="next"' not in headers["Link"]
    assert gh.violations == []


def test_read_only_tokens_cannot_write(gh: FakeGitHub) -> None:
    gh.add_token("ro", login="alice", write=False)
    status, data, _ = call(gh, "POST", f"/repos/{REPO}/issues/7/comments", {"body": "x"}, token="ro")
    assert (status, data["message"]) == (403, "Resource not accessible by integration")
    assert call(gh, "GET", f"/repos/{REPO}/issues/7/comments", token="ro")[0] == 200


def test_combined_status_without_statuses_is_pending_with_zero_count(gh: FakeGitHub) -> None:
    status, data, _ = call(gh, "GET", f"/repos/{REPO}/commits/{HEAD}/status")
    assert (status, data["state"], data["total_count"]) == (200, "pending", 0)
    gh.add_status(REPO, HEAD, "ci", "success")
    assert call(gh, "GET", f"/repos/{REPO}/commits/{HEAD}/status")[1]["state"] == "success"
    assert gh.violations == []


def test_files_list_stops_at_3000(gh: FakeGitHub) -> None:
    files = [diff_entry(f"f{i}.txt", None, status="added") for i in range(3001)]
    gh.add_pull(REPO, 8, head_sha=HEAD, base_sha=BASE, files=files, changed_files=3500)
    _, last, headers = call(gh, "GET", f"/repos/{REPO}/pulls/8/files?per_page=100&page=30")
    assert len(last) == 100 and last[-1]["filename"] == "f2999.txt" and 'rel="next"' not in headers["Link"]
    assert call(gh, "GET", f"/repos/{REPO}/pulls/8")[1]["changed_files"] == 3500


def test_injected_failures_are_served_then_spent(gh: FakeGitHub) -> None:
    gh.fail("*", r"/pulls/7$", 500, times=2)
    assert [call(gh, "GET", f"/repos/{REPO}/pulls/7")[0] for _ in range(3)] == [500, 500, 200]


def test_a_whole_review_flow_through_pygithub_keeps_the_contract(gh: FakeGitHub) -> None:
    gh.add_check_run(REPO, HEAD, "tests")
    gh.add_status(REPO, HEAD, "legacy", "pending")
    gh.add_content(REPO, BASE, ".github/imreview.yml", "language: en\n")
    client = github_client(gh, "tok")
    source = GitHubSource(client, REPO, 7, run_id="1")
    change = source.change()
    assert change.snapshot.ci.state == "pending"
    assert source.read_file(".github/imreview.yml", BASE) == "language: en\n"
    assert client.viewer_login() == "alice"
    comment = client.create_issue_comment(REPO, 7, "sticky")
    client.edit_issue_comment(REPO, comment.id, "sticky, updated")
    client.create_review(
        REPO,
        7,
        commit_sha=source.head_sha(),
        body="review",
        comments=[InlineComment("lib.py", 12, "RIGHT", "range", start_line=10)],
    )
    assert [c.body for c in client.issue_comments(REPO, 7)] == ["sticky, updated"]
    assert len(client.reviews(REPO, 7)) == 1
    assert client.open_pull_list(REPO)[0].number == 7
    client.delete_issue_comment(REPO, comment.id)
    assert gh.comments(REPO, 7) == []
    assert gh.violations == []
