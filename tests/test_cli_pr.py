"""`imreview pr OWNER/REPO#N` end to end: the CLI as a subprocess against the loopback fake GitHub."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli_env, run_cli
from tests.factories import fake_github, model_answer, model_finding
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, text

REPO = "octo-org/widgets"
TOKEN = "fake-user-token"
MODEL = "openai/fake-model"
BASE = "b0" * 20
HEAD = "a1" * 20
HEAD2 = "c2" * 20
PATCH = "@@ -1,3 +1,4 @@\n def div(a, b):\n-    return 0\n+    total = a / b\n+    return total\n # end"
DEBUG_PATCH = "@@ -1,2 +1,3 @@\n x = 1\n+breakpoint()\n y = 2"
MARKER = "<!-- imreview:state v1 "
FINDING = model_finding()  # the division by zero in app.py line 2 that PATCH adds


def answer(body: dict[str, Any]) -> Reply:
    if '"verdicts"' in body["messages"][-1]["content"]:
        return text('{"verdicts": []}')
    return text(model_answer(FINDING))


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with fake_github({TOKEN: {"login": "alice"}}) as server:
        server.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=[diff_entry("app.py", PATCH)])
        yield server


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(handler=answer) as server:
        yield server


def pr(tmp_path: Path, gh: FakeGitHub, model: FakeModelServer | None, *args: str):
    env = cli_env(
        tmp_path,
        {
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_API_URL": gh.url,
            "IMREVIEW_STATE_KEY": "cli-pr-state-key-0123456789abcdefghij",
        },
    )
    model_args = ["--model", MODEL, "--api-base", model.api_base] if model else []
    return run_cli(["pr", f"{REPO}#7", *model_args, *args], cwd=tmp_path, env=env)


def state_of(body: str) -> dict[str, Any]:
    last = body.rstrip().rpartition("\n")[2]
    assert last.startswith(MARKER) and last.endswith(" -->"), last
    return json.loads(last[len(MARKER) : -len(" -->")])


def test_pr_prints_the_summary_and_posts_nothing_unless_asked(
    gh: FakeGitHub, model: FakeModelServer, tmp_path: Path
) -> None:
    proc = pr(tmp_path, gh, model)
    assert proc.returncode == 0, proc.stderr
    assert "Division by zero when b is 0" in proc.stdout and "**findings**" in proc.stdout
    assert f"{REPO}#7" in proc.stdout
    assert [r for r in gh.requests if r.method != "GET" and r.path != "/graphql"] == []
    assert gh.comments(REPO, 7) == []
    assert gh.violations == []


def test_post_comment_creates_the_one_sticky_comment_and_a_later_run_edits_it(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    gh.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=[diff_entry("app.py", DEBUG_PATCH)])
    proc = pr(tmp_path, gh, None, "--post-comment")
    assert proc.returncode == 0, proc.stderr
    (comment,) = gh.comments(REPO, 7)
    assert comment["user"]["login"] == "alice"
    state = state_of(comment["body"])
    assert (state["head"], state["base"], state["findings"]) == (HEAD, BASE, 1)
    assert "Debugger breakpoint left in" in comment["body"]

    gh.set_head(REPO, 7, HEAD2)
    proc = pr(tmp_path, gh, None, "--post-comment")
    assert proc.returncode == 0, proc.stderr
    (edited,) = gh.comments(REPO, 7)
    assert edited["id"] == comment["id"]
    assert state_of(edited["body"])["reviewed_heads"] == [HEAD, HEAD2]
    assert len(gh.requests_to("POST", r"/issues/7/comments$")) == 1
    assert gh.violations == []


def test_bad_target_exits_2_naming_it(tmp_path: Path) -> None:
    proc = run_cli(["pr", "foo"], cwd=tmp_path, env=cli_env(tmp_path, {"GITHUB_TOKEN": TOKEN}))
    assert proc.returncode == 2
    assert "TARGET 'foo'" in proc.stderr and "OWNER/REPO#N" in proc.stderr


def test_missing_token_exits_2(tmp_path: Path) -> None:
    proc = run_cli(["pr", f"{REPO}#7"], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 2
    assert "GITHUB_TOKEN" in proc.stderr
