"""Reading real answers: shapes mapped by the one table, cut answers keep only their complete items."""

from __future__ import annotations

import json

import pytest

from reviewer.answer_json import read_json
from reviewer.findings import NORMALISED_CODES, NothingUsable, parse_answer
from reviewer.schema import load_report_schema
from tests.factories import model_answer


def _finding(n: int, **extra: object) -> dict[str, object]:
    return {
        "path": "app/db.py",
        "line": n,
        "priority": "P2",
        "title": f"Defect number {n}",
        "trigger": "t",
        "observation": f"goes wrong at {n}",
        "suggestion": "fix it",
        "quote": f"code_{n}()",
        "confidence": 0.8,
        **extra,
    }


@pytest.mark.parametrize(
    ("word", "priority"),
    [
        ("high", "P1"),
        ("Critical", "P1"),
        ("BLOCKER", "P1"),
        ("medium", "P2"),
        ("Moderate", "P2"),
        ("major", "P2"),
        ("low", "P3"),
        ("nit", "P3"),
        ("INFO", "P3"),
        ("minor", "P3"),
        (1, "P1"),
    ],
)
def test_severity_words_are_priorities_in_any_case(word: object, priority: str) -> None:
    answer = parse_answer(model_answer(_finding(3, priority=word)))
    assert answer.findings[0].priority == priority
    assert "priority_word" in answer.normalised


def test_another_shape_with_synonyms_is_read_and_what_was_normalised_is_counted() -> None:
    text = json.dumps(
        {
            "issues": [
                {"file": "./app/db.py", "lineNumber": "7", "severity": "high", "message": "SQL injection."}
            ]
        }
    )
    answer = parse_answer(text, pr_paths={"app/db.py"})
    (finding,) = answer.findings
    assert (finding.path, finding.line, finding.priority) == ("app/db.py", 7, "P1")
    assert finding.title == "SQL injection." and finding.observation == "SQL injection."
    assert (finding.trigger, finding.suggestion, finding.quote) == ("", "", "")
    assert {
        "list_name",
        "field_name",
        "path_prefix",
        "string_number",
        "priority_word",
        "filled_empty",
    } <= set(answer.normalised)
    assert set(answer.normalised) <= set(NORMALISED_CODES)


def test_the_report_schema_names_every_normalisation_code() -> None:
    schema = load_report_schema()["$defs"]["answers"]["properties"]["normalised"]
    assert schema["propertyNames"]["enum"] == list(NORMALISED_CODES)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps([_finding(2)]),
        json.dumps({"review": {"findings": [_finding(2)]}}),
        json.dumps({"comments": [_finding(2)]}),
        json.dumps(_finding(2)),
        "<think>\nthe {diff} first\n</think>\n" + model_answer(_finding(2)),
        "checked it.\n</think>\n" + model_answer(_finding(2)),
        model_answer(_finding(2)).replace("], ", ",], ", 1),
        "{'findings': [" + json.dumps(_finding(2)) + "], // done\n 'exclusions': []}",
    ],
    ids=["bare list", "wrapper", "comments", "lone finding", "think", "lone </think>", "comma", "js-style"],
)
def test_wrappers_thinking_and_slips_keep_the_finding(text: str) -> None:
    (finding,) = parse_answer(text).findings
    assert (finding.path, finding.line, finding.title) == ("app/db.py", 2, "Defect number 2")


def test_a_cut_answer_keeps_its_complete_findings_and_drops_the_half_written_one() -> None:
    full = model_answer(_finding(1), _finding(2), _finding(3), _finding(4))
    cut = full[: full.index('"path"', full.index("Defect number 3")) + 60]  # inside the 4th finding
    answer = parse_answer(cut)
    assert [f.line for f in answer.findings] == [1, 2, 3]
    assert answer.missing and answer.cut_findings == 1
    assert [(d.where, d.why) for d in answer.dropped] == [("findings[3]", "truncated")]


def test_a_half_written_finding_that_the_repair_would_complete_is_still_dropped() -> None:
    full = model_answer(_finding(1), _finding(2))
    cut = full[: full.rindex('"confidence"') + len('"confidence": 0.8')]  # every field there, no `}`
    answer = parse_answer(cut)
    assert [f.line for f in answer.findings] == [1] and answer.cut_findings == 1


