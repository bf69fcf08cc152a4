"""How many tokens one review answer needs: the `max_tokens` a review call reserves.

The reservation is a whole answer in our own format, not a share of the unit: `max-findings`
complete findings written the way the prompt asks, plus the exclusions, simplification signals and
verification gaps the method asks for, counted with the model's own tokenizer, so a small unit
still gets room for a full answer (measured in docs/answers-budget.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from reviewer.findings import MAX_UNVERIFIED

REFERENCE_EXCLUSIONS = 3
"""Exclusions a reference answer holds: the method asks for each suspicion checked and cleared."""
REFERENCE_SIGNALS = 2
SLACK_PERCENT = 10
"""Held on top of the counted reference: real answers vary in length around it."""

_EN: dict[str, Any] = {
    "finding": {
        "path": "src/app/services/payments/refund_handler.py",
        "line": 142,
        "end_line": 145,
        "side": "RIGHT",
        "priority": "P1",
        "title": "The refund total is read before the lock is taken, so two partial refunds can exceed "
        "the captured amount.",
        "trigger": "Call refund(order_id, amount=60) twice at once on an order captured for 100: both "
        "calls read `order.refunded` before `with self._lock:` on line 147.",
        "observation": "Both calls pass the `amount <= order.captured - order.refunded` check, 120 is "
        "refunded on a capture of 100, and the second ledger row is written with a negative balance.",
        "suggestion": "Read `order.refunded` and compute `remaining` inside `with self._lock:`, before "
        "`gateway.refund(...)` is called.",
        "quote": "    remaining = order.captured - order.refunded",
        "confidence": 0.8,
    },
    "exclusion": {
        "claim": "`parse_amount` may return None for an empty field and crash the comparison.",
        "reason": "The only caller, `RefundForm.clean` (line 88), rejects empty fields before it is called.",
        "path": "src/app/services/payments/refund_handler.py",
        "line": 131,
    },
    "signal": {
        "kind": "MERGE",
        "target": "src/app/services/payments/refund_handler.py:160",
        "into": "src/app/services/payments/ledger.py:write_entry",
        "reason": "The same balance arithmetic is written out in both places; one helper keeps them in step.",
    },
    "unverified": {
        "what": "Whether `gateway.refund` is idempotent when the same refund id is sent twice after "
        "a timeout.",
        "how": "Run tests/payments/test_refund.py::test_retry_after_timeout against the sandbox gateway.",
    },
}
_ZH: dict[str, Any] = {
    "finding": {
        **_EN["finding"],
        "title": "退款总额在加锁之前读取，两次并发的部分退款可能超过已扣款金额。",
        "trigger": "对一笔扣款 100 的订单同时调用两次 refund(order_id, amount=60)：两次调用都在第 147 行"
        "的 `with self._lock:` 之前读取 `order.refunded`。",
        "observation": "两次调用都通过 `amount <= order.captured - order.refunded` 检查，对 100 的扣款退款 "
        "120，第二条账目以负余额写入。",
        "suggestion": "在 `with self._lock:` 内读取 `order.refunded` 并计算 `remaining`，然后再调用 "
        "`gateway.refund(...)`。",
    },
    "exclusion": {
        **_EN["exclusion"],
        "claim": "`parse_amount` 对空字段可能返回 None，导致比较时崩溃。",
        "reason": "唯一的调用方 `RefundForm.clean`（第 88 行）在调用之前已拒绝空字段。",
    },
    "signal": {**_EN["signal"], "reason": "两处写了同一段余额计算；合并为一个辅助函数可保持一致。"},
    "unverified": {
        "what": "超时后以同一退款 id 重发时，`gateway.refund` 是否幂等。",
        "how": "在沙箱网关上运行 tests/payments/test_refund.py::test_retry_after_timeout。",
    },
}


def reference_answer(findings: int, language: str = "en") -> str:
    """A complete answer in our format with `findings` findings and the exclusions, signals and
    verification gaps the method asks for, written as a model writes it (indented JSON). Prose is
    English for an English review and Chinese otherwise (the most tokens per sentence of the
    languages measured, so every other language fits in it)."""
    sample = _EN if language.lower().startswith("en") else _ZH
    answer = {
        "findings": [sample["finding"]] * max(findings, 0),
        "exclusions": [sample["exclusion"]] * REFERENCE_EXCLUSIONS,
        "signals": [sample["signal"]] * REFERENCE_SIGNALS,
        "unverified": [sample["unverified"]] * MAX_UNVERIFIED,
    }
    return json.dumps(answer, ensure_ascii=False, indent=2)


def answer_reservation(count_tokens: Callable[[str], int], findings: int, language: str = "en") -> int:
    """The `max_tokens` for a review answer of up to `findings` findings (at least one), counted with
    `count_tokens`, plus SLACK_PERCENT."""
    counted = count_tokens(reference_answer(max(findings, 1), language))
    return counted + -(-counted * SLACK_PERCENT // 100)
