"""`imreview action`: the runner's environment and event payload → reviews → sinks → outputs.

Only the PR from the event, the dispatch input, or a scan of GITHUB_REPOSITORY is ever
written to; the model's output never chooses a target.
"""

from __future__ import annotations

import dataclasses
import json
import re
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
from reviewer.events import RunRequest, plan_run, read_inputs
from reviewer.pull import (
    PrOutcome,
    PullJob,
    SkipRules,
    crashed,
    echo,
    review_pull,
    run_text,
    skipped_outcome,
    unreadable,
)
from reviewer.render import Renderer
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
class RunOptions:
    """The Action's on/off inputs (`BOOL_INPUTS`): which sinks are on, which PRs a scan skips, and
    whether a schedule run plans a fan-out matrix instead of reviewing."""

    post_comment: bool
    inline_comments: bool
    annotations: bool
    skip_drafts: bool
    skip_bots: bool
    scan_matrix: bool


@dataclass(frozen=True)
class ActionSettings:
    """The Action's own inputs, typed; review settings are `overrides` for `build_config`."""

    token: str
    api_url: str
    repository: str
    event_name: str
    run_id: str | None
    scratch: Path
    reports: ReportDir
    options: RunOptions
    config_path: str
    template_dir: str | None
    on_error: str
    overrides: Overrides
    scan_limit: int = 20
    scan_labels: tuple[str, ...] = ()
    head_sha: str | None = None
    max_pr_cost_usd: float = 5.0


@dataclass(frozen=True)
class RunResult:
    """What a run writes: a run-level summary (scan) before each PR's, and the `matrix` output."""

    outcomes: list[PrOutcome]
    head: str = ""
    matrix: str = ""


RUNNER_VARIABLES = ("GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY")


def settings_from(env: Mapping[str, str], inputs: Mapping[str, str]) -> ActionSettings:
    """Every input checked up front; a bad one exits 2 naming the input."""
    _require_runner(env)
    options = _run_options(inputs)
    overrides = _config_overrides(inputs)
    on_error = _on_error(inputs)
    overrides["on_error"] = on_error
    scratch = Path(env.get("RUNNER_TEMP") or "/tmp") / "imreview"
    scan_limit = _scan_limit(inputs)
    pr_cap = _non_negative(inputs.get("max-pr-cost-usd") or "5.00", "max-pr-cost-usd")
    return ActionSettings(
        token=inputs.get("github-token") or env.get("GITHUB_TOKEN", "").strip(),
        api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").strip(),
        repository=env.get("GITHUB_REPOSITORY", "").strip(),
        event_name=env.get("GITHUB_EVENT_NAME", "").strip(),
        run_id=env.get("GITHUB_RUN_ID") or None,
        scratch=scratch,
        reports=report_dir(env, scratch),
        options=options,
        config_path=inputs.get("config-path") or ".github/imreview.yml",
        template_dir=inputs.get("template-dir") or None,
        on_error=on_error,
        overrides=Overrides.given(overrides),
        scan_limit=scan_limit,
        scan_labels=_scan_labels(inputs),
        head_sha=env.get("GITHUB_SHA") or None,
        max_pr_cost_usd=pr_cap,
    )


def _require_runner(env: Mapping[str, str]) -> None:
    """Outside a runner the event and repository are unknown: say which command to use instead."""
    missing = [name for name in RUNNER_VARIABLES if not env.get(name, "").strip()]
    if missing:
        raise UsageError(
            f"runner variable(s) {', '.join(missing)} not set: this entrypoint runs as a GitHub Actions"
            " step (elsewhere use `imreview review` or `imreview pr`)"
        )


def _run_options(inputs: Mapping[str, str]) -> RunOptions:
    """The on/off inputs, in `BOOL_INPUTS` order (the first bad one is the one named); an empty
    input takes action.yml's default."""

    def switch(name: str) -> bool:
        return parse_bool(inputs[name], f"input '{name}'") if inputs.get(name) else BOOL_INPUTS[name]

    return RunOptions(**{name.replace("-", "_"): switch(name) for name in BOOL_INPUTS})


