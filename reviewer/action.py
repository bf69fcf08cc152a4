"""`imreview action`: the runner's environment and event payload → reviews → sinks → outputs.

Only the PR from the event, the dispatch input, or a scan of GITHUB_REPOSITORY is ever
written to; the model's output never chooses a target.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from reviewer import progress
from reviewer.commands import COMMAND_EVENTS, CommentEvent, read_comment_event
from reviewer.config import CONFIG_KEYS, Overrides, parse_bool, parse_input_value
from reviewer.errors import GitHubError, UsageError
from reviewer.events import RunRequest, SkipRules, label_names, plan_run, read_inputs
from reviewer.pull import (
    PrOutcome,
    PullJob,
    echo,
    failed,
    review_pull,
    run_text,
    skipped_outcome,
)
from reviewer.render import Renderer, Say, english, run_renderer
from reviewer.report import VERDICT_RANK
from reviewer.report_files import ReportDir, report_dir
from reviewer.runner_sinks import Rendered, StepOutputs, SummaryFile, echo_untrusted, escape_data, mask
from reviewer.state import check_state_key

if TYPE_CHECKING:
    from reviewer.source.github import GitHubClient

BOOL_INPUTS = {
    "post-comment": True,
    "inline-comments": False,
    "annotations": True,
    "skip-drafts": True,
    "skip-bots": True,
    "scan-matrix": False,
}
CONFIG_INPUT_DEFAULTS = {
    "max-cost-usd": "1.00",
    "max-input-tokens": "200000",
    "max-output-tokens": "24000",
    "max-seconds": "600",
    "max-calls": "24",
    "max-concurrency": "4",
    "max-findings": "6",
    "fail-on": "never",
    "language": "en",
}
"""action.yml's defaults for inputs that mirror config keys. The runner passes every declared input,
so an input still at its default is "not given": the base branch's config file then applies."""


@dataclass(frozen=True)
class ActionSettings:
    """The Action's own inputs, typed; `job` is the template of every PR's `PullJob` (its repo, number
    and `explicit` come from the run's request), with review settings as `overrides`."""

    token: str
    api_url: str
    repository: str
    event_name: str
    on_error: str
    job: PullJob
    scan_limit: int = 20
    scan_labels: tuple[str, ...] = ()
    scan_matrix: bool = False
    head_sha: str | None = None


@dataclass(frozen=True)
class RunResult:
    """What a run writes: a run-level summary (scan) before each PR's, and the `matrix` output."""

    outcomes: list[PrOutcome]
    head: str = ""
    matrix: str = ""


def settings_from(env: Mapping[str, str], inputs: Mapping[str, str]) -> ActionSettings:
    """Every input checked up front, in this order; a bad one exits 2 naming the input. An empty
    on/off input takes action.yml's default."""
    _require_runner(env)
    switch = {
        name: parse_bool(inputs[name], f"input '{name}'") if inputs.get(name) else default
        for name, default in BOOL_INPUTS.items()
    }
    overrides = _config_overrides(inputs)
    on_error = inputs.get("on-error") or "warn"
    if on_error not in ("warn", "fail"):  # a typo is named now, not guessed at when a review fails
        raise UsageError(f"input 'on-error': expected 'warn' or 'fail', got {on_error!r}")
    overrides["on_error"] = on_error
    limit, cap = _limit_and_cap(inputs)
    scratch = Path(env.get("RUNNER_TEMP") or "/tmp") / "imreview"
    event_name = env.get("GITHUB_EVENT_NAME", "").strip()
    job = PullJob(
        repo="",
        number=0,
        overrides=Overrides.given(overrides),
        config_path=inputs.get("config-path") or ".github/imreview.yml",
        base_template_dir=inputs.get("template-dir") or None,
        env=env,
        skip=SkipRules(drafts=switch["skip-drafts"], bots=switch["skip-bots"], closed=True, reviewed=True),
        post_comment=switch["post-comment"],
        inline_comments=switch["inline-comments"],
        annotations=switch["annotations"],
        forks_read_only=event_name == "pull_request",
        run_id=env.get("GITHUB_RUN_ID") or None,
        scratch=scratch,
        max_pr_cost_usd=cap,
        reports=report_dir(env, scratch),
    )
    return ActionSettings(
        token=inputs.get("github-token") or env.get("GITHUB_TOKEN", "").strip(),
        api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").strip(),
        repository=env.get("GITHUB_REPOSITORY", "").strip(),
        event_name=event_name,
        on_error=on_error,
        job=job,
        scan_limit=limit,
        scan_labels=label_names(inputs.get("scan-labels", "")),
        scan_matrix=switch["scan-matrix"],
        head_sha=env.get("GITHUB_SHA") or None,
    )


def _require_runner(env: Mapping[str, str]) -> None:
    """Outside a runner the event and repository are unknown: say which command to use instead."""
    runner = ("GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY")
    missing = [name for name in runner if not env.get(name, "").strip()]
    if missing:
        raise UsageError(
            f"runner variable(s) {', '.join(missing)} not set: this entrypoint runs as a GitHub Actions"
            " step (elsewhere use `imreview review` or `imreview pr`)"
        )


