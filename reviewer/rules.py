"""Stage 2, rules: deterministic checks over the lines a change adds. Zero cost, high signal only.

- `conflict-marker` (P1): `<<<<<<< `, `>>>>>>> ` at column 0; `=======` only between them in the
  same hunk, so Markdown and reST underlines stay quiet. One finding per conflict.
- `secret` (P1): well-known key and token formats, private key headers, and `password = "…"`-style
  assignments whose literal is long, mixed and high-entropy (confidence 0.9). Placeholders,
  documentation examples (AWS's `…EXAMPLE`) and references such as `${VAR}` stay quiet. The
  assignment check skips test files, where fake credentials are the norm; the token formats do not.
- `debugger` (P2): a debugger call or import that starts its line (so comments and strings stay
  quiet) in Python, JavaScript/TypeScript or Ruby. Files under fixture/testdata directories are
  data, not code, and are not checked.
- `duplicate-block`: a `MERGE` signal when the same run of at least 6 non-trivial lines is added
  twice.

Secret and conflict checks run on every file, policy-skipped ones included (DESIGN 7); debugger
and duplicate checks skip lockfiles and generated, vendored, minified or binary files. Every
quote passes through `redact`, which cuts each secret-shaped token to its first 4 characters + `…`.

All prose comes from templates/i18n/en.yml (`english()`), which a caller may override key by key
(`run_rules(messages=...)`) to speak the configured language; finding ids are always computed from the
English title.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import string
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

from reviewer.diff import DiffFile, DiffLine, Hunk
from reviewer.policy import (
    category,
    definition_names,
    holds_sample_data,
    is_fixture_path,
    pure_path,
    skip_reason,
)
from reviewer.report import Finding, Priority, Signal, finding_id

RuleId = Literal["conflict-marker", "secret", "debugger"]
RULE_IDS: tuple[str, ...] = get_args(RuleId)
"""The rules that raise findings (`source: rule:<id>`; `ignore: - rule: <id>` quiets one). The
duplicate-block check raises a MERGE signal, not a finding."""

MIN_DUPLICATE_LINES = 6
MAX_DUPLICATE_SIGNALS = 10
"""Only the largest copies are worth a reader's time; code in tests, docs and data is not checked."""

