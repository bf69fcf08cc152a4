"""How many GitHub requests one PR review costs (issue 9, targets 3 and 4), counted per endpoint
at the loopback fake GitHub: `imreview pr --post-comment` as a subprocess, with and without a
model, with a state key and without one (then the new sticky comment is edited once to name its
own id). benchmarks/bench_perf.py measures the same through the Action."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewer.source.github import REVIEW_FILES_LIMIT
from tests.conftest import cli_env, run_cli
from tests.factories import model_answer, model_finding
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, text

REPO = "octo-org/widgets"
TOKEN = "ghs_" + "c" * 36  # an installation token, as GITHUB_TOKEN is: no GET /user
BASE = "b0" * 20
HEAD = "a1" * 20
HEAD2 = "c2" * 20
PATCH = "@@ -1,3 +1,4 @@\n def div(a, b):\n-    return 0\n+    total = a / b\n+    return total\n # end"
BREAKPOINT = "@@ -1,2 +1,2 @@\n def div(a, b):\n-    return 0\n+    breakpoint()"
MODEL = "openai/fake-model"

FIRST_RUN = {
    "GET /pulls/7": 2,  # the PR, and the gate's re-read of its head just before publishing
    "GET /issues/7/comments": 2,  # our sticky comment and state; the duplicate check after creating
    "GET /pulls/7/files": 1,
    "POST /graphql": 1,  # head files, the base's config and the CI state in one query
    "GET /compare/{sha}...{sha}": 1,  # the merge base, shown in the report and kept in the state
    "POST /issues/7/comments": 1,
}


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_token(TOKEN)
        yield server
    assert server.violations == []


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.handler = lambda body: text(model_answer())
        yield server


def pull_with(gh: FakeGitHub, count: int, *, others: int = 0) -> None:
    """A PR of `count` files; `others` more files at the head that the PR does not change."""
    files = [diff_entry(f"src/m{i:04d}.py", PATCH) for i in range(count)]
    gh.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=files, changed_files=count)
    for i in range(count):
        gh.add_content(REPO, HEAD, f"src/m{i:04d}.py", "def div(a, b):\n    return a / b\n")
    for i in range(others):
        gh.add_content(REPO, HEAD, f"src/lib/o{i:04d}.py", f"def helper{i}(x):\n    return x\n")


def cli_environment(tmp_path: Path, gh: FakeGitHub, *, key: bool = True) -> dict[str, str]:
    return cli_env(
        tmp_path,
        {
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_API_URL": gh.url,
            "IMREVIEW_STATE_KEY": "counts-state-key-0123456789abcdefghij" if key else "",
        },
    )


def review(
    tmp_path: Path,
    gh: FakeGitHub,
    model: FakeModelServer | None = None,
    *,
    key: bool = True,
) -> dict[str, object]:
    report = tmp_path / "report.json"
    model_args = ["--model", MODEL, "--api-base", model.api_base, "--max-calls", "4"] if model else []
    proc = run_cli(
        ["pr", f"{REPO}#7", "--post-comment", *model_args, "--json", str(report)],
        cwd=tmp_path,
        env=cli_environment(tmp_path, gh, key=key),
    )
    assert proc.returncode in (0, 1), proc.stderr
    data: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return data


def per_endpoint(gh: FakeGitHub) -> collections.Counter[str]:
    def endpoint(method: str, path: str) -> str:
        path = re.sub(r"[0-9a-f]{40}", "{sha}", path)
        path = re.sub(r"/issues/comments/\d+$", "/issues/comments/{id}", path)
        return f"{method} {re.sub(r'^/repos/[^/]+/[^/]+', '', path)}"

    return collections.Counter(endpoint(r.method, r.path) for r in gh.requests)


def test_the_first_review_of_a_100_file_pr_costs_eight_requests(gh: FakeGitHub, tmp_path: Path) -> None:
    pull_with(gh, 100)
    report = review(tmp_path, gh)
    assert per_endpoint(gh) == FIRST_RUN
    assert report["snapshot"]["merge_base"] == BASE  # type: ignore[index]


def test_without_a_state_key_the_new_comment_is_edited_once_to_name_itself(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    pull_with(gh, 100)
    review(tmp_path, gh, key=False)
    assert per_endpoint(gh) == {**FIRST_RUN, "PATCH /issues/comments/{id}": 1}


def test_ci_is_read_in_the_graphql_query_not_through_rest(gh: FakeGitHub, tmp_path: Path) -> None:
    pull_with(gh, 3)
    gh.add_check_run(REPO, HEAD, "tests", conclusion="failure")
    report = review(tmp_path, gh)
    assert report["snapshot"]["ci"]["state"] == "failure"  # type: ignore[index]
    assert not gh.requests_to("GET", r"/status$") and not gh.requests_to("GET", r"/check-runs$")
    assert per_endpoint(gh)["POST /graphql"] == 1


def test_after_a_push_the_sticky_found_at_the_start_is_edited(gh: FakeGitHub, tmp_path: Path) -> None:
    pull_with(gh, 3)
    review(tmp_path, gh)
    gh.requests.clear()
    gh.set_head(REPO, 7, HEAD2)
    review(tmp_path, gh)
    again = per_endpoint(gh)
    assert again["GET /issues/7/comments"] == 1, again
    assert again["PATCH /issues/comments/{id}"] == 1 and again["POST /issues/7/comments"] == 0
    assert again["GET /contents/.github/imreview.yml"] == 0, "the config came in the GraphQL query"
    assert sum(again.values()) <= 10, again


def test_a_rerun_at_the_same_head_reads_the_config_before_the_diff(gh: FakeGitHub, tmp_path: Path) -> None:
    """Only the config hash can tell whether the review is the same: read first, nothing else."""
    gh.add_pull(
        REPO, 7, head_sha=HEAD, base_sha=BASE, files=[diff_entry("src/m.py", BREAKPOINT)], changed_files=1
    )
    argv = ["pr", f"{REPO}#7", "--post-comment", "--skip-reviewed"]
    env = cli_environment(tmp_path, gh)
    first = run_cli(argv, cwd=tmp_path, env=env)
    assert first.returncode in (0, 1), first.stderr
    gh.requests.clear()
    again = run_cli(argv, cwd=tmp_path, env=env)
    assert again.returncode in (0, 1) and "already reviewed" in again.stdout + again.stderr
    assert per_endpoint(gh) == {
        "GET /pulls/7": 1,
        "GET /contents/.github/imreview.yml": 1,
        "GET /issues/7/comments": 1,
    }


def test_with_a_model_repository_context_costs_a_tree_listing_and_two_queries(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    """600 other files at the head: context reads 500 of them in two queries, whatever their number."""
    pull_with(gh, 100, others=600)
    review(tmp_path, gh, model)
    counts = per_endpoint(gh)
    reserved = {  # max-pr-cost-usd: the comment is created holding the run's allowance before the
        # model is called, then listed again and edited with the review (docs/state-and-caps.md)
        "GET /issues/7/comments": 3,
        "PATCH /issues/comments/{id}": 1,
    }
    assert counts == {**FIRST_RUN, "GET /git/trees/{sha}": 1, "POST /graphql": 3, **reserved}, counts


@pytest.mark.parametrize("key", [True, False], ids=["state key", "no state key"])
def test_a_pr_larger_than_the_review_stays_within_15_requests_and_names_the_rest(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path, key: bool
) -> None:
    pull_with(gh, 1000, others=600)
    report = review(tmp_path, gh, model, key=key)
    counts = per_endpoint(gh)
    assert counts["GET /pulls/7/files"] == REVIEW_FILES_LIMIT // 100, counts
    assert counts["POST /graphql"] == 3, counts  # the first 250 files + CI; context: 50 more + 450
    assert sum(counts.values()) <= 15, counts
    assert report["verdict"] == "incomplete"
    gaps = [g for g in report["gaps"] if g["why"] == "too_many_files"]  # type: ignore[union-attr,index]
    assert len(gaps) == 1 and f"first {REVIEW_FILES_LIMIT} of the 1000" in gaps[0]["what"]


def test_reading_threads_for_dismissals_costs_one_query_whatever_their_number(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    """Issue 22: after an inline review, a push's review reads every thread (resolved, replies,
    👎) in ONE GraphQL request, plus one permission read per distinct resolver or reactor."""
    files = [diff_entry(f"src/m{i:04d}.py", PATCH) for i in range(30)]
    gh.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=files, changed_files=30)
    model.handler = lambda body: text(
        '{"verdicts": []}'
        if '"verdicts"' in body["messages"][-1]["content"]
        else json.dumps(
            {
                "findings": [
                    model_finding(path=f"src/m{i:04d}.py", title=f"Division by zero in m{i:04d}")
                    for i in range(30)
                    if f"src/m{i:04d}.py" in body["messages"][-1]["content"]
                ],
                "exclusions": [],
                "signals": [],
            }
        )
    )
    argv = [
        "pr",
        f"{REPO}#7",
        "--post-comment",
        "--inline-comments",
        "--model",
        MODEL,
        "--api-base",
        model.api_base,
    ]
    argv += ["--max-findings", "30"]
    env = cli_environment(tmp_path, gh)
    assert run_cli(argv, cwd=tmp_path, env=env).returncode in (0, 1)
    threads = gh.review_comment_ids(REPO, 7)
    assert len(threads) >= 10
    for first in threads:
        gh.resolve_thread(first, by="lead")
        gh.react_as("review", first, login="lead")
    gh.set_permission(REPO, "lead", "write")
    gh.requests.clear()
    gh.set_head(REPO, 7, HEAD2)
    report = tmp_path / "after.json"
    assert run_cli([*argv, "--json", str(report)], cwd=tmp_path, env=env).returncode in (0, 1)
    counts = per_endpoint(gh)
    threads_read = [r for r in gh.graphql_requests() if "reviewThreads" in r.body["query"]]
    assert len(threads_read) == 1, counts
    assert counts["GET /collaborators/lead/permission"] == 1, counts
    dismissed = json.loads(report.read_text(encoding="utf-8"))["dismissed"]
    assert len(dismissed) == len(threads), "every thread's finding dismissed, each once"
