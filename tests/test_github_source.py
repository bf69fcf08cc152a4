"""GitHubClient and GitHubSource against the loopback fake GitHub, through real PyGithub."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from reviewer.errors import GitHubError, NoWriteAccess, RateLimited, Retryable, Unprocessable, UsageError
from reviewer.source import github
from reviewer.source.github import GitHubClient, GitHubSource, InlineComment, github_timeout
from tests.factories import fake_github, github_client
from tests.fakes.github_server import FakeGitHub, diff_entry

HEAD = "a" * 40
BASE = "b" * 40
MERGE_BASE = "c" * 40
REPO = "octo/widgets"
PATCH = "@@ -1,3 +1,4 @@\n a\n-b\n+c\n+d\n e"
TWO_HUNKS = "@@ -1,2 +1,2 @@\n-x\n+y\n z\n@@ -10,2 +10,3 @@\n q\n+r\n s"


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with fake_github(
        {"user-token": {"login": "alice"}, "actions-token": {}, "read-only": {"write": False}},
        repo=REPO,
        strict=True,
    ) as server:
        yield server


def client(gh: FakeGitHub, token: str = "user-token", **options: object) -> GitHubClient:
    return github_client(gh, token, **options)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every sleep the client asks for (urllib3's retry and PyGithub's rate-limit waits), not taken."""
    asked: list[float] = []
    monkeypatch.setattr(time, "sleep", asked.append)
    return asked


def add_pull(gh: FakeGitHub, number: int = 7, **kwargs: object) -> None:
    defaults: dict[str, object] = {"head_sha": HEAD, "base_sha": BASE, "files": [diff_entry("app.py", PATCH)]}
    gh.add_pull(REPO, number, **{**defaults, **kwargs})  # type: ignore[arg-type]


def test_snapshot_carries_the_pull_request_as_github_shows_it(gh: FakeGitHub) -> None:
    add_pull(
        gh,
        title="Fix parser",
        body="Please review",
        author="bob",
        head_ref="fix",
        base_ref="main",
        draft=True,
        labels=["bug"],
        merge_base_sha=MERGE_BASE,
        commits=3,
        mergeable=None,
        files=[diff_entry("app.py", PATCH), diff_entry("lib/util.py", TWO_HUNKS)],
    )
    change = GitHubSource(client(gh), REPO, 7).change()
    snap = change.snapshot
    assert (snap.source, snap.repo, snap.number, snap.title, snap.author) == (
        "github",
        REPO,
        7,
        "Fix parser",
        "bob",
    )
    assert snap.url == f"https://github.com/{REPO}/pull/7"
    assert (snap.base.ref, snap.base.sha, snap.head.ref, snap.head.sha) == ("main", BASE, "fix", HEAD)
    assert snap.merge_base == MERGE_BASE
    assert snap.draft is True and snap.state == "open" and snap.mergeable is None
    assert (snap.files, snap.additions, snap.deletions, snap.commits) == (2, 4, 2, 3)
    assert change.body == "Please review"
    assert [f.path for f in change.files] == ["app.py", "lib/util.py"]
    assert [len(f.hunks) for f in change.files] == [1, 2]
    assert change.gaps == ()


def test_files_are_read_100_per_page(gh: FakeGitHub) -> None:
    add_pull(gh, files=[diff_entry(f"src/m{i}.py", PATCH) for i in range(150)])
    change = GitHubSource(client(gh), REPO, 7).change()
    pages = gh.requests_to("GET", r"/pulls/7/files$")
    assert len(pages) == 2
    assert all(r.query.get("per_page") == "100" for r in pages)
    assert len(change.files) == 150 and change.gaps == ()


def test_a_file_without_patch_is_listed_not_guessed(gh: FakeGitHub) -> None:
    add_pull(gh, files=[diff_entry("logo.png", None, status="added"), diff_entry("app.py", PATCH)])
    files = GitHubSource(client(gh), REPO, 7).change().files
    assert [(f.path, f.has_patch, len(f.hunks)) for f in files] == [
        ("logo.png", False, 0),
        ("app.py", True, 1),
    ]


