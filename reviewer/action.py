"""`imreview action`: the runner's environment and event payload → reviews → sinks → outputs.

Only the PR from the event, the dispatch input, or (later) a scan of GITHUB_REPOSITORY is ever
written to; the model's output never chooses a target.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from reviewer import gate
from reviewer.config import CONFIG_KEYS, parse_bool, parse_input_value
from reviewer.errors import GitHubError, UsageError
from reviewer.events import RunRequest, plan_run, read_inputs, skip_reason
from reviewer.publish import (
    READ_ONLY_DETAIL,
    annotate,
    echo_untrusted,
    escape_data,
    mask,
    write_outputs,
    write_summary,
)
from reviewer.render import Renderer
from reviewer.report import PRIORITIES, VERDICT_RANK, Published, Report, priority_rank

if TYPE_CHECKING:
    from reviewer.source.github import GitHubClient

BOOL_INPUTS = {
    "post-comment": True,
    "inline-comments": False,
    "annotations": True,
    "skip-drafts": True,
    "skip-bots": True,
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
OUTPUT_NAMES = (
    "verdict",
    "publish-ready",
    "findings",
    "p1",
    "max-priority",
    "cost-usd",
    "report-path",
    "comment-url",
    "matrix",
)


@dataclass(frozen=True)
class ActionSettings:
    """The Action's own inputs; review settings go to `overrides` for `build_config`."""

    token: str
    api_url: str
    repository: str
    event_name: str
    run_id: str | None
    scratch: Path
    flags: Mapping[str, bool]
    config_path: str
    template_dir: str | None
    on_error: str
    overrides: Mapping[str, Any]


@dataclass(frozen=True)
class PrOutcome:
    """One PR's result, enough for the summary and the aggregated outputs (DESIGN 10.4)."""

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


def settings_from(env: Mapping[str, str], inputs: Mapping[str, str]) -> ActionSettings:
    """Every input checked up front; a bad one exits 2 naming the input."""
    flags = {
        name: parse_bool(inputs[name], f"input '{name}'") if inputs.get(name) else default
        for name, default in BOOL_INPUTS.items()
    }
    overrides: dict[str, Any] = {}
    for key, spec in CONFIG_KEYS.items():
        if (
            spec.input
            and inputs.get(spec.input)
            and inputs[spec.input] != CONFIG_INPUT_DEFAULTS.get(spec.input)
        ):
            value = parse_input_value(key, inputs[spec.input], spec.input_origin)
            if value is not None:
                overrides[key] = value
    on_error = inputs.get("on-error") or "warn"
    if on_error not in ("warn", "fail"):
        raise UsageError(f"input 'on-error': expected 'warn' or 'fail', got {on_error!r}")
    overrides["on_error"] = on_error
    scratch = Path(env.get("RUNNER_TEMP") or "/tmp") / "imreview"
    return ActionSettings(
        token=inputs.get("github-token") or env.get("GITHUB_TOKEN", "").strip(),
        api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").strip(),
        repository=env.get("GITHUB_REPOSITORY", "").strip(),
        event_name=env.get("GITHUB_EVENT_NAME", "").strip(),
        run_id=env.get("GITHUB_RUN_ID") or None,
        scratch=scratch,
        flags=flags,
        config_path=inputs.get("config-path") or ".github/imreview.yml",
        template_dir=inputs.get("template-dir") or None,
        on_error=on_error,
        overrides=overrides,
    )


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


def run_action(env: Mapping[str, str], stdout: TextIO | None = None) -> int:
    """The container's entry: never leaves the PR half-published, exits per DESIGN section 2."""
    out = stdout or sys.stdout
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    output_path = env.get("GITHUB_OUTPUT")
    on_error = "warn"
    try:
        inputs = read_inputs(env)
        on_error = inputs.get("on-error") or "warn"
        if inputs.get("github-token"):
            mask(out, inputs["github-token"])
        settings = settings_from(env, inputs)
        request = plan_run(
            settings.event_name,
            load_event(env.get("GITHUB_EVENT_PATH")),
            repository=settings.repository,
            inputs=inputs,
        )
    except UsageError as exc:
        return _usage_error(exc, out, summary_path, output_path)
    try:
        outcomes = _dispatch(request, settings, env, out)
    except UsageError as exc:  # e.g. the base branch's config file, an empty token: exit 2 naming it
        return _usage_error(exc, out, summary_path, output_path)
    except Exception as exc:  # unexpected: say what broke; warn → green step with an ::error
        detail = f"{type(exc).__name__}: {exc}"
        out.write(f"::error title=imreview failed::{escape_data(detail)}\n")
        echo_untrusted(out, traceback.format_exc())
        write_summary(summary_path, f"## imreview — review failed\n\n{_md_text(detail)}\n")
        write_outputs(output_path, _outputs([_failed(0, detail)], index_path=""))
        return 0 if on_error == "warn" else 3
    for outcome in outcomes:
        write_summary(summary_path, outcome.summary)
    index_path = _write_index(settings.scratch, outcomes) if len(outcomes) > 1 else ""
    write_outputs(output_path, _outputs(outcomes, index_path=index_path))
    for outcome in outcomes:
        if outcome.verdict == "incomplete":
            out.write(
                f"::warning title=imreview::review of #{outcome.number} is incomplete (see the job summary)\n"
            )
    return max((o.exit_code for o in outcomes), default=0)


