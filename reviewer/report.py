"""The Report: the one object every renderer and sink reads (schema `imreview.report/v1`).

Stages exchange these frozen dataclasses; `Report.to_dict()` is the JSON edge, and templates
read only that dict, so `imreview render report.json` reproduces any output. What each field means
is said once, in the schema (reviewer/schema/report.v1.json).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from reviewer import TOOL_NAME, __version__

SCHEMA_ID = "imreview.report/v1"

Priority = Literal["P1", "P2", "P3"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
Side = Literal["RIGHT", "LEFT"]
Verdict = Literal["findings", "clean", "incomplete", "skipped"]
CoverageStatus = Literal["reviewed", "partial", "listed", "skipped"]
VERDICT_RANK: Mapping[str, int] = {"skipped": 0, "clean": 1, "findings": 2, "incomplete": 3}


@dataclass(frozen=True)
class Ref:
    ref: str
    sha: str


@dataclass(frozen=True)
class CheckResult:
    name: str
    conclusion: str | None


@dataclass(frozen=True)
class CiState:
    """`state` is success, failure, pending, unknown or none (no CI configured)."""

    state: str = "unknown"
    checks: tuple[CheckResult, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """What was reviewed, pinned once; every later stage reads this, never live state."""

    source: Literal["github", "local"]
    repo: str
    number: int | None
    title: str
    author: str
    url: str
    base: Ref
    head: Ref
    merge_base: str
    draft: bool = False
    state: str = "open"
    files: int = 0
    additions: int = 0
    deletions: int = 0
    commits: int = 0
    ci: CiState = field(default_factory=CiState)
    mergeable: bool | None = None


@dataclass(frozen=True)
class Finding:
    id: str
    priority: Priority
    title: str
    path: str
    line: int | None
    end_line: int | None
    side: Side
    trigger: str
    observation: str
    suggestion: str
    quote: str
    confidence: float
    source: str
    anchored: bool = False
    anchor_reason: str = "not_checked"
    verified: bool | None = None
    carried_from: str | None = None


DismissalHow = Literal["command", "resolved", "reaction", "config"]
DISMISSAL_HOWS: tuple[str, ...] = get_args(DismissalHow)
"""`config`: the base branch's `ignore:` list (kept in no state: the file says it on every run)."""
_HEX12 = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True)
class Dismissal:
    """A finding a maintainer dismissed on the PR, as the signed state keeps it and the comment lists
    it (reviewer/dismissals.py makes and applies them). `key` survives line moves."""

    key: str
    id: str
    title: str
    path: str
    by: str
    how: DismissalHow

    def to_json(self) -> dict[str, Any]:
        return {"k": self.key, "id": self.id, "t": self.title, "p": self.path, "by": self.by, "how": self.how}

    @classmethod
    def from_json(cls, value: Any) -> Dismissal | None:
        """None for anything malformed (the state is signed, but stay strict)."""
        if not isinstance(value, Mapping):
            return None
        key, ident, title, path, by, how = (value.get(k) for k in ("k", "id", "t", "p", "by", "how"))
        if not (isinstance(key, str) and _HEX12.fullmatch(key) and isinstance(ident, str) and ident):
            return None
        if not all(isinstance(v, str) for v in (title, path, by)) or how not in DISMISSAL_HOWS:
            return None
        return cls(key, ident[:40], str(title)[:160], str(path)[:300], str(by)[:60], how)


@dataclass(frozen=True)
class Exclusion:
    """A suspicion that was checked and cleared."""

    claim: str
    reason: str
    path: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Signal:
    """A simplification: MERGE, DELETE, INLINE or MOVE."""

    kind: str
    target: str
    into: str
    reason: str


@dataclass(frozen=True)
class Unverified:
    what: str
    how: str


@dataclass(frozen=True)
class Gap:
    """Something not verified. `why` is a machine code; `what` is localized prose."""

    what: str
    why: str
    path: str | None = None


@dataclass(frozen=True)
class SliceCoverage:
    hunk: int
    start: int
    end: int
    reviewed: bool
    side: Side = "RIGHT"


@dataclass(frozen=True)
class FileCoverage:
    path: str
    status: CoverageStatus
    reason: str | None
    hunks_total: int
    hunks_reviewed: int
    slices: tuple[SliceCoverage, ...] = ()
    reviewed_at: str | None = None


