"""How many GitHub requests one PR review costs (issue 9, targets 3 and 4), counted per endpoint
at the loopback fake GitHub: `imreview pr --post-comment` as a subprocess, no model."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewer.source.github import REVIEW_FILES_LIMIT
from tests.conftest import cli_env, run_cli
from tests.fakes.github_server import FakeGitHub, diff_entry

REPO = "octo-org/widgets"
TOKEN = "ghs_" + "c" * 36  # an installation token, as GITHUB_TOKEN is: no GET /user
BASE = "b0" * 20
HEAD = "a1" * 20
HEAD2 = "c2" * 20
PATCH = "@@ -1,3 +1,4 @@\n def div(a, b):\n-    return 0\n+    total = a / b\n+    return total\n # end"


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_token(TOKEN)
        yield server
    assert server.violations == []


def pull_with(gh: FakeGitHub, count: int) -> None:
    files = [diff_entry(f"src/m{i:04d}.py", PATCH) for i in range(count)]
    gh.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=files, changed_files=count)


def review(tmp_path: Path, gh: FakeGitHub) -> dict[str, object]:
    env = cli_env(
        tmp_path, {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url, "IMREVIEW_STATE_KEY": "counts-state-key"}
    )
    report = tmp_path / "report.json"
    proc = run_cli(["pr", f"{REPO}#7", "--post-comment", "--json", str(report)], cwd=tmp_path, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    data: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return data


def per_endpoint(gh: FakeGitHub) -> collections.Counter[str]:
    def endpoint(method: str, path: str) -> str:
        path = re.sub(r"[0-9a-f]{40}", "{sha}", path)
        return f"{method} {re.sub(r'^/repos/[^/]+/[^/]+', '', path)}"

    return collections.Counter(endpoint(r.method, r.path) for r in gh.requests)


def test_the_comments_are_listed_once_before_writing_and_once_after_creating(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    pull_with(gh, 3)
    review(tmp_path, gh)
    first = per_endpoint(gh)
    assert first["GET /issues/7/comments"] == 2, first  # the start, and the race check after creating
    assert first["POST /issues/7/comments"] == 1

    gh.requests.clear()
    gh.set_head(REPO, 7, HEAD2)
    review(tmp_path, gh)
    again = per_endpoint(gh)
    assert again["GET /issues/7/comments"] == 1, again  # the sticky found at the start is edited
    assert len(gh.requests_to("PATCH", r"/issues/comments/\d+$")) == 1
    assert sum(again.values()) <= 10, again


def test_a_pr_larger_than_the_review_reads_four_pages_and_names_the_rest(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    pull_with(gh, 1000)
    report = review(tmp_path, gh)
    counts = per_endpoint(gh)
    assert counts["GET /pulls/7/files"] == REVIEW_FILES_LIMIT // 100, counts
    assert sum(counts.values()) <= 15, counts
    assert report["verdict"] == "incomplete"
    gaps = [g for g in report["gaps"] if g["why"] == "too_many_files"]  # type: ignore[union-attr,index]
    assert len(gaps) == 1 and f"first {REVIEW_FILES_LIMIT} of the 1000" in gaps[0]["what"]
