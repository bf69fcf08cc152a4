"""Parsing model answers, anchoring findings to commentable lines, dedupe."""

from __future__ import annotations

import json

import pytest

from reviewer.diff import LineIndex, parse_patch
from reviewer.findings import EXAMPLE_VALUES, NothingUsable, anchor, dedupe, parse_answer
from reviewer.report import Finding
from tests.factories import FLAG_FINDING, model_answer

PATCH = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -10,5 +10,7 @@ def handler(request):
     user = request.user
-    if user.is_admin:
+    if user.is_admin or request.debug:
+        grant_all(user)
         return ok()
     log(user)
     return denied()
+    cleanup()
"""


def _answer(**overrides: object) -> dict[str, object]:
    return {"findings": [{**FLAG_FINDING, **overrides}], "exclusions": [], "signals": []}


def _files():
    files = parse_patch(PATCH)
    return {f.path: f for f in files}, LineIndex.build(files)


def test_plain_fenced_and_trailing_prose_answers_parse() -> None:
    body = json.dumps(_answer())
    for text in (body, f"```json\n{body}\n```", f"Here you go:\n{body}\nHope this helps!"):
        answer = parse_answer(text)
        assert answer.findings[0].priority == "P1"
        assert answer.findings[0].source == "llm"
        assert len(answer.findings[0].id) == 12


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json at all", "no JSON object"),
        ('{"findings": {"a": 1}}', "'findings' must be a list"),
        (json.dumps(_answer(priority="P7")), "priority"),
        (json.dumps(_answer(title=None, observation="")), "missing 'title'"),
        (json.dumps(_answer(line="twelve")), "'line' must be an integer"),
    ],
)
def test_invalid_answers_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_answer(text)


def test_an_answer_cut_inside_its_only_finding_is_unusable_and_one_cut_after_it_is_kept() -> None:
    body = json.dumps(_answer())
    with pytest.raises(NothingUsable, match="ended inside it"):
        parse_answer(body[: body.index('"confidence"')])
    after = parse_answer(body[: body.index('"exclusions"') + 5])
    assert [f.title for f in after.findings] == ["Debug flag grants admin"] and not after.missing


def test_anchor_as_stated() -> None:
    files, index = _files()
    f = anchor(parse_answer(json.dumps(_answer())).findings[0], files, index)
    assert f.anchored and f.line == 11 and f.anchor_reason == "as_stated"


def test_anchor_moves_to_quote_three_lines_away() -> None:
    files, index = _files()
    f = anchor(parse_answer(json.dumps(_answer(line=14))).findings[0], files, index)
    assert f.anchored and f.line == 11 and f.anchor_reason == "moved_by_quote"


def test_anchor_outside_diff_stays_summary_only() -> None:
    files, index = _files()
    outside = anchor(parse_answer(json.dumps(_answer(path="src/other.py"))).findings[0], files, index)
    assert not outside.anchored and outside.anchor_reason == "not_in_diff"
    unknown_quote = anchor(
        parse_answer(json.dumps(_answer(quote="nowhere()", line=300))).findings[0], files, index
    )
    assert not unknown_quote.anchored and unknown_quote.anchor_reason == "quote_not_found"
    far_line = anchor(parse_answer(json.dumps(_answer(quote="", line=300))).findings[0], files, index)
    assert not far_line.anchored and far_line.anchor_reason == "line_not_commentable"


def test_anchor_nearest_match_wins_ties_lower() -> None:
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,1 +1,5 @@\n x\n+dup()\n+y\n+z\n+dup()\n"
    files = parse_patch(patch)
    by_path, index = {f.path: f for f in files}, LineIndex.build(files)
    base = parse_answer(json.dumps(_answer(path="a.py", quote="dup()", line=3))).findings[0]
    assert anchor(base, by_path, index).line == 2
    near_five = parse_answer(json.dumps(_answer(path="a.py", quote="dup()", line=4))).findings[0]
    assert anchor(near_five, by_path, index).line == 5


def test_anchor_left_side_uses_removed_lines() -> None:
    files, index = _files()
    f = parse_answer(json.dumps(_answer(side="LEFT", line=11, quote="if user.is_admin:"))).findings[0]
    anchored = anchor(f, files, index)
    assert anchored.anchored and anchored.side == "LEFT" and anchored.line == 11


def test_range_kept_only_inside_one_hunk() -> None:
    files, index = _files()
    f = anchor(parse_answer(json.dumps(_answer(end_line=12))).findings[0], files, index)
    assert (f.line, f.end_line) == (11, 12)
    g = anchor(parse_answer(json.dumps(_answer(end_line=99))).findings[0], files, index)
    assert g.end_line is None


def test_dedupe_same_root_cause_keeps_most_severe() -> None:
    files, index = _files()
    a = anchor(parse_answer(json.dumps(_answer())).findings[0], files, index)
    b = anchor(parse_answer(json.dumps(_answer(priority="P3", quote=""))).findings[0], files, index)
    c = anchor(
        parse_answer(json.dumps(_answer(title="Cleanup never runs", quote="cleanup()", line=17))).findings[0],
        files,
        index,
    )
    kept = dedupe([b, a, c, a])
    assert [f.priority for f in kept] == ["P1", "P1"]
    assert isinstance(kept[0], Finding) and kept[0].title == "Debug flag grants admin"


def test_clean_callback_applies_to_text_fields() -> None:
    answer = parse_answer(
        json.dumps(_answer(quote="token = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789'")),
        clean=lambda s: s.replace("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_…"),
    )
    assert "ghp_…" in answer.findings[0].quote


def _many(*findings: dict[str, object]) -> str:
    good = _answer()["findings"][0]  # type: ignore[index]
    return model_answer(good, *findings)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"line": -3}, "'line' must not be negative"),
        ({"line": float("inf")}, "'line' must be an integer"),
        ({"line": float("nan")}, "'line' must be an integer"),
        ({"line": 12.5}, "'line' must be an integer"),
        ({"end_line": [1]}, "'end_line' must be an integer"),
        ({"title": 7, "observation": ""}, "'title' must be a string"),
        ({"confidence": "quite"}, "'confidence' must be a number"),
        ({"priority": "whenever"}, "'priority'"),
    ],
)
def test_one_malformed_finding_is_dropped_not_the_answer(bad: dict[str, object], message: str) -> None:
    broken = {**_answer()["findings"][0], **bad, "title": bad.get("title", "Another defect")}  # type: ignore[dict-item]
    answer = parse_answer(_many(broken))
    assert [f.title for f in answer.findings] == ["Debug flag grants admin"]
    (dropped,) = answer.dropped
    assert (dropped.where, dropped.why) == ("findings[1]", "malformed")
    assert message in dropped.detail


def test_a_malformed_signal_or_exclusion_is_dropped_alone() -> None:
    data = _answer()
    data["signals"] = [
        {"kind": "REWRITE", "target": "x", "reason": "y"},
        {"kind": "DELETE", "target": "a.py:3", "reason": "dead"},
    ]
    data["exclusions"] = ["not an object"]
    answer = parse_answer(json.dumps(data))
    assert [s.kind for s in answer.signals] == ["DELETE"]
    assert len(answer.findings) == 1 and answer.exclusions == ()
    assert {d.where for d in answer.dropped} == {"signals[0]", "exclusions[0]"}


def test_foreign_path_is_dropped_and_an_answer_of_only_foreign_findings_is_unusable() -> None:
    pr = {"src/app.py"}
    answer = parse_answer(_many({**_answer()["findings"][0], "path": "src/elsewhere.py"}), pr_paths=pr)  # type: ignore[dict-item]
    assert [f.path for f in answer.findings] == ["src/app.py"]
    assert [d.why for d in answer.dropped] == ["not_in_pr"]
    with pytest.raises(NothingUsable, match="not a file of this PR") as caught:
        parse_answer(json.dumps(_answer(path="lib/ghost.py")), pr_paths=pr)
    assert [d.why for d in caught.value.dropped] == ["not_in_pr"]


def test_an_echo_of_the_prompt_example_is_never_a_finding() -> None:
    # what llama-server's schema enforcement made a 135M model answer (issue 12), old and new example
    old = _answer(path="a/b.py", line=120, quote="exact code text from the diff", title="…")
    with pytest.raises(NothingUsable, match="example"):
        parse_answer(json.dumps(old), pr_paths={"a/b.py"})
    new = _answer(
        path="src/app.py", title="<one sentence naming the defect>", quote="<one line copied from the diff>"
    )
    with pytest.raises(NothingUsable, match="example"):
        parse_answer(json.dumps(new))


@pytest.mark.parametrize(
    "title",
    ["<describe the defect>", "<one sentence naming the bug>", " <title> ", "<the defect, in one sentence>"],
)
def test_an_echoed_placeholder_in_a_form_not_on_the_list_is_never_a_finding(title: str) -> None:
    assert title.strip() not in EXAMPLE_VALUES
    with pytest.raises(NothingUsable, match="example"):
        parse_answer(json.dumps(_answer(path="src/app.py", title=title)))
    kept = parse_answer(json.dumps(_answer(path="src/app.py", title="<br> tags are not escaped")))
    assert [f.title for f in kept.findings] == ["<br> tags are not escaped"], "a title that starts with a tag"


@pytest.mark.parametrize("quote", ["exact code text from the diff", "<one line copied from the diff>"])
def test_a_finding_quoting_the_example_code_is_an_echo_even_with_a_real_title(quote: str) -> None:
    with pytest.raises(NothingUsable, match="example"):
        parse_answer(json.dumps(_answer(path="src/app.py", title="Division by zero", quote=quote)))
    kept = parse_answer(json.dumps(_answer(path="src/app.py", title="Division by zero", quote="<T>(x)")))
    assert [f.quote for f in kept.findings] == ["<T>(x)"], "code may look like a placeholder"


def test_the_prompt_example_uses_only_values_the_parser_rejects() -> None:
    from reviewer.render import Renderer

    text = Renderer().render("prompts/findings_schema.j2")
    start = text.index('{"findings"')
    example, _ = json.JSONDecoder().raw_decode(text[start:].replace("MERGE|DELETE|INLINE|MOVE", "MERGE"))
    (finding,) = example["findings"]
    for key in ("path", "title", "trigger", "observation", "suggestion", "quote"):
        assert finding[key] in EXAMPLE_VALUES, key
    (gap,) = example["unverified"]
    assert gap["what"] in EXAMPLE_VALUES and gap["how"] in EXAMPLE_VALUES
    assert parse_answer(json.dumps({**example, "findings": []})).unverified == ()
    with pytest.raises(NothingUsable, match="example"):
        parse_answer(json.dumps(example))
    assert parse_answer(json.dumps({**example, "findings": []})).exclusions == ()


def test_verification_gaps_are_kept_short_at_most_five_and_never_a_reason_to_drop_the_answer() -> None:
    items = [
        {"what": f"caller {i} of div()\nis not shown", "how": "read app.py " + "x" * 400} for i in range(8)
    ]
    answer = parse_answer(json.dumps({"findings": [], "unverified": [42, {"how": "no what"}, *items]}))
    assert [u.what for u in answer.unverified] == [f"caller {i} of div() is not shown" for i in range(5)]
    assert all(len(u.how) <= 300 and u.how.endswith("…") for u in answer.unverified)
    assert [d.why for d in answer.dropped] == ["malformed", "malformed"]
    assert parse_answer(json.dumps({"findings": [], "unverified": "see above"})).unverified == ()
    secret = parse_answer(
        json.dumps({"findings": [], "unverified": [{"what": "token ghp_" + "a" * 36, "how": ""}]}),
        clean=lambda s: s.replace("ghp_" + "a" * 36, "[redacted]"),
    )
    assert secret.unverified[0].what == "token [redacted]"
