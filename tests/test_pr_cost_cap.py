"""`max-pr-cost-usd` holds under any pattern of pushes (issue 21, item 3).

A PR is reviewed again and again while its author pushes: before a run, during a model call (the
head moves, so the gate publishes nothing), or during a call with the run cancelled there (the
`concurrency: cancel-in-progress` of the pull_request example: the job is killed, here with
SIGKILL in a forked process, so nothing of ours runs after it). What the PR cost is counted where
a provider would bill it: at the loopback model server, for every request it answered. Whatever the
timings, that never passes the cap, and the sticky state never records less than was billed.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer.config import Overrides
from reviewer.pull import PullJob, SkipRules, review_pull
from reviewer.source.github import GitHubClient
from reviewer.state import StickyState, sign_sticky, state_key
from tests.factories import fake_github, github_client, model_answer
from tests.fakes.github_server import FakeGitHub, diff_entry
from tests.fakes.model_server import FakeModelServer, Reply, text

REPO = "octo-org/widgets"
TOKEN = "fake-token"
MODEL = "openai/fake-model"
BASE = "b0" * 20
KEY = "cap-test-state-key-0123456789abcdefgh"
PRICES = "prices:\n  openai/fake-model:\n    input_usd_per_mtok: 10\n    output_usd_per_mtok: 20\n"
PROMPT_TOKENS = 200  # below any real prompt of ours: the ledger's estimate always covers it
ANSWER_TOKENS = 3000


def sha(n: int) -> str:
    return f"a{n:039x}"


def files_at(n: int) -> list[dict[str, Any]]:
    return [diff_entry("m.py", f"@@ -1,2 +1,3 @@\n x = {n}\n+y = x * {n}\n z = 1")]


def billed(body: dict[str, Any]) -> float:
    answer = min(ANSWER_TOKENS, int(body.get("max_tokens") or ANSWER_TOKENS))
    return (PROMPT_TOKENS * 10 + answer * 20) / 1_000_000


@dataclass
class Provider:
    """The model server's side of the bill, and what the author does when a call arrives."""

    spent: float = 0.0
    calls: int = 0
    on_call: dict[int, str] = field(default_factory=dict)  # call number in this run → push | cancel
    push: Any = None
    victim: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.calls += 1
            self.spent += billed(body)
            what = self.on_call.get(self.calls)
        if what is not None:
            self.push()
        if what == "cancel" and self.victim:
            os.kill(self.victim, signal.SIGKILL)
        answer = min(ANSWER_TOKENS, int(body.get("max_tokens") or ANSWER_TOKENS))
        return text(model_answer(), prompt_tokens=PROMPT_TOKENS, completion_tokens=answer)


JOBS = multiprocessing.get_context("forkserver")
JOBS.set_forkserver_preload(["litellm", "reviewer.pull", "reviewer.review", "reviewer.llm"])


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[FakeGitHub, FakeModelServer]]:
    with fake_github({TOKEN: {"login": "alice"}}, repo=REPO) as gh, FakeModelServer() as model:
        yield gh, model


def job(cap: float, model: FakeModelServer, number: int) -> PullJob:
    return PullJob(
        repo=REPO,
        number=number,
        overrides=Overrides(model=MODEL, api_base=model.api_base, max_cost_usd=0.2, max_calls=4),
        skip=SkipRules(reviewed=True),
        post_comment=True,
        inline_comments=True,
        max_pr_cost_usd=cap,
    )


def _one_run(api_url: str, pull: PullJob) -> None:
    """The job's process: started by a fork server that imported litellm once, so a run starts fast."""
    os.environ["IMREVIEW_STATE_KEY"] = KEY
    client = GitHubClient(TOKEN, api_url, seconds_between_writes=0)
    review_pull(client, pull, warn=lambda message: print(message, file=sys.stderr))


def run_job(gh: FakeGitHub, pull: PullJob, provider: Provider) -> None:
    """One run of the Action's review step, in its own process (a cancel kills it outright)."""
    process = JOBS.Process(target=_one_run, args=(gh.url, pull))
    process.start()
    provider.victim = process.pid or 0
    process.join(120)
    provider.victim = 0
    assert process.exitcode in (0, -signal.SIGKILL), (
        f"a run that was not cancelled ended with {process.exitcode}"
    )


def recorded_total(gh: FakeGitHub, number: int) -> float:
    comments = gh.comments(REPO, number)
    if not comments:
        return 0.0
    state = StickyState.parse(comments[0]["body"])
    assert state is not None
    return state.spent()


def earlier_review(gh: FakeGitHub, number: int, total: float) -> StickyState:
    """PR `number` at head sha(2), whose signed sticky comment records a review at sha(1) and `total`."""
    gh.add_pull(REPO, number, head_sha=sha(2), base_sha=BASE, files=files_at(2))
    state = StickyState(
        head=sha(1), base=BASE, config="x", verdict="clean", cost_usd=total, total_cost_usd=total
    )
    body = sign_sticky(
        state.body("## imreview\n\nan earlier review"), repo=REPO, number=number, key=state_key()
    )
    gh.add_comment(REPO, number, body, login="alice")
    return state