def _usage_error(exc: UsageError, out: TextIO, summary_path: str | None, output_path: str | None) -> int:
    out.write(f"::error title=imreview configuration::{escape_data(str(exc))}\n")
    write_summary(summary_path, f"## imreview — configuration error\n\n{_md_text(str(exc))}\n")
    write_outputs(output_path, _outputs([_failed(0, str(exc))], index_path=""))
    return 2


def _dispatch(
    request: RunRequest, settings: ActionSettings, env: Mapping[str, str], out: TextIO
) -> list[PrOutcome]:
    renderer = Renderer(language=str(settings.overrides.get("language", "en")))
    if request.kind == "skip":
        return [_skipped(0, request.reason, renderer)]
    if request.kind == "scan":
        reason = renderer.translate(
            "action.scan_unavailable",
            "scheduled scans of open pull requests are not available in this version; "
            "use pull_request or workflow_dispatch with pr-number",
        )
        return [_skipped(0, f"{request.reason}: {reason}", renderer)]
    if not settings.token:
        raise UsageError("input 'github-token' is empty and GITHUB_TOKEN is not set")
    from reviewer.source.github import GitHubClient

    client = GitHubClient(settings.token, settings.api_url)
    outcomes = []
    for number in request.numbers:
        try:
            outcomes.append(_review_pr(client, request, number, settings, env, out))
        except GitHubError as exc:  # one unreadable PR must not hide the others' reviews
            outcomes.append(_unreadable(number, exc, settings.on_error, out))
    return outcomes


def _unreadable(number: int, exc: GitHubError, on_error: str, out: TextIO) -> PrOutcome:
    detail = f"could not read pull request #{number} through the API: {exc}"
    out.write(f"::error title=imreview::{escape_data(detail)}\n")
    return PrOutcome(
        number=number,
        verdict="incomplete",
        summary=f"## imreview — #{number} incomplete\n\n{_md_text(detail)}\n",
        cost_usd=None,
        exit_code=3 if on_error == "fail" else 0,
    )


def _review_pr(
    client: GitHubClient,
    request: RunRequest,
    number: int,
    settings: ActionSettings,
    env: Mapping[str, str],
    out: TextIO,
) -> PrOutcome:
    from reviewer.github_flow import NO_WRITING, base_templates, prepare_writing, repo_config
    from reviewer.review import analyse
    from reviewer.run import finish, report_json, summary_text
    from reviewer.source.github import GitHubSource

    repo = request.repo
    source = GitHubSource(client, repo, number, run_id=settings.run_id)
    pull = source.pull_info()
    plain = Renderer(language=str(settings.overrides.get("language", "en")))
    reason = skip_reason(
        draft=pull.draft,
        author=pull.author,
        author_type=pull.author_type,
        state=pull.state,
        explicit=request.explicit,
        skip_drafts=settings.flags["skip-drafts"],
        skip_bots=settings.flags["skip-bots"],
    )
    if reason:
        return _skipped(number, reason, plain)
    change = source.change()
    base_repo = pull.base_repo or repo
    config = repo_config(
        client, source, config_path=settings.config_path, overrides=settings.overrides, env=env
    )
    template_dir = None
    if settings.template_dir:
        scratch = settings.scratch / f"templates-{number}"
        template_dir, _ = base_templates(client, base_repo, pull.base_sha, settings.template_dir, scratch)
    renderer = Renderer(language=config.language, template_dir=template_dir)

    read_only = settings.event_name == "pull_request" and pull.cross_repo
    wants_write = settings.flags["post-comment"] or settings.flags["inline-comments"]

    def warn(message: str) -> None:
        echo_untrusted(out, message)

    writing = NO_WRITING
    if not read_only:
        writing = prepare_writing(
            client,
            repo,
            number,
            config,
            renderer,
            head_sha=change.snapshot.head.sha,
            post_comment=settings.flags["post-comment"],
            inline_comments=settings.flags["inline-comments"],
            warn=warn,
        )
    prior = writing.prior
    if prior.same and prior.state is not None:
        return _already_reviewed(
            number, prior.state, prior.comment_url or "", renderer, fail_on=config.fail_on
        )

    analysis = analyse(change, config, read_file=source.read_file, renderer=renderer, warn=warn)
    report, _ = finish(analysis, source, config, renderer, publisher=writing.publisher, prior=prior.state)
    if read_only and wants_write:
        notice = renderer.translate(
            "action.read_only",
            "read-only token (pull request from a fork): results are in the job summary and annotations only",
        )
        report = report.replace(published=(*report.published, Published("pull_request", False, notice)))
        out.write(f"::notice title=imreview::{escape_data(notice)}\n")
    elif any(not p.ok and p.detail == READ_ONLY_DETAIL for p in report.published):
        out.write(f"::notice title=imreview::{escape_data(READ_ONLY_DETAIL)}\n")
    dropped = 0
    if settings.flags["annotations"]:
        dropped = annotate(list(report.findings[: config.max_findings]), out).dropped
    settings.scratch.mkdir(parents=True, exist_ok=True)
    report_path = settings.scratch / f"report-{number}.json"
    report_path.write_text(report_json(report), encoding="utf-8")
    code = gate.exit_code(
        verdict_=report.verdict, findings=report.findings, fail_on=config.fail_on, on_error=config.on_error
    )
    return _from_report(
        number,
        report,
        summary_text(report, renderer, annotations_dropped=dropped),
        str(report_path),
        code,
    )


