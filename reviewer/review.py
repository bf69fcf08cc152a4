"""The stages wired together: change → rules → plan → review units → verify → gate → Report.

Flat on purpose (reviewdog's `Run`): `analyse` is the stage order, one named call each; a branch
(no model, an increment, a re-plan) lives inside the stage it changes; each stage records what it
skipped, nothing vanishes.
"""

from __future__ import annotations

import dataclasses
import functools
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from reviewer import context as ctx
from reviewer import dismissals, gate, incremental, progress, rules, verify
from reviewer import findings as fnd
from reviewer.answer_size import answer_reservation
from reviewer.budget import PLAN_SECONDS_SHARE, Budget, Limits, Price, held_call_cost, held_tokens
from reviewer.config import Config
from reviewer.diff import DiffFile, Hunk, LineIndex
from reviewer.errors import AnswerUnparsed, BudgetExhausted, ContextExceeded, ImreviewError, ModelError
from reviewer.llm import Continuation, failure_kind, human_error
from reviewer.plan import LEGEND, REQUEST_SLACK_TOKENS, Plan, PlanOptions, TextFree, Unit, coverage, make_plan
from reviewer.policy import matches_any
from reviewer.report import AnswerStats, Coverage, Gap, Gate, ModelInfo, PlanSummary, Report, Settings
from reviewer.source import Change, Source

if TYPE_CHECKING:
    from reviewer.llm import ModelClient
    from reviewer.render import Renderer, Say

Warn = Callable[[str], None]