def test_more_changed_files_than_listed_is_a_too_many_files_gap(gh: FakeGitHub) -> None:
    add_pull(gh, changed_files=3500, files=[diff_entry("a.py", PATCH), diff_entry("b.py", PATCH)])
    change = GitHubSource(client(gh), REPO, 7).change()
    assert change.snapshot.files == 3500
    assert [g.why for g in change.gaps] == ["too_many_files"]
    assert "2 of the 3500" in change.gaps[0].what


def test_max_files_stops_reading_and_says_so(gh: FakeGitHub) -> None:
    add_pull(gh, files=[diff_entry(f"m{i}.py", PATCH) for i in range(5)])
    change = GitHubSource(client(gh), REPO, 7, max_files=3).change()
    assert len(change.files) == 3
    assert [g.why for g in change.gaps] == ["too_many_files"]


def test_renamed_file_keeps_its_previous_name(gh: FakeGitHub) -> None:
    add_pull(gh, files=[diff_entry("new/name.py", PATCH, status="renamed", previous_filename="old/name.py")])
    (renamed,) = GitHubSource(client(gh), REPO, 7).change().files
    assert (renamed.path, renamed.status, renamed.old_path) == ("new/name.py", "renamed", "old/name.py")


def test_failed_compare_leaves_merge_base_empty_with_a_gap(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.fail("GET", r"/compare/", 404)
    change = GitHubSource(client(gh), REPO, 7).change()
    assert change.snapshot.merge_base == ""
    assert [g.why for g in change.gaps] == ["merge_base_unknown"]


# --------------------------------------------------------------------------- CI state


def ci(gh: FakeGitHub, run_id: str | None = "42"):  # type: ignore[no-untyped-def]
    return GitHubSource(client(gh), REPO, 7, run_id=run_id).change().snapshot.ci


def test_our_own_check_run_is_excluded(gh: FakeGitHub) -> None:
    add_pull(gh)
    ours = f"https://github.com/{REPO}/actions/runs/42/job/9"
    gh.add_check_run(REPO, HEAD, "imreview", status="in_progress", details_url=ours)
    gh.add_check_run(REPO, HEAD, "tests", details_url=f"https://github.com/{REPO}/actions/runs/420/job/1")
    state = ci(gh)
    assert state.state == "success"
    assert [(c.name, c.conclusion) for c in state.checks] == [("tests", "success")]


def test_no_statuses_and_no_checks_is_none_not_pending(gh: FakeGitHub) -> None:
    add_pull(gh)
    assert ci(gh).state == "none"


def test_pending_and_failed_checks(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.add_check_run(REPO, HEAD, "lint", status="queued", conclusion=None)
    assert ci(gh).state == "pending"
    gh.add_status(REPO, HEAD, "ci/legacy", "failure")
    state = ci(gh)
    assert state.state == "failure"
    assert {(c.name, c.conclusion) for c in state.checks} == {("ci/legacy", "failure"), ("lint", "queued")}


def test_ci_is_read_in_the_files_query_not_through_rest(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.add_status(REPO, HEAD, "ci/legacy", "success")
    gh.add_check_run(REPO, HEAD, "tests", status="completed", conclusion="failure")
    state = ci(gh)
    assert state.state == "failure"
    assert {(c.name, c.conclusion) for c in state.checks} == {("ci/legacy", "success"), ("tests", "failure")}
    assert len(gh.graphql_requests()) == 1
    assert not gh.requests_to("GET", r"/status$") and not gh.requests_to("GET", r"/check-runs$")


def test_a_token_that_may_not_read_checks_makes_ci_unknown(gh: FakeGitHub) -> None:
    """GraphQL answers the rollup null with a FORBIDDEN error; the files of the same query still count."""
    gh.add_token("no-checks", login="alice", checks=False)
    add_pull(gh)
    gh.add_content(REPO, HEAD, "app.py", "c\n")
    gh.add_status(REPO, HEAD, "ci/legacy", "success")
    source = GitHubSource(client(gh, "no-checks"), REPO, 7, run_id="42")
    assert source.change().snapshot.ci.state == "unknown"
    assert source.read_file("app.py", HEAD) == "c\n"
    assert len(gh.graphql_requests()) == 1 and not gh.requests_to("GET", r"/contents/")


def test_when_graphql_fails_ci_is_read_through_rest_and_a_403_on_checks_is_unknown(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.add_status(REPO, HEAD, "ci/legacy", "success")
    gh.fail("POST", r"/graphql$", 502, times=10)
    gh.fail("GET", r"/check-runs$", 403, {"message": "Resource not accessible by integration"})
    assert ci(gh).state == "unknown"
    assert len(gh.requests_to("GET", r"/status$")) == 1


def test_more_than_a_page_of_checks_without_a_failure_is_unknown(gh: FakeGitHub) -> None:
    add_pull(gh)
    for n in range(101):
        gh.add_check_run(REPO, HEAD, f"job {n}")
    state = ci(gh)
    assert state.state == "unknown" and len(state.checks) == 100


# --------------------------------------------------------------------------- transport


def test_ghes_base_url_with_a_path_prefix_works() -> None:
    with FakeGitHub(prefix="/api/v3") as ghes:
        ghes.add_token("t", login="alice")
        ghes.add_repo(REPO)
        ghes.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=[diff_entry("app.py", PATCH)])
        ghes.add_content(REPO, BASE, ".github/imreview.yml", "model: x\n")
        gh_client = GitHubClient("t", ghes.url + "/", seconds_between_writes=0.0)
        source = GitHubSource(gh_client, REPO, 7)
        assert source.change().snapshot.merge_base == BASE
        assert source.read_file(".github/imreview.yml", BASE) == "model: x\n"
        assert gh_client.create_issue_comment(REPO, 7, "hello").user == "alice"
        assert ghes.url.endswith("/api/v3")
        assert ghes.violations == []


def test_writes_are_spaced_for_githubs_secondary_rate_limit(
    gh: FakeGitHub, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client made as the Action makes it (no spacing given) waits between two writes for what
    `WRITE_SPACING_SECONDS` says (0.5 s shipped; the tests' conftest sets 0 for the loopback)."""
    monkeypatch.setattr(github, "WRITE_SPACING_SECONDS", 0.5)
    add_pull(gh)
    action_client = GitHubClient("user-token", gh.url)
    action_client.create_issue_comment(REPO, 7, "one")
    action_client.create_issue_comment(REPO, 7, "two")
    assert any(0.3 < s <= 0.5 for s in sleeps), sleeps


def test_a_get_that_keeps_failing_backs_off_as_shipped(
    gh: FakeGitHub, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the shipped backoff (the tests' conftest sets 0), the third attempt waits 1 s."""
    monkeypatch.setattr(github, "RETRY_BACKOFF_SECONDS", 0.5)
    add_pull(gh)
    gh.fail("GET", r"/pulls/7$", 502, times=2)
    assert GitHubClient("user-token", gh.url).pull(REPO, 7).head_sha == HEAD
    assert len(gh.requests_to("GET", r"/pulls/7$")) == 3
    assert 1.0 in sleeps, sleeps


def test_a_502_on_get_is_retried(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.fail("GET", r"/pulls/7$", 502)
    assert client(gh).pull(REPO, 7).head_sha == HEAD
    assert len(gh.requests_to("GET", r"/pulls/7$")) == 2


def test_a_429_on_get_is_retried_after_its_retry_after(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.fail("GET", r"/pulls/7$", 429, headers={"Retry-After": "0"})
    assert client(gh).pull(REPO, 7).number == 7
    assert len(gh.requests_to("GET", r"/pulls/7$")) == 2


def test_a_502_on_post_is_not_retried(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.fail("POST", r"/pulls/7/reviews$", 502)
    with pytest.raises(Retryable, match="HTTP 502") as err:
        client(gh).create_review(REPO, 7, commit_sha=HEAD, body="b", comments=())
    assert err.value.status == 502
    assert len(gh.requests_to("POST", r"/reviews$")) == 1
    assert gh.reviews(REPO, 7) == []


@pytest.mark.parametrize(
    ("status", "message", "headers", "wait"),
    [
        (
            403,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            {"Retry-After": "7"},
            7.0,
        ),
        (429, "Too Many Requests", {"Retry-After": "2"}, 2.0),
        (
            403,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            {},
            60.0,
        ),
    ],
    ids=["secondary with Retry-After", "429 with Retry-After", "secondary without: a minute"],
)
def test_a_rate_limited_write_is_rate_limited_not_read_only(
    gh: FakeGitHub, status: int, message: str, headers: dict[str, str], wait: float
) -> None:
    """Sent once (the caller decides to try again, after re-listing); the wait GitHub asked for is kept."""
    add_pull(gh)
    gh.fail("POST", r"/issues/7/comments$", status, {"message": message}, headers=headers)
    gh_client = client(gh)
    with pytest.raises(RateLimited, match=r"GitHub rate limit|HTTP 429") as err:
        gh_client.create_issue_comment(REPO, 7, "hello")
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1 and gh.comments(REPO, 7) == []
    assert gh_client.write_wait(err.value.retry_after) == wait
    gh_client.wait_within(1.0)
    assert gh_client.write_wait(err.value.retry_after) is None, "longer than the time left"


def test_gets_that_keep_failing_end_as_retryable_with_the_status(gh: FakeGitHub) -> None:
    add_pull(gh)
    gh.fail("GET", r"/pulls/7$", 503, times=10)
    with pytest.raises(Retryable, match="HTTP 503") as err:
        client(gh, retries=1).pull(REPO, 7)
    assert err.value.status == 503
    assert len(gh.requests_to("GET", r"/pulls/7$")) == 2


def test_a_primary_rate_limit_with_a_distant_reset_does_not_sleep(
    gh: FakeGitHub, sleeps: list[float]
) -> None:
    add_pull(gh)
    reset = str(int(time.time()) + 3600)
    gh.fail(
        "GET",
        r"/pulls/7$",
        403,
        {"message": "API rate limit exceeded for installation ID 1."},
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
    )
    with pytest.raises(Retryable, match="rate limit") as err:
        client(gh).pull(REPO, 7)
    assert not [s for s in sleeps if s >= 5], "waited for a reset an hour away"
    assert err.value.status == 403


def test_a_long_retry_after_does_not_sleep(gh: FakeGitHub, sleeps: list[float]) -> None:
    add_pull(gh)
    gh.fail(
        "GET",
        r"/pulls/7$",
        403,
        {"message": "You have exceeded a secondary rate limit. Please retry your request again later."},
        headers={"Retry-After": "3600"},
    )
    with pytest.raises(Retryable, match="rate limit"):
        client(gh).pull(REPO, 7)
    assert not [s for s in sleeps if s >= 5], "honoured a Retry-After of an hour"


def test_a_refused_connection_is_retryable() -> None:
    with FakeGitHub() as gone:
        url = gone.url
    with pytest.raises(Retryable, match=f"read pull request {REPO}#7"):
        GitHubClient("t", url, retries=0, timeout=2).pull(REPO, 7)


def test_bad_configuration_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="token"):
        GitHubClient("  ")
    with pytest.raises(UsageError, match="GITHUB_API_URL"):
        GitHubClient("t", "api.github.com")
    with pytest.raises(UsageError, match="OWNER/REPO"):
        GitHubClient("t").pull("not-a-repo", 1)


def test_an_unknown_token_is_a_github_error_not_write_access(gh: FakeGitHub) -> None:
    add_pull(gh)
    with pytest.raises(GitHubError, match="HTTP 401") as err:
        GitHubClient("nope", gh.url).pull(REPO, 7)
    assert err.value.status == 401 and not isinstance(err.value, NoWriteAccess)


# --------------------------------------------------------------------------- writes


def test_read_only_token_raises_no_write_access(gh: FakeGitHub) -> None:
    add_pull(gh)
    ro = client(gh, "read-only")
    assert ro.pull(REPO, 7).head_sha == HEAD
    with pytest.raises(NoWriteAccess, match="HTTP 403") as err:
        ro.create_issue_comment(REPO, 7, "hello")
    assert err.value.status == 403
    with pytest.raises(NoWriteAccess, match="HTTP 403"):
        ro.create_review(REPO, 7, commit_sha=HEAD, body="b", comments=())
    assert gh.comments(REPO, 7) == [] and gh.reviews(REPO, 7) == []


def test_a_review_line_outside_the_diff_is_unprocessable(gh: FakeGitHub) -> None:
    add_pull(gh)
    with pytest.raises(Unprocessable, match="HTTP 422") as err:
        client(gh).create_review(
            REPO, 7, commit_sha=HEAD, body="b", comments=[InlineComment("app.py", 40, "RIGHT", "x")]
        )
    assert err.value.status == 422
    assert "must be part of the diff" in str(err.value)


def test_a_comment_over_the_limit_is_unprocessable(gh: FakeGitHub) -> None:
    add_pull(gh)
    with pytest.raises(Unprocessable, match="Body is too long"):
        client(gh).create_issue_comment(REPO, 7, "x" * 65537)


def test_create_review_sends_comment_event_commit_and_lines(gh: FakeGitHub) -> None:
    add_pull(gh, files=[diff_entry("app.py", PATCH), diff_entry("lib.py", TWO_HUNKS)])
    comments = [
        InlineComment("app.py", 3, "RIGHT", "single"),
        InlineComment("app.py", 2, "LEFT", "removed line"),
        InlineComment("lib.py", 12, "RIGHT", "range", start_line=10),
        InlineComment("lib.py", 11, "RIGHT", "degenerate range", start_line=11),
    ]
    review = client(gh).create_review(REPO, 7, commit_sha=HEAD, body="Summary", comments=comments)
    (post,) = gh.requests_to("POST", r"/pulls/7/reviews$")
    assert post.body["event"] == "COMMENT"
    assert post.body["commit_id"] == HEAD
    sent = post.body["comments"]
    assert sent[0] == {"path": "app.py", "line": 3, "side": "RIGHT", "body": "single"}
    assert sent[1] == {"path": "app.py", "line": 2, "side": "LEFT", "body": "removed line"}
    assert sent[2]["start_line"] == 10 and sent[2]["start_side"] == "RIGHT" and sent[2]["line"] == 12
    assert "start_line" not in sent[3]
    assert all("subject_type" not in c for c in sent)
    (stored,) = gh.reviews(REPO, 7)
    assert review.id == stored["id"] and review.commit_id == HEAD and review.user == "alice"
    assert len(stored["comments"]) == 4
    assert [r.id for r in client(gh).reviews(REPO, 7)] == [review.id]


def test_issue_comment_round_trip(gh: FakeGitHub) -> None:
    add_pull(gh)
    c = client(gh, "actions-token")
    first = c.create_issue_comment(REPO, 7, "one")
    second = c.create_issue_comment(REPO, 7, "two")
    assert first.user == "github-actions[bot]"
    assert first.url.endswith(f"#issuecomment-{first.id}")
    assert [(x.id, x.body) for x in c.issue_comments(REPO, 7)] == [(first.id, "one"), (second.id, "two")]
    edited = c.edit_issue_comment(REPO, first.id, "one, updated")
    assert (edited.id, edited.body) == (first.id, "one, updated")
    c.delete_issue_comment(REPO, second.id)
    assert [x["body"] for x in gh.comments(REPO, 7)] == ["one, updated"]


def test_editing_a_missing_comment_is_no_write_access(gh: FakeGitHub) -> None:
    add_pull(gh)
    with pytest.raises(NoWriteAccess, match="HTTP 404") as err:
        client(gh).edit_issue_comment(REPO, 999999, "x")
    assert err.value.status == 404


# --------------------------------------------------------------------------- reads


def test_viewer_login_for_user_and_integration_tokens(gh: FakeGitHub) -> None:
    assert client(gh).viewer_login() == "alice"
    assert client(gh, "actions-token").viewer_login() == "github-actions[bot]"


def test_file_text_reads_by_ref_and_none_when_missing(gh: FakeGitHub) -> None:
    gh.add_content(REPO, BASE, "docs/é.md", "héllo\n")
    c = client(gh)
    assert c.file_text(REPO, "docs/é.md", BASE) == "héllo\n"
    assert c.file_text(REPO, "docs/é.md", HEAD) is None
    assert c.file_text(REPO, "missing.txt", BASE) is None


def test_head_sha_is_read_again_each_time(gh: FakeGitHub) -> None:
    add_pull(gh)
    source = GitHubSource(client(gh), REPO, 7)
    assert source.change().snapshot.head.sha == HEAD
    gh.set_head(REPO, 7, "d" * 40)
    assert source.head_sha() == "d" * 40


def test_pull_info_tells_cross_repo_and_bots(gh: FakeGitHub) -> None:
    add_pull(gh, 1)
    add_pull(gh, 2, head_repo="forker/widgets")
    add_pull(gh, 3, head_repo=None, author="dependabot[bot]", author_type="Bot")
    c = client(gh)
    same, fork, gone = (c.pull(REPO, n) for n in (1, 2, 3))
    assert (same.cross_repo, same.head_repo, same.base_repo) == (False, REPO, REPO)
    assert (fork.cross_repo, fork.head_repo) == (True, "forker/widgets")
    assert (gone.cross_repo, gone.head_repo, gone.author, gone.author_type) == (
        True,
        None,
        "dependabot[bot]",
        "Bot",
    )
    assert same.changed_files == 1 and same.additions == 2 and same.deletions == 1


def test_the_open_pull_list_is_every_open_pr_least_recently_updated_first_without_counts(
    gh: FakeGitHub,
) -> None:
    for n in range(1, 6):
        add_pull(gh, n, labels=["review"] if n % 2 else [])
    add_pull(gh, 9, state="closed", labels=["review"])
    listed = client(gh).open_pull_list(REPO)
    assert sorted(p.number for p in listed) == [1, 2, 3, 4, 5]
    assert [p.labels for p in listed if p.number == 3] == [("review",)]
    assert listed[0].changed_files is None
    assert len(gh.requests_to("GET", r"/pulls/\d+$")) == 0


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("reset", "the connection was reset before GitHub answered"),
        ("slow", "GitHub did not answer within the timeout"),
        ("truncate", "GitHub's answer was not complete JSON ("),
    ],
)
def test_a_transport_fault_is_one_retryable_line(gh: FakeGitHub, mode: str, said: str) -> None:
    add_pull(gh)
    gh.fail("GET", r"/pulls/7$", mode=mode, delay=1.5 if mode == "slow" else 0.0, times=5)
    with pytest.raises(Retryable, match=f"read pull request {REPO}#7") as caught:
        client(gh, retries=0, timeout=1).pull(REPO, 7)
    message = str(caught.value)
    assert message.startswith(f"read pull request {REPO}#7: {said}"), message
    assert "\n" not in message and "Pool" not in message and len(message) < 200


def test_a_failing_page_fails_the_whole_list_never_a_part_of_it(gh: FakeGitHub) -> None:
    add_pull(gh, files=[diff_entry(f"f{i}.py", PATCH) for i in range(150)])
    gh.fail("GET", r"/pulls/7/files", 500, page=2, times=1)
    with pytest.raises(Retryable, match="HTTP 500"):
        client(gh, retries=0).pull_files(REPO, 7)
    assert [r.query.get("page") for r in gh.requests_to("GET", r"/pulls/7/files")] == [None, "2"]
    assert len(client(gh).pull_files(REPO, 7)) == 150, "the fault was one page's, not the list's"


@pytest.mark.parametrize(("value", "seconds"), [("", 30), ("5", 5), (" 600 ", 600)])
def test_the_github_timeout_comes_from_the_environment(value: str, seconds: int) -> None:
    assert github_timeout({"IMREVIEW_GITHUB_TIMEOUT": value}) == seconds


@pytest.mark.parametrize("value", ["0", "601", "1.5", "soon", "-3"])
def test_a_bad_github_timeout_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="IMREVIEW_GITHUB_TIMEOUT: expected whole seconds from 1 to 600"):
        github_timeout({"IMREVIEW_GITHUB_TIMEOUT": value})


@pytest.mark.parametrize("body", ["x", 5, ["tree"]])
def test_a_tree_answer_that_is_not_an_object_costs_the_context_not_the_review(
    gh: FakeGitHub, body: object
) -> None:
    """`tree_paths` feeds repository context, which survives a `GitHubError` only: a 200 answer that is
    not an object must be one, not an AttributeError that fails the PR's whole review."""
    gh.fail("GET", r"/git/trees/", status=200, body=body)  # type: ignore[arg-type]
    with pytest.raises(GitHubError, match="no tree in the answer"):
        client(gh).tree_paths(REPO, "a" * 40)
