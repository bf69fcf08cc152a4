"""The shipped JSON Schema matches Report.to_dict() exactly, and rejects what a report cannot contain."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import jsonschema
import pytest

from reviewer.budget import DEFAULT_LIMITS
from reviewer.report import (
    SCHEMA_ID,
    BudgetReport,
    CheckResult,
    CiState,
    Coverage,
    Exclusion,
    FileCoverage,
    Finding,
    Gap,
    Gate,
    GateCheck,
    ModelInfo,
    Published,
    Ref,
    Report,
    Settings,
    Signal,
    Snapshot,
    Usage,
    finding_id,
)
from reviewer.schema import load_report_schema


def full_report() -> Report:
    """Every field populated, every optional present, every list non-empty."""
    snapshot = Snapshot(
        source="github",
        repo="octo-org/widgets",
        number=42,
        title="Retry transient API errors",
        author="alice",
        url="https://github.com/octo-org/widgets/pull/42",
        base=Ref("main", "7c6b5a4" + "0" * 33),
        head=Ref("feature/retry", "a1b2c3d" + "e" * 33),
        merge_base="9f8e7d6" + "1" * 33,
        draft=False,
        state="open",
        files=4,
        additions=540,
        deletions=100,
        commits=3,
        ci=CiState("failure", (CheckResult("build", "success"), CheckResult("lint", None))),
        mergeable=True,
    )
    findings = (
        Finding(
            id=finding_id("client/http.py", "except HTTPError:", "Retry loop never gives up"),
            priority="P2",
            title="Retry loop never gives up",
            path="client/http.py",
            line=88,
            end_line=92,
            side="RIGHT",
            trigger="send() retries every HTTPError",
            observation="a wrong token loops until the job timeout",
            suggestion="retry only on 429 and 5xx",
            quote="except HTTPError:",
            confidence=0.8,
            source="llm",
            anchored=True,
            anchor_reason="moved_by_quote",
            verified=True,
        ),
        Finding(
            id=finding_id("conf.py", "<<<<<<< HEAD", "Merge conflict marker"),
            priority="P1",
            title="Merge conflict marker",
            path="conf.py",
            line=3,
            end_line=None,
            side="LEFT",
            trigger="the file is imported",
            observation="SyntaxError at import",
            suggestion="resolve the conflict",
            quote="<<<<<<< HEAD",
            confidence=1.0,
            source="rule:conflict_marker",
            anchored=False,
            anchor_reason="line_not_commentable",
            verified=None,
        ),
    )
    usage = Usage(input_tokens=18240, output_tokens=1200, cost_usd=0.07, seconds=41.3, calls=3)
    return Report(
        snapshot=snapshot,
        model=ModelInfo("openai/gpt-4o-mini", ("anthropic/claude-3-haiku",)),
        coverage=Coverage(
            files=(
                FileCoverage("client/http.py", "reviewed", None, 3, 3),
                FileCoverage("cache.py", "partial", "budget", 4, 2),
                FileCoverage("big.py", "listed", "model_error", 2, 0),
                FileCoverage("package-lock.json", "skipped", "lockfile", 9, 0),
            ),
            lines_changed=640,
            lines_reviewed=612,
        ),
        findings=findings,
        exclusions=(Exclusion("lock cannot deadlock", "_refresh never calls get()", "cache.py", 12),),
        signals=(Signal("MERGE", "client/retry.py:backoff()", "client/http.py:_sleep()", "same formula"),),
        gaps=(Gap("Not reviewed: budget", "budget", "cache.py"), Gap("tests were not run", "not_run")),
        budget=BudgetReport(
            limits=dataclasses.asdict(DEFAULT_LIMITS),
            used=usage,
            exhausted=True,
            by_phase={"review": usage, "repair": Usage(), "verify": Usage(cost_usd=None)},
        ),
        gate=Gate(
            publish_ready=True,
            checks=tuple(
                GateCheck(name, True, "ok")
                for name in (
                    "head_unchanged",
                    "coverage_accounted",
                    "answers_parsed",
                    "budget_respected",
                    "output_limits",
                )
            ),
        ),
        settings=Settings(language="zh-CN", max_findings=6, fail_on="P2"),
        verdict="findings",
        published=(Published("comment", True, "updated", "https://github.com/o/r/pull/42#issuecomment-1"),),
        warnings=("model has no known price",),
    )


def minimal_report() -> Report:
    """A local run with no model: nulls wherever the types allow them."""
    snapshot = Snapshot(
        source="local",
        repo="widgets",
        number=None,
        title="",
        author="",
        url="",
        base=Ref("main", "0" * 40),
        head=Ref("HEAD", "1" * 40),
        merge_base="0" * 40,
    )
    return Report(
        snapshot=snapshot,
        model=ModelInfo(),
        coverage=Coverage(),
        findings=(),
        exclusions=(Exclusion("claim", "reason"),),
        signals=(),
        gaps=(Gap("LLM review not run: no model configured", "no_model"),),
        budget=BudgetReport(
            limits=dataclasses.asdict(DEFAULT_LIMITS),
            used=Usage(cost_usd=None),
            exhausted=False,
            by_phase={"review": Usage(), "repair": Usage(), "verify": Usage()},
        ),
        gate=Gate(publish_ready=False),
        settings=Settings(),
        verdict="incomplete",
    )


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = load_report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator: jsonschema.Draft202012Validator, data: Any) -> list[str]:
    return [e.message for e in validator.iter_errors(data)]


@pytest.mark.parametrize("build", [full_report, minimal_report])
def test_reports_validate_including_after_a_json_round_trip(validator, build) -> None:
    data = build().to_dict()
    assert _errors(validator, data) == []
    assert _errors(validator, json.loads(json.dumps(data))) == []


def test_schema_requires_exactly_the_keys_to_dict_produces(validator) -> None:
    data = full_report().to_dict()
    schema = load_report_schema()
    assert set(schema["required"]) == set(schema["properties"]) == set(data)
    assert schema["properties"]["schema"]["const"] == SCHEMA_ID
    for name, sub in schema["$defs"].items():
        if sub.get("type") == "object":
            assert sub["additionalProperties"] is False, name
            assert set(sub["required"]) == set(sub["properties"]), name


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    *parents, last = path.split(".")
    node: Any = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def _drop(data: dict[str, Any], path: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    *parents, last = path.split(".")
    node: Any = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    del node[last]
    return out


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("extra", 1),
        ("snapshot.extra", 1),
        ("snapshot.ci.extra", 1),
        ("snapshot.ci.checks.0.extra", 1),
        ("findings.0.extra", 1),
        ("budget.used.extra", 1),
        ("budget.by_phase.extra", {}),
        ("gate.checks.0.extra", 1),
        ("published.0.extra", 1),
        ("coverage.files.0.extra", 1),
    ],
)
def test_an_extra_key_anywhere_is_rejected(validator, path, value) -> None:
    data = _set(full_report().to_dict(), path, value)
    assert _errors(validator, data), path


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("schema", "imreview.report/v2"),
        ("verdict", "ok"),
        ("mode", "incremental"),
        ("findings.0.priority", "P4"),
        ("findings.0.side", "BOTH"),
        ("findings.0.id", "not-a-hex-id"),
        ("findings.0.confidence", 1.5),
        ("findings.0.source", "gpt"),
        ("findings.0.line", "88"),
        ("signals.0.kind", "REFACTOR"),
        ("gate.checks.0.name", "looks_fine"),
        ("coverage.files.0.status", "done"),
        ("coverage.files.0.reason", "budget"),
        ("coverage.files.3.reason", "budget"),
        ("coverage.files.2.reason", "lockfile"),
        ("snapshot.source", "gitlab"),
        ("snapshot.ci.state", "green"),
        ("settings.fail_on", "P5"),
        ("budget.used.calls", -1),
        ("gaps.0.why", "Budget Reached"),
    ],
)
def test_a_wrong_value_is_rejected(validator, path, value) -> None:
    data = _set(full_report().to_dict(), path, value)
    assert _errors(validator, data), f"{path}={value!r} was accepted"


@pytest.mark.parametrize(
    "path", ["tool", "snapshot.head", "findings.0.verified", "budget.by_phase.verify", "warnings"]
)
def test_a_missing_key_is_rejected(validator, path) -> None:
    assert _errors(validator, _drop(full_report().to_dict(), path))
