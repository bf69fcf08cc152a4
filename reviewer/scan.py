"""`imreview scan` and the Action's `schedule` mode: open PRs → reviews inside one run budget, or a
fan-out matrix.

Cheap triage first (`GITHUB_TOKEN` has 1,000 requests an hour): drafts, bots and unlabelled PRs
are dropped from the listing itself, and the sticky states of the rest come from one
repository-wide comment listing, so an unchanged PR costs no request of its own and no model call.
Cost and seconds are shared by the run, tokens and calls stay per PR; a PR whose planned cost no
longer fits what the run has left is deferred (listed, never half-reviewed), as are PRs past
`scan-limit`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from reviewer.budget import Budget, Limits, Price, minimal_call_cost
from reviewer.config import Config, config_hash
from reviewer.errors import GitHubError, Retryable, UsageError
from reviewer.events import skip_reason
from reviewer.publish import stickies_by_pull
from reviewer.pull import (
    ListedComments,
    PrOutcome,
    PullJob,
    base_templates,
    config_at,
    failed,
    find_prior,
    is_same_review,
    review_pull,
    run_text,
)
from reviewer.render import Renderer
from reviewer.review import planned_cost
from reviewer.state import StickyState

if TYPE_CHECKING:
    from reviewer.source import Change
    from reviewer.source.github import GitHubClient, PullInfo

MATRIX_MAX = 256
"""GitHub runs at most 256 jobs from one matrix."""
COMMENT_PAGES = 10
"""Repository-wide comment pages read for sticky states (1,000 comments); past that, a PR's own
comments are read when it comes up for review (by a plan job, while its matrix has room)."""
Status = Literal["reviewed", "skipped", "deferred", "failed", "planned"]


@dataclass(frozen=True)
class ScanSettings:
    """What to scan: `job.repo`, skipping drafts and bots as `job.skip` says. `job` is the template
    every PR's `PullJob` is made from (its number is replaced). `plan_only`: review nothing; the PRs
    that need a review become the matrix (a fan-out job, or the list `imreview scan` prints without
    `--review`). `config_ref` is where config and templates are read (None: the default branch)."""

    job: PullJob
    limit: int = 20
    labels: tuple[str, ...] = ()
    plan_only: bool = False
    config_ref: str | None = None


@dataclass(frozen=True)
class ScanRow:
    """One open PR in the run's table. `reason` is a machine code; `outcome` is set when reviewed."""

    number: int
    title: str
    url: str
    status: Status
    reason: str = ""
    outcome: PrOutcome | None = None


@dataclass(frozen=True)
class ScanResult:
    repo: str
    rows: tuple[ScanRow, ...]
    matrix: tuple[int, ...]
    cost_usd: float | None
    seconds: float
    cost_limit: float
    seconds_limit: float

    @property
    def outcomes(self) -> list[PrOutcome]:
        """The PRs reviewed in this run (or found unreadable): what the step outputs aggregate."""
        return [r.outcome for r in self.rows if r.outcome is not None and r.status in ("reviewed", "failed")]

    def matrix_json(self) -> str:
        return json.dumps({"include": [{"pr": n} for n in self.matrix]}, separators=(",", ":"))


def scan(
    client: GitHubClient,
    settings: ScanSettings,
    *,
    warn: Callable[[str], None],
    notices: TextIO | None = None,
) -> ScanResult:
    """Triage every open PR, then review (or plan a matrix of) those that need it. Config and
    templates are read once, so that no PR is judged with another config than the rest."""
    job = settings.job
    config = config_at(client, job, lambda: (job.repo, settings.config_ref))
    templates = job.templates or (Path(config.template_dir) if config.template_dir else None)
    if job.base_template_dir:
        where = (job.scratch or Path("/tmp/imreview")) / "templates-scan"
        templates = base_templates(
            client, job.repo, settings.config_ref, job.base_template_dir, where, config.language
        )
    renderer = Renderer(language=config.language, template_dir=templates)
    job = dataclasses.replace(job, config=config, templates=templates)
    rows: dict[int, ScanRow] = {}  # the PRs settled so far, stage by stage
    pulls = _listed(client, settings, rows)
    pulls = _stale(client, settings, config_hash(config, renderer.templates_digest()), pulls, rows)
    run = Budget(Limits.shared_by_run(config.limits))  # the parent of every PR's budget
    matrix: list[int] = []
    if settings.plan_only:
        matrix = _planned(pulls, settings.limit, rows)
    else:
        _reviewed(client, settings.limit, job, config, renderer, pulls, run, rows, warn, notices)
    spent = run.spent().cost_usd
    return ScanResult(
        repo=job.repo,
        rows=tuple(sorted(rows.values(), key=lambda r: _ROW_ORDER[r.status])),
        matrix=tuple(matrix),
        cost_usd=round(spent, 6) if spent is not None else None,
        seconds=round(run.elapsed(), 1),
        cost_limit=config.limits.cost_usd,
        seconds_limit=config.limits.seconds,
    )