RUN = st.lists(st.sampled_from(["quiet", "push_before", "push_during", "cancel"]), min_size=1, max_size=5)
PR_NUMBERS = iter(range(100, 10_000))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=RUN, cap=st.sampled_from([0.1, 0.25, 0.4]))
def test_no_pattern_of_pushes_takes_a_pr_past_max_pr_cost_usd(
    world: tuple[FakeGitHub, FakeModelServer], monkeypatch: pytest.MonkeyPatch, runs: list[str], cap: float
) -> None:
    gh, model = world
    monkeypatch.setenv("IMREVIEW_STATE_KEY", KEY)
    number = next(PR_NUMBERS)
    heads = iter(range(number * 100, number * 100 + 100))
    first = next(heads)
    gh.add_pull(REPO, number, head_sha=sha(first), base_sha=BASE, files=files_at(first))
    gh.add_content(REPO, BASE, ".github/imreview.yml", PRICES)

    def push() -> None:
        n = next(heads)
        gh.set_head(REPO, number, sha(n), files=files_at(n))

    provider = Provider(push=push)
    model.handler = provider.answer
    for what in runs:
        if what == "push_before":
            push()
        provider.calls = 0
        provider.on_call = {1: "push"} if what == "push_during" else {1: "cancel"} if what == "cancel" else {}
        before = provider.spent
        was = recorded_total(gh, number)
        run_job(gh, job(cap, model, number), provider)
        if was >= cap:
            assert provider.spent == before, "a PR whose recorded cost reached the cap is not reviewed"
        assert provider.spent <= cap + 1e-9, (runs, provider.spent)
        assert recorded_total(gh, number) >= provider.spent - 1e-6, (
            "the state never records less than was billed"
        )
    assert provider.spent > 0


def test_a_pr_whose_cost_is_exactly_the_cap_is_not_reviewed_again(
    world: tuple[FakeGitHub, FakeModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    gh, model = world
    monkeypatch.setenv("IMREVIEW_STATE_KEY", KEY)
    number = 9001
    gh.add_content(REPO, BASE, ".github/imreview.yml", PRICES)
    earlier_review(gh, number, 0.25)
    provider = Provider()
    model.handler = provider.answer
    writes = len([r for r in gh.requests if r.method != "GET"])
    client = github_client(gh, TOKEN)
    outcome = review_pull(client, job(0.25, model, number), warn=lambda message: None)
    assert (outcome.verdict, outcome.reason) == ("skipped", "pr_cost_cap")
    assert provider.calls == 0
    assert len([r for r in gh.requests if r.method != "GET"]) == writes, "nothing is written either"

    earlier_review(gh, number + 1, 0.25 - 0.000001)
    outcome = review_pull(client, job(0.25, model, number + 1), warn=lambda message: None)
    assert outcome.reason != "pr_cost_cap", "a millionth of a dollar left is not the cap reached"
    assert provider.calls == 0, "but no call fits in it"


def test_a_run_that_crashes_after_spending_records_what_it_spent(
    world: tuple[FakeGitHub, FakeModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the reservation (a GitHub error mid-review, a bug) settles the reservation to
    the real spend: the PR is neither left charged its whole allowance nor charged nothing."""
    import reviewer.review as review_module

    gh, model = world
    monkeypatch.setenv("IMREVIEW_STATE_KEY", KEY)
    number = 9101
    gh.add_pull(REPO, number, head_sha=sha(2), base_sha=BASE, files=files_at(2))
    gh.add_content(REPO, BASE, ".github/imreview.yml", PRICES)
    provider = Provider()
    model.handler = provider.answer
    real_analyse = review_module.analyse

    def crashes_after_spending(*args: Any, **kwargs: Any) -> Any:
        real_analyse(*args, **kwargs)
        raise RuntimeError("crash after spending")

    monkeypatch.setattr(review_module, "analyse", crashes_after_spending)
    client = github_client(gh, TOKEN)
    with pytest.raises(RuntimeError, match="crash after spending"):
        review_pull(client, job(1.0, model, number), warn=lambda message: None)
    assert provider.calls > 0 and provider.spent > 0
    assert recorded_total(gh, number) == pytest.approx(provider.spent, abs=1e-5)
    assert recorded_total(gh, number) < 0.2, "not the whole allowance"


def test_a_run_that_cannot_be_priced_keeps_the_total_of_the_runs_before_it(
    world: tuple[FakeGitHub, FakeModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    gh, model = world
    monkeypatch.setenv("IMREVIEW_STATE_KEY", KEY)
    number = 9201
    earlier_review(gh, number, 0.1)
    provider = Provider()
    model.handler = provider.answer
    client = github_client(gh, TOKEN)
    priced = job(1.0, model, number)
    unpriced = dataclasses.replace(
        priced, overrides=dataclasses.replace(priced.overrides, model="openai/no-price-known")
    )
    review_pull(client, unpriced, warn=lambda message: None)
    assert provider.calls > 0
    assert recorded_total(gh, number) == pytest.approx(0.1), "the cap does not start over"
