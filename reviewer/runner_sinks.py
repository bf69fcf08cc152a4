"""The sink interface, and the sinks that write to the runner: job summary, step outputs,
annotations and other workflow commands (DESIGN section 6; the GitHub sinks are in publish.py).

Every sink is `publish(report, rendered) -> Published` (reviewdog's `CommentService`): it writes
what `rendered` holds for it and says what it did, where, or why not, with a machine `reason`
callers branch on. A sink never raises for a failed write. The flows compose their sinks in one
list (`pull.sinks_for`, `action.publish_run`) and `publish_all` runs it: sinks that write to the
pull request wait for the completion gate and stop at a read-only token; the results they record
are the report's `published`.
"""

from __future__ import annotations

import functools
import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol, TextIO

from reviewer.render import Renderer, Say, english, fit
from reviewer.report import Finding, Published, Report, priority_rank, published
from reviewer.state import StickyState

SUMMARY_LIMIT_BYTES = 1_000_000
"""The runner refuses a step summary over 1 MiB; stay under it, measured in UTF-8 bytes."""
ANNOTATIONS_PER_LEVEL = 10
ANNOTATION_MESSAGE_MAX = 4_000
READ_ONLY_KEY = "publish.read_only"
"""The i18n key of what a write refused as read-only says (the sinks' `say` words it)."""
READ_ONLY = "read_only"
"""The reason code of a write refused for lack of permission: no further PR writes are tried."""


