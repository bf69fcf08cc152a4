"""Verification of model findings: deterministic checks first, then (budget allowing) a second call.

Order (DESIGN 4.4, issue 8):
1. Deterministic, zero cost, every model finding: the quoted code exists at head (the base, for a
   removed line); the suggested fix differs from that code; the line is in the diff. A failed quote
   or no-op fix refutes the finding (it becomes an exclusion with the reason); a line outside the
   diff leaves it summary-only with `verified: false`. A file that cannot be read (a diff-only
   source, a failed API call) refutes nothing: only the file's text at that commit can.
2. A verification call re-checks P1/P2 findings against fuller code around their line, and against
   the repository context (definitions, call sites) the review call showed with that code: the
   verifier judges a claim on the evidence it was made from. `holds: false` refutes (exclusion,
   with the model's reason); `holds: true` sets `verified: true`; a finding the model leaves out
   stays `verified: null`. When the budget cannot pay for the context it is left out, not the
   call. No budget, an error, or an unparsable answer leaves every finding as it was, with a
   warning.

Only findings on files the model was shown are re-checked: a model-chosen path must never pull a
skipped file (such as `.env`) into a prompt. Everything shown or kept is redacted (`rules.redact`).
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reviewer import context as ctx
from reviewer import findings as fnd
from reviewer.diff import DiffFile
from reviewer.errors import BudgetExhausted, ModelError
from reviewer.report import Exclusion, Finding
from reviewer.rules import redact

if TYPE_CHECKING:
    from reviewer.llm import ModelClient
    from reviewer.render import Renderer

ReadText = Callable[[str], "str | None"]
Evidence = Callable[[Finding], Sequence[ctx.Snippet]]

CONTEXT_LINES = 25
MAX_VERIFY = 8
MAX_EVIDENCE_CHARS = 12_000
_DIFF_PREFIX = re.compile(r"^\s*(?:\(?\d+\)?\s+)?[+\- ~]\s")
_FENCED = re.compile(r"^```[\w+-]*\n(.*?)\n?```$", re.S)
_SHOWN = ("id", "priority", "title", "path", "line", "trigger", "observation", "suggestion", "quote")
"""The fields of a finding the verifier is shown, with the code around its line."""


@dataclass(frozen=True)
class Outcome:
    """Findings kept (some marked verified) and the refuted ones as exclusions."""

    findings: tuple[Finding, ...]
    refuted: tuple[Exclusion, ...]


def _exclusion(finding: Finding, reason: str) -> Exclusion:
    return Exclusion(claim=finding.title, reason=reason, path=finding.path, line=finding.line)


def deterministic(
    found: Sequence[Finding],
    *,
    files: Mapping[str, DiffFile],
    read_head: ReadText,
    read_base: ReadText,
    say: Callable[..., str],
) -> Outcome:
    """The zero-cost checks on every model finding (rule findings are exact by construction)."""
    kept: list[Finding] = []
    refuted: list[Exclusion] = []
    for finding in found:
        reason = None
        if finding.source == "llm" and finding.path in files:
            reason = _refutation(finding, files[finding.path], read_head, read_base, say)
            if not reason and not finding.anchored and finding.anchor_reason != "not_in_unit":
                finding = dataclasses.replace(finding, verified=False)
        if reason:
            refuted.append(_exclusion(finding, reason))
        else:
            kept.append(finding)
    return Outcome(tuple(kept), tuple(refuted))


def _refutation(
    finding: Finding, file: DiffFile, read_head: ReadText, read_base: ReadText, say: Callable[..., str]
) -> str | None:
    """Why the finding is refuted: its quote (the first code line, without a diff marker or line
    number the model may have copied) is not in the file nor its diff, or its fix is the quoted
    code (or the anchored line) unchanged."""
    first = next((line for line in finding.quote.splitlines() if line.strip()), "")
    quote = fnd.norm(_DIFF_PREFIX.sub("", first, count=1))
    if not quote:
        return None
    diff_texts = fnd.line_texts(file, finding.side)
    whole = (read_base if finding.side == "LEFT" else read_head)(finding.path)
    if whole is not None and not _quoted_anywhere(quote, [*diff_texts.values(), *whole.splitlines()]):
        where = "verify.quote_not_at_base" if finding.side == "LEFT" else "verify.quote_not_at_head"
        return say(where, quote=quote[:120], path=finding.path)  # an unreadable file proves nothing
    fix = _code_of(finding.suggestion)
    at_line = fnd.norm(diff_texts.get(finding.line or -1, "")) if finding.anchored else ""
    if fix and (fix == fnd.norm(finding.quote) or (at_line and fix == at_line)):
        return say("verify.fix_is_the_code", quote=quote[:120])
    return None


def _quoted_anywhere(quote: str, lines: Sequence[str]) -> bool:
    """The quote, as written or without a copied `+` and line number, on one of `lines`."""
    quotes = {quote, fnd.bare_quote(quote)} - {""}
    return any(q in fnd.norm(line) or q in fnd.norm(redact(line)) for line in lines for q in quotes)


def _code_of(suggestion: str) -> str:
    text = suggestion.strip()
    fenced = _FENCED.match(text)
    if fenced:
        return fnd.norm(fenced.group(1))
    return fnd.norm(text.strip("`") if text.startswith("`") and text.endswith("`") else text)


def recheck(
    client: ModelClient,
    found: Sequence[Finding],
    *,
    renderer: Renderer,
    read_head: ReadText,
    warn: Callable[[str], None],
    reviewed_paths: set[str],
    evidence: Evidence = lambda finding: (),
) -> Outcome:
    """One verification call for up to MAX_VERIFY of the model's P1/P2 findings not yet verified, on
    files the model saw. `evidence`: the repository context the review call that raised a finding was
    shown; the best-ranked snippets that fit MAX_EVIDENCE_CHARS are rendered as the review showed
    them (`select` charges no separator for the first snippet, this budget one for each)."""
    targets = [
        f
        for f in found
        if f.source == "llm"
        and f.priority in ("P1", "P2")
        and f.path in reviewed_paths
        and f.verified is None
    ][:MAX_VERIFY]
    if not targets:
        return Outcome(tuple(found), ())
    items = [
        {**{k: getattr(f, k) for k in _SHOWN}, "context": _context(read_head(f.path), f.line)}
        for f in targets
    ]
    snippets = ctx.merge(evidence(f) for f in targets)
    excerpts = ctx.render(ctx.select(snippets, MAX_EVIDENCE_CHARS - len(ctx.SEPARATOR), len, redact), redact)
    try:
        verdicts = _verdicts(client, renderer, items, excerpts)
    except (BudgetExhausted, ModelError) as exc:
        detail = " ".join(str(exc).split())[:120] or type(exc).__name__
        warn(renderer.translate("warning.verification_skipped", why=redact(detail)))
        return Outcome(tuple(found), ())
    return _decided(found, {f.id for f in targets}, verdicts)


def _decided(
    found: Sequence[Finding], target_ids: set[str], verdicts: Mapping[str, tuple[bool, str]]
) -> Outcome:
    """Each target the verifier confirmed marked verified, each it refuted an exclusion."""
    kept: list[Finding] = []
    refuted: list[Exclusion] = []
    for f in found:
        decision = verdicts.get(f.id) if f.id in target_ids else None
        if decision is None or decision[0]:
            kept.append(f if decision is None else dataclasses.replace(f, verified=True))
        else:
            refuted.append(_exclusion(f, redact(decision[1])))
    return Outcome(tuple(kept), tuple(refuted))


def _verdicts(
    client: ModelClient, renderer: Renderer, items: list[dict[str, Any]], excerpts: str
) -> Mapping[str, tuple[bool, str]]:
    """The verification call; refused for the budget before any request, it is tried once more
    without the excerpts (the findings alone may still fit)."""
    nonce = secrets.token_hex(8)

    def ask(excerpts: str) -> Mapping[str, tuple[bool, str]]:
        prompt = renderer.prompt(
            "verify", findings=items, excerpts=excerpts, nonce=nonce, language=renderer.language
        )
        system = renderer.prompt("system", language=renderer.language)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        return client.complete_json(
            messages, phase="verify", parse=parse_verdicts, response_schema=fnd.VERDICTS_SCHEMA
        )[0]

    try:
        return ask(excerpts)
    except BudgetExhausted:
        if not excerpts:
            raise
        return ask("")


def _context(text: str | None, line: int | None) -> str:
    if not text or not line:
        return ""
    lo = max(0, line - 1 - CONTEXT_LINES)
    shown = text.splitlines()[lo : line + CONTEXT_LINES]
    return redact("\n".join(f"{n} {code}" for n, code in enumerate(shown, lo + 1)))


def parse_verdicts(text: str) -> Mapping[str, tuple[bool, str]]:
    """`{"verdicts": [{"id", "holds", "reason"}]}`; a malformed entry is skipped, not the answer."""
    data: Any = fnd.json_object(text)
    items = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError("'verdicts' must be a list")
    out: dict[str, tuple[bool, str]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        holds = item.get("holds")
        if isinstance(holds, bool):
            out[item["id"]] = (holds, str(item.get("reason") or "")[:500])
    if items and not out:
        raise ValueError("no entry of 'verdicts' has a string 'id' and a true/false 'holds'")
    return out
