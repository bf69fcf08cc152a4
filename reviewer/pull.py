"""One GitHub pull request end to end: read → configure → allot → review → gate → render → publish.

`review_pull` is the only place that reviews a GitHub PR: the Action, `imreview pr` and `imreview
scan` differ only in the `PullJob` they pass. Config and templates are read from the PR's BASE
branch (never its head); PyGithub stays inside `source.github`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from reviewer import gate, incremental
from reviewer.budget import Budget
from reviewer.config import (
    NO_OVERRIDES,
    Config,
    Overrides,
    build_config,
    config_hash,
    env_layer,
    load_config_file,
    parse_config_text,
)
from reviewer.diff import LineIndex
from reviewer.errors import ConfigError, GitHubError
from reviewer.events import SkipRules, skip_reason
from reviewer.incremental import Increment
from reviewer.publish import InlineReview, PullTarget, StickyComment, find_sticky, upsert_sticky
from reviewer.render import Renderer, language_files, run_renderer, template_names
from reviewer.report import PRIORITIES, Incremental, Report, priority_rank
from reviewer.report_files import ReportDir
from reviewer.runner_sinks import (
    READ_ONLY_KEY,
    Annotations,
    Notice,
    ReadOnlyPull,
    Sink,
    annotations_dropped,
    echo_untrusted,
    gate_closed,
    publish_all,
)
from reviewer.state import StickyState, state_key, visible_text

if TYPE_CHECKING:
    from reviewer.review import Analysis
    from reviewer.run import Rendered
    from reviewer.source import Change
    from reviewer.source.github import CommentInfo, GitHubClient, GitHubSource, PullInfo

DEFAULT_CONFIG_PATH = ".github/imreview.yml"
Warn = Callable[[str], None]
NO_SKIPS = SkipRules(explicit=True)
"""`imreview pr` by default: the PR named is reviewed whatever its state."""


@dataclass(frozen=True)
class PullJob:
    """How to handle one PR: where its config and templates come from, which skips and sinks apply.
    `base_template_dir` is read from the base branch (the Action's `template-dir`). `max_pr_cost_usd`:
    what the PR may cost over all its runs, as our sticky comment counts it (0: no cap). `config` and
    `templates`, when set, were resolved once for a whole scan. `forks_read_only`: a cross-repo PR has
    a read-only token (the `pull_request` event): nothing is written to it, the summary says so."""

    repo: str
    number: int
    overrides: Overrides = NO_OVERRIDES
    config_file: str | None = None
    config_path: str = DEFAULT_CONFIG_PATH
    base_template_dir: str | None = None
    env: Mapping[str, str] | None = None
    skip: SkipRules = NO_SKIPS
    post_comment: bool = False
    inline_comments: bool = False
    annotations: bool = False
    forks_read_only: bool = False
    run_id: str | None = None
    scratch: Path | None = None
    config: Config | None = None
    templates: Path | None = None
    max_pr_cost_usd: float = 0.0
    reports: ReportDir | None = None  # report JSON; the Action's goes under the workspace
    full_review: bool = False  # `/imreview full`: no incremental review, whatever the state allows

    def messages(self, language: str | None = None) -> Renderer:
        """The renderer of the run's own messages (skips, failures, command replies, the scan table)
        in `language` or the one given, before the base branch's templates are read."""
        local = self.templates or self.overrides.template_dir
        return run_renderer(language or self.overrides.language, local, unread=bool(self.base_template_dir))


@dataclass(frozen=True)
class PrOutcome:
    """One PR's result: enough for the job summary, the aggregated outputs (DESIGN 10.4) and scan.
    `report` and `rendered` are None when nothing was reviewed; `reason` is then a machine code
    (`draft`, `bot`, `closed`, `already_reviewed`, `unreadable`, `policy`, ...)."""

    number: int
    verdict: str
    summary: str
    publish_ready: bool = False
    findings: int = 0
    p1: int = 0
    max_priority: str = ""
    cost_usd: float | None = 0.0
    report_path: str = ""
    comment_url: str = ""
    exit_code: int = 0
    reason: str = ""
    title: str = ""
    url: str = ""
    report: Report | None = None
    rendered: Rendered | None = None


def review_pull(
    client: GitHubClient,
    job: PullJob,
    *,
    warn: Warn,
    notices: TextIO | None = None,
    parent: Budget | None = None,
    admit: Callable[[Change, Config], str] | None = None,
) -> PrOutcome:
    """Review one PR and publish to it as `job` says; never half-published. The budget is a child of
    `parent` (a scan's run budget) when given; `admit` may refuse the PR once its diff is known (the
    scan cannot pay for it): `skipped` with that reason code. `notices` takes the workflow commands."""
    from reviewer.run import finish

    pr = open_pull(client, job)  # the PR, skip rules, our sticky comment, config and templates, the diff
    if isinstance(pr, PrOutcome):
        return pr
    allotted = allot(client, job, pr, parent=parent, admit=admit)  # the budget and the per-PR cap
    if isinstance(allotted, PrOutcome):
        return allotted
    budget, reservation, pr = allotted
    try:
        analysis = review_units(client, job, pr, budget, warn=warn)  # rules → plan → review units → verify
        report, rendered = finish(analysis, pr.source, pr.config, pr.renderer, prior=pr.prior.state)
        sinks = sinks_for(client, job, pr, analysis.index, notices=notices)
        report = publish_all(sinks, report, rendered, gate_closed=gate_closed(pr.renderer), warn=warn)
    except Exception:
        if reservation is not None:  # the state counts what was really spent, not the whole allowance
            try:
                release_spend(client, job, reservation, budget.spent().cost_usd, pr.renderer, warn=warn)
            except Exception as lost:  # the first failure is the one the run reports
                warn(f"imreview: comment: this run's cost stays counted at its allowance: {lost}")
        raise
    if reservation is not None:
        report = settle_spend(client, job, reservation, report, pr.renderer, warn=warn)
    return reviewed_outcome(job, pr, report, rendered, sinks)


@dataclass(frozen=True)
class PullContext:
    """What every stage after the first reads. `listed`: who we write as and the PR's comments as
    listed at the start (None: nothing is written to the PR)."""

    source: GitHubSource
    info: PullInfo
    read_only: bool
    change: Change
    config: Config
    renderer: Renderer
    prior: PriorReview
    listed: ListedComments | None


def open_pull(client: GitHubClient, job: PullJob) -> PullContext | PrOutcome:
    """The PR, its policy skips, our sticky comment (found once), config and templates from the base,
    the rerun and cap skips, then the diff: its GraphQL query brings the base's config file too (one
    request fewer, issue 9) unless the config must be read first to decide a skip."""
    from reviewer.source.github import REVIEW_FILES_LIMIT, GitHubSource

    repo, number = job.repo, job.number
    source = GitHubSource(
        client, repo, number, run_id=job.run_id, max_files=REVIEW_FILES_LIMIT, config_path=job.config_path
    )
    info = source.pull_info()
    policy = skip_reason(
        job.skip, state=info.state, draft=info.draft, author=info.author, author_type=info.author_type
    )
    if policy is not None:
        plain = job.messages()
        why = policy.words(plain.translate)
        return skipped_outcome(number, why, plain, reason=policy.code, title=info.title, url=info.url)
    read_only = job.forks_read_only and info.cross_repo
    wants_write = (job.post_comment or job.inline_comments) and not read_only
    listed = list_comments(client, repo, number) if wants_write else None
    prior = find_prior(client, repo, number, listed)
    change = None
    if not _config_decides_a_skip(job, info, listed, prior.state):
        if _named_model(job):
            from reviewer.llm import preload_litellm

            preload_litellm()  # seconds of import, overlapped with reading the diff from GitHub
        change = source.change()
    config = job_config(client, job, source)
    renderer = _renderer(client, job, info, config)
    same = listed is not None and is_same_review(
        prior.state, head_sha=info.head_sha, config_digest=config_hash(config, renderer.templates_digest())
    )
    skipped = _state_skip(job, info, config, renderer, prior, same)
    if skipped is not None:
        return skipped
    if config.model:
        from reviewer.llm import preload_litellm

        preload_litellm()  # (started already when an input named the model: it runs once)
    change = change if change is not None else source.change()
    change = dataclasses.replace(change, gaps=source.worded_gaps(renderer.translate))
    return PullContext(source, info, read_only, change, config, renderer, prior, listed)


def allot(
    client: GitHubClient,
    job: PullJob,
    pr: PullContext,
    *,
    parent: Budget | None,
    admit: Callable[[Change, Config], str] | None,
) -> tuple[Budget, Reservation | None, PullContext] | PrOutcome:
    """The PR's budget: admitted by a scan's run budget, its own limits or a share, cut to what
    the per-PR cap leaves; with a model and the cap, that allowance reserved in the sticky state."""
    refused = admit(pr.change, pr.config) if admit is not None else ""
    if refused:
        return PrOutcome(job.number, "skipped", "", reason=refused, title=pr.info.title, url=pr.info.url)
    limits = pr.config.limits
    capped = job.max_pr_cost_usd > 0
    if capped:
        state = pr.prior.state
        cap_left = job.max_pr_cost_usd - (state.spent() if state is not None else 0.0)
        if cap_left < limits.cost_usd:
            limits = dataclasses.replace(limits, cost_usd=cap_left)
    budget = Budget(limits, parent=parent)
    if not (capped and pr.config.model and budget.limits.cost_usd > 0 and job.post_comment):
        return budget, None, pr
    reservation = reserve_spend(client, job, pr, allowance=budget.limits.cost_usd)
    if reservation is not None and reservation.created and pr.listed is not None:
        # list again: the PR now holds this run's comment
        pr = dataclasses.replace(pr, listed=dataclasses.replace(pr.listed, comments=None))
    return budget, reservation, pr


def review_units(
    client: GitHubClient, job: PullJob, pr: PullContext, budget: Budget, *, warn: Warn
) -> Analysis:
    """Rules → plan → review units → verify (`review.analyse`), on the whole PR or, after a push our
    signed state allows, on what the push changed (incremental); the report says which and why."""
    from reviewer import review
    from reviewer.memory import remember

    client.wait_within(budget.limits.seconds)
    prior = pr.prior.state
    increment, increment_info = (
        (None, incremental.full("requested", prior.head if prior else None))
        if job.full_review
        else plan_increment(client, pr.source.repo, pr.change, prior, config=pr.config, renderer=pr.renderer)
    )
    analysis = review.analyse(
        pr.source, pr.change, pr.config, budget=budget, renderer=pr.renderer, warn=warn, increment=increment
    )
    if increment is None:
        analysis = dataclasses.replace(analysis, report=analysis.report.replace(incremental=increment_info))
    return remember(  # what maintainers dismissed on this PR is not raised again
        client,
        pr.source.repo,
        job.number,
        analysis,
        pr.change.files,
        prior,
        ours=pr.listed.login if pr.listed is not None else "",
        allowed=pr.config.maintainer_associations,
        read_threads_too=job.inline_comments and pr.listed is not None,
        warn=warn,
    )


def sinks_for(
    client: GitHubClient, job: PullJob, pr: PullContext, index: LineIndex, *, notices: TextIO | None
) -> list[Sink]:
    """Every sink of one PR's review, in the order they run (a fork PR's read-only token: a notice that
    nothing is written). The job summary and the outputs are written by the caller, per run."""
    sinks: list[Sink] = []
    if pr.read_only and (job.post_comment or job.inline_comments):
        text = pr.renderer.translate(
            "action.read_only",
            "read-only token (pull request from a fork): results are in the job summary and annotations only",
        )
        sinks.append(ReadOnlyPull(notices, text))
    else:
        listed = pr.listed or ListedComments("", None)
        target = PullTarget(client, job.repo, job.number, listed.login, listed.comments)
        say = pr.renderer.translate
        if pr.listed is not None and job.post_comment:
            sinks.append(StickyComment(target, say))
        if pr.listed is not None and job.inline_comments:
            sinks.append(InlineReview(target, pr.renderer, pr.config.max_findings, index))
        sinks.append(Notice(notices, say(READ_ONLY_KEY), on_read_only=True, say=say))
    if job.annotations and notices is not None:
        sinks.append(Annotations(notices, pr.config.max_findings, pr.renderer.translate))
    return sinks


def reviewed_outcome(
    job: PullJob, pr: PullContext, report: Report, rendered: Rendered, sinks: Sequence[Sink]
) -> PrOutcome:
    """The PR's outcome: the report saved (the Action's report JSON), the exit code, the summary."""
    from reviewer.run import report_json, summary_text

    config = pr.config
    annotating = any(isinstance(sink, Annotations) for sink in sinks)
    dropped = annotations_dropped(report.findings, config.max_findings) if annotating else 0
    reports = job.reports
    report_path = (
        reports.save(f"report-{job.number}.json", report_json(report)) if reports is not None else ""
    )
    url = next((p.url for p in report.published if p.sink == "comment" and p.ok and p.url), "")
    return PrOutcome(
        job.number,
        report.verdict,
        summary_text(report, pr.renderer, annotations_dropped=dropped),
        publish_ready=report.gate.publish_ready,
        findings=len(report.findings),
        p1=gate.counts(report.findings)["P1"],
        max_priority=report.findings[0].priority if report.findings else "",
        cost_usd=report.budget.used.cost_usd,
        report_path=report_path,
        comment_url=url or "",
        exit_code=gate.exit_code(
            verdict_=report.verdict,
            findings=report.findings,
            fail_on=config.fail_on,
            on_error=config.on_error,
        ),
        title=pr.info.title,
        url=pr.info.url,
        report=report,
        rendered=rendered,
    )


def _config_decides_a_skip(
    job: PullJob, info: PullInfo, listed: ListedComments | None, state: StickyState | None
) -> bool:
    """Whether the config must be read before the diff: it is free (given, or a local file), or our
    sticky state names the current head (a rerun that the config hash may skip) or a spent per-PR cap."""
    if job.config is not None or job.config_file:
        return True
    if listed is None or state is None or not (job.skip.reviewed or job.max_pr_cost_usd > 0):
        return False
    capped = job.max_pr_cost_usd > 0 and state.spent() >= job.max_pr_cost_usd
    return (job.skip.reviewed and state.head == info.head_sha) or capped


def _named_model(job: PullJob) -> bool:
    """An input, flag or `IMREVIEW_MODEL` names a model before the config file is read."""
    env = job.env if job.env is not None else os.environ
    return bool((job.overrides.model or "").strip() or (env.get("IMREVIEW_MODEL") or "").strip())


def plan_increment(
    client: GitHubClient,
    repo: str,
    change: Change,
    state: StickyState | None,
    *,
    config: Config,
    renderer: Renderer,
) -> tuple[Increment | None, Incremental]:
    """An incremental review when our signed state allows one and the push descends from the head
    it reviewed (one compare request); otherwise None and why the review is full. After an
    incomplete review the whole PR is sent, what the push changed first."""
    head = change.snapshot.head.sha
    prior = state.prior() if state is not None else None
    since = prior.head if prior is not None else None
    digest = config_hash(config, renderer.templates_digest())
    model = config.model or ""
    reason = incremental.full_reason(
        prior, head=head, merge_base=change.snapshot.merge_base, config_digest=digest, model=model
    )
    if prior is None or reason is not None:
        return None, incremental.full(reason or "no_prior_review", since)
    if not prior.complete and not config.model:
        return None, incremental.full("prior_incomplete", since)  # nothing to send first: no compare
    try:
        pushed = client.pushed_since(repo, prior.head, head)
    except GitHubError:
        return None, incremental.full("compare_failed", since)
    reason = "force_push" if pushed is None else incremental.compare_reason(pushed.status, len(pushed.files))
    if reason is not None or pushed is None:
        return None, incremental.full(reason or "force_push", since)
    planned = incremental.increment(prior, pushed.files, change.files)
    return planned, incremental.full(planned.reason, since)


def _state_skip(
    job: PullJob, info: PullInfo, config: Config, renderer: Renderer, prior: PriorReview, same: bool
) -> PrOutcome | None:
    """The rerun skip (outputs and exit code from the marker, so a failed step stays failed), or the
    per-PR cost cap spent (nothing is sent; the summary says what the PR cost)."""
    state, url, number = prior.state, prior.comment_url or "", job.number
    if job.skip.reviewed and same and state is not None:
        top, fail_on = state.max_priority, config.fail_on
        failing = fail_on != "never" and top in PRIORITIES and priority_rank(top) <= priority_rank(fail_on)
        return PrOutcome(
            number,
            state.verdict,
            run_text(
                renderer, "already_reviewed", number=number, head=state.head, verdict=state.verdict, url=url
            ),
            publish_ready=True,
            findings=state.findings,
            p1=state.p1,
            max_priority=state.max_priority,
            cost_usd=0.0 if state.cost_usd is not None else None,
            comment_url=url,
            exit_code=1 if failing else 0,
            reason="already_reviewed",
            title=info.title,
            url=info.url,
        )
    spent = state.spent() if state is not None else 0.0
    if job.max_pr_cost_usd > 0 and job.max_pr_cost_usd - spent <= 0:
        summary = run_text(renderer, "pr_cost_cap", number=number, spent=spent, cap=job.max_pr_cost_usd)
        return PrOutcome(
            number, "skipped", summary, comment_url=url, reason="pr_cost_cap", title=info.title, url=info.url
        )
    return None


def _renderer(client: GitHubClient, job: PullJob, info: PullInfo, config: Config) -> Renderer:
    template_dir: Path | str | None = job.templates or config.template_dir
    if job.base_template_dir and job.templates is None:
        scratch = job.scratch or Path(os.environ.get("RUNNER_TEMP") or "/tmp") / "imreview"
        where = scratch / f"templates-{job.number}"
        template_dir = base_templates(
            client, info.base_repo or job.repo, info.base_sha, job.base_template_dir, where, config.language
        )
    return Renderer(language=config.language, template_dir=template_dir)


def run_text(renderer: Renderer, kind: str, **values: Any) -> str:
    """Run-level Markdown (templates/run.md.j2): skipped, already reviewed, unreadable, failures."""
    return renderer.render("run.md.j2", kind=kind, **values).strip("\n") + "\n"


def skipped_outcome(
    number: int, why: str, renderer: Renderer, *, reason: str = "policy", title: str = "", url: str = ""
) -> PrOutcome:
    summary = run_text(renderer, "skipped", number=number, reason=why)
    return PrOutcome(number, "skipped", summary, reason=reason, title=title, url=url)


def failed(number: int, exc: Exception, renderer: Renderer, *, on_error: str) -> PrOutcome:
    """A PR unreadable (a `GitHubError`) or whose review broke: `incomplete`, named, and the run goes on
    to the other PRs (one hostile PR must not cost a scan every other review)."""
    if isinstance(exc, GitHubError):
        reason, summary = "unreadable", run_text(renderer, "unreadable", number=number, error=str(exc))
    else:
        reason = "failed"
        summary = run_text(renderer, "failed", detail=f"#{number}: {type(exc).__name__}: {exc}")
    return PrOutcome(
        number, "incomplete", summary, cost_usd=None, exit_code=3 if on_error == "fail" else 0, reason=reason
    )


def job_config(client: GitHubClient, job: PullJob, source: GitHubSource) -> Config:
    """`config_at` the PR's BASE branch (never its head): one call for a reviewed PR and a command alike."""
    return config_at(
        client, job, lambda: (source.pull_info().base_repo or source.repo, source.pull_info().base_sha)
    )


def config_at(client: GitHubClient, job: PullJob, where: Callable[[], tuple[str, str | None]]) -> Config:
    """The job's own config when it has one, else its local file when named, else the file at
    `where()` (repo, ref), under the job's overrides and environment (a scan reads it once)."""
    if job.config is not None:
        return job.config
    if job.config_file:
        file_layer = load_config_file(job.config_file, required=True)
    else:
        repo, ref = where()
        text = client.file_text(repo, job.config_path, ref)
        file_layer = parse_config_text(text, job.config_path) if text is not None else {}
    env = env_layer(job.env if job.env is not None else os.environ)
    return build_config(file_layer=file_layer, env=env, overrides=job.overrides)


def base_templates(
    client: GitHubClient, repo: str, base_sha: str | None, template_dir: str, scratch: Path, language: str
) -> Path:
    """Copy the template overrides found under `template_dir` at the base sha into `scratch` (one
    GraphQL query), with the i18n file of a `language` the package lacks (one the directory adds)."""
    found = 0
    names = tuple(dict.fromkeys((*template_names(), *language_files(language))))
    ref, root = base_sha or "HEAD", template_dir.strip("/")
    texts = client.file_texts(repo, [(ref, f"{root}/{name}") for name in names])
    for name in names:
        text = texts[(ref, f"{root}/{name}")]
        if text is None:
            continue
        target = scratch / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        found += 1
    if not found:
        raise ConfigError(
            f"no template found under {template_dir!r} at the base commit {(base_sha or 'HEAD')[:12]}"
            f" (looked for {', '.join(names)})",
            "input 'template-dir'",
        )
    return scratch


@dataclass(frozen=True)
class PriorReview:
    """What our sticky comment says about the last review. `body`: the comment as read (its visible
    text is kept when only the state changes)."""

    state: StickyState | None
    comment_url: str | None
    body: str | None = None


def is_same_review(state: StickyState | None, *, head_sha: str, config_digest: str) -> bool:
    """DESIGN 6: same head, same config hash, and a verdict that was not incomplete; and nothing
    left to publish (an inline review that failed after the comment was posted is posted by a rerun)."""
    return bool(
        state is not None
        and state.head == head_sha
        and state.config == config_digest
        and state.verdict not in ("", "incomplete")
        and not state.pending
    )


@dataclass(frozen=True)
class Reservation:
    """What the sticky state said before this run reserved its allowance, and how the reservation
    was written: `created` when this run created the sticky comment to hold it, as `login`."""

    state: StickyState
    visible: str
    created: bool
    head_sha: str
    login: str


def reserve_spend(
    client: GitHubClient, job: PullJob, pr: PullContext, *, allowance: float
) -> Reservation | None:
    """Before the first model call, add `allowance` to the PR's total in the sticky state: a run
    that ends unpublished or never ends (cancelled, killed) is then counted at its most, so
    `max-pr-cost-usd` holds under any pattern of pushes (`settle_spend` counts what it really cost).
    None when there is no key to sign with, no sticky sink, or the write failed: the run goes on."""
    if pr.listed is None or state_key() is None:
        return None
    prior, head_sha = pr.prior, pr.info.head_sha
    if prior.state is not None and prior.body is not None:
        before, visible = prior.state, visible_text(prior.body)
    else:
        before = StickyState(head="", base="", config="", total_cost_usd=0.0)
        visible = run_text(
            pr.renderer, "spend_reserved", head=head_sha, allowance=allowance, cap=job.max_pr_cost_usd
        )
    # rounded up to the state's 6 decimals: a reservation never records less than it holds
    reserved = before.with_total(math.ceil(round((before.spent() + allowance) * 1_000_000, 3)) / 1_000_000)
    login = pr.listed.login
    body = reserved.body(visible)
    written = upsert_sticky(client, job.repo, job.number, body=body, login=login, comments=pr.listed.comments)
    if not written.ok:
        return None
    return Reservation(before, visible, written.reason == "created", head_sha, login)


def settle_spend(
    client: GitHubClient,
    job: PullJob,
    reservation: Reservation,
    report: Report,
    renderer: Renderer,
    *,
    warn: Warn,
) -> Report:
    """After the run: a sticky comment this run wrote already holds what it really cost (its state was
    built from the one before the reservation, and the comment is reported created); else release."""
    comment = next((p for p in report.published if p.sink == "comment"), None)
    if comment is None or not comment.ok:
        release_spend(client, job, reservation, report.budget.used.cost_usd, renderer, warn=warn)
    elif reservation.created:
        rest = comment.detail.removeprefix(renderer.translate("publish.comment_updated"))
        detail = renderer.translate("publish.comment_created") + rest
        created = dataclasses.replace(comment, detail=detail, reason="created")
        return report.replace(published=tuple(created if p is comment else p for p in report.published))
    return report


def release_spend(
    client: GitHubClient,
    job: PullJob,
    reservation: Reservation,
    spent: float | None,
    renderer: Renderer,
    *,
    warn: Warn,
) -> None:
    """The reservation replaced by what the run spent, after an unpublished or failed run (on a comment
    this run created, a line says the review was not published)."""
    settled = reservation.state  # a cost that cannot be priced is not counted (docs/state-and-caps.md)
    if spent is not None:
        settled = settled.with_total(round(settled.spent() + spent, 6))
    visible = reservation.visible
    if reservation.created:
        visible = run_text(
            renderer,
            "spend_unpublished",
            head=reservation.head_sha,
            run=spent or 0.0,
            total=settled.spent(),
            cap=job.max_pr_cost_usd,
        )
    body = settled.body(visible)
    written = upsert_sticky(client, job.repo, job.number, body=body, login=reservation.login)
    if not written.ok:
        warn(f"imreview: comment: this run's cost stays counted at its allowance: {written.detail}")


def find_prior(client: GitHubClient, repo: str, number: int, listed: ListedComments | None) -> PriorReview:
    """Our sticky comment and its state, found and parsed once per run, from the comments listed at
    the start (listed here when that list failed)."""
    try:
        sticky = (
            find_sticky(client, repo, number, login=listed.login, comments=listed.comments)
            if listed
            else None
        )
    except GitHubError:
        sticky = None
    return (
        PriorReview(StickyState.parse(sticky.body), sticky.url, sticky.body)
        if sticky
        else PriorReview(None, None)
    )


@dataclass(frozen=True)
class ListedComments:
    """Who we write as, and the PR's comments as listed once at the start (None: the list failed)."""

    login: str
    comments: list[CommentInfo] | None


def list_comments(client: GitHubClient, repo: str, number: int) -> ListedComments:
    login = client.viewer_login()
    try:
        return ListedComments(login, client.issue_comments(repo, number))
    except GitHubError:
        return ListedComments(login, None)


def echo(stream: TextIO) -> Warn:
    """A `warn` that prints untrusted text to an Actions log with workflow commands switched off."""
    return lambda message: echo_untrusted(stream, message)
