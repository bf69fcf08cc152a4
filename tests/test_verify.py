"""Verification outcomes: deterministic refutations, unverifiable places, dedupe across units."""

from __future__ import annotations

import json

from reviewer.diff import LineIndex, parse_patch
from reviewer.findings import anchor, dedupe, parse_answer
from reviewer.render import Renderer
from reviewer.report import Finding
from reviewer.verify import deterministic, parse_verdicts
from tests.factories import FLAG_FINDING, model_answer

PATCH = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -10,4 +10,5 @@ def handler(request):
     user = request.user
-    if user.is_admin:
+    if user.is_admin or request.debug:
+        grant_all(user)
         return ok()
     log(user)
"""
HEAD = "\n".join(
    [f"# line {n}" for n in range(1, 8)]
    + ["def handler(request):", "    '''Entry.'''", "    user = request.user"]
    + [
        "    if user.is_admin or request.debug:",
        "        grant_all(user)",
        "        return ok()",
        "    log(user)",
    ]
)
BASE = HEAD.replace(
    "    if user.is_admin or request.debug:\n        grant_all(user)\n", "    if user.is_admin:\n"
)


def _finding(**overrides: object) -> Finding:
    """The flag finding as the model writes it, parsed and anchored to PATCH by our own code."""
    item = {**FLAG_FINDING, **overrides}
    files = parse_patch(PATCH)
    parsed = parse_answer(model_answer(item)).findings[0]
    return anchor(parsed, {f.path: f for f in files}, LineIndex.build(files))


def _check(*found: Finding, language: str = "en"):
    files = parse_patch(PATCH)
    return deterministic(
        found,
        files={f.path: f for f in files},
        read_head=lambda path: HEAD if path == "src/app.py" else None,
        read_base=lambda path: BASE if path == "src/app.py" else None,
        say=Renderer(language=language).translate,
    )


def test_a_finding_whose_quote_is_at_head_passes_unchanged() -> None:
    good = _finding()
    out = _check(good)
    assert out.findings == (good,) and out.refuted == ()


def test_a_quote_missing_at_head_refutes_the_finding_with_its_reason() -> None:
    out = _check(_finding(quote="if user.is_superuser:", line=11))
    assert out.findings == ()
    (excl,) = out.refuted
    assert excl.claim == "Debug flag grants admin" and (excl.path, excl.line) == ("src/app.py", 11)
    assert "`if user.is_superuser:` is not in src/app.py at the head commit" in excl.reason


def test_a_removed_line_is_checked_against_the_merge_base() -> None:
    kept = _check(_finding(side="LEFT", line=11, quote="if user.is_admin:"))
    assert len(kept.findings) == 1
    gone = _check(_finding(side="LEFT", line=11, quote="if user.is_root:"))
    assert "at the merge base" in gone.refuted[0].reason


def test_a_fix_that_is_the_code_already_there_is_refuted() -> None:
    out = _check(_finding(suggestion="`if user.is_admin or request.debug:`"))
    (excl,) = out.refuted
    assert "changes nothing" in excl.reason
    zh = _check(_finding(suggestion="if user.is_admin or request.debug:"), language="zh-CN")
    assert "它什么也没改变" in zh.refuted[0].reason


def test_a_quote_copied_with_its_diff_marker_and_number_still_counts() -> None:
    out = _check(_finding(quote="    11 + if user.is_admin or request.debug:"))
    assert len(out.findings) == 1 and out.refuted == ()


def test_a_line_outside_the_diff_is_summary_only_and_unverified() -> None:
    outside = _finding(line=8, quote="def handler(request):", priority="P3")
    assert not outside.anchored
    (kept,) = _check(outside).findings
    assert kept.verified is False and kept.anchor_reason == "quote_not_found"


def test_rule_findings_are_not_second_guessed() -> None:
    rule = _finding(quote="not anywhere")
    rule = Finding(**{**rule.__dict__, "source": "rule:secret"})
    assert _check(rule).findings == (rule,)


def test_the_same_defect_from_two_units_is_one_finding() -> None:
    first = _finding(confidence=0.7)
    second = _finding(title="Debug mode bypasses the admin check", line=12, priority="P2", confidence=0.95)
    third = _finding(title="Other", quote="grant_all(user)", line=12, priority="P3")
    kept = dedupe([second, first, third])
    assert [f.title for f in kept] == ["Debug flag grants admin", "Other"]


def test_verdict_entries_that_are_malformed_are_skipped_alone() -> None:
    parsed = parse_verdicts(
        json.dumps(
            {"verdicts": [{"id": "a", "holds": "yes"}, {"id": "b", "holds": False, "reason": "guarded"}]}
        )
    )
    assert parsed == {"b": (False, "guarded")}


def test_the_recheck_call_confirms_refutes_and_leaves_out(tmp_path) -> None:
    import re

    from reviewer.budget import Budget
    from reviewer.config import build_config
    from reviewer.llm import ModelClient
    from reviewer.verify import recheck
    from tests.fakes.model_server import FakeModelServer, text

    confirmed = _finding()
    refuted = _finding(title="Grant without audit", quote="grant_all(user)", line=12, priority="P2")
    unsure = _finding(title="Debug flag read twice", quote="return ok()", line=13, priority="P2")
    minor = _finding(title="Naming", priority="P3")

    def handler(body):
        prompt = body["messages"][-1]["content"]
        ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.M)
        assert ids == [confirmed.id, refuted.id, unsure.id], "P3 findings are not re-checked"
        verdicts = [
            {"id": confirmed.id, "holds": True, "reason": "debug comes from the query string"},
            {"id": refuted.id, "holds": False, "reason": "grant_all() audits every call itself"},
        ]
        return text(json.dumps({"verdicts": verdicts}))

    with FakeModelServer(handler=handler) as server:
        config = build_config(overrides={"model": "openai/fake-model", "api_base": server.api_base})
        client = ModelClient(config, Budget(config.limits), warn=lambda m: None)
        out = recheck(
            client,
            [confirmed, refuted, unsure, minor],
            renderer=Renderer(),
            read_head=lambda path: HEAD,
            warn=lambda m: None,
            reviewed_paths={"src/app.py"},
        )
        (request,) = server.requests
    assert "grant_all(user)" in request["messages"][-1]["content"], "the code around the line is shown"
    assert [(f.title, f.verified) for f in out.findings] == [
        ("Debug flag grants admin", True),
        ("Debug flag read twice", None),
        ("Naming", None),
    ]
    (excl,) = out.refuted
    assert excl.claim == "Grant without audit" and "audits every call" in excl.reason


def test_an_unreadable_file_refutes_nothing() -> None:
    files = parse_patch(PATCH)
    out = deterministic(
        [_finding(quote="def handler(request):", line=8)],
        files={f.path: f for f in files},
        read_head=lambda path: None,
        read_base=lambda path: None,
        say=Renderer().translate,
    )
    assert out.refuted == () and out.findings[0].verified is False


def _evidence_run(max_input_tokens: int) -> tuple[list[dict], object]:
    from reviewer.budget import Budget
    from reviewer.config import build_config
    from reviewer.context import Snippet
    from reviewer.llm import ModelClient
    from reviewer.verify import recheck
    from tests.fakes.model_server import FakeModelServer, text

    claim = _finding()
    helper = Snippet(
        path="src/perms.py",
        start=1,
        lines=tuple(f"    check_{n}(user)  # audited" for n in range(300)),
        kind="definition",
        symbol="grant_all",
    )
    answer = {"verdicts": [{"id": claim.id, "holds": True, "reason": "debug is user input"}]}
    with FakeModelServer(handler=lambda body: text(json.dumps(answer))) as server:
        config = build_config(
            overrides={
                "model": "openai/fake-model",
                "api_base": server.api_base,
                "max_input_tokens": max_input_tokens,
            }
        )
        client = ModelClient(config, Budget(config.limits), warn=lambda m: None)
        out = recheck(
            client,
            [claim],
            renderer=Renderer(),
            read_head=lambda path: HEAD,
            warn=lambda m: None,
            reviewed_paths={"src/app.py"},
            evidence=lambda f: (helper,) if f.path == "src/app.py" else (),
        )
        return list(server.requests), out


def test_the_recheck_shows_the_evidence_and_drops_it_before_the_call_when_it_does_not_fit() -> None:
    requests, out = _evidence_run(100_000)
    (request,) = requests
    assert "src/perms.py lines 1-300 (definition of `grant_all`)" in request["messages"][-1]["content"]
    assert [f.verified for f in out.findings] == [True]  # type: ignore[attr-defined]

    requests, out = _evidence_run(2_500)
    (request,) = requests
    assert "src/perms.py" not in request["messages"][-1]["content"], "one call, without the context"
    assert [f.verified for f in out.findings] == [True], "verified all the same"  # type: ignore[attr-defined]