def _row(pull: PullInfo, status: Status, reason: str = "", outcome: PrOutcome | None = None) -> ScanRow:
    return ScanRow(pull.number, pull.title, pull.url, status, reason, outcome)


def _listed(client: GitHubClient, settings: ScanSettings, rows: dict[int, ScanRow]) -> list[PullInfo]:
    """The open PRs, with drafts, bots and unlabelled PRs skipped from the listing alone."""
    candidates: list[PullInfo] = []
    labels = set(settings.labels)
    for pull in client.open_pull_list(settings.job.repo):
        policy = skip_reason(
            settings.job.skip,
            state="open",
            draft=pull.draft,
            author=pull.author,
            author_type=pull.author_type,
        )
        reason = policy.code if policy else "label" if labels and not labels & set(pull.labels) else ""
        if reason:
            rows[pull.number] = _row(pull, "skipped", reason)
        else:
            candidates.append(pull)
    return candidates


def _stale(
    client: GitHubClient, settings: ScanSettings, digest: str, pulls: list[PullInfo], rows: dict[int, ScanRow]
) -> list[PullInfo]:
    """The PRs whose sticky state says they need a review: not this head with this config already,
    and not past the per-PR cost cap."""
    repo, cap = settings.job.repo, settings.job.max_pr_cost_usd
    states, listed_all = _sticky_states(client, repo, pulls) if pulls else ({}, True)
    to_review: list[PullInfo] = []
    for pull in pulls:
        state = states.get(pull.number)
        if state is None and not listed_all and settings.plan_only and len(to_review) < settings.limit:
            # the listing was cut: anyone can push our stickies past its pages with newer comments, and a
            # reviewed PR read as new would take a matrix job and a `scan-limit` slot from one that needs
            # a review. Its own comments, while the matrix has room (unread: the review job decides).
            state = find_prior(client, repo, pull.number, ListedComments(client.viewer_login(), None)).state
        if is_same_review(state, head_sha=pull.head_sha, config_digest=digest):
            rows[pull.number] = _row(pull, "skipped", "already_reviewed")
        elif cap > 0 and state is not None and (state.total_cost_usd or 0.0) >= cap:
            rows[pull.number] = _row(pull, "skipped", "pr_cost_cap")
        else:
            to_review.append(pull)
    return to_review


def _planned(pulls: Sequence[PullInfo], limit: int, rows: dict[int, ScanRow]) -> list[int]:
    """The fan-out: the first `limit` PRs (at most `MATRIX_MAX`) are the matrix."""
    cap = min(max(limit, 0), MATRIX_MAX)
    matrix: list[int] = []
    for pull in pulls:
        if len(matrix) < cap:
            matrix.append(pull.number)
            rows[pull.number] = _row(pull, "planned", "matrix")
        else:
            rows[pull.number] = _row(
                pull, "deferred", "matrix_cap" if len(matrix) >= MATRIX_MAX else "over_limit"
            )
    return matrix


def _reviewed(
    client: GitHubClient,
    limit: int,
    job: PullJob,
    config: Config,
    renderer: Renderer,
    pulls: Sequence[PullInfo],
    run: Budget,
    rows: dict[int, ScanRow],
    warn: Callable[[str], None],
    notices: TextIO | None,
) -> None:
    """Each PR reviewed in turn inside the run's budget; only reviews done count towards `limit`.
    The longest PR so far is how much time the next one is assumed to need."""
    price = None
    if config.model:
        from reviewer.llm import ModelClient

        price = ModelClient(config, Budget(config.limits), warn=warn, say=renderer.translate).price(
            config.model
        )
    reviewed = 0
    longest_pr = 0.0
    for pull in pulls:
        if reviewed >= limit:
            rows[pull.number] = _row(pull, "deferred", "over_limit")
            continue
        started = run.elapsed()
        row = _review_one(client, job, pull, run, longest_pr, price, renderer, warn, notices)
        longest_pr = max(longest_pr, run.elapsed() - started)
        if row.status == "reviewed":
            reviewed += 1
        rows[pull.number] = row


def _early_deferral(run: Budget, longest_pr: float, config: Config, price: Price | None) -> str:
    """Why the next PR is deferred before any request for it, or "": the run has less time left than
    its longest PR took, or cannot pay for even one call's prompt."""
    seconds_left = run.seconds_left()
    if seconds_left <= 0 or seconds_left < longest_pr:
        return "seconds"
    cost_left = run.left().cost_usd
    if config.limits.cost_usd <= 0 or cost_left <= 0:
        return "budget"
    if price is not None and minimal_call_cost(price) > cost_left:
        return "budget"
    return ""


def _pulls(result: ScanResult) -> list[dict[str, Any]]:
    """A row per open PR, as `imreview scan --json` writes it."""
    return [
        {
            "number": r.number,
            "title": r.title,
            "url": r.url,
            "status": r.status,
            "reason": r.reason,
            "verdict": r.outcome.verdict if r.outcome is not None else None,
            "findings": r.outcome.findings if r.outcome is not None else None,
            "cost_usd": r.outcome.cost_usd if r.outcome is not None else None,
            "comment_url": (r.outcome.comment_url or None) if r.outcome is not None else None,
        }
        for r in result.rows
    ]