def _config_overrides(inputs: Mapping[str, str]) -> dict[str, object]:
    """The inputs that mirror config keys and differ from action.yml's defaults: only those override
    the base branch's config file."""
    overrides: dict[str, object] = {}
    for key, spec in CONFIG_KEYS.items():
        if not spec.input:
            continue
        text = inputs.get(spec.input)
        if text and text != CONFIG_INPUT_DEFAULTS.get(spec.input):
            value = parse_input_value(key, text, spec.input_origin)
            if value is not None:
                overrides[key] = value
    return overrides


def _on_error(inputs: Mapping[str, str]) -> str:
    """Only `warn` or `fail`: a typo is named now, not guessed at when a review fails."""
    on_error = inputs.get("on-error") or "warn"
    if on_error not in ("warn", "fail"):
        raise UsageError(f"input 'on-error': expected 'warn' or 'fail', got {on_error!r}")
    return on_error


def _scan_limit(inputs: Mapping[str, str]) -> int:
    """ASCII digits only: `int()` would also take ' 2', '-1' or '1_000'."""
    limit_text = inputs.get("scan-limit") or "20"
    if not limit_text.isascii() or not limit_text.isdigit():
        raise UsageError(f"input 'scan-limit': expected a whole number of pull requests, got {limit_text!r}")
    return int(limit_text)


def _scan_labels(inputs: Mapping[str, str]) -> tuple[str, ...]:
    """YAML lets a workflow write the labels one a line or comma-separated."""
    return tuple(
        label.strip() for label in re.split(r"[\n,]", inputs.get("scan-labels", "")) if label.strip()
    )


def _non_negative(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"input '{name}': expected an amount in US dollars >= 0, got {text!r}")
    return value


def load_event(path: str | None) -> Mapping[str, Any]:
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"GITHUB_EVENT_PATH {path!r} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"GITHUB_EVENT_PATH {path!r} does not hold a JSON object")
    return data


@dataclass(frozen=True)
class _Run:
    """A run whose inputs and event were all read and checked before any request was made."""

    settings: ActionSettings
    request: RunRequest
    command: CommentEvent | None


def run_action(env: Mapping[str, str], stdout: TextIO | None = None) -> int:
    """The container's entry: never leaves the PR half-published, exits per DESIGN section 2."""
    out = stdout or sys.stdout
    try:
        run = _prepare(env, out)
    except UsageError as exc:
        return _usage_error(exc, out, env)
    try:
        with progress.use(progress.for_environment(env, out=out)):
            result = _execute(run, env, out)
    except UsageError as exc:  # e.g. the base branch's config file, an empty token: exit 2 naming it
        return _usage_error(exc, out, env)
    except Exception as exc:  # unexpected: say what broke; warn → green step with an ::error
        return _run_crashed(exc, out, env, on_error=run.settings.on_error)
    return _finish(result, run.settings, env, out)


def _prepare(env: Mapping[str, str], out: TextIO) -> _Run:
    """Everything that can be wrong with the workflow, found before any work: a usage error (exit 2).
    The token is masked first, so no later line of the log can show it."""
    inputs = read_inputs(env)
    if inputs.get("github-token"):
        mask(out, inputs["github-token"])
    settings = settings_from(env, inputs)
    check_state_key(env)
    payload = load_event(env.get("GITHUB_EVENT_PATH"))
    command = comment_command(settings, payload, inputs)
    request = plan_run(
        settings.event_name,
        payload,
        repository=settings.repository,
        inputs=inputs if command is None else {**inputs, "mode": "auto"},
    )
    return _Run(settings, request, command)


def _execute(run: _Run, env: Mapping[str, str], out: TextIO) -> RunResult:
    if run.command is not None:
        return _command(run.command, run.request, run.settings, env, out)
    return _dispatch(run.request, run.settings, env, out)


def _run_crashed(exc: Exception, out: TextIO, env: Mapping[str, str], *, on_error: str) -> int:
    """An unexpected failure still leaves a summary and outputs; `warn` keeps the step green."""
    detail = f"{type(exc).__name__}: {exc}"
    out.write(f"::error title=imreview failed::{escape_data(detail)}\n")
    echo_untrusted(out, traceback.format_exc())
    _publish_failure(env, "failed", detail)
    return 0 if on_error == "warn" else 3