# --- the interface -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    """What the sinks write, rendered once: the sticky comment (and the state in its marker), the
    job summary, the step outputs. A run-level write (a skip, a scan's table) has only `summary`."""

    comment: str = ""
    comment_truncated: bool = False
    state: StickyState | None = None
    summary: str = ""
    outputs: Mapping[str, str] = field(default_factory=dict)


class Sink(Protocol):
    """One place a review is published to. `gated`: writes to the pull request, so only when the
    completion gate passed. `records`: its result is part of the report (`report.published`)."""

    gated: ClassVar[bool]
    records: ClassVar[bool]

    def publish(self, report: Report | None, rendered: Rendered) -> Published: ...


class RunnerSink:
    """A sink that writes to the runner: it runs whatever the gate says, and is not recorded."""

    gated: ClassVar[bool] = False
    records: ClassVar[bool] = False


class PullSink:
    """A sink that writes to the pull request: it waits for the gate, and its result is recorded."""

    gated: ClassVar[bool] = True
    records: ClassVar[bool] = True


def publish_all(
    sinks: Sequence[Sink],
    report: Report,
    rendered: Rendered,
    *,
    gate_closed: Published,
    warn: Callable[[str], None],
) -> Report:
    """Run `sinks` in order; the report returned records what the recording sinks did (a later sink
    sees the earlier results in `report.published`). When the gate is closed, the gated sinks are
    not run and `gate_closed` says why, once. A gated sink's failure is also a warning in the log."""
    for sink in sinks:
        if sink.gated and not report.gate.publish_ready:
            result = None if gate_closed in report.published else gate_closed
        else:
            result = sink.publish(report, rendered)
            if sink.gated and not result.ok:
                warn(f"imreview: {result.sink}: {result.detail}")
        if result is not None and sink.records:
            report = report.replace(published=(*report.published, result))
    return report


def gate_closed(renderer: Renderer) -> Published:
    """What the pull request's sinks say when the completion gate did not pass: nothing posted."""
    return Published(
        sink="pull_request",
        ok=False,
        detail=renderer.translate(
            "not_published_gate", "nothing posted to the PR: the completion gate did not pass"
        ),
        reason="gate_closed",
    )


def refused_read_only(report: Report | None) -> bool:
    """An earlier write to the pull request was refused for lack of permission."""
    return report is not None and any(p.reason == READ_ONLY for p in report.published)


# --- the runner's sinks ------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryFile(RunnerSink):
    """The job summary (`GITHUB_STEP_SUMMARY`): `rendered.summary`, appended within the 1 MiB cap."""

    path: str | Path | None
    say: Say = english

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        return write_summary(self.path, rendered.summary, say=self.say)


@dataclass(frozen=True)
class StepOutputs(RunnerSink):
    """The step outputs (`GITHUB_OUTPUT`): `rendered.outputs`, each in the heredoc form."""

    path: str | Path | None
    say: Say = english

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        said = functools.partial(Published, "outputs")
        if not self.path:
            return said(False, self.say("publish.outputs_not_in_actions"), reason="not_in_actions")
        try:
            write_outputs(self.path, rendered.outputs)
        except OSError as exc:
            detail = self.say("publish.write_failed", path=str(self.path), error=str(exc))
            return said(False, detail, reason="write_failed")
        return said(True, self.say("publish.outputs_written", n=len(rendered.outputs)), reason="written")


@dataclass(frozen=True)
class Annotations(RunnerSink):
    """`::warning`/`::notice` workflow commands on the published findings' lines (the first
    `limit`), at most ANNOTATIONS_PER_LEVEL per level; the rest are counted in the summary."""

    stream: TextIO
    limit: int
    say: Say = english

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        if report is None:
            return Published("annotations", False, self.say("publish.no_review"), reason="no_report")
        printed, dropped = annotate(list(published(report.findings, self.limit)), self.stream)
        detail = self.say("publish.annotations", printed=str(printed), dropped=str(dropped))
        return Published("annotations", True, detail, reason="dropped" if dropped else "printed")


@dataclass(frozen=True)
class Notice(RunnerSink):
    """A `::notice` workflow command: `text`, always, or only when a write to the pull request
    was refused as read-only (`on_read_only`). `recorded`: the notice is also a result in the
    report (a fork PR's read-only token, known before anything is tried)."""

    stream: TextIO | None
    text: str
    on_read_only: bool = False
    say: Say = english

    def publish(self, report: Report | None, rendered: Rendered) -> Published:
        if self.on_read_only and not refused_read_only(report):
            return Published("pull_request", True, self.say("publish.nothing_refused"), reason="not_needed")
        if self.stream is not None:
            self.stream.write(f"::notice title=imreview::{escape_data(self.text)}\n")
        return Published("pull_request", False, self.text, reason=READ_ONLY)


@dataclass(frozen=True)
class ReadOnlyPull(Notice):
    """A fork PR's read-only token: nothing is written to it, and the report and the log say so."""

    records: ClassVar[bool] = True


def annotations_dropped(findings: Sequence[Finding], limit: int) -> int:
    """How many of the first `limit` findings the runner would not show as annotations (the summary
    counts them): the choice `annotate` makes, without writing."""
    return _annotation_plan(published(findings, limit), ANNOTATIONS_PER_LEVEL)[1]


# --- job summary and outputs -------------------------------------------------------------------


def write_summary(
    path: str | Path | None, text: str, *, limit_bytes: int = SUMMARY_LIMIT_BYTES, say: Say = english
) -> Published:
    """Append to `GITHUB_STEP_SUMMARY`; cut at a line boundary, with a visible note, to fit the cap.

    The cap counts what the file already holds: the runner drops the whole step summary when the
    file passes 1 MiB, so an over-long append would lose earlier steps' content too.
    """
    said = functools.partial(Published, "summary")
    if not path:
        return said(False, say("publish.summary_not_in_actions"), reason="not_in_actions")
    target = Path(path)
    full = len(text.encode("utf-8"))
    try:
        used = target.stat().st_size if target.exists() else 0
        prefix = "\n" if used and not target.read_bytes().endswith(b"\n") else ""
        room = max(limit_bytes - used - len(prefix), 0)
        truncated = full > room
        kept = text
        if truncated:
            note = "\n" + say("publish.summary_truncated", full=f"{full:,}") + "\n"
            kept = fit(text, room, unit="utf8", note=note)[0]
        if not kept and truncated:
            return said(False, say("publish.summary_full", used=used), reason="summary_full")
        with target.open("ab") as fh:
            fh.write((prefix + kept).encode("utf-8"))
    except OSError as exc:
        return said(
            False, say("publish.summary_write_failed", path=str(path), error=str(exc)), reason="write_failed"
        )
    written = len(kept.encode("utf-8"))
    if truncated:
        return said(True, say("publish.summary_cut", written=written, full=full), reason="truncated")
    return said(True, say("publish.summary_appended", written=written), reason="written")


def write_outputs(path: str | Path | None, outputs: Mapping[str, str]) -> None:
    """Append every output to `GITHUB_OUTPUT` in the heredoc form, a fresh delimiter per value.

    This is the toolkit's own format (`name<<ghadelimiter_<uuid>`), so multi-line and hostile
    values (a line `x=y` or a guessed delimiter) cannot set other outputs. Outside Actions
    (`path` unset) there is nowhere to write, and nothing happens.
    """
    if not path:
        return
    chunks: list[str] = []
    for name, value in outputs.items():
        if not name or any(ch in name for ch in "\r\n=") or "<<" in name:
            raise ValueError(f"output name {name!r} is not a valid GITHUB_OUTPUT name")
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter in value:
            raise ValueError(f"output {name!r}: the value contains the delimiter {delimiter!r}")
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with Path(path).open("a", encoding="utf-8", newline="") as fh:
        fh.write("".join(chunks))


# --- workflow commands on stdout ---------------------------------------------------------------


_LEVEL = {"P1": "warning", "P2": "warning", "P3": "notice"}


def escape_data(value: str) -> str:
    """The toolkit's `escapeData`: the runner decodes these, and a newline cannot end the command."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotate(
    findings: Sequence[Finding], stream: TextIO, *, limit_per_level: int = ANNOTATIONS_PER_LEVEL
) -> tuple[int, int]:
    """`::warning` (P1, P2) or `::notice` (P3) on anchored RIGHT-side findings, most severe first;
    returns how many were printed and how many dropped over the runner's per-level limit.

    Annotations cannot sit inside `::stop-commands::`, so every property and the message are
    escaped the way the toolkit does; a finding's text cannot start a command of its own.
    """
    chosen, dropped = _annotation_plan(findings, limit_per_level)
    for level, finding, line in chosen:
        stream.write(_annotation(level, finding, line) + "\n")
    stream.flush()
    return len(chosen), dropped


def _annotation_plan(
    findings: Sequence[Finding], limit_per_level: int
) -> tuple[list[tuple[str, Finding, int]], int]:
    """(level, finding, line) of the annotations printed, most severe first, and how many were not."""
    eligible = [(f, f.line) for f in findings if f.anchored and f.side == "RIGHT" and f.line is not None]
    eligible.sort(key=lambda pair: priority_rank(pair[0].priority) if pair[0].priority in _LEVEL else 9)
    counts: dict[str, int] = {}
    chosen: list[tuple[str, Finding, int]] = []
    for finding, line in eligible:
        level = _LEVEL.get(finding.priority, "notice")
        counts[level] = counts.get(level, 0) + 1
        if counts[level] <= limit_per_level:
            chosen.append((level, finding, line))
    return chosen, len(eligible) - len(chosen)


def _annotation(level: str, finding: Finding, line: int) -> str:
    props: dict[str, str | int] = {"file": finding.path, "line": line}
    if finding.end_line is not None and finding.end_line > line:
        props["endLine"] = finding.end_line
    props["title"] = f"[{finding.priority}] {finding.title}"[:255]
    text = "\n\n".join(part.strip() for part in (finding.observation, finding.suggestion) if part.strip())
    # the toolkit's escapeProperty: also `:` and `,`, which delimit properties
    shown = (escape_data(str(v)).replace(":", "%3A").replace(",", "%2C") for v in props.values())
    listed = ",".join(f"{key}={value}" for key, value in zip(props, shown, strict=True))
    return f"::{level} {listed}::{escape_data((text or finding.title)[:ANNOTATION_MESSAGE_MAX])}"


def echo_untrusted(stream: TextIO, text: str) -> None:
    """Print PR or model text to the log with workflow commands switched off around it."""
    token = secrets.token_hex(16)
    body = text if text.endswith("\n") else text + "\n"
    stream.write(f"::stop-commands::{token}\n{body}::{token}::\n")
    stream.flush()


def mask(stream: TextIO, value: str) -> None:
    """Register a secret with the runner; escaped, so a multi-line value stays one command."""
    if value.strip():
        stream.write(f"::add-mask::{escape_data(value)}\n")
        stream.flush()