NO_MODEL_WINDOW = 128_000
MAX_REPLANS = 3
UNVERIFIED_REPORTED = 10
"""The model's verification gaps a report keeps, from the riskiest units first (each answer gives at
most findings.MAX_UNVERIFIED)."""
MAX_PATCH_CHARS = 1_000_000
"""A file's diff longer than this is listed, not reviewed: no budget default could send it, and
slicing and redacting it costs time for nothing (linear, about 0.6 s per MB on a loaded 2-core
runner; benchmarks/BIG_DIFF.md). GitHub omits such patches itself."""
NO_MODEL_SIZING = TextFree(tokens=lambda chars: max(1, chars // 3), may_redact=rules.may_hold_secret)
"""Without a model no unit text is sent: the plan sizes its parts (a conservative stand-in for a
tokenizer) without writing them."""


@dataclass(frozen=True)
class UnitOutcome:
    unit_id: int
    status: str  # ok | budget | unparsed | model_error | replan (the server's window was smaller)
    answer: fnd.ModelAnswer | None = None
    detail: str = ""
    dropped: tuple[fnd.Dropped, ...] = ()
    kind: str = ""  # for model_error: unreachable | auth | unknown_model | error (llm.failure_kind)
    calls: int = 0  # for model_error: the requests it sent, every attempt (as the budget counts them)


@dataclass(frozen=True)
class Analysis:
    """Everything but the gate: the gate needs the rendered outputs and a fresh head."""

    report: Report
    index: LineIndex
    answers_expected: int
    answers_parsed: int
    answers_gapped: int
    carry: tuple[incremental.CarriedFinding, ...] = ()
    complete: bool = False
    """The model findings the sticky state keeps for the next run, and whether the review covered
    the whole PR with every finding kept (only then may the next push be reviewed incrementally)."""


def unit_nonce() -> str:
    """A delimiter nonce of 20 random digits (66 bits): tokenizers split digits into fixed groups,
    so every nonce counts the same and the plan does not depend on which one was drawn."""
    return str(secrets.randbelow(10**20)).zfill(20)


class _Warnings:
    def __init__(self, sink: Warn) -> None:
        self.items: list[str] = []
        self._sink = sink
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self._lock:
            if message not in self.items:
                self.items.append(message)
                self._sink(message)


def _redacted(change: Change) -> Change:
    """The PR title, body, commit messages and file names are untrusted text that can carry a key:
    cut like diff lines before the model, the report or the summary sees them."""
    files = tuple(
        dataclasses.replace(f, path=rules.redact(f.path)) if rules.redact(f.path) != f.path else f
        for f in change.files
    )
    snapshot = dataclasses.replace(change.snapshot, title=rules.redact(change.snapshot.title))
    return dataclasses.replace(change, snapshot=snapshot, body=rules.redact(change.body), files=files)


def _unusable_patches(change: Change, renderer: Renderer) -> tuple[Change, list[Gap]]:
    """Files whose patch cannot be reviewed, each with a gap that names the file and the reason: a
    patch that is not a diff (`DiffFile.unusable`), or one over MAX_PATCH_CHARS, which is then
    dropped (listed as having no patch) before any rule or the planner reads it."""
    gaps: list[Gap] = []
    files: list[DiffFile] = []
    for f in change.files:
        size = sum([len(line.text) + 2 for hunk in f.hunks for line in hunk.lines]) if f.has_patch else 0
        if f.unusable:
            gaps.append(Gap(what=renderer.gap_text(f.unusable), why="no_patch", path=f.path))
        elif size > MAX_PATCH_CHARS:
            what = renderer.gap_text(
                "patch_too_large", size=f"{size / 1e6:.1f}", limit=f"{MAX_PATCH_CHARS / 1e6:.0f}"
            )
            gaps.append(Gap(what=what, why="no_patch", path=f.path))
            f = dataclasses.replace(f, hunks=(), has_patch=False, unusable="patch_too_large")
        files.append(f)
    return (dataclasses.replace(change, files=tuple(files)) if gaps else change), gaps


def analyse(
    source: Source,
    change: Change,
    config: Config,
    *,
    renderer: Renderer,
    warn: Warn,
    budget: Budget | None = None,
    increment: incremental.Increment | None = None,
) -> Analysis:
    """Redact the change, set aside the patches that cannot be reviewed, check `include`, then run
    every stage up to the gate; never raises for model trouble (it becomes gaps). `imreview review`,
    a PR of the action and an eval item are the same run.

    `budget` is the caller's (a PR's share of a scan's run budget), else the PR's own. `source`
    reads files, and the head of the repository for context only when a model will be called.
    With an `increment`, only its re-sent hunks are planned; the rest keep the earlier review's
    coverage and findings (see `reviewer.incremental`).
    """
    change, unusable = _unusable_patches(_redacted(change), renderer)
    run = _Run(
        change=change,
        config=config,
        budget=Budget(config.limits) if budget is None else budget,
        renderer=renderer,
        warnings=_Warnings(warn),
        source=source,
        increment=increment,
        gaps=[*change.gaps, *unusable],
        explained=frozenset(g.path for g in unusable if g.path),
    )
    _check_include(run)
    checked = _check_rules(run)
    _open_model(run)
    planner, plan = _plan(run)
    reviewed = _review(run, planner, plan)
    cov = _cover(run, reviewed)
    index = LineIndex.build(run.files)
    found = _verify(run, checked, reviewed, cov, index)
    return _gate(run, checked, reviewed, cov, found, index)


@dataclass
class _Run:
    """One review's inputs, the model client once opened (or None, with the reason no hunk is sent:
    `unsent`), and the gaps found so far (in the order the report lists them)."""

    change: Change
    config: Config
    budget: Budget
    renderer: Renderer
    warnings: _Warnings
    source: Source
    increment: incremental.Increment | None
    gaps: list[Gap]
    explained: frozenset[str]
    """Files whose patch cannot be reviewed, already with a `no_patch` gap that says why."""
    client: ModelClient | None = None
    unsent: str = "budget"

    @property
    def files(self) -> Sequence[DiffFile]:
        return self.change.files

    @property
    def head(self) -> str:
        return self.change.snapshot.head.sha

    def read(self, path: str, sha: str) -> str | None:
        """Context is optional: a failed read (a 502 on the contents API) costs context, not the review."""
        try:
            return self.source.read_file(path, sha)
        except ImreviewError as exc:
            why = _short(str(exc), 160)
            self.warnings(self.renderer.translate("warning.context_read", path=path, sha=sha[:12], why=why))
            return None

    def read_head(self, path: str) -> str | None:
        return self.read(path, self.head)

    def read_base(self, path: str) -> str | None:
        return self.read(path, self.change.snapshot.merge_base)


def _check_include(run: _Run) -> None:
    """An `include` that matches no changed file (by its new or its old path) leaves the whole change
    out: a gap (the verdict is incomplete and the headline says why), not a silent "every file
    excluded". A glob that matches nothing beside others that match is a warning."""
    files, globs = run.files, [pattern for pattern in run.config.include if pattern.strip()]
    unmatched = [
        pattern
        for pattern in globs
        if not any(
            matches_any(f.path, (pattern,)) or (f.old_path and matches_any(f.old_path, (pattern,)))
            for f in files
        )
    ]
    if not unmatched or not files:
        return
    named = ", ".join(f"`{pattern}`" for pattern in unmatched)
    if len(unmatched) < len(globs):
        run.warnings(run.renderer.translate("warning.include_partly", globs=named))
        return
    what = run.renderer.gap_text("include_unmatched", globs=named, n=len(files))
    run.warnings(what)
    run.gaps.append(Gap(what=what, why="include_unmatched"))


def _check_rules(run: _Run) -> rules.RuleResult:
    with progress.current().stage("deterministic checks"):
        return rules.run_rules(run.files, messages=run.renderer.messages("rules."))


def _open_model(run: _Run) -> None:
    """The client for the configured model; no model, or no credentials for it, is a gap."""
    config, renderer = run.config, run.renderer
    if not config.model:
        run.gaps.append(Gap(what=renderer.gap_text("no_model"), why="no_model"))
        run.unsent = "no_model"
        return
    client = _default_client(config, run.budget, run.warnings, renderer.translate)
    if not (missing := client.credentials_missing()):
        run.client = client
        return
    keys, secrets_ = ", ".join(missing), ", ".join(f"`{key}`" for key in missing)
    what = renderer.gap_text("no_credentials_keys", keys=keys, secrets=secrets_, model=config.model)
    run.gaps.append(Gap(what=what, why="no_credentials"))
    run.warnings(what)
    run.unsent = "no_credentials"


def _plan(run: _Run) -> tuple[_Planner, Plan]:
    """Pack the hunks into units within what the budget allows (an increment's hunks only, the push's
    first); with a model, the units carry repository context read at the head."""
    client, increment = run.client, run.increment
    read_head = run.read_head if client is not None else None
    finder = _ContextFinder(run) if client is not None else None
    planner = _Planner(run.config, client, run.renderer, run.change, read_head, finder)
    if increment is not None:
        planner.only, planner.first = increment.resend, increment.first
    with progress.current().stage("plan"):
        return planner, planner.whole(run.budget)


def _hunk_keys(units: Iterable[Unit]) -> set[tuple[str, int]]:
    """The (path, hunk index) pairs the units carry: how a re-plan names what to pack."""
    return {(p.path, p.hunk_index) for u in units for p in u.parts}


def _paths(unit: Unit) -> str:
    return ", ".join(dict.fromkeys(p.path for p in unit.parts))


@dataclass(frozen=True)
class _Reviewed:
    """The units as finally planned (after any re-plan), what each call came to, the planner (its
    window is the one used), and the gaps of the calls that failed or were cut."""

    plan: Plan
    outcomes: tuple[UnitOutcome, ...]
    planner: _Planner
    gaps: tuple[Gap, ...] = ()

    @property
    def ok_units(self) -> set[int]:
        return {o.unit_id for o in self.outcomes if o.status == "ok"}

    @property
    def answers(self) -> list[fnd.ModelAnswer]:
        return [o.answer for o in self.outcomes if o.answer is not None]

    @property
    def answered_units(self) -> list[Unit]:
        ok = self.ok_units
        return [u for u in self.plan.units if u.id in ok]


def _review(run: _Run, planner: _Planner, plan: Plan) -> _Reviewed:
    """One model call per unit; the failures become gaps, the parts of answers dropped warnings."""
    if run.client is None:
        return _Reviewed(plan, (), planner)
    outcomes: list[UnitOutcome] = []
    if plan.units:
        with progress.current().stage(f"model review ({len(plan.units)} units)"):
            plan, outcomes = _review_all(run, planner, plan)
    if any(x.reason == "budget" for x in plan.unplaced):  # after calibration's re-plan: what is still cut
        run.budget.mark_exhausted()
    units, renderer = {u.id: u for u in plan.units}, run.renderer
    gaps = _failure_gaps(outcomes, run) + [
        Gap(
            what=renderer.gap_text(
                "truncated",
                paths=_paths(units[o.unit_id]),
                kept=len(o.answer.findings),
                cut=o.answer.cut_findings,
            ),
            why="truncated",
        )
        for o in outcomes
        if o.status == "ok" and o.answer is not None and o.answer.missing
    ]
    for why, items in fnd.group_dropped(d for o in outcomes for d in o.dropped).items():
        details = "; ".join(_short(_dropped_detail(d, renderer.translate), 160) for d in items[:3])
        run.warnings(renderer.translate(f"dropped.{why}", n=len(items), details=details))
    return _Reviewed(plan, tuple(outcomes), planner, tuple(gaps))


def _cover(run: _Run, reviewed: _Reviewed) -> Coverage:
    """What was reviewed, hunk by hunk (an increment's other hunks carried from the earlier review);
    a gap per file not fully reviewed (not for a run-wide cause already a gap, nor for a file whose
    `no_patch` gap already says why), then the review's own gaps."""
    increment = run.increment
    carried = (
        {(f.path, h.index) for f in run.files for h in f.hunks} - increment.resend
        if increment is not None
        else set()
    )
    cov = coverage(
        reviewed.plan,
        run.files,
        reviewed_units=reviewed.ok_units,
        unsent_reason={
            o.unit_id: o.status if o.status in ("budget", "unparsed", "context_window") else "model_error"
            for o in reviewed.outcomes
            if o.status != "ok"
        },
        default_unsent=run.unsent,
        carried=carried,
    )
    cov = incremental.stamp_coverage(
        cov,
        head=run.head,
        since=increment.since if increment is not None and increment.carries else None,
        sent={path for path, _ in _hunk_keys(reviewed.answered_units)},
    )
    run.gaps.extend([*_coverage_gaps(run, cov, reviewed.planner.window), *reviewed.gaps])
    return cov


def _coverage_gaps(run: _Run, cov: Coverage, window: int) -> list[Gap]:
    run_wide = {g.why for g in run.gaps} & {"no_model", "no_credentials"}
    return [
        Gap(what=run.renderer.gap_text(f.reason, window=window), why=f.reason, path=f.path)
        for f in cov.files
        if f.status in ("listed", "partial")
        and f.reason
        and f.reason not in run_wide
        and not (f.reason == "no_patch" and f.path in run.explained)
    ]


def _verify(
    run: _Run, checked: rules.RuleResult, reviewed: _Reviewed, cov: Coverage, index: LineIndex
) -> verify.Outcome:
    """Anchor and dedupe, check each finding against the code (and, with a model, a re-check call on
    the files it was shown): the findings kept, and every exclusion (the model's own first)."""
    answers = reviewed.answers
    by_path = {f.path: f for f in run.files}
    anchored = fnd.dedupe(
        f if f.anchor_reason == "not_in_unit" else fnd.anchor(f, by_path, index, redact=rules.redact)
        for f in (*checked.findings, *(f for a in answers for f in a.findings))
    )
    exact = verify.deterministic(
        anchored, files=by_path, read_head=run.read_head, read_base=run.read_base, say=run.renderer.translate
    )
    rechecked = _recheck(run, exact, reviewed, cov)
    exclusions = (*(e for a in answers for e in a.exclusions), *exact.refuted, *rechecked.refuted)
    return verify.Outcome(rechecked.findings, exclusions)


def _recheck(run: _Run, exact: verify.Outcome, reviewed: _Reviewed, cov: Coverage) -> verify.Outcome:
    if run.client is None:
        return verify.Outcome(exact.findings, ())
    with progress.current().stage("verify"):
        return verify.recheck(
            run.client,
            exact.findings,
            renderer=run.renderer,
            read_head=run.read_head,
            warn=run.warnings,
            reviewed_paths={f.path for f in cov.files if f.status in ("reviewed", "partial")},
            evidence=_evidence(reviewed.answered_units),
        )


def _gate(
    run: _Run,
    checked: rules.RuleResult,
    reviewed: _Reviewed,
    cov: Coverage,
    found: verify.Outcome,
    index: LineIndex,
) -> Analysis:
    """The report with its verdict (the completion gate comes after rendering: `conclude`), the
    findings an increment carries merged in, and what the sticky state carries to the next push."""
    config, gaps, answers, increment = run.config, run.gaps, reviewed.answers, run.increment
    findings, increment_info = list(found.findings), None
    if increment is not None:
        answered = _hunk_keys(reviewed.answered_units)
        findings, kept, dropped = incremental.merge(
            findings, increment.carried, answered=answered, index=index
        )
        increment_info = increment.info(len(kept), len(increment.dropped) + len(dropped))
    ignored = dismissals.ignored_by_config(fnd.order(findings), config.ignore, run.files)
    findings = list(ignored.kept)
    budget_report = run.budget.report()
    if budget_report.overrun:
        what = ", ".join(f"{o.limit} {o.used:g} of {o.allowed:g}" for o in budget_report.overrun)
        run.warnings(run.renderer.translate("warning.overrun", what=what))
    report = Report(
        snapshot=run.change.snapshot,
        model=ModelInfo(name=config.model, fallbacks=config.fallback_models),
        coverage=cov,
        findings=tuple(fnd.order(findings)),
        dismissed=ignored.listed,
        exclusions=fnd.dedupe_exclusions(found.refuted),
        signals=fnd.dedupe_signals((*checked.signals, *(s for a in answers for s in a.signals))),
        gaps=tuple(dict.fromkeys(gaps)),
        budget=budget_report,
        gate=Gate(publish_ready=False),
        settings=Settings(language=config.language, max_findings=config.max_findings, fail_on=config.fail_on),
        verdict=gate.verdict(findings=findings, coverage=cov, gaps=gaps, head_moved=False),
        warnings=tuple(run.warnings.items),
        incremental=increment_info,
        answers=_answer_stats(answers) if run.client is not None else None,
        unverified=fnd.dedupe_unverified((u for a in answers for u in a.unverified), UNVERIFIED_REPORTED),
        plan=_plan_summary(run, reviewed),
    )
    status = Counter(o.status for o in reviewed.outcomes)
    carry, carry_complete = incremental.to_carry(report.findings, run.files, head=run.head)
    return Analysis(
        report=report,
        index=index,
        answers_expected=len(reviewed.outcomes) - status["budget"] - status["context_window"],
        answers_parsed=status["ok"],
        answers_gapped=status["unparsed"] + status["model_error"],
        carry=carry,
        complete=carry_complete and incremental.coverage_complete(cov, {g.why for g in gaps}),
    )


def _plan_summary(run: _Run, reviewed: _Reviewed) -> PlanSummary:
    client, plan, planner = run.client, reviewed.plan, reviewed.planner
    return PlanSummary(
        window=planner.window,
        window_source=planner.window_source if client is not None else "none",
        units=len(plan.units),
        input_tokens_planned=plan.input_tokens,
        input_tokens_available=run.budget.limits.input_tokens,
        window_assumed=client.assumed_window if client is not None else None,
        context_files=tuple(dict.fromkeys(s.path for u in reviewed.answered_units for s in u.context)),
        context_tokens=plan.context_tokens,
        context_displaced_lines=plan.context_displaced_lines,
    )


def planned_cost(change: Change, config: Config, *, renderer: Renderer) -> float | None:
    """What reviewing all of `change` would reserve before any call, as the planner would pack it
    within the PR's own token and call limits (money unbounded), held as the ledger holds each
    request. No context is read, so no request reaches GitHub: each hunk is priced with as much
    context as it can expect (`context.stand_in`), within the unit's `context_share`. 0 without a
    model or credentials (no call is made); None when the price is unknown. Verification calls come
    on top, and only when budget is left."""
    if not config.model:
        return 0.0
    budget = Budget(dataclasses.replace(config.limits, cost_usd=float("inf")))
    client = _default_client(config, budget, lambda message: None, renderer.translate)
    if client.credentials_missing():
        return 0.0
    price = client.price(client.models[0])
    if price is None:
        return None
    plan = _Planner(config, client, renderer, _redacted(change), None, ctx.stand_in).plan(budget)
    return _held_cost(price, plan.units, client.margin_percent(), [u.input_tokens for u in plan.units])


def _held_cost(price: Price, units: Sequence[Unit], margin: int, inputs: Sequence[int]) -> float:
    """What the units' calls hold when sent: each input (with the slack the planner holds per
    request) and its answer's `max_tokens`, priced as the ledger holds them (the margin on the input)."""
    return sum(
        held_call_cost(price, i + REQUEST_SLACK_TOKENS, u.answer_tokens, margin)
        for i, u in zip(inputs, units, strict=True)
    )


def conclude(
    analysis: Analysis, *, current_head: str | None, outputs: Sequence[gate.OutputSize], renderer: Renderer
) -> Report:
    """Gate and final verdict; a moved head makes the review incomplete (stale)."""
    report = analysis.report
    pinned = report.snapshot.head.sha
    result = gate.evaluate(
        pinned_head=pinned,
        current_head=current_head,
        coverage=report.coverage,
        answers_expected=analysis.answers_expected,
        answers_parsed=analysis.answers_parsed,
        answers_gapped=analysis.answers_gapped,
        budget=report.budget,
        outputs=outputs,
        say=renderer.translate,
    )
    moved, gaps = current_head is not None and current_head != pinned, report.gaps
    if moved and current_head is not None:
        gaps = (
            *gaps,
            Gap(what=renderer.gap_text("stale", head=pinned[:12], now=current_head[:12]), why="stale"),
        )
    verdict = gate.verdict(findings=report.findings, coverage=report.coverage, gaps=gaps, head_moved=moved)
    return report.replace(gate=result, gaps=gaps, verdict=verdict)


def _default_client(config: Config, budget: Budget, warn: Warn, say: Say) -> ModelClient:
    """The model client, once litellm is imported; the wait for the import is not review time."""
    from reviewer.llm import ModelClient, litellm_ready

    import_seconds, waited = litellm_ready()
    budget.started_model(import_seconds=import_seconds, waited=waited)
    return ModelClient(config, budget, warn=warn, say=say)


@dataclass(eq=False)
class _Planner:
    """Builds the plan for what the budget still holds, counting requests exactly as they will be
    sent (each unit's own nonce, system prompt, response schema)."""

    config: Config
    client: ModelClient | None
    renderer: Renderer
    change: Change
    read_file: Callable[[str], str | None] | None
    finder: Callable[[DiffFile, Hunk], Sequence[ctx.Snippet]] | None = None
    only: Collection[tuple[str, int]] | None = None
    """The hunks this review covers (an increment's), None for all; `first` go first (the push's)."""
    first: Collection[tuple[str, int]] = ()

    def __post_init__(self) -> None:
        config, client = self.config, self.client
        self.window, self.window_source = (
            client.window() if client else (config.context_window or NO_MODEL_WINDOW, "config")
        )
        self._system = self.renderer.prompt("system", language=config.language)
        self.schema_sent = client is not None and client.sends_schema()

    @property
    def model(self) -> ModelClient:
        assert self.client is not None
        return self.client

    def messages(self, units_text: str, nonce: str, context_text: str = "") -> list[dict[str, str]]:
        """With `schema_sent` (every model of the chain gets the response schema) the answer format
        says what the fields mean and leaves their shape to the schema."""
        config, snapshot = self.config, self.change.snapshot
        user = self.renderer.prompt(
            "review",
            title=snapshot.title,
            body=self.change.body,
            instructions=config.instructions,
            language=config.language,
            units=units_text,
            context=context_text,
            legend=LEGEND,
            nonce=nonce,
            schema_sent=self.schema_sent,
        )
        return [{"role": "system", "content": self._system}, {"role": "user", "content": user}]

    @functools.cached_property
    def answer_tokens(self) -> int:
        """The `max_tokens` of one whole answer: `max-findings` findings with the exclusions, signals
        and verification gaps, counted with the model's tokenizer (reviewer.answer_size)."""
        return answer_reservation(self.model.count_tokens, self.config.max_findings, self.config.language)

    def measure(self, nonce: str, units_text: str, context_text: str = "") -> int:
        return self.model.count_request(self.messages(units_text, nonce, context_text), fnd.ANSWER_SCHEMA)

    def whole(self, budget: Budget) -> Plan:
        """The plan of this review's whole scope, nothing sent yet."""
        return self.plan(budget, only=self.only, first=self.first)

    def plan(
        self,
        budget: Budget,
        *,
        only: Collection[tuple[str, int]] | None = None,
        first: Collection[tuple[str, int]] = (),
        first_id: int = 0,
        held: Sequence[Unit] = (),
    ) -> Plan:
        """The whole plan for what `budget` has left, less what the `held` units (planned, not sent
        yet) will reserve; without a model, only coverage matters."""
        client, config = self.client, self.config
        scope = PlanOptions(
            unit_tokens=self.window,
            count_tokens=lambda text: NO_MODEL_SIZING.tokens(len(text)),
            read_file=self.read_file,
            redact=rules.redact,
            only=only,
            first=first,
            first_id=first_id,
        )
        if client is None:
            return self._pack(replace(scope, text_free=NO_MODEL_SIZING, deadline=budget.deadline(1.0)))
        self.window, self.window_source = client.window()
        price, margin = client.price(client.models[0]), client.margin_percent()
        allowance = budget.allowance(
            price=price,
            window=self.window,
            margin_percent=margin,
            max_answer_tokens=client.answer_cap(),
            answer_tokens=self.answer_tokens,
            held=_held_limits(held, client, price, margin) if held else None,
        )
        options = replace(
            scope,
            unit_tokens=self.window,
            count_tokens=client.count_tokens_calibrated,
            allowance=allowance,
            nonce=lambda i: unit_nonce(),
            overhead=lambda nonce: self.measure(nonce, ""),
            measure=self.measure,
            context=self.finder,
            context_share=config.context_share,
            deadline=budget.deadline(PLAN_SECONDS_SHARE),
        )
        return self._pack(options)

    def _pack(self, options: PlanOptions) -> Plan:
        return make_plan(self.change.files, options, include=self.config.include, exclude=self.config.exclude)


def _held_limits(held: Sequence[Unit], client: ModelClient, price: Price | None, margin: int) -> Limits:
    """What the planned, unsent `held` units will reserve when they are sent, counted calibrated."""
    calibration = client.calibration(client.models[0])
    inputs = [calibration.apply(u.input_tokens) for u in held]
    return Limits(
        input_tokens=sum(held_tokens(i + REQUEST_SLACK_TOKENS, margin) for i in inputs),
        output_tokens=sum(u.answer_tokens for u in held),
        cost_usd=0.0 if price is None else _held_cost(price, held, margin, inputs),
        seconds=0.0,
        calls=len(held),
    )


def _evidence(units: Sequence[Unit]) -> verify.Evidence:
    """The repository context of the answered calls that showed a finding's line (its whole file
    when the finding has no line), so the verifier sees what the reviewer saw."""
    return lambda f: ctx.merge(
        u.context
        for u in units
        if any(
            p.path == f.path and (f.line is None or p.span is None or p.span[0] <= f.line <= p.span[1])
            for p in u.parts
        )
    )


@dataclass(eq=False)
class _ContextFinder:
    """`reviewer.context.Finder` over the source's corpus, opened on first use; a source that
    cannot open one (or fails to) costs the context, never the review."""

    run: _Run
    finder: ctx.Finder | None = None
    opened: bool = False

    def __call__(self, file: DiffFile, hunk: Hunk) -> Sequence[ctx.Snippet]:
        try:
            if not self.opened:
                self.opened = True
                corpus = self.run.source.context_corpus()
                self.finder = ctx.Finder(self.run.files, corpus) if corpus is not None else None
            return self.finder.for_hunk(file, hunk) if self.finder is not None else ()
        except ImreviewError as exc:
            self.run.warnings(
                self.run.renderer.translate("warning.context_unavailable", why=_short(str(exc), 200))
            )
            self.finder = None
            return ()


def _review_all(run: _Run, planner: _Planner, plan: Plan) -> tuple[Plan, list[UnitOutcome]]:
    """Send the planned units; when the server says a request was longer than its window, re-plan
    what was not answered for the window it told us (the fresh units numbered after the plan's),
    within what the budget has left."""
    plan, outcomes = _calibrated_review(run, planner, plan)
    for _ in range(MAX_REPLANS):
        redo = {o.unit_id for o in outcomes if o.status == "replan"}
        if not redo:
            break
        hunks = _hunk_keys(u for u in plan.units if u.id in redo)
        fresh = planner.plan(run.budget, only=hunks, first_id=max(u.id for u in plan.units) + 1)
        assumed = planner.model.assumed_window
        if assumed is not None:
            run.warnings(
                run.renderer.translate("warning.window_learned", assumed=assumed, window=str(planner.window))
            )
        kept = tuple(u for u in plan.units if u.id not in redo)
        plan = dataclasses.replace(plan, units=kept + fresh.units, unplaced=plan.unplaced + fresh.unplaced)
        outcomes = [o for o in outcomes if o.unit_id not in redo] + _review_units(planner, fresh.units)
    return plan, [
        dataclasses.replace(o, status="context_window") if o.status == "replan" else o for o in outcomes
    ]


def _calibrated_review(run: _Run, planner: _Planner, plan: Plan) -> tuple[Plan, list[UnitOutcome]]:
    """Send the planned units. While the model's count is an uncalibrated stand-in and the plan has
    more than one call or leaves diff unsent, the provider is first asked to count the first unit's
    request (`ModelClient.count_with_provider`); when it does, the count is calibrated and the whole
    PR is planned again with it, nothing sent yet. Otherwise the first unit goes alone: the
    provider's count of its prompt calibrates every later count (`ModelClient.calibration`), and
    what is left is re-planned with it within what the budget has left; units holding a slice of a
    hunk the first one carried keep their place (a hunk's slices are not re-split; their need is
    held out of the re-plan)."""
    client = planner.model
    if _first_goes_alone(client, plan):
        first = plan.units[0]
        if client.count_with_provider(
            planner.messages(first.text, first.nonce or unit_nonce(), first.context_text)
        ):
            plan = planner.whole(run.budget)
    if not plan.units or not _first_goes_alone(client, plan):
        return plan, _review_units(planner, plan.units)
    first, rest = plan.units[0], plan.units[1:]
    outcomes = _review_units(planner, [first])
    if outcomes[0].status == "replan":
        return plan, outcomes + [UnitOutcome(u.id, "replan") for u in rest]
    kept, redo = _after_first(plan, first, rest)
    if client.needs_calibration() or not redo:
        return plan, outcomes + _review_units(planner, rest)
    fresh = planner.plan(run.budget, only=redo, first_id=max(u.id for u in plan.units) + 1, held=kept)
    unplaced = tuple(x for x in plan.unplaced if (x.path, x.hunk_index) not in redo) + fresh.unplaced
    plan = dataclasses.replace(plan, units=(first, *kept, *fresh.units), unplaced=unplaced)
    return plan, outcomes + _review_units(planner, (*kept, *fresh.units))


def _after_first(
    plan: Plan, first: Unit, rest: Sequence[Unit]
) -> tuple[tuple[Unit, ...], set[tuple[str, int]]]:
    """(kept, redo) once the first unit is answered: units sharing a hunk with it stay as planned;
    every other hunk still to send, and the ones the budget cut, are packed again."""
    sent = _hunk_keys([first])
    kept = tuple(u for u in rest if _hunk_keys([u]) & sent)
    cut = {(x.path, x.hunk_index) for x in plan.unplaced if x.reason == "budget"}
    return kept, (_hunk_keys(rest) | cut) - sent - _hunk_keys(kept)


def _first_goes_alone(client: ModelClient, plan: Plan) -> bool:
    """Calibrating on one call pays only while counts are stand-ins and there is something later
    (another call, or diff the budget cut) that a truer count could pack differently."""
    cut = any(x.reason == "budget" for x in plan.unplaced)
    return client.needs_calibration() and (len(plan.units) > 1 or cut)


def _review_units(planner: _Planner, units: Sequence[Unit]) -> list[UnitOutcome]:
    """One call per planned unit, up to `max_concurrency` at a time; the plan already fits the
    budget, so the order of completion changes timing, never what is covered. After a
    context-exceeded answer no further unit is sent: the rest is re-planned."""
    too_long, lock, finished = threading.Event(), threading.Lock(), [0]
    pr_paths = frozenset(f.path for f in planner.change.files)
    reporter = progress.current()  # read here: worker threads do not inherit the context

    def spare(unit: Unit, max_tokens: int) -> bool:
        with lock:
            others = len(units) - finished[0] - 1
        return _affordable(planner.model.budget, units, unit, max_tokens, others=others)

    def one(unit: Unit) -> UnitOutcome:
        start = time.monotonic()
        outcome = _review_unit(planner, unit, pr_paths, too_long, functools.partial(spare, unit))
        with lock:
            finished[0] += 1
            done = finished[0]
        reporter.unit(done, len(units), _paths(unit), outcome.status, time.monotonic() - start)
        return outcome

    if not units:
        return []
    workers = max(1, min(planner.config.max_concurrency, len(units)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="imreview-unit") as pool:
        return list(pool.map(one, units))


def _review_unit(
    planner: _Planner,
    unit: Unit,
    pr_paths: frozenset[str],
    too_long: threading.Event,
    affordable: Callable[[int], bool],
) -> UnitOutcome:
    """One unit's call (with its repairs, and continuations of a cut answer that name the findings
    it kept) and what it came to. A finding on a file the call did not show is a guess: it stays in
    the summary, never on a line."""
    if too_long.is_set():
        return UnitOutcome(unit.id, "replan")
    client, renderer, nonce = planner.model, planner.renderer, unit.nonce or unit_nonce()
    dropped: list[fnd.Dropped] = []
    sent_before = client.calls_in_this_thread()
    try:
        answer, _ = client.complete_json(
            planner.messages(unit.text, nonce, unit.context_text),
            phase="review",
            parse=_answer_parser(pr_paths, dropped),
            response_schema=fnd.ANSWER_SCHEMA,
            repair_prompt=lambda bad, error: renderer.prompt("repair", answer=bad, error=error, nonce=nonce),
            max_tokens=unit.answer_tokens or None,
            continuation=Continuation[fnd.ModelAnswer](
                missing=lambda answer: answer.missing,
                prompt=lambda _text, answer: renderer.prompt(
                    "continue",
                    kept=[f"{f.path}:{f.line or '?'} {f.title}" for f in answer.findings],
                    cut=answer.cut_findings > 0,
                    nonce=nonce,
                ),
                join=lambda first, more: first.joined(more),
                affordable=affordable,
            ),
        )
    except ContextExceeded as exc:
        too_long.set()
        return UnitOutcome(unit.id, "replan", detail=_short(str(exc)))
    except BudgetExhausted as exc:
        return UnitOutcome(unit.id, "budget", detail=exc.limit)
    except Exception as exc:  # a worker must never take the run down
        return _failure(unit, exc, dropped, calls=client.calls_in_this_thread() - sent_before)
    shown = {part.path for part in unit.parts}
    findings = tuple(
        f if f.path in shown else dataclasses.replace(f, anchor_reason="not_in_unit") for f in answer.findings
    )
    return UnitOutcome(
        unit.id, "ok", answer=dataclasses.replace(answer, findings=findings), dropped=answer.dropped
    )


def _failure(unit: Unit, exc: Exception, dropped: Sequence[fnd.Dropped], *, calls: int) -> UnitOutcome:
    if isinstance(exc, AnswerUnparsed):
        return UnitOutcome(unit.id, "unparsed", detail=_short(str(exc)), dropped=tuple(dropped), calls=calls)
    if not isinstance(exc, ModelError):
        return UnitOutcome(unit.id, "model_error", detail=_short(f"{type(exc).__name__}: {exc}"), calls=calls)
    return UnitOutcome(
        unit.id,
        "model_error",
        detail=_short(human_error(str(exc))),
        dropped=tuple(dropped),
        kind=failure_kind(exc),
        calls=calls,
    )


def _answer_parser(pr_paths: frozenset[str], dropped: list[fnd.Dropped]) -> Callable[[str], fnd.ModelAnswer]:
    """Parse one answer; `dropped` holds what the last attempt dropped, even when nothing was usable."""

    def parse(text: str) -> fnd.ModelAnswer:
        dropped.clear()
        try:
            parsed = fnd.parse_answer(text, clean=rules.redact, pr_paths=pr_paths)
        except fnd.NothingUsable as exc:
            dropped.extend(exc.dropped)
            raise
        dropped.extend(parsed.dropped)
        return parsed

    return parse


def _affordable(budget: Budget, units: Sequence[Unit], unit: Unit, max_tokens: int, *, others: int) -> bool:
    """Room for one more call for this unit beyond what the units still running or waiting
    were planned to spend (their calls, answers and prompts), so a continuation never takes
    what a planned unit needs."""
    limits, spent = budget.limits, budget.spent()
    waiting = [u for u in units if u.id != unit.id][: max(others, 0)]
    return (
        spent.calls + others + 1 <= limits.calls
        and spent.output_tokens + sum(u.answer_tokens for u in waiting) + max_tokens <= limits.output_tokens
        and spent.input_tokens + sum(u.input_tokens for u in waiting) + unit.input_tokens + max_tokens
        <= limits.input_tokens
    )


def _dropped_detail(dropped: fnd.Dropped, say: Say) -> str:
    """Which item was dropped, worded for the report; a malformed item's is the parser's own message."""
    if dropped.why == "malformed":
        return dropped.detail
    return say(f"dropped_item.{dropped.why}", where=dropped.where, path=repr(dropped.path))


def _short(text: str, limit: int = 300) -> str:
    text = rules.redact(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failure_gaps(outcomes: Sequence[UnitOutcome], run: _Run) -> list[Gap]:
    """One gap per distinct model failure, not one per unit: a dead endpoint is one loud line (also a
    warning, so it reaches stderr) whose `why` names it (`model_unreachable`, `model_auth`, ...)."""
    gap_text = run.renderer.gap_text
    gaps = [
        Gap(what=f"{gap_text(o.status)}: {o.detail}" if o.detail else gap_text(o.status), why=o.status)
        for o in outcomes
        if o.status == "unparsed"
    ]
    groups: dict[str, list[UnitOutcome]] = {}
    for o in outcomes:
        if o.status == "model_error":
            why = f"model_{o.kind}" if o.kind in ("unreachable", "auth", "unknown_model") else "model_error"
            groups.setdefault(why, []).append(o)
    for why, items in groups.items():
        sent = sum(o.calls for o in items)  # every attempt, as the budget table counts them
        text = gap_text(why) + (run.renderer.translate("gap.after_calls", n=sent) if sent else "")
        details = [o.detail for o in items if o.detail]
        if details and why != "model_unreachable":  # "Connection error." adds nothing to the sentence
            text += f": {details[0]}"
        gaps.append(Gap(what=text, why=why))
        run.warnings(text)
    return gaps


def _answer_stats(answers: Sequence[fnd.ModelAnswer]) -> AnswerStats:
    """What reading the answers took, over every answered unit (`answers` in report.json)."""
    return AnswerStats(
        answers=len(answers),
        normalised=dict(sorted(Counter(code for a in answers for code in a.normalised).items())),
        truncated=sum(1 for a in answers if a.missing),
        continued=sum(a.continued for a in answers),
        findings_cut=sum(a.cut_findings for a in answers),
    )