def _finish(result: RunResult, settings: ActionSettings, env: Mapping[str, str], out: TextIO) -> int:
    """The runner sinks for a finished run, a warning per incomplete review, and the worst exit code."""
    outcomes = result.outcomes
    index_path = _write_index(settings.reports, outcomes) if len(outcomes) > 1 else ""
    summaries = [*([result.head] if result.head else []), *(o.summary for o in outcomes)]
    publish_run(env, summaries, _outputs(outcomes, index_path=index_path, matrix=result.matrix))
    for outcome in outcomes:
        if outcome.verdict == "incomplete":
            out.write(
                f"::warning title=imreview::review of #{outcome.number} is incomplete (see the job summary)\n"
            )
    return max((o.exit_code for o in outcomes), default=0)


def _usage_error(exc: UsageError, out: TextIO, env: Mapping[str, str]) -> int:
    out.write(f"::error title=imreview configuration::{escape_data(str(exc))}\n")
    _publish_failure(env, "config_error", str(exc))
    return 2


def publish_run(env: Mapping[str, str], summaries: Sequence[str], outputs: Mapping[str, str]) -> None:
    """The run's runner sinks: each summary appended to the job summary (a scan's table first, then
    one per PR), then the step outputs, aggregated over the run (DESIGN 10.4)."""
    summary = SummaryFile(env.get("GITHUB_STEP_SUMMARY"))
    for text in summaries:
        summary.publish(None, Rendered(summary=text))
    StepOutputs(env.get("GITHUB_OUTPUT")).publish(None, Rendered(outputs=outputs))


def _dispatch(
    request: RunRequest, settings: ActionSettings, env: Mapping[str, str], out: TextIO
) -> RunResult:
    renderer = Renderer(language=settings.overrides.language or "en")
    if request.kind == "skip":
        return RunResult([skipped_outcome(0, request.reason, renderer)])
    client = _client(settings, env)
    if request.kind == "scan":
        return _scan(client, request, settings, env, out)
    outcomes = []
    for number in request.numbers:
        try:
            outcomes.append(
                review_pull(client, _job(request, number, settings, env), warn=echo(out), notices=out)
            )
        except GitHubError as exc:  # one unreadable PR must not hide the others' reviews
            detail = renderer.translate("action.unreadable", number=number, error=str(exc))
            out.write(f"::error title=imreview::{escape_data(detail)}\n")
            outcomes.append(unreadable(number, exc, renderer, on_error=settings.on_error))
        except UsageError:
            raise
        except Exception as exc:  # unexpected, in one PR: name it and go on with the others
            detail = f"#{number}: {type(exc).__name__}: {exc}"
            out.write(f"::error title=imreview failed::{escape_data(detail)}\n")
            echo_untrusted(out, traceback.format_exc())
            outcomes.append(crashed(number, exc, renderer, on_error=settings.on_error))
    return RunResult(outcomes)


def comment_command(
    settings: ActionSettings, payload: Mapping[str, Any], inputs: Mapping[str, str]
) -> CommentEvent | None:
    """A comment event with `mode: auto` is a possible command (docs/commands.md)."""
    if settings.event_name not in COMMAND_EVENTS or (inputs.get("mode") or "auto") != "auto":
        return None
    return read_comment_event(settings.event_name, payload, repository=settings.repository)


def _command(
    command: CommentEvent, request: RunRequest, settings: ActionSettings, env: Mapping[str, str], out: TextIO
) -> RunResult:
    from reviewer.commanded import run_command

    client = _client(settings, env)
    job = _job(dataclasses.replace(request, explicit=True), command.number, settings, env)
    return RunResult([run_command(client, command, job, warn=echo(out), notices=out)])


def _client(settings: ActionSettings, env: Mapping[str, str]) -> GitHubClient:
    if not settings.token:
        raise UsageError("input 'github-token' is empty and GITHUB_TOKEN is not set")
    from reviewer.source.github import GitHubClient, github_timeout

    return GitHubClient(settings.token, settings.api_url, timeout=github_timeout(env))