_BEGIN_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_END_KEY = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")
_KEY_BODY_LINE = re.compile(r"\s*(?:[A-Za-z0-9+/=]{16,}|Proc-Type: )")
_PEM_LINE = re.compile(r"^([ +\-]?\s*(?:\d+\s+)?)([A-Za-z0-9+/]{64}|[A-Za-z0-9+/]{40,63}={0,2})$", re.M)
_ESCAPED_KEY_BODY = re.compile(r"\\n[A-Za-z0-9+/=]{16,}")
_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("AWS access key ID", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
        ("GitHub token", r"(?<![A-Za-z0-9_])(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{36,}(?![A-Za-z0-9_])"),
        ("GitHub token", r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{40,}"),
        ("GitLab token", r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}"),
        ("Slack token", r"(?<![A-Za-z0-9])xox[abprse]-[A-Za-z0-9-]{10,}"),
        (
            "Slack webhook URL",
            r"https://hooks\.slack\.com/services/(?P<tok>T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+)",
        ),
        ("Stripe live key", r"(?<![A-Za-z0-9])(?:sk|rk)_live_[A-Za-z0-9]{16,}"),
        ("Google API key", r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
        ("Anthropic API key", r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"),
        ("OpenAI API key", r"(?<![A-Za-z0-9_-])sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
        ("OpenAI API key", r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9]{32,}(?![A-Za-z0-9_-])"),
        ("npm token", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
        ("PyPI token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
        ("SendGrid API key", r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
        (
            "AWS secret access key",
            r"(?i:aws)[A-Za-z0-9_.\-]{0,30}?(?i:secret)[A-Za-z0-9_.\-]{0,30}[\"']?\s*(?::=|=>|=|:)\s*[\"']?"
            r"(?P<tok>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ),
        (
            "password in a URL",
            r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/@\"'`<>]{1,64}:"
            r"(?P<tok>[^\s/@\"'`<>$%{}*]{2,128})@[A-Za-z0-9\[]",
        ),
    )
)
_CREDENTIAL_NAMES = (
    r"password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|client[_-]?secret|auth[_-]?key|credentials?"
    r"|(?:encryption|signing|master|hmac|jwt|cipher|crypto|aes|fernet)[_-]?(?:key|secret)"
)
_GENERIC = re.compile(
    rf"(?<![A-Za-z0-9_.\-])(?P<key>[a-z0-9_.\-]*?(?:{_CREDENTIAL_NAMES})"
    r"(?:[_-]?(?:key|value|str|string|b64|base64|hex))?)[\"']?\s*(?::=|=>|=|:)\s*"
    r"(?:(?P<q>[\"'`])(?P<tok>[^\"'`\s]{8,})(?P=q)|(?P<bare>[^\s\"'`#,;(){}\[\]<>]{8,})\s*$)",
    re.IGNORECASE | re.MULTILINE,
)
_CREDENTIAL_NAME = re.compile(_CREDENTIAL_NAMES)
_LEADING_LOOKBEHIND = re.compile(r"\(\?<[!=](?:[^()\\\[]|\\.|\[(?:[^\]\\]|\\.)*\])*\)")


def _quick(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """A fast necessary condition for `pattern`: the same regex without a leading lookbehind.

    The lookbehind only narrows where a match may start, so whenever `pattern` matches, this does
    too; without it the engine jumps to the literal prefix instead of testing every position
    (20-50x faster on text with no match, which is nearly all text)."""
    m = _LEADING_LOOKBEHIND.match(pattern.pattern)
    return re.compile(pattern.pattern[m.end() :], pattern.flags) if m else pattern


_TOKEN_GATES: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = tuple(
    (kind, pattern, _quick(pattern)) for kind, pattern in _TOKENS
)


_SECRET_WORDS = re.compile(
    r"a(?:kia|sia|bia|cca|iza|ws)|gh[pousr]_|github_pat_|glpat-|xox|_live_|s(?:k-|g\.|ecret)|npm_"
    r"|p(?:ypi-|ass|wd)|://|token|key|credential"
)
"""In lowercased ASCII text, a literal that every token format, the key header (`key`) and every
credential name (`pass`, `pwd`, `secret`, `token`, `key`, `credential`) contains."""
_BASE64_AS_A = str.maketrans(dict.fromkeys(string.ascii_letters + string.digits + "+/", "a"))
_BASE64_RUN = "a" * 40
"""A PEM-width base64 run, found as a run of `a` once every base64 character is mapped to `a`
(str.translate and `in` are 20x faster than a regex scan)."""


def may_hold_secret(text: str) -> bool:
    """False only when `redact` leaves `text` as it is and no secret check can fire on any of its
    lines: one cheap scan first, as nearly all text holds no secret."""
    if not text.isascii():
        return True
    return _SECRET_WORDS.search(text.lower()) is not None or _BASE64_RUN in text.translate(_BASE64_AS_A)


def _may_name_credential(text: str) -> bool:
    """False only when `_GENERIC` cannot match: it needs one of the credential names. ASCII text
    lowercased matches them exactly as IGNORECASE would; other text takes the full regex."""
    return not text.isascii() or _CREDENTIAL_NAME.search(text.lower()) is not None


_PLACEHOLDER = re.compile(
    r"change_?-?me|example|sample|placeholder|dummy|fake|mock|test|xxx|your|redacted|todo|fixme|password"
    r"|passwd|secret|token|localhost|admin|default|undefined|null|none|empty|enter|insert|replace"
    r"|abc123|123456|qwerty|foo|bar|[<>{}*]|\.\.\.|…|\$\(|%\(|%s|://",
    re.IGNORECASE,
)
_REFERENCE_START = ("$", "%", "@", "/", "./", "~/", "env:", "env.", "process.env", "vault:", "arn:")
_DOTTED_NAME = re.compile(r"\.[A-Za-z_]")

_CONFLICT_OPEN = re.compile(r"^<<<<<<<(?: .*)?$")
_CONFLICT_MID = re.compile(r"^=======\s*$")
_CONFLICT_CLOSE = re.compile(r"^>>>>>>>(?: .*)?$")
_CONFLICT_LITERALS = re.compile(r"^(?:<<<<<<<|=======|>>>>>>>)", re.MULTILINE)
"""An added line that starts like a conflict marker: without one, no hunk of the file is walked."""


@functools.lru_cache(maxsize=1)
def english() -> Mapping[str, str]:
    """The English rule prose, read from its one source, the `rules:` section of
    templates/i18n/en.yml, keyed as there (`rules.secret.trigger`). Placeholders: {name}; literal
    braces: {{ }}. Read on first use (the renderer imports this module, so not at import)."""
    from reviewer.render import packaged_english

    messages = packaged_english()
    return MappingProxyType(
        {key: value for key, value in messages.items() if key.startswith("rules.") and isinstance(value, str)}
    )


_PLACEHOLDER_NAME = re.compile(r"\{\{|\}\}|\{(\w+)\}")


def _fill(template: str, params: Mapping[str, object]) -> str:
    """Substitute `{name}`; raises KeyError for a name not in `params`."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        return str(params[m.group(1)])

    return _PLACEHOLDER_NAME.sub(one, template)


@dataclass(frozen=True)
class _Prose:
    """The caller's templates over the English ones; a template that names a parameter the rule
    does not pass (a translator's typo) falls back to English for that key."""

    messages: Mapping[str, str]

    def __call__(self, key: str, **params: object) -> str:
        template = self.messages.get(key)
        if isinstance(template, str):
            try:
                return _fill(template, params)
            except KeyError:
                pass
        return _fill(english()[key], params)


_POLICY_SKIPS = frozenset({"lockfile", "generated", "vendored", "minified", "binary"})


@dataclass(frozen=True)
class _Debugger:
    suffixes: frozenset[str]
    pattern: re.Pattern[str]
    key: str
    needles: tuple[str, ...]
    """Literals every match contains: a file whose added text has none is not scanned line by line."""


_DEBUGGERS: tuple[_Debugger, ...] = (
    _Debugger(
        frozenset({".py", ".pyw"}),
        re.compile(
            r"^\s*(?:breakpoint\(\s*\)|(?:pdb|ipdb|pudb)\.set_trace\(|__import__\([\"'](?:pdb|ipdb)[\"']\))"
        ),
        "rules.debugger.py_breakpoint",
        ("breakpoint", "set_trace", "__import__"),
    ),
    _Debugger(
        frozenset({".py", ".pyw"}),
        re.compile(r"^\s*(?:import\s+(?:pdb|ipdb|pudb)\b|from\s+(?:pdb|ipdb|pudb)\s+import\b)"),
        "rules.debugger.py_import",
        ("pdb", "pudb"),
    ),
    _Debugger(
        frozenset({".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".vue", ".svelte"}),
        re.compile(r"^\s*debugger\s*;?\s*(?://.*)?$"),
        "rules.debugger.js_statement",
        ("debugger",),
    ),
    _Debugger(
        frozenset({".rb", ".erb", ".rake"}),
        re.compile(r"^\s*(?:binding\.(?:pry|irb)|byebug|debugger)\s*(?:#.*)?$"),
        "rules.debugger.rb_breakpoint",
        ("binding.", "byebug", "debugger"),
    ),
)


@dataclass(frozen=True)
class RuleResult:
    findings: tuple[Finding, ...]
    signals: tuple[Signal, ...]


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


_EXAMPLE_TOKEN = re.compile(
    r"example|xxxx|0000|1234|abcd|change_?-?me|placeholder|dummy|fake|your_?(?:api_?)?(?:key|token|secret)"
    r"|[<>{}]|\.\.\.|…",
    re.IGNORECASE,
)
"""Parts of a token that make it a documentation example or a placeholder (AWS's `AKIAIOSFODNN7EXAMPLE`,
`ghp_xxxx…`, `<token>`): never a finding."""


def _looks_secret(value: str, *, bare: bool) -> bool:
    """A long, mixed, high-entropy literal that is not a placeholder or a reference."""
    if len(value) < 10 or value.lower().startswith(_REFERENCE_START) or _PLACEHOLDER.search(value):
        return False
    if bare and (not any(c.isdigit() for c in value) or _DOTTED_NAME.search(value)):
        return False
    classes = sum(
        (any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value))
    ) + any(not c.isalnum() for c in value)
    return classes >= 2 and any(c.isdigit() for c in value) and _entropy(value) >= 3.0


def _mask(token: str) -> str:
    """The first 4 characters of a long token (enough to find it); nothing of a short one."""
    return token[:4] + "…" if len(token) >= 10 else "…"


def _mask_span(match: re.Match[str], group: str | int) -> str:
    whole, (start, end) = match.group(0), match.span(group)
    base = match.start()
    return whole[: start - base] + _mask(match.group(group)) + whole[end - base :]


def _mask_token(match: re.Match[str]) -> str:
    return _mask_span(match, "tok" if "tok" in match.re.groupindex else 0)


def _mask_generic(match: re.Match[str]) -> str:
    group = "tok" if match.group("tok") else "bare"
    return (
        _mask_span(match, group)
        if _looks_secret(match.group(group), bare=group == "bare")
        else match.group(0)
    )


def _mask_pem_line(match: re.Match[str]) -> str:
    body = match.group(2)
    mixed = all(any(test(c) for c in body) for test in (str.isupper, str.islower, str.isdigit))
    return match.group(1) + _mask(body) if mixed else match.group(0)


def _mask_key_bodies(text: str) -> str:
    """Key bodies after a BEGIN line, before an END line whose BEGIN is not in the text (a hunk can
    show a key's middle as context), and base64 lines of PEM width anywhere."""
    first_end = _END_KEY.search(text)
    if first_end and not _BEGIN_KEY.search(text, 0, first_end.start()):
        head = _KEY_BODY.sub(lambda m: _mask(m.group(0)), text[: first_end.start()])
        return head + first_end.group(0) + _mask_key_bodies(text[first_end.end() :])
    text = _PEM_LINE.sub(_mask_pem_line, text)
    out: list[str] = []
    pos = 0
    for begin in _BEGIN_KEY.finditer(text):
        if begin.start() < pos:
            continue
        end = _END_KEY.search(text, begin.end())
        stop = end.start() if end else len(text)
        out.append(text[pos : begin.end()])
        out.append(_KEY_BODY.sub(lambda m: _mask(m.group(0)), text[begin.end() : stop]))
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def redact(text: str) -> str:
    """Cut every secret-shaped token to its first 4 characters + `…` (private key bodies too).
    Idempotent; used on every output and on everything sent to the model."""
    if not may_hold_secret(text):
        return text
    text = _mask_key_bodies(text)
    for _, pattern, quick in _TOKEN_GATES:
        if quick.search(text):
            text = pattern.sub(_mask_token, text)
    return _GENERIC.sub(_mask_generic, text) if _may_name_credential(text) else text


@dataclass(frozen=True)
class _Hit:
    rule: RuleId
    finding: Finding
    """The card when this is the only place; its id is computed from `id_title`."""
    id_title: str
    text: str = ""
    """The line as added (unredacted, never shown): what makes two hits the same line."""
    across_files: bool = True
    """Whether the same line in another file is the same finding (one card); a conflict block is
    each file's own."""


def _hit(
    rule: RuleId,
    path: str,
    line: DiffLine,
    prose: _Prose,
    *,
    title: str,
    trigger: str,
    observation: str,
    suggestion: str,
    params: Mapping[str, object],
    priority: Priority = "P1",
    confidence: float = 1.0,
    end_line: int | None = None,
) -> _Hit:
    """`title`, `trigger`, `observation` and `suggestion` are message keys, all filled from `params`."""
    id_title, quote = _fill(english()[title], params), redact(line.text).strip()
    finding = Finding(
        id=finding_id(path, quote, id_title),
        priority=priority,
        title=prose(title, **params),
        path=path,
        line=line.new or 0,
        end_line=end_line,
        side="RIGHT",
        trigger=prose(trigger, **params),
        observation=prose(observation, **params),
        suggestion=prose(suggestion, **params),
        quote=quote,
        confidence=confidence,
        source=f"rule:{rule}",
    )
    return _Hit(rule, finding, id_title, text=line.text.strip())


def _conflicts(path: str, hunk: Hunk, prose: _Prose) -> Iterator[_Hit]:
    opened: DiffLine | None = None
    middle = False
    for line in hunk.lines:
        if line.kind != "+" or line.new is None:
            continue
        if _CONFLICT_OPEN.match(line.text):
            if opened:
                yield _conflict(path, prose, opened)
            opened, middle = line, False
        elif _CONFLICT_MID.match(line.text) and opened:
            middle = True
        elif _CONFLICT_CLOSE.match(line.text):  # a close without an open is a marker alone
            yield _conflict(path, prose, opened or line, line if opened else None, middle=middle)
            opened, middle = None, False
    if opened:
        yield _conflict(path, prose, opened)


def _conflict(
    path: str, prose: _Prose, start: DiffLine, end: DiffLine | None = None, *, middle: bool = False
) -> _Hit:
    kind = "marker" if end is None else "block_both" if middle else "block"
    hit = _hit(
        "conflict-marker",
        path,
        start,
        prose,
        title="rules.conflict.title",
        trigger="rules.conflict.trigger",
        observation=f"rules.conflict.observation_{kind}",
        suggestion="rules.conflict.suggestion",
        params={"line": start.new, "start": start.new, "end": end.new if end is not None else start.new},
        end_line=end.new if end is not None else None,
    )
    return dataclasses.replace(hit, across_files=False)


def _secret(
    path: str, line: DiffLine, prose: _Prose, which: str, confidence: float = 1.0, **params: object
) -> _Hit:
    """P1, except in tests, fixtures, examples and docs (`policy.holds_sample_data`), where
    committed credentials are made up far more often than leaked: P3 there, below every usual
    `fail-on`, with a suggestion that asks before it tells to rotate. Not silence: a real key pasted
    into a fixture is still a leak."""
    sample = holds_sample_data(path)
    return _hit(
        "secret",
        path,
        line,
        prose,
        title=f"rules.secret.{which}.title",
        trigger="rules.secret.trigger",
        observation=f"rules.secret.{which}.observation",
        suggestion="rules.secret.suggestion_sample" if sample else "rules.secret.suggestion",
        params={"line": line.new, **params},
        confidence=confidence,
        priority="P3" if sample else "P1",
    )


def _secrets(file: DiffFile, added_text: str, prose: _Prose) -> Iterator[_Hit]:
    generic_ok = category(file.path) != "test"
    name = pure_path(file.path).name
    bare_ok = category(file.path) == "config" or name.startswith(".env") or name.endswith(".env")
    if not may_hold_secret(added_text):
        return
    added = {line.new: line for line in file.added_lines() if line.new is not None}
    for number, line in added.items():
        key = _private_key(file.path, line, added.get(number + 1), prose)
        if key is not None:
            yield key
            continue
        tokens = list(_tokens(file.path, line, prose))
        yield from tokens
        if generic_ok and not tokens and _may_name_credential(line.text):
            yield from _assignment(file.path, line, prose, bare_ok=bare_ok)


def _private_key(path: str, line: DiffLine, following: DiffLine | None, prose: _Prose) -> _Hit | None:
    """A header alone (in docs, tests, detectors like this one) is not a key; a body after it is."""
    header = _BEGIN_KEY.search(line.text)
    body = following is not None and _KEY_BODY_LINE.match(following.text)
    if not header or not (_ESCAPED_KEY_BODY.match(line.text[header.end() :]) or body):
        return None
    hit = _secret(path, line, prose, "private_key")
    # every key has the same header: its first body line tells two keys apart
    return dataclasses.replace(hit, text=f"{hit.text}\n{following.text if following else ''}")


def _tokens(path: str, line: DiffLine, prose: _Prose) -> Iterator[_Hit]:
    """Each plausible token of a known kind on the line, none overlapping an earlier one."""
    taken: list[tuple[int, int]] = []
    for kind, pattern, quick in _TOKEN_GATES:
        if not quick.search(line.text):
            continue
        for m in pattern.finditer(line.text):
            token = m.group("tok") if "tok" in pattern.groupindex else m.group(0)
            overlaps = any(s < m.end() and m.start() < e for s, e in taken)
            if overlaps or _EXAMPLE_TOKEN.search(token) or _entropy(token) < 3.0:
                continue
            taken.append(m.span())
            yield _secret(path, line, prose, "token", kind=kind)


def _assignment(path: str, line: DiffLine, prose: _Prose, *, bare_ok: bool) -> Iterator[_Hit]:
    """The first credential-named assignment of a secret-looking value (a bare one only in config)."""
    for m in _GENERIC.finditer(line.text):
        group = "tok" if m.group("tok") else "bare"
        if (group == "bare" and not bare_ok) or not _looks_secret(m.group(group), bare=group == "bare"):
            continue
        yield _secret(path, line, prose, "assignment", confidence=0.9)
        return


def _debuggers(file: DiffFile, added_text: str, prose: _Prose) -> Iterator[_Hit]:
    pure = pure_path(file.path)
    if is_fixture_path(file.path):
        return
    checks = [
        d
        for d in _DEBUGGERS
        if pure.suffix.lower() in d.suffixes and any(needle in added_text for needle in d.needles)
    ]
    if not checks:
        return
    for line in file.added_lines():
        for check in checks:
            if line.new is not None and check.pattern.match(line.text):
                trigger, where = _where(file, line, f"{check.key}.trigger")
                yield _hit(
                    "debugger",
                    file.path,
                    line,
                    prose,
                    priority="P2",
                    title=f"{check.key}.title",
                    trigger=trigger,
                    observation=f"{check.key}.observation",
                    suggestion="rules.debugger.suggestion",
                    params={"line": line.new, "name": where},
                )
                break


def _where(file: DiffFile, line: DiffLine, default: str) -> tuple[str, str]:
    """Where a Python line runs, as a trigger key and the function's name: `trigger_module` for a
    line at column 0 (it runs when the module is imported), `trigger_function` inside the nearest
    definition above it in the hunk or named in the hunk header, else the check's own trigger."""
    if pure_path(file.path).suffix.lower() not in (".py", ".pyi"):
        return default, ""
    indent = len(line.text) - len(line.text.lstrip())
    if indent == 0:
        return "rules.debugger.trigger_module", ""
    for hunk in file.hunks:
        if line not in hunk.lines:
            continue
        above = hunk.lines[: hunk.lines.index(line)]
        for other in reversed(above):
            if other.kind == "-" or not other.text.strip():
                continue
            depth = len(other.text) - len(other.text.lstrip())
            if depth < indent:
                names = definition_names(other.text)
                if names:
                    return "rules.debugger.trigger_function", names[0]
                indent = depth
                if depth == 0:
                    return default, ""
        names = definition_names(hunk.header.strip())
        if names:
            return "rules.debugger.trigger_function", names[0]
    return default, ""


def _grouped(hits: Sequence[_Hit]) -> list[list[_Hit]]:
    """One card per rule, title and quote: the same line added in several places is one finding
    (anchored at the first place), as only the rule knows that two of its findings say the same
    thing. The hits of one finding id together; across files, those of one rule, title, quote and
    text."""
    in_file: dict[str, list[_Hit]] = {}
    for hit in sorted(hits, key=lambda h: (h.finding.path, h.finding.line or 0, h.rule)):
        in_file.setdefault(hit.finding.id, []).append(hit)
    groups: dict[tuple[object, ...], list[_Hit]] = {}
    for fid, found in in_file.items():
        first = found[0]
        same_text = frozenset(h.text for h in found)  # quotes are redacted: two keys can share one
        key = (first.rule, first.id_title, first.finding.quote, same_text) if first.across_files else (fid,)
        groups.setdefault(key, []).extend(found)
    return list(groups.values())


def _card(group: Sequence[_Hit], prose: _Prose) -> Finding:
    """The first hit, its observation naming where else the same line was added: in the first file
    by line, other files by `path:line` (at most MAX_PLACES_NAMED, then a count)."""
    first, *rest = (h.finding for h in group)
    observation = first.observation
    same = [f for f in rest if f.path == first.path]
    others = [f for f in rest if f.path != first.path]
    if len(same) == 1:
        observation = prose("rules.repeated_line", observation=observation, line=same[0].line)
    elif len(same) > 1:
        more = ", ".join(str(f.line) for f in same)
        observation = prose("rules.repeated_lines", observation=observation, lines=more)
    if others:
        places = ", ".join(f"{f.path}:{f.line}" for f in others[:MAX_PLACES_NAMED])
        if len(others) > MAX_PLACES_NAMED:
            places = prose("rules.and_more", places=places, n=len(others) - MAX_PLACES_NAMED)
        observation = prose("rules.repeated_places", observation=observation, places=places)
    return dataclasses.replace(first, observation=observation)


MAX_PLACES_NAMED = 10
"""Places of a grouped rule finding named in its card; the rest are counted."""

_ALNUM = re.compile(r"[^\W_]")
"""A character for which str.isalnum() is true: `\\w` is exactly those plus `_`."""


def _runs(files: Sequence[DiffFile]) -> list[list[tuple[str, str, int]]]:
    """Runs of adjacent added lines, trivial (blank or punctuation-only) lines dropped."""
    runs: list[list[tuple[str, str, int]]] = []
    for file in sorted(files, key=lambda f: f.path):
        for hunk in file.hunks:
            if hunk.added < MIN_DUPLICATE_LINES:
                continue  # a run holds added lines only
            run: list[tuple[str, str, int]] = []
            for line in hunk.lines:
                if line.kind == "+":
                    if line.new is not None:
                        norm = " ".join(line.text.split())
                        if _ALNUM.search(norm):
                            run.append((norm, file.path, line.new))
                elif line.kind != "-":
                    if len(run) >= MIN_DUPLICATE_LINES:
                        runs.append(run)
                    run = []
            if len(run) >= MIN_DUPLICATE_LINES:
                runs.append(run)
    return runs


def _duplicates(files: Sequence[DiffFile], prose: _Prose) -> tuple[Signal, ...]:
    size = MIN_DUPLICATE_LINES
    runs = _runs(files)
    seen: dict[tuple[str, ...], tuple[int, int]] = {}
    diagonals: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for ri, run in enumerate(runs):
        texts = [text for text, _, _ in run]
        for off in range(len(run) - size + 1):
            key = tuple(texts[off : off + size])
            if key not in seen:
                if len(set(key)) >= 3:  # a window seen before passed this already
                    seen[key] = (ri, off)
                continue
            fr, fo = seen[key]
            if fr == ri and off - fo < size:
                continue
            diagonals.setdefault((fr, ri, off - fo), []).append((fo, off))
    sized: list[tuple[int, Signal]] = []
    for (fr, ri, _), pairs in diagonals.items():
        block: list[tuple[int, int]] = []
        for pair in [*sorted(pairs), (-2, -2)]:
            if block and pair[0] != block[-1][0] + 1:
                first, later = runs[fr], runs[ri]
                (a0, b0), (a1, b1) = block[0], block[-1]
                a_end, b_end = first[a1 + size - 1], later[b1 + size - 1]
                reason = prose(
                    "rules.duplicate.reason",
                    count=a1 - a0 + size,
                    path=later[b0][1],
                    start=later[b0][2],
                    end=b_end[2],
                    original_path=first[a0][1],
                    original_start=first[a0][2],
                    original_end=a_end[2],
                )
                target, into = f"{later[b0][1]}:{later[b0][2]}", f"{first[a0][1]}:{first[a0][2]}"
                sized.append((a1 - a0 + size, Signal(kind="MERGE", target=target, into=into, reason=reason)))
                block = []
            block.append(pair)
    largest = sorted(sized, key=lambda item: -item[0])[:MAX_DUPLICATE_SIGNALS]
    return tuple(sorted((signal for _, signal in largest), key=lambda s: (s.target, s.into)))


def run_rules(files: Sequence[DiffFile], *, messages: Mapping[str, str] | None = None) -> RuleResult:
    """All checks over the added lines of every file; findings are unanchored until findings.py.

    `messages` replaces the English templates by key (the configured language); ids stay English."""
    prose = _Prose(messages or {})
    hits: list[_Hit] = []
    code: list[DiffFile] = []
    for file in files:
        added_text = file.added_text
        if _CONFLICT_LITERALS.search(added_text):
            for hunk in file.hunks:
                hits.extend(_conflicts(file.path, hunk, prose))
        hits.extend(_secrets(file, added_text, prose))
        if skip_reason(file) not in _POLICY_SKIPS:
            hits.extend(_debuggers(file, added_text, prose))
            if category(file.path) == "source":
                code.append(file)
    findings = tuple(_card(group, prose) for group in _grouped(hits))
    return RuleResult(findings=findings, signals=_duplicates(code, prose))