def _from_report(number: int, report: Report, summary: str, report_path: str, code: int) -> PrOutcome:
    counts = gate.counts(report.findings)
    url = next((p.url for p in report.published if p.sink == "comment" and p.ok and p.url), "")
    return PrOutcome(
        number=number,
        verdict=report.verdict,
        summary=summary,
        publish_ready=report.gate.publish_ready,
        findings=len(report.findings),
        p1=counts["P1"],
        max_priority=report.findings[0].priority if report.findings else "",
        cost_usd=report.budget.used.cost_usd,
        report_path=report_path,
        comment_url=url or "",
        exit_code=code,
    )


def _already_reviewed(
    number: int, state: Mapping[str, Any], url: str, renderer: Renderer, *, fail_on: str
) -> PrOutcome:
    """The rerun skip: outputs and the exit code come from the marker, so a failed step stays failed."""
    head = str(state.get("head", ""))
    params = {"head": head[:12], "verdict": str(state.get("verdict", ""))}
    default = "already reviewed at {head} with the same configuration: no model call was made ({verdict})."
    text = renderer.translate("action.already_reviewed", default, **params)
    link = f" [comment]({url})" if url else ""
    cost = state.get("cost_usd")
    top = str(state.get("max_priority") or "")
    failing = fail_on != "never" and top in PRIORITIES and priority_rank(top) <= priority_rank(fail_on)
    return PrOutcome(
        number=number,
        verdict=str(state.get("verdict", "")),
        summary=f"## imreview — #{number}\n\n{text}{link}\n",
        publish_ready=True,
        findings=int(state.get("findings") or 0),
        p1=int(state.get("p1") or 0),
        max_priority=str(state.get("max_priority") or ""),
        cost_usd=0.0 if isinstance(cost, (int, float)) else None,
        comment_url=url,
        exit_code=1 if failing else 0,
    )


def _skipped(number: int, reason: str, renderer: Renderer) -> PrOutcome:
    title = f"#{number}" if number else ""
    head = renderer.translate("action.skipped", "skipped") + (f" — {title}" if title else "")
    return PrOutcome(
        number=number, verdict="skipped", summary=f"## imreview — {head}\n\n{_md_text(reason)}\n"
    )


def _failed(number: int, detail: str) -> PrOutcome:
    return PrOutcome(number=number, verdict="incomplete", summary=detail, cost_usd=None)


def _md_text(text: str) -> str:
    from reviewer.render import untrusted

    return untrusted(text)


def _write_index(scratch: Path, outcomes: Sequence[PrOutcome]) -> str:
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "index.json"
    index = {
        "schema": "imreview.index/v1",
        "reports": [
            {"number": o.number, "verdict": o.verdict, "report_path": o.report_path or None} for o in outcomes
        ],
    }
    path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return str(path)


def _outputs(outcomes: Sequence[PrOutcome], *, index_path: str) -> dict[str, str]:
    """DESIGN 10.4: worst verdict, sums, highest priority, cost empty when unknown."""
    worst = max(outcomes, key=lambda o: VERDICT_RANK.get(o.verdict, 0))
    costs = [o.cost_usd for o in outcomes]
    priorities = sorted(o.max_priority for o in outcomes if o.max_priority)
    return {
        "verdict": worst.verdict,
        "publish-ready": str(all(o.publish_ready for o in outcomes)).lower(),
        "findings": str(sum(o.findings for o in outcomes)),
        "p1": str(sum(o.p1 for o in outcomes)),
        "max-priority": priorities[0] if priorities else "",
        "cost-usd": "" if any(c is None for c in costs) else f"{sum(c or 0.0 for c in costs):.4f}",
        "report-path": index_path or (outcomes[0].report_path if len(outcomes) == 1 else ""),
        "comment-url": "\n".join(o.comment_url for o in outcomes if o.comment_url),
        "matrix": "",
    }
