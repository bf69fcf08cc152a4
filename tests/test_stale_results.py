"""Results stay honest: a carried finding does not outlive a re-review that no longer finds it, a
compare listing that may be cut off is not trusted, and a file the window could not hold whole is
never `clean` (issue 21's survivors)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reviewer.config import Overrides
from reviewer.incremental import COMPARE_FILES_CAP, compare_reason
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import fake_github, github_client, model_answer, review_args
from tests.fakes.github_server import FakeGitHub
from tests.fakes.model_server import FakeModelServer, Reply, text
from tests.test_incremental import APP_BASE, EVAL, FINDINGS, REPO, TOKEN, UTIL_BASE, Pr, report_of, review


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("IMREVIEW_STATE_KEY", "stale-results-key-0123456789abcdefghij")
    with fake_github({TOKEN: {"login": "alice"}}, repo=REPO) as server:
        yield server


def reviewer_satisfied_by_a_guard(body: dict[str, Any]) -> Reply:
    """Reports the eval while the hunk shows no allow-list check; once it does, finds nothing."""
    prompt = body["messages"][-1]["content"]
    if '"verdicts"' in prompt:
        return text('{"verdicts": []}')
    if "ALLOWED" in prompt:
        return text(model_answer())
    for row in prompt.splitlines():
        if row.rstrip().endswith("return eval(cmd)") and row.split()[0].isdigit():
            found = {**FINDINGS["return eval(cmd)"], "line": int(row.split()[0])}
            return text(model_answer(found))
    return text(model_answer())


def test_a_carried_finding_is_dropped_when_its_hunk_is_re_reviewed_without_it(
    tmp_path: Path, gh: FakeGitHub
) -> None:
    pr = Pr(tmp_path, gh)
    with FakeModelServer(handler=reviewer_satisfied_by_a_guard) as model:
        head = pr.git.commit({"app.py": EVAL + APP_BASE}, "feature")
        pr.open(head)
        first = report_of(review(gh, model, fail_on="P1"))
        assert [f.title for f in first.findings] == ["eval of caller input"]

        # the fix guards the call: the quoted line itself is unchanged, so the finding could carry
        guard = "    if cmd not in ALLOWED:\n        raise ValueError(cmd)\n"
        guarded = "def run(cmd):\n" + guard + "    return eval(cmd)\n"
        pr.push(pr.git.commit({"app.py": guarded + APP_BASE}, "allow-list"))
        outcome = review(gh, model, fail_on="P1")

    report = report_of(outcome)
    inc = report.incremental
    assert inc is not None and (inc.mode, inc.findings_dropped) == ("incremental", 1)
    assert report.findings == ()
    assert report.verdict == "clean", "the fixed bug no longer fails the job"
    (comment,) = gh.comments(REPO, 7)
    assert "eval of caller input" not in comment["body"]


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (COMPARE_FILES_CAP - 1, None),
        (COMPARE_FILES_CAP, "compare_too_large"),  # exactly 300: GitHub may have cut the list there
        (COMPARE_FILES_CAP + 1, "compare_too_large"),
    ],
)
def test_a_compare_listing_of_300_files_is_not_trusted_as_complete(files: int, reason: str | None) -> None:
    assert COMPARE_FILES_CAP == 300
    assert compare_reason("ahead", files) == reason
    for status in ("diverged", "behind", "identical"):  # not a plain push: a force-push or a rebase
        assert compare_reason(status, files) == "force_push"


def test_a_push_of_exactly_300_files_is_a_full_review(tmp_path: Path, gh: FakeGitHub) -> None:
    pr = Pr(tmp_path, gh)
    with FakeModelServer(handler=lambda body: text(model_answer())) as model:
        pr.open(pr.git.commit({"util.py": UTIL_BASE + "# one\n"}, "feature"))
        review(gh, model, max_calls=1)  # the same limits both times: a change of config is a full review
        touched = {f"gen/f{n:03d}.py": f"x = {n}\n" for n in range(COMPARE_FILES_CAP - 1)}
        pr.push(pr.git.commit({"util.py": UTIL_BASE + "# two\n", **touched}, "a big push"))
        report = report_of(review(gh, model, max_calls=1))
    inc = report.incremental
    assert inc is not None and (inc.mode, inc.reason) == ("full", "compare_too_large")


def test_a_file_with_a_line_too_long_for_the_window_is_never_clean(repo: Repo, tmp_path: Path) -> None:
    config = "context_window: 3000\nmax_output_tokens_per_call: 256\n"
    repo.commit({"app.py": "x = 1\n", ".github/imreview.yml": config}, "base")
    repo.branch("feature")
    lines = [f"value_{n} = compute(x, {n})" for n in range(60)]  # short lines: not a minified file
    lines.insert(30, "TABLE = " + repr(" ".join(f"word{n}" for n in range(1500))))  # ~4,000 tokens
    repo.commit({"app.py": "x = 1\n" + "\n".join(lines) + "\n"}, "feature")
    out = tmp_path / "r.json"
    with FakeModelServer(handler=lambda body: text(model_answer())) as model:
        proc = run_cli(
            review_args(repo.path, model.api_base, "--json", str(out), "--exclude", ".github/**"),
            cwd=tmp_path,
            env=cli_env(tmp_path),
        )
        assert model.requests, "the lines that fit were reviewed"
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    (app,) = [f for f in report["coverage"]["files"] if f["path"] == "app.py"]
    assert (app["status"], app["reason"]) == ("partial", "context_window")
    assert report["verdict"] == "incomplete"


@pytest.mark.parametrize(
    ("parsed", "gapped", "ready"),
    [(3, 0, True), (2, 1, True), (2, 0, False), (1, 1, False)],
)
def test_every_model_answer_is_parsed_or_reported_as_a_gap_before_publishing(
    parsed: int, gapped: int, ready: bool
) -> None:
    """Three answers expected: one missing and not reported as a gap blocks publishing."""
    from reviewer.gate import evaluate
    from reviewer.render import Renderer
    from tests.test_gate import _budget, _cov

    gate = evaluate(
        pinned_head="a" * 40,
        current_head="a" * 40,
        coverage=_cov(("reviewed", None)),
        answers_expected=3,
        answers_parsed=parsed,
        answers_gapped=gapped,
        budget=_budget(calls=3),
        say=Renderer().translate,
    )
    (check,) = [c for c in gate.checks if c.name == "answers_parsed"]
    assert check.ok == ready


def test_an_incomplete_review_at_the_same_head_is_reviewed_again(tmp_path: Path, gh: FakeGitHub) -> None:
    """The model was down for the first run (incomplete): a rerun at the same head, with skips of
    reviewed heads on, reviews it instead of calling it done."""
    from reviewer.events import SkipRules
    from reviewer.pull import PullJob, review_pull
    from tests.fakes.model_server import status

    pr = Pr(tmp_path, gh)
    pr.open(pr.git.commit({"util.py": UTIL_BASE + "# one\n"}, "feature"))
    answers: list[Reply] = [status(401, message="invalid api key")]
    with FakeModelServer(handler=lambda body: answers[0]) as model:
        job = PullJob(
            repo=REPO,
            number=7,
            overrides=Overrides(model="openai/fake-model", api_base=model.api_base),
            skip=SkipRules(reviewed=True),
            post_comment=True,
        )
        client = github_client(gh, TOKEN)
        first = review_pull(client, job, warn=lambda message: None)
        assert first.verdict == "incomplete"
        answers[0] = text(model_answer())
        called = len(model.requests)
        again = review_pull(client, job, warn=lambda message: None)
        assert len(model.requests) > called, "the rerun called the model"
    assert again.verdict == "clean"


def test_a_carried_finding_is_never_posted_inline_even_when_inline_comments_were_off_before(
    tmp_path: Path, gh: FakeGitHub
) -> None:
    """Inline comments turned on between two runs: the push's review posts inline only what it
    found now; the finding carried from the earlier run stays in the comment, not in a new review."""
    from reviewer.events import SkipRules
    from reviewer.pull import PullJob, review_pull
    from tests.test_incremental import consistent_reviewer

    pr = Pr(tmp_path, gh)
    with FakeModelServer(handler=consistent_reviewer) as model:

        def run(inline: bool) -> Any:
            job = PullJob(
                repo=REPO,
                number=7,
                overrides=Overrides(model="openai/fake-model", api_base=model.api_base),
                skip=SkipRules(),
                post_comment=True,
                inline_comments=inline,
            )
            client = github_client(gh, TOKEN)
            return report_of(review_pull(client, job, warn=lambda message: None))

        pr.open(pr.git.commit({"app.py": EVAL + APP_BASE}, "feature"))
        first = run(inline=False)
        assert [f.title for f in first.findings] == ["eval of caller input"] and gh.reviews(REPO, 7) == []
        pr.push(pr.git.commit({"app.py": EVAL + APP_BASE + "def late(x):\n    return x * 99\n"}, "push"))
        second = run(inline=True)
    assert second.incremental is not None and second.incremental.mode == "incremental"
    assert [f.carried_from for f in second.findings] == [first.snapshot.head.sha]
    assert [r["comments"] for r in gh.reviews(REPO, 7)] in ([], [[]]), (
        "the carried finding is not posted inline"
    )
