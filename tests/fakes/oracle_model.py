"""A loopback oracle model: it answers exactly the planted defects of a labelled dataset, with the
noise real models add, so a test can show the pipeline loses, moves and duplicates nothing.

Use it as the handler of `FakeModelServer`. For each review request it finds the planted defects
whose file and line are shown in the diff, and answers them with:
- the line off by 1 to 3 (the quote is exact, so anchoring can move it back);
- the JSON sometimes fenced and wrapped in prose;
- a defect whose sibling file is shown in another unit reported again from there, in other words;
- the first answer of one unit in the wrong schema (`{"issues": [...]}`), repaired when the
  repair prompt quotes it back.
Verification requests are answered `holds: true` for every finding: they are all real.
With `needs_evidence`, a defect whose evidence lies outside the diff (a caller, a definition) is
answered only when every evidence line is in the prompt: a model cannot see what it is not shown.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from tests.fakes.model_behaviours import last_user_text
from tests.fakes.model_server import Reply, text

LINE_NOISE = (1, -2, 3, -1, 2, -3)
_OPEN = re.compile(r"^<<<UNTRUSTED ([A-Za-z0-9]+) (\w+)$", re.M)
_FILE = re.compile(r"^## File: (.+?) \(", re.M)


@dataclass(frozen=True)
class Planted:
    """One planted defect: where it is, the exact code on its line, and how to describe it."""

    item: str
    path: str
    line: int
    quote: str
    priority: str
    description: str
    siblings: tuple[str, ...] = ()  # other changed files of the same item
    evidence: tuple[str, ...] = ()  # lines outside the diff (exact text) that show the defect


def _blocks(prompt: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _OPEN.finditer(prompt):
        nonce, label = m.group(1), m.group(2)
        end = prompt.find(f"\nUNTRUSTED {nonce}>>>", m.end())
        out[label] = prompt[m.end() + 1 : end if end >= 0 else len(prompt)]
    return out


class Oracle:
    def __init__(
        self, planted: list[Planted], *, wrong_schema_item: str | None = None, needs_evidence: bool = False
    ) -> None:
        self.planted = planted
        self.needs_evidence = needs_evidence
        self.wrong_schema_item = wrong_schema_item
        self.kinds: list[str] = []
        self._lock = threading.Lock()
        self._answers = 0
        self.findings_sent = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_text(body)
        blocks = _blocks(prompt)
        earlier = [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "assistant"]
        if earlier:  # the repair turn: user → assistant (the unusable answer) → user
            return self._repair(earlier[-1])
        if "previous_answer" in blocks:
            return self._repair(blocks["previous_answer"])
        if '"verdicts"' in prompt:
            ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.M)
            self._note("verify")
            return text(
                json.dumps({"verdicts": [{"id": i, "holds": True, "reason": "reachable"} for i in ids]})
            )
        return self._review(blocks.get("diff", ""), blocks.get("context", ""))

    def _note(self, kind: str) -> int:
        with self._lock:
            self.kinds.append(kind)
            self._answers += 1
            return self._answers

    def _review(self, diff: str, context: str = "") -> Reply:
        shown = set(_FILE.findall(diff))
        findings: list[dict[str, Any]] = []
        items: set[str] = set()
        seen = diff + "\n" + context
        for n, p in enumerate(self.planted):
            if self.needs_evidence and not all(e.strip() in seen for e in p.evidence):
                continue
            if p.path in shown and p.quote in diff:
                findings.append(self._finding(p, LINE_NOISE[n % len(LINE_NOISE)], p.description))
                items.add(p.item)
            if shown & set(p.siblings):
                # the same defect seen from a unit that shows a file using it: other words, other line
                findings.append(self._finding(p, 2, f"Callers get the wrong result: {p.description}"))
                items.add(p.item)
        answer = {"findings": findings, "exclusions": [], "signals": []}
        count = self._note("review")
        with self._lock:
            self.findings_sent += len(findings)
        if self.wrong_schema_item in items:
            self.wrong_schema_item = None
            self.kinds[-1] = "wrong_schema"
            return text(json.dumps({"payload_v2": findings, "notes": "looks risky"}))  # no shape we read
        if count % 2:
            return text(f"Here is my review.\n\n```json\n{json.dumps(answer, indent=1)}\n```\nThanks!")
        return text(json.dumps(answer))

    def _repair(self, previous: str) -> Reply:
        self._note("repair")
        data = json.loads(previous)
        return text(json.dumps({"findings": data.get("payload_v2", []), "exclusions": [], "signals": []}))

    @staticmethod
    def _finding(p: Planted, offset: int, title: str) -> dict[str, Any]:
        return {
            "path": p.path,
            "line": max(1, p.line + offset),
            "end_line": None,
            "side": "RIGHT",
            "priority": p.priority,
            "title": title[:180],
            "trigger": "the input described in the title",
            "observation": p.description,
            "suggestion": "fix the code on this line as the observation says",
            "quote": p.quote.strip(),
            "confidence": 0.9,
        }