def test_a_cut_between_findings_loses_nothing_but_may_have_more() -> None:
    full = model_answer(_finding(1), _finding(2))
    cut = full[: full.index("}, {") + 3]
    answer = parse_answer(cut)
    assert [f.line for f in answer.findings] == [1] and answer.missing and answer.cut_findings == 0


def test_a_cut_in_the_exclusions_leaves_the_findings_complete() -> None:
    text = json.dumps({"findings": [_finding(1)], "exclusions": [{"claim": "a", "reason": "b"}]})
    answer = parse_answer(text[:-12])
    assert [f.line for f in answer.findings] == [1] and not answer.missing


def test_an_answer_cut_inside_its_first_finding_is_not_a_clean_answer() -> None:
    full = model_answer(_finding(1))
    with pytest.raises(NothingUsable, match="finding"):
        parse_answer(full[:40])
    with pytest.raises(ValueError, match="before its first finding was complete"):
        parse_answer('{"findings": [')


def test_nesting_past_the_stack_is_no_json_not_a_crash() -> None:
    with pytest.raises(ValueError, match="no JSON"):
        read_json('{"findings": ' + "[" * 5_000)


# found by the session's adversarial read of the tolerant reader


def test_an_empty_list_in_the_prose_before_the_answer_is_not_the_answer() -> None:
    text = "The helper returns [] for an empty input, and {} for none.\n" + model_answer(_finding(3))
    answer = parse_answer(text, pr_paths={"app/db.py"})
    assert [f.line for f in answer.findings] == [3]


def test_a_prose_object_without_any_answer_in_it_is_skipped() -> None:
    text = 'It returns {"data": []} here. ' + model_answer(_finding(4))
    assert [f.line for f in parse_answer(text, pr_paths={"app/db.py"}).findings] == [4]


def test_a_lone_finding_cut_at_the_root_is_never_published_as_complete() -> None:
    whole = json.dumps(_finding(5))
    with pytest.raises(NothingUsable, match="ended inside"):
        parse_answer(whole[: whole.index("goes wrong") + 5], pr_paths={"app/db.py"})


def test_repairing_a_hostile_answer_reads_a_bounded_number_of_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json_repair

    from reviewer import answer_json

    seen: list[int] = []
    real = json_repair.loads

    def counting(text: str, **kwargs: object) -> object:
        seen.append(len(text))
        return real(text, **kwargs)

    monkeypatch.setattr(json_repair, "loads", counting)
    with pytest.raises(ValueError, match=r"no usable finding|no JSON|ended"):
        parse_answer('{"findings":[' + '{"a":"x,' * 8_000)
    assert seen and sum(seen) <= answer_json.MAX_REPAIR_TOTAL


def test_a_continuation_that_brings_nothing_back_leaves_the_cut_finding_disclosed() -> None:
    whole = model_answer(_finding(1), _finding(2))
    first = parse_answer(whole[: whole.index("goes wrong at 2") + 5], pr_paths={"app/db.py"})
    assert (len(first.findings), first.cut_findings, first.missing) == (1, 1, True)
    joined = first.joined(parse_answer(model_answer(), pr_paths={"app/db.py"}))
    assert (len(joined.findings), joined.cut_findings, joined.missing) == (1, 1, True)
    whole_again = first.joined(parse_answer(model_answer(_finding(2)), pr_paths={"app/db.py"}))
    assert (len(whole_again.findings), whole_again.cut_findings, whole_again.missing) == (2, 0, False)


def test_prose_with_brackets_before_the_answer_and_an_example_after_it_keep_the_answer() -> None:
    """The first complete object opening with an answer key is the answer: prose braces before it
    (`{b}`) are not repaired into it, and an example the model adds after it does not replace it."""
    from reviewer.answer_json import read_json

    answer = '{"findings": [{"title": "Division by zero"}]}'
    before = "Looking at `div(a, b)`: items[0] and {b} may be zero; [a, b] is the pair. " * 3
    after = '\nWith nothing to report I would answer {"findings": []}.'
    assert read_json(before + answer + after).value == {"findings": [{"title": "Division by zero"}]}
