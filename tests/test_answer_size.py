"""The answer reservation is a whole answer in our format, counted with a real tokenizer (issue 17 item 3)."""

from __future__ import annotations

import json

from reviewer import answer_size
from reviewer.budget import DEFAULT_ANSWER_TOKENS
from reviewer.findings import parse_answer


def o200k(text: str) -> int:
    import litellm

    return int(litellm.token_counter(model="gpt-4o-mini", text=text))


def test_the_reference_answer_is_a_valid_answer_with_every_list_the_method_asks_for() -> None:
    text = answer_size.reference_answer(6, "en")
    answer = parse_answer(text)
    assert len(answer.findings) == 6 and answer.dropped == ()
    assert (len(answer.exclusions), len(answer.signals), len(answer.unverified)) == (3, 2, 5)
    assert len(parse_answer(answer_size.reference_answer(6, "zh-CN")).findings) == 6
    assert "退款" in answer_size.reference_answer(1, "ja"), "another language is sized in Chinese"


def test_the_default_reservation_is_six_findings_as_gpt_4o_mini_counts_them() -> None:
    assert answer_size.answer_reservation(o200k, 6, "en") == DEFAULT_ANSWER_TOKENS
    frame = o200k(answer_size.reference_answer(0, "en"))
    per_finding = o200k(answer_size.reference_answer(1, "en")) - frame
    assert 200 <= per_finding <= 260 and 600 <= frame <= 750, (per_finding, frame)
    assert answer_size.answer_reservation(o200k, 0) == answer_size.answer_reservation(o200k, 1)
    assert answer_size.answer_reservation(o200k, 2) < DEFAULT_ANSWER_TOKENS
    biggest = json.loads(answer_size.reference_answer(6, "en"))["findings"]
    assert o200k(json.dumps(biggest, indent=2)) < DEFAULT_ANSWER_TOKENS