def _limit_and_cap(inputs: Mapping[str, str]) -> tuple[int, float]:
    """`scan-limit` in ASCII digits only (`int()` would also take ' 2', '-1' or '1_000'), and
    `max-pr-cost-usd`, a finite amount >= 0."""
    limit = inputs.get("scan-limit") or "20"
    if not limit.isascii() or not limit.isdigit():
        raise UsageError(f"input 'scan-limit': expected a whole number of pull requests, got {limit!r}")
    cap_text = inputs.get("max-pr-cost-usd") or "5.00"
    try:
        cap = float(cap_text)
    except ValueError:
        cap = -1.0
    if not cap >= 0 or cap == float("inf"):
        raise UsageError(f"input 'max-pr-cost-usd': expected an amount in US dollars >= 0, got {cap_text!r}")
    return int(limit), cap


def _config_overrides(inputs: Mapping[str, str]) -> dict[str, object]:
    """The inputs that mirror config keys and differ from action.yml's defaults: only those override
    the base branch's config file."""
    overrides: dict[str, object] = {}
    for key, spec in CONFIG_KEYS.items():
        text = inputs.get(spec.input or "")
        if spec.input and text and text != CONFIG_INPUT_DEFAULTS.get(spec.input):
            value = parse_input_value(key, text, spec.input_origin)
            if value is not None:
                overrides[key] = value
    return overrides


def run_action(env: Mapping[str, str], stdout: TextIO | None = None) -> int:
    """The container's entry: never leaves the PR half-published, exits per DESIGN section 2."""
    out = stdout or sys.stdout
    try:
        settings, request, command = _prepare(env, out)
    except UsageError as exc:
        return _usage_error(exc, out, env)
    try:
        with progress.use(progress.for_environment(env, out=out)):
            result = _dispatch(request, command, settings, env, out)
    except UsageError as exc:  # e.g. the base branch's config file, an empty token: exit 2 naming it
        return _usage_error(exc, out, env)
    except Exception as exc:  # unexpected: say what broke; warn → green step with an ::error
        detail = f"{type(exc).__name__}: {exc}"
        out.write(f"::error title=imreview failed::{escape_data(detail)}\n")
        echo_untrusted(out, traceback.format_exc())
        _publish_failure(env, "failed", detail)
        return 0 if settings.on_error == "warn" else 3
    outcomes = result.outcomes  # the runner sinks, a warning per incomplete review, the worst exit code
    index_path = (
        _write_index(settings.job.reports, outcomes) if len(outcomes) > 1 and settings.job.reports else ""
    )
    summaries = [*([result.head] if result.head else []), *(o.summary for o in outcomes)]
    say = functools.partial(_say_in, settings.job.overrides.language)
    publish_run(env, summaries, _outputs(outcomes, index_path=index_path, matrix=result.matrix), say)
    for outcome in outcomes:
        if outcome.verdict == "incomplete":
            out.write(
                f"::warning title=imreview::review of #{outcome.number} is incomplete (see the job summary)\n"
            )
    return max((o.exit_code for o in outcomes), default=0)


def _prepare(env: Mapping[str, str], out: TextIO) -> tuple[ActionSettings, RunRequest, CommentEvent | None]:
    """Everything that can be wrong with the workflow, found before any request: a usage error (exit
    2). The token is masked first, so no later line of the log can show it."""
    inputs = read_inputs(env)
    if inputs.get("github-token"):
        mask(out, inputs["github-token"])
    settings = settings_from(env, inputs)
    check_state_key(env)
    payload = _load_event(env.get("GITHUB_EVENT_PATH"))
    command = None  # a comment event with `mode: auto` is a possible command (docs/commands.md)
    if settings.event_name in COMMAND_EVENTS and (inputs.get("mode") or "auto") == "auto":
        command = read_comment_event(settings.event_name, payload, repository=settings.repository)
    routed = inputs if command is None else {**inputs, "mode": "auto"}
    return (
        settings,
        plan_run(settings.event_name, payload, repository=settings.repository, inputs=routed),
        command,
    )


def _load_event(path: str | None) -> Mapping[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8")) if path else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"GITHUB_EVENT_PATH {path!r} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"GITHUB_EVENT_PATH {path!r} does not hold a JSON object")
    return data


def _usage_error(exc: UsageError, out: TextIO, env: Mapping[str, str]) -> int:
    out.write(f"::error title=imreview configuration::{escape_data(str(exc))}\n")
    _publish_failure(env, "config_error", str(exc))
    return 2


def publish_run(
    env: Mapping[str, str], summaries: Sequence[str], outputs: Mapping[str, str], say: Say = english
) -> None:
    """The run's runner sinks: each summary appended to the job summary (a scan's table first, then
    one per PR), then the step outputs, aggregated over the run (DESIGN 10.4). `say` words the note
    of a summary cut to fit (in the run's language)."""
    summary = SummaryFile(env.get("GITHUB_STEP_SUMMARY"), say)
    for text in summaries:
        summary.publish(None, Rendered(summary=text))
    StepOutputs(env.get("GITHUB_OUTPUT")).publish(None, Rendered(outputs=outputs))