def scan_json(result: ScanResult) -> str:
    """`imreview scan --json`: the run's rows, totals and matrix (schema `imreview.scan/v1`)."""
    data = {
        "schema": "imreview.scan/v1",
        "repo": result.repo,
        "cost_usd": result.cost_usd,
        "seconds": result.seconds,
        "limits": {"cost_usd": result.cost_limit, "seconds": result.seconds_limit},
        "matrix": {"include": [{"pr": n} for n in result.matrix]},
        "pulls": _pulls(result),
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def summary(result: ScanResult, renderer: Renderer) -> str:
    """The run's table (templates/run.md.j2, kind `scan`): a row per open PR, then the totals."""
    rows = [
        {
            **row,
            "verdict": row["verdict"] if row["status"] == "reviewed" else "",
            "findings": row["findings"] or 0,
            "cost": row["cost_usd"],
            "comment_url": row["comment_url"] or "",
        }
        for row in _pulls(result)
    ]
    return run_text(
        renderer,
        "scan",
        repo=result.repo,
        rows=rows,
        totals={status: sum(1 for r in result.rows if r.status == status) for status in _ROW_ORDER},
        matrix=list(result.matrix),
        cost=result.cost_usd,
        cost_limit=result.cost_limit,
        seconds=result.seconds,
        seconds_limit=result.seconds_limit,
    )


_ROW_ORDER = {"reviewed": 0, "failed": 1, "planned": 2, "deferred": 3, "skipped": 4}


def _sticky_states(
    client: GitHubClient, repo: str, pulls: Sequence[PullInfo]
) -> tuple[dict[int, StickyState], bool]:
    """The sticky state of each PR from one repository-wide listing, and whether it was complete; a
    sticky is never older than its PR, so older comments are not read."""
    login = client.viewer_login()
    opened = [when for when in (_when(p.created_at) for p in pulls) if when is not None]
    since = min(opened) if len(opened) == len(pulls) and opened else None
    comments, complete = client.repo_issue_comments(repo, since=since, max_pages=COMMENT_PAGES)
    wanted = {p.number for p in pulls}
    found = stickies_by_pull(((n, c) for n, c in comments if n in wanted), login, repo=repo)
    states = {n: StickyState.parse(c.body) for n, c in found.items()}
    return {n: s for n, s in states.items() if s is not None}, complete


def _when(stamp: str) -> datetime | None:
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _review_one(
    client: GitHubClient,
    job: PullJob,
    pull: PullInfo,
    run: Budget,
    longest_pr: float,
    price: Price | None,
    run_renderer: Renderer,
    warn: Callable[[str], None],
    notices: TextIO | None,
) -> ScanRow:
    """One PR's review as a child of the run's budget; whatever goes wrong in it is its row."""
    if job.config is not None:
        early = _early_deferral(run, longest_pr, job.config, price)
        if early:
            return _row(pull, "deferred", early)
    client.wait_within(run.seconds_left())
    ledger = Budget(Limits.unbounded(), parent=run)  # this PR's own calls, whatever becomes of its review
    try:
        outcome = review_pull(
            client,
            dataclasses.replace(job, number=pull.number),
            warn=warn,
            notices=notices,
            parent=ledger,
            admit=functools.partial(_admit, run, longest_pr, price, run_renderer),
        )
    except Retryable as exc:
        warn(f"imreview: #{pull.number} deferred: {exc}")
        return _row(pull, "deferred", "rate_limited")
    except UsageError:
        raise
    except Exception as exc:  # unreadable, or unexpected in one PR: the scan goes on with the others
        if not isinstance(exc, GitHubError):
            warn(f"imreview: #{pull.number} failed: {type(exc).__name__}: {exc}")
        cost = ledger.spent().cost_usd
        outcome = failed(pull.number, exc, run_renderer, on_error=job.overrides.on_error or "warn")
        outcome = dataclasses.replace(outcome, cost_usd=None if cost is None else round(cost, 6))
        return _row(pull, "failed", outcome.reason, outcome)
    if outcome.report is not None:
        return _row(pull, "reviewed", "", outcome)
    if outcome.reason in ("budget", "seconds", "rate_limited"):  # the run ran short
        return _row(pull, "deferred", outcome.reason)
    return _row(pull, "skipped", outcome.reason, outcome)


def _admit(
    run: Budget, longest_pr: float, price: Price | None, renderer: Renderer, change: Change, config: Config
) -> str:
    """`review_pull`'s `admit`: once a PR's change and config are known, whether the run can still
    pay for its planned cost; a reason to defer it, or "" to go on."""
    early = _early_deferral(run, longest_pr, config, price)
    if early:
        return early
    needed = planned_cost(change, config, renderer=renderer)
    if needed is not None and needed > run.left().cost_usd:
        return "budget"
    return ""