@dataclass(frozen=True)
class Coverage:
    files: tuple[FileCoverage, ...] = ()
    lines_changed: int = 0
    lines_reviewed: int = 0


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    seconds: float = 0.0
    calls: int = 0


@dataclass(frozen=True)
class CallRecord:
    phase: str
    estimated_input_tokens: int
    reserved_input_tokens: int
    input_tokens: int
    max_output_tokens: int
    output_tokens: int
    calibrated_input_tokens: int = 0


@dataclass(frozen=True)
class Overrun:
    limit: str
    used: float
    allowed: float


@dataclass(frozen=True)
class Startup:
    import_seconds: float | None = None
    import_wait_seconds: float = 0.0


@dataclass(frozen=True)
class BudgetReport:
    limits: Mapping[str, Any]
    used: Usage
    exhausted: bool
    by_phase: Mapping[str, Usage]
    calls: tuple[CallRecord, ...] = ()
    overrun: tuple[Overrun, ...] = ()
    startup: Startup = Startup()


@dataclass(frozen=True)
class GateCheck:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Gate:
    publish_ready: bool
    checks: tuple[GateCheck, ...] = ()


@dataclass(frozen=True)
class Published:
    """What one sink did. `reason` is the machine code callers branch on; `detail` is for people."""

    sink: str
    ok: bool
    detail: str
    url: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class Settings:
    language: str = "en"
    max_findings: int = 6
    fail_on: str = "never"


@dataclass(frozen=True)
class ModelInfo:
    name: str | None = None
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanSummary:
    window: int
    window_source: str
    units: int
    input_tokens_planned: int
    input_tokens_available: int | None
    window_assumed: int | None = None
    context_files: tuple[str, ...] = ()
    context_tokens: int = 0
    context_displaced_lines: int = 0


@dataclass(frozen=True)
class Incremental:
    mode: Literal["full", "incremental"]
    reason: str
    since: str | None = None
    hunks_sent: int = 0
    hunks_carried: int = 0
    findings_carried: int = 0
    findings_dropped: int = 0


@dataclass(frozen=True)
class AnswerStats:
    answers: int = 0
    normalised: Mapping[str, int] = field(default_factory=dict)
    truncated: int = 0
    continued: int = 0
    findings_cut: int = 0


@dataclass(frozen=True)
class Report:
    snapshot: Snapshot
    model: ModelInfo
    coverage: Coverage
    findings: tuple[Finding, ...]
    exclusions: tuple[Exclusion, ...]
    signals: tuple[Signal, ...]
    gaps: tuple[Gap, ...]
    budget: BudgetReport
    gate: Gate
    settings: Settings
    verdict: Verdict
    published: tuple[Published, ...] = ()
    warnings: tuple[str, ...] = ()
    mode: str = "direct"
    plan: PlanSummary | None = None
    incremental: Incremental | None = None
    answers: AnswerStats | None = None
    unverified: tuple[Unverified, ...] = ()
    """The model's verification gaps (the method's fourth list), at most MAX_UNVERIFIED_REPORTED."""
    dismissed: tuple[Dismissal, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA_ID, "tool": {"name": TOOL_NAME, "version": __version__}, **_plain(self)}

    def replace(self, **changes: Any) -> Report:
        return dataclasses.replace(self, **changes)


def _plain(value: Any) -> Any:
    if value is None or type(value) in (str, int, float, bool):
        return value
    names = getattr(type(value), "__dataclass_fields__", None)  # no ClassVar in these classes
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_WS = re.compile(r"\s+")


def published(findings: Sequence[Finding], limit: int) -> tuple[Finding, ...]:
    """The findings that go to the PR (the sticky comment, the inline review, the annotations): the
    first `limit` (`max-findings`) in report order; the rest stay in the job summary."""
    return tuple(findings[: max(limit, 0)])


def finding_id(path: str, quote: str, title: str) -> str:
    """Stable 12-hex fingerprint of (path, normalized quote, title), so reruns recognise repeats."""
    norm_quote = _WS.sub(" ", quote).strip()
    norm_title = _WS.sub(" ", title).strip().lower()
    digest = hashlib.sha256(f"{path}\0{norm_quote}\0{norm_title}".encode()).hexdigest()
    return digest[:12]


def priority_rank(priority: str) -> int:
    """P1 → 1 ... P3 → 3; lower is more severe."""
    return PRIORITIES.index(priority) + 1