def _scan(
    client: GitHubClient, request: RunRequest, settings: ActionSettings, env: Mapping[str, str], out: TextIO
) -> RunResult:
    """Schedule mode: one table for the run, then each reviewed PR's summary; or the fan-out matrix."""
    from reviewer.scan import ScanSettings, scan, summary

    job = _job(request, 0, settings, env)
    result = scan(
        client,
        ScanSettings(
            repo=request.repo,
            job=job,
            limit=settings.scan_limit,
            labels=settings.scan_labels,
            skip_drafts=settings.options.skip_drafts,
            skip_bots=settings.options.skip_bots,
            plan_only=settings.options.scan_matrix,
            config_ref=settings.head_sha,
        ),
        warn=echo(out),
        notices=out,
        scratch=settings.scratch,
    )
    renderer = Renderer(language=settings.overrides.language or "en")
    return RunResult(
        result.outcomes,
        head=summary(result, renderer),
        matrix=result.matrix_json() if settings.options.scan_matrix else "",
    )


def _job(request: RunRequest, number: int, settings: ActionSettings, env: Mapping[str, str]) -> PullJob:
    """The Action's rules for one PR: skip drafts and bots (unless named), closed PRs and reviewed heads."""
    return PullJob(
        repo=request.repo,
        number=number,
        overrides=settings.overrides,
        config_path=settings.config_path,
        base_template_dir=settings.template_dir,
        env=env,
        skip=SkipRules(
            drafts=settings.options.skip_drafts,
            bots=settings.options.skip_bots,
            closed=True,
            reviewed=True,
            explicit=request.explicit,
        ),
        post_comment=settings.options.post_comment,
        inline_comments=settings.options.inline_comments,
        annotations=settings.options.annotations,
        forks_read_only=settings.event_name == "pull_request",
        run_id=settings.run_id,
        scratch=settings.scratch,
        max_pr_cost_usd=settings.max_pr_cost_usd,
        reports=settings.reports,
    )


def _publish_failure(env: Mapping[str, str], kind: str, detail: str) -> None:
    failed = PrOutcome(number=0, verdict="incomplete", summary=detail, cost_usd=None)
    publish_run(env, [run_text(_plain_renderer(env), kind, detail=detail)], _outputs([failed], index_path=""))


def _plain_renderer(env: Mapping[str, str]) -> Renderer:
    """The packaged templates in the `language` input's language (English when it is unusable)."""
    try:
        return Renderer(language=read_inputs(env).get("language") or "en")
    except UsageError:
        return Renderer()


def _write_index(reports: ReportDir, outcomes: Sequence[PrOutcome]) -> str:
    index = {
        "schema": "imreview.index/v1",
        "reports": [
            {"number": o.number, "verdict": o.verdict, "report_path": o.report_path or None} for o in outcomes
        ],
    }
    return reports.save("index.json", json.dumps(index, indent=2) + "\n")


def _outputs(outcomes: Sequence[PrOutcome], *, index_path: str, matrix: str = "") -> dict[str, str]:
    """DESIGN 10.4: worst verdict, sums, highest priority, cost empty when unknown."""
    worst = max(outcomes, key=lambda o: VERDICT_RANK.get(o.verdict, 0), default=None)
    return {
        "verdict": worst.verdict if worst is not None else "skipped",
        "publish-ready": str(all(o.publish_ready for o in outcomes)).lower(),
        "findings": str(sum(o.findings for o in outcomes)),
        "p1": str(sum(o.p1 for o in outcomes)),
        "max-priority": min((o.max_priority for o in outcomes if o.max_priority), default=""),  # P1 < P2
        "cost-usd": _total_cost(outcomes),
        "report-path": index_path or (outcomes[0].report_path if len(outcomes) == 1 else ""),
        "comment-url": "\n".join(o.comment_url for o in outcomes if o.comment_url),
        "matrix": matrix,
    }


def _total_cost(outcomes: Sequence[PrOutcome]) -> str:
    """Empty when any PR's cost is unknown: a partial sum would understate the run's spend."""
    costs = [o.cost_usd for o in outcomes]
    return "" if any(c is None for c in costs) else f"{sum(c or 0.0 for c in costs):.4f}"