def _dispatch(
    request: RunRequest,
    command: CommentEvent | None,
    settings: ActionSettings,
    env: Mapping[str, str],
    out: TextIO,
) -> RunResult:
    if command is not None:
        from reviewer.commanded import run_command

        client = _client(settings, env)
        job = _job(dataclasses.replace(request, explicit=True), command.number, settings)
        return RunResult([run_command(client, command, job, warn=echo(out), notices=out)])
    renderer = settings.job.messages()
    if request.kind == "skip":
        why = request.reason.words(renderer.translate) if request.reason is not None else ""
        return RunResult([skipped_outcome(0, why, renderer)])
    client = _client(settings, env)
    if request.kind == "scan":  # one table for the run, then each reviewed PR's summary; or the matrix
        from reviewer.scan import ScanSettings, scan, summary

        scanned = ScanSettings(
            job=_job(request, 0, settings),
            limit=settings.scan_limit,
            labels=settings.scan_labels,
            plan_only=settings.scan_matrix,
            config_ref=settings.head_sha,
        )
        result = scan(client, scanned, warn=echo(out), notices=out)
        matrix = result.matrix_json() if settings.scan_matrix else ""
        return RunResult(result.outcomes, head=summary(result, renderer), matrix=matrix)
    outcomes = []
    for number in request.numbers:
        try:
            outcomes.append(review_pull(client, _job(request, number, settings), warn=echo(out), notices=out))
        except UsageError:
            raise
        except Exception as exc:  # one PR unreadable or broken must not hide the others' reviews
            if isinstance(exc, GitHubError):
                detail = renderer.translate("action.unreadable", number=number, error=str(exc))
                out.write(f"::error title=imreview::{escape_data(detail)}\n")
            else:
                detail = f"#{number}: {type(exc).__name__}: {exc}"
                out.write(f"::error title=imreview failed::{escape_data(detail)}\n")
                echo_untrusted(out, traceback.format_exc())
            outcomes.append(failed(number, exc, renderer, on_error=settings.on_error))
    return RunResult(outcomes)


def _client(settings: ActionSettings, env: Mapping[str, str]) -> GitHubClient:
    if not settings.token:
        raise UsageError("input 'github-token' is empty and GITHUB_TOKEN is not set")
    from reviewer.source.github import GitHubClient, github_timeout

    return GitHubClient(settings.token, settings.api_url, timeout=github_timeout(env))


def _job(request: RunRequest, number: int, settings: ActionSettings) -> PullJob:
    """The Action's rules for one PR: skip drafts and bots (unless named), closed PRs and reviewed heads."""
    skip = dataclasses.replace(settings.job.skip, explicit=request.explicit)
    return dataclasses.replace(settings.job, repo=request.repo, number=number, skip=skip)


def _publish_failure(env: Mapping[str, str], kind: str, detail: str) -> None:
    """The summary in the `language` input's language (the packaged templates; English when the
    input is unusable) and the outputs of a run that did not get to review."""
    try:
        renderer = Renderer(language=read_inputs(env).get("language") or "en")
    except UsageError:
        renderer = Renderer()
    outcome = PrOutcome(0, "incomplete", detail, cost_usd=None)
    publish_run(
        env, [run_text(renderer, kind, detail=detail)], _outputs([outcome], index_path=""), renderer.translate
    )


def _say_in(language: str | None, key: str, default: str | None = None, **params: Any) -> str:
    """A run-level sentence in the run's `language`, the renderer built only when one is worded."""
    return run_renderer(language, unread=True).translate(key, default, **params)


def _write_index(reports: ReportDir, outcomes: Sequence[PrOutcome]) -> str:
    index = {
        "schema": "imreview.index/v1",
        "reports": [
            {"number": o.number, "verdict": o.verdict, "report_path": o.report_path or None} for o in outcomes
        ],
    }
    return reports.save("index.json", json.dumps(index, indent=2) + "\n")


def _outputs(outcomes: Sequence[PrOutcome], *, index_path: str, matrix: str = "") -> dict[str, str]:
    """DESIGN 10.4: worst verdict, sums, highest priority; the cost is empty when any PR's is unknown
    (a partial sum would understate the run's spend)."""
    worst = max(outcomes, key=lambda o: VERDICT_RANK.get(o.verdict, 0), default=None)
    return {
        "verdict": worst.verdict if worst is not None else "skipped",
        "publish-ready": str(all(o.publish_ready for o in outcomes)).lower(),
        "findings": str(sum(o.findings for o in outcomes)),
        "p1": str(sum(o.p1 for o in outcomes)),
        "max-priority": min((o.max_priority for o in outcomes if o.max_priority), default=""),  # P1 < P2
        "cost-usd": _total_cost([o.cost_usd for o in outcomes]),
        "report-path": index_path or (outcomes[0].report_path if len(outcomes) == 1 else ""),
        "comment-url": "\n".join(o.comment_url for o in outcomes if o.comment_url),
        "matrix": matrix,
    }


def _total_cost(costs: Sequence[float | None]) -> str:
    return "" if any(c is None for c in costs) else f"{sum(c or 0.0 for c in costs):.4f}"
