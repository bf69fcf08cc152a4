"""The end stages shared by `review`, `pr` and `action` (DESIGN 10.1): gate (the head re-read) →
render the PR bodies once (the gate then records their sizes) → publish → the job summary, report
and outputs.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from reviewer import gate
from reviewer.config import Config, config_hash
from reviewer.dismissals import merged
from reviewer.errors import UsageError
from reviewer.publish import COMMENT_LIMIT, utf16_len
from reviewer.render import Renderer, fit
from reviewer.report import Report
from reviewer.review import Analysis, analyse, conclude
from reviewer.runner_sinks import SUMMARY_LIMIT_BYTES, echo_untrusted
from reviewer.runner_sinks import Rendered as Rendered
from reviewer.source import Source
from reviewer.state import StickyState

Warn = Callable[[str], None]


def state_for(
    report: Report, analysis: Analysis, config: Config, renderer: Renderer, prior: StickyState | None
) -> StickyState:
    """The sticky marker's state (DESIGN 6): full shas, config hash, cumulative cost, and what an
    incremental review after a push needs (the findings to carry; whether the review was complete)."""
    counts = gate.counts(report.findings)
    cost = report.budget.used.cost_usd
    prior_total = prior.total_cost_usd if prior is not None else None
    known = [c for c in (cost, prior_total) if c is not None]  # an unpriced run keeps earlier totals
    total = round(sum(known), 6) if known else None
    heads = list(prior.reviewed_heads) if prior is not None else []
    if report.snapshot.head.sha not in heads:
        heads.append(report.snapshot.head.sha)
    return StickyState(
        head=report.snapshot.head.sha,
        base=report.snapshot.base.sha,
        config=config_hash(config, renderer.templates_digest()),
        model=config.model or "",
        cost_usd=cost,
        total_cost_usd=total,
        reviewed_heads=tuple(heads[-20:]),
        verdict=report.verdict,
        findings=len(report.findings),
        p1=counts["P1"],
        max_priority=report.findings[0].priority if report.findings else "",
        merge_base=report.snapshot.merge_base,
        complete=analysis.complete and report.verdict != "incomplete",
        carried=analysis.carry,
        dismissed=merged(
            prior.dismissed if prior is not None else (), (d for d in report.dismissed if d.how != "config")
        ),
    )


def render_bodies(
    report: Report, analysis: Analysis, config: Config, renderer: Renderer, prior: StickyState | None
) -> Rendered:
    state = state_for(report, analysis, config, renderer, prior)
    marker = state.marker()
    body = renderer.comment(report.to_dict(), max_findings=config.max_findings)
    if report.snapshot.source == "github" and state.cost_usd is not None:
        cost_line = renderer.render(
            "run.md.j2", kind="cost_line", run=state.cost_usd, total=state.total_cost_usd
        )
        body = f"{body.rstrip()}\n\n{cost_line.strip()}\n"
    note = renderer.translate("truncated_comment", "_(comment truncated: the job summary has the rest)_")
    room = COMMENT_LIMIT - utf16_len(marker) - 2
    body, truncated = fit(body, room, unit="utf16", note=f"\n\n{note}\n")
    return Rendered(comment=f"{body.rstrip()}\n\n{marker}", comment_truncated=truncated, state=state)


def finish(
    analysis: Analysis, source: Source, config: Config, renderer: Renderer, prior: StickyState | None = None
) -> tuple[Report, Rendered]:
    """Gate → render: the verdict and the completion gate (the head re-read once), then the bodies,
    rendered once; the gate's output check then measures the comment as it will be written."""
    head = source.head_sha()
    report = conclude(analysis, current_head=head, outputs=(), renderer=renderer)
    rendered = render_bodies(report, analysis, config, renderer, prior)
    comment = gate.OutputSize(
        "comment", utf16_len(rendered.comment), COMMENT_LIMIT + 5_000, rendered.comment_truncated
    )
    sized = conclude(analysis, current_head=head, outputs=[comment], renderer=renderer)
    if sized.gate.publish_ready != report.gate.publish_ready:  # the comment fits by construction
        rendered = render_bodies(sized, analysis, config, renderer, prior)
    return sized, rendered


def summary_text(report: Report, renderer: Renderer, *, annotations_dropped: int = 0) -> str:
    text = renderer.summary(report.to_dict(), annotations_dropped=annotations_dropped)
    note = renderer.translate("truncated_summary", "_(summary truncated at GitHub's size limit)_")
    return fit(text, SUMMARY_LIMIT_BYTES, unit="utf8", note=f"\n\n{note}\n")[0]


def write_text(path: str | None, text: str) -> None:
    """`-` is stdout (inside Actions between `::stop-commands::` markers: the text carries PR and
    model content); a file path is created with its parent directories."""
    if not path:
        return
    if path == "-":
        if os.environ.get("GITHUB_ACTIONS") == "true":
            echo_untrusted(sys.stdout, text)
            return
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path!r}: {exc.strerror or exc}") from exc


def report_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


def review_and_report(
    source: Source,
    config: Config,
    *,
    summary_path: str | None,
    json_path: str | None,
    comment_path: str | None,
    warn: Warn,
) -> int:
    """The local flow (`imreview review`): review, gate, write files, return the exit code."""
    renderer = Renderer(language=config.language, template_dir=config.template_dir)
    gc.disable()
    try:
        change = source.change()
    finally:
        gc.freeze()  # the diff's objects (one per line) live to the end: no collection need rescan them
        gc.enable()
    if config.model:
        from reviewer.llm import preload_litellm

        preload_litellm()  # overlaps the deterministic checks; after the diff, so an empty one exits at once
    analysis = analyse(source, change, config, renderer=renderer, warn=warn)
    report, rendered = finish(analysis, source, config, renderer)
    write_report_files(
        report,
        comment=rendered.comment,
        summary=summary_text(report, renderer),
        json_path=json_path,
        comment_path=comment_path,
        summary_path=summary_path,
    )
    return gate.exit_code(
        verdict_=report.verdict, findings=report.findings, fail_on=config.fail_on, on_error=config.on_error
    )


def write_report_files(
    report: Report,
    *,
    comment: str,
    summary: str,
    json_path: str | None,
    comment_path: str | None,
    summary_path: str | None,
) -> None:
    """`--json`, `--comment` and `--summary` of the reviewing commands."""
    write_text(json_path, report_json(report))
    write_text(comment_path, comment)
    write_text(summary_path, summary)
