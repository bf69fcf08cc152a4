"""Report → Markdown and prompts, through Jinja templates (sandboxed) and explicit escaping filters.

Autoescape is off because the output is Markdown, not HTML: every value that came from the PR or
from the model must pass through `untrusted`, `untrusted_line`, `code_span` or `code` in the
template. Those filters strip HTML comments and invisible/bidi characters, escape `<`, `>`, `&`,
neutralize `@mentions` (the `@` becomes the visible FULLWIDTH COMMERCIAL AT `＠`, which never
notifies), issue cross-references, slash commands, workflow commands at line start and our own
marker text, and cap lengths. Prompts use `prompt_data`/`prompt_code`, which keep code intact but
remove anything that could forge the untrusted-data delimiters.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import re
import secrets
import traceback
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jinja2
import yaml
from jinja2.bccache import Bucket
from jinja2.sandbox import SandboxedEnvironment

from reviewer.budget import plausible
from reviewer.errors import ConfigError, TemplateError, UsageError
from reviewer.links import blob_url, files_url
from reviewer.report import SCHEMA_ID
from reviewer.rules import redact

DEFAULT_LANGUAGE = "en"
UNTRUSTED_LIMIT = 4000
LINE_LIMIT = 1000
CODE_LIMIT = 20000
PLURAL_FORMS = frozenset({"zero", "one", "other"})

_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")
_HTML_COMMENT = re.compile(r"<!--(?:-?>|.*?(?:-->|\Z))", re.S)
_MARKER = re.compile(r"imreview:(state|review)", re.I)
_XREF = re.compile(r"#(?=\d)")
_MD_SPECIAL = re.compile(r"[\\`*|~$]|(?<=\])\(")
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_GH_REF = re.compile(r"(gh)-(?=\d)", re.I)
_URL_SCHEME = re.compile(r":(?=/)")
_WWW = re.compile(r"(www)\.", re.I)
_LINE_START = re.compile(r"^(\d{0,9})((?<=\d)[.)](?=\s|$)|(?<!\d)[-+=/:#\[])")
_BACKTICKS = re.compile(r"`+")
_WS = re.compile(r"\s+")
_DELIMITER = re.compile(r"<<<\s*UNTRUSTED|UNTRUSTED\b[^\n<>]{0,100}>>>", re.I)
_NONCE = re.compile(r"[A-Za-z0-9]{8,64}")
_I18N_PARAM = re.compile(r"\{\{|\}\}|\{(\w+)\}")
_LANG_CODE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*")
_SAFE_URL = re.compile(r"https?://[^\s<>()\[\]\"'`\\]+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_DETAILS_OPEN = re.compile(r"<details[\s>]", re.I)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.I)
_EXTRA_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0")


def packaged_templates_dir() -> Path:
    """The shipped templates: `reviewer/templates` when installed, the repo's `templates/` in a checkout."""
    installed = resources.files("reviewer") / "templates"
    if installed.is_dir():
        return Path(str(installed))
    checkout = Path(__file__).resolve().parent.parent / "templates"
    if checkout.is_dir():
        return checkout
    raise TemplateError(f"packaged templates not found (looked in {installed} and {checkout})")


def template_names() -> tuple[str, ...]:
    """Every file a template directory may override (`comment.md.j2`, `prompts/review.j2`,
    `i18n/en.yml`, ...): the package's own, so a new template is overridable from its first day."""
    root = packaged_templates_dir()
    files = (p for p in root.rglob("*") if p.is_file() and p.suffix in (".j2", ".yml"))
    return tuple(sorted(p.relative_to(root).as_posix() for p in files))


def template_cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where compiled templates are kept between runs: IMREVIEW_CACHE_DIR, else the job's RUNNER_TEMP
    inside GitHub Actions, else the user cache dir; None when none is set (HOME unset)."""
    env = os.environ if environ is None else environ
    if env.get("IMREVIEW_CACHE_DIR"):
        return Path(env["IMREVIEW_CACHE_DIR"]) / "jinja"
    if env.get("RUNNER_TEMP"):
        return Path(env["RUNNER_TEMP"]) / "imreview-cache" / "jinja"
    base = env.get("XDG_CACHE_HOME") or (str(Path(env["HOME"]) / ".cache") if env.get("HOME") else "")
    return Path(base) / "imreview" / "jinja" if base else None


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's file cache (keyed by template name and source checksum, tagged with the Python
    version); a cache that cannot be written is only slower, never an error."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError):
            bucket.reset()


_SHARED_CACHE: dict[Path | None, jinja2.BytecodeCache | None] = {}


def _bytecode_cache(directory: Path | None) -> jinja2.BytecodeCache | None:
    """One cache per directory per process; the directory must be ours and closed to others, since
    compiled templates are code (Jinja's own default cache checks the same)."""
    if directory in _SHARED_CACHE:
        return _SHARED_CACHE[directory]
    cache: jinja2.BytecodeCache = _MemoryCache()
    if directory is not None:
        with contextlib.suppress(OSError):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = directory.stat()
            getuid = getattr(os, "getuid", None)
            if (getuid is None or info.st_uid == getuid()) and not info.st_mode & 0o022:
                cache = _TemplateCache(str(directory))
    _SHARED_CACHE[directory] = cache
    return cache


class _MemoryCache(jinja2.BytecodeCache):
    """Compiled templates for this process only, when no cache directory is usable."""

    def __init__(self) -> None:
        self._codes: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._codes.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._codes[bucket.key] = bucket.bytecode_to_string()


def new_nonce() -> str:
    """A fresh random token for one prompt's untrusted-data delimiters."""
    return secrets.token_hex(8)


# --- text measures and truncation -------------------------------------------------------------


_UNITS: Mapping[str, tuple[str, int]] = {"utf16": ("utf-16-le", 2), "utf8": ("utf-8", 1)}
"""Each unit `fit` measures in: its encoding and the bytes of one unit."""


def _markdown_closers(text: str) -> str:
    """What must be appended so a cut Markdown text does not swallow the note (open fence, <details>)."""
    fence: str | None = None
    details = 0
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            if not m.group(2).strip():
                fence = None
        elif fence is None:
            details += len(_DETAILS_OPEN.findall(line)) - len(_DETAILS_CLOSE.findall(line))
    return (f"{fence}\n" if fence else "") + "</details>\n" * max(details, 0)


def fit(text: str, limit: int, *, unit: str, note: str) -> tuple[str, bool]:
    """Cut `text` to at most `limit` UTF-16 code units or UTF-8 bytes, at a line boundary where
    possible, closing an open code fence or <details> and appending `note`; returns (text, cut?)."""
    if unit not in _UNITS:
        raise ValueError(f"fit(): unit must be 'utf16' or 'utf8', not {unit!r}")
    if limit < 0:
        raise ValueError(f"fit(): limit must be >= 0, not {limit}")
    encoding, width = _UNITS[unit]

    def size(text: str) -> int:
        return len(text.encode(encoding)) // width

    def prefix(text: str, limit: int) -> str:
        return text.encode(encoding)[: max(limit, 0) * width].decode(encoding, errors="ignore")

    if size(text) <= limit:
        return text, False
    budget = limit - size(note) - 1
    while budget > 0:
        kept = prefix(text, budget)
        if "\n" in kept:
            kept = kept[: kept.rindex("\n") + 1]
        elif kept:
            kept += "\n"
        out = kept + _markdown_closers(kept) + note
        if size(out) <= limit:
            return out, True
        budget -= size(out) - limit
    return prefix(note, limit), True


# --- filters for untrusted text ---------------------------------------------------------------


def _invisible(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat == "Cf" or (cat == "Cc" and ch not in "\n\t") or ch in _EXTRA_INVISIBLE


def _strip_invisible(text: str) -> str:
    return "".join(ch for ch in text if not _invisible(ch))


_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""The ASCII characters `_invisible` names (category Cc), newline included: `_show_invisible`
keeps it, so it is put back as itself."""


def _show_invisible(text: str) -> str:
    """In code, hidden characters are evidence (Trojan Source): make them visible instead. Plain
    ASCII (most code) is handled by one regex pass: planning renders every unit's prompt to count it."""
    if text.isascii():
        return _ASCII_CONTROL.sub(
            lambda m: m.group() if m.group() == "\n" else f"<U+{ord(m.group()):04X}>", text
        )
    return "".join(f"<U+{ord(ch):04X}>" if _invisible(ch) and ch != "\t" else ch for ch in text)


def _strip_comments(text: str) -> str:
    while True:
        stripped = _HTML_COMMENT.sub("", text)
        if stripped == text:
            return text
        text = stripped


def _plausible_count(call: Mapping[str, Any]) -> bool:
    """Whether a ledger entry's provider count (`input_tokens`) is a tokenizer's difference from ours."""
    return plausible(int(call["estimated_input_tokens"]), int(call["input_tokens"]))


def _as_text(value: Any) -> str:
    return "" if value is None else str(value)


def _shown(value: Any) -> str:
    """Text from the PR or the model as it may be shown: secret-shaped tokens cut (rules.redact)."""
    return redact(_as_text(value))


def _cap(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def _neutralize_marker(text: str) -> str:
    return _MARKER.sub(lambda m: f"imreview\u2236{m.group(1)}", text)


def _split_code_spans(line: str) -> list[tuple[bool, str]]:
    """CommonMark code spans on one line: a run of N backticks closed by the next run of exactly N.

    The text around them is escaped completely (every backslash included), so a run kept here as an
    opener is never preceded by an escaping backslash in the output, and a run with no closer on the
    same line is escaped; the output's code spans are therefore exactly the ones found here."""
    parts: list[tuple[bool, str]] = []
    pos = start = 0
    while m := _BACKTICKS.search(line, pos):
        run = m.group(0)
        close = next((c for c in _BACKTICKS.finditer(line, m.end()) if c.group(0) == run), None)
        if close is None:
            pos = m.end()
            continue
        if m.start() > start:
            parts.append((False, line[start : m.start()]))
        parts.append((True, line[m.start() : close.end()]))
        pos = start = close.end()
    if start < len(line):
        parts.append((False, line[start:]))
    return parts


def _escape_text(text: str) -> str:
    """Text that renders as itself and nothing else: each character that could start Markdown markup
    here escaped, and GitHub's own autolinks (mentions, issue references) broken with a look-alike.

    Kept literal where CommonMark cannot make markup of them, so prose stays readable: `_` between
    two letters or digits (intraword), `[` after the line start (no link without `](` or a reference
    definition, and definitions only start a line), `#` after the line start unless a digit follows."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\g<0>", text)
    text = _EMPHASIS_UNDERSCORE.sub(r"\\_", text)
    text = _XREF.sub("\uff03", text).replace("@", "\uff20")
    text = _GH_REF.sub("\\1\u2011", text)
    text = _URL_SCHEME.sub("\\\\:", text)
    return _WWW.sub("\\1\\\\.", text)


def _escape_line(line: str, *, cell: bool) -> str:
    """One line: no indentation (indented code), its first character never a block marker (list,
    heading underline, slash command, workflow command), code spans kept, everything else escaped."""
    out = []
    for n, (is_code, part) in enumerate(_split_code_spans(line.strip(" \t"))):
        if is_code:
            out.append(part.replace("|", "\\|") if cell else part)
        else:
            part = _escape_text(part)
            out.append(_LINE_START.sub("\\1\\\\\\2", part) if n == 0 else part)
    return "".join(out)


def _prepared(text: str, limit: int | None) -> str:
    """Untrusted text before escaping: comments and invisible characters gone, capped, marker defused."""
    text = _strip_comments(_strip_invisible(_NEWLINES.sub("\n", text)))
    return _neutralize_marker(_cap(text, limit))


def _sanitize(text: str, limit: int | None, *, cell: bool) -> str:
    return "\n".join(_escape_line(line, cell=cell) for line in _prepared(text, limit).split("\n"))


def untrusted(value: Any, limit: int | None = UNTRUSTED_LIMIT) -> str:
    """PR or model text for a Markdown block: sanitized, escaped, capped; newlines kept."""
    return _sanitize(_shown(value).strip("\n"), limit, cell=False)


def untrusted_line(value: Any, limit: int | None = LINE_LIMIT, cell: bool = False) -> str:
    """Like `untrusted`, collapsed to one line; `cell=True` also escapes `|` for a table cell."""
    if type(value) is str and len(value) <= _REMEMBERED_LINE:
        return _untrusted_line(value, limit, cell)
    return _untrusted_line.__wrapped__(value, limit, cell)


def link_text(value: Any) -> str:
    """One line as a link's text, all of it escaped, brackets too (a code span cannot hold an escaped
    `]`): a `]` ending the label early turns a line that starts `[`a]:1`](…)` into a link reference
    definition, and the line vanishes."""
    text = _escape_text(_prepared(_one_line(value), LINE_LIMIT))
    return text.replace("[", "\\[").replace("]", "\\]")


_REMEMBERED_LINE = 200
"""Short values repeat (a coverage table names the same status and reason on every row): each is
sanitized once per process."""


@functools.lru_cache(maxsize=4096)
def _untrusted_line(value: Any, limit: int | None, cell: bool) -> str:
    return _sanitize(_one_line(value), limit, cell=cell)


def _one_line(value: Any) -> str:
    return _WS.sub(" ", _strip_comments(_NEWLINES.sub("\n", _shown(value)))).strip()


def code_span(value: Any, limit: int | None = LINE_LIMIT, cell: bool = False) -> str:
    """Untrusted text as one inline code span whose backtick fence cannot be closed from inside."""
    text = _strip_comments(_strip_invisible(_NEWLINES.sub("\n", _shown(value))))
    text = _neutralize_marker(_cap(_WS.sub(" ", text).strip(), limit))
    if not text:
        return ""
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code(value: Any, lang: str = "", limit: int | None = CODE_LIMIT) -> str:
    """A fenced block whose fence is longer than any backtick run inside; hidden characters shown."""
    text = _show_invisible(_NEWLINES.sub("\n", _shown(value))).rstrip("\n")
    text = _neutralize_marker(_cap(text, limit))
    fence = "`" * max(3, max((len(r) for r in _BACKTICKS.findall(text)), default=0) + 1)
    info = re.sub(r"[^\w+#.-]", "", _as_text(lang))[:20]
    return f"{fence}{info}\n{text}\n{fence}"


def usd(value: float) -> str:
    """Dollars with cents ($1.23, $0.00); under a cent, two significant digits ($0.0042, $0.000031),
    so a small but real cost never reads as $0.00."""
    if value == 0 or abs(value) >= 0.01 or not math.isfinite(value):
        return f"${value:,.2f}"
    places = 1 - math.floor(math.log10(abs(value)))
    return "$" + f"{value:.{places}f}".rstrip("0")


def short_sha(value: Any) -> str:
    sha = re.sub(r"[^0-9a-fA-F]", "", _as_text(value))[:7]
    return sha or "-"


def safe_url(value: Any) -> str:
    """The URL when it is a plain http(s) URL that cannot break out of a Markdown link, else ''."""
    url = _as_text(value)
    return url if _SAFE_URL.fullmatch(url) else ""


def _prompt_clean(value: Any, nonce: str, limit: int | None) -> str:
    text = _cap(_NEWLINES.sub("\n", _as_text(value)), limit)
    text = _DELIMITER.sub("[delimiter removed]", text)
    return text.replace(nonce, "[nonce removed]") if nonce else text


def prompt_data(value: Any, nonce: str, limit: int | None = 8000) -> str:
    """PR title/body for a prompt: HTML comments and invisible characters stripped, delimiters removed."""
    return _prompt_clean(
        _strip_comments(_strip_invisible(_NEWLINES.sub("\n", _as_text(value)))), nonce, limit
    )


def prompt_code(value: Any, nonce: str, limit: int | None = None) -> str:
    """Diff or code for a prompt: kept verbatim (line numbers must survive), hidden characters shown,
    delimiters removed. Only CRLF ends a line: a lone CR or a Unicode line separator inside a
    line is shown, since as a line break it could forge a numbered diff line."""
    text = _as_text(value).replace("\r\n", "\n")
    shown = _LINE_SEPARATORS.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)
    return _prompt_clean(_show_invisible(shown), nonce, limit)


_LINE_SEPARATORS = re.compile("[\u2028\u2029]")


# --- i18n -------------------------------------------------------------------------------------


def _flatten(data: Any, origin: str, prefix: str = "") -> dict[str, str | dict[str, str]]:
    if not isinstance(data, Mapping):
        raise TemplateError(f"expected a mapping of strings at {prefix or 'the top level'}", origin)
    out: dict[str, str | dict[str, str]] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, str):
            out[name] = value
        elif isinstance(value, Mapping) and "other" in value and set(value) <= PLURAL_FORMS:
            if not all(isinstance(v, str) for v in value.values()):
                raise TemplateError(f"plural forms of {name!r} must be strings", origin)
            out[name] = {str(k): v for k, v in value.items()}
        elif isinstance(value, Mapping):
            out.update(_flatten(value, origin, f"{name}."))
        else:
            raise TemplateError(f"{name!r} must be a string, not {type(value).__name__}", origin)
    return out


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML has it (its wheels do): a language file is read in milliseconds,
not the second the pure-Python parser takes on a loaded runner."""


def _load_i18n(path: Path) -> tuple[Mapping[str, str | dict[str, str]], str]:
    text = path.read_text(encoding="utf-8")
    return _parsed_i18n(text, str(path)), text


@functools.lru_cache(maxsize=16)
def _parsed_i18n(text: str, origin: str) -> Mapping[str, str | dict[str, str]]:
    """One parse per language file and content: a scan builds a renderer for every PR it reviews."""
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{origin}:{mark.line + 1}" if mark else origin
        raise TemplateError(f"invalid YAML: {exc.problem}", where) from exc
    return MappingProxyType(_flatten(data or {}, origin))


@functools.cache
def packaged_english() -> Mapping[str, str | dict[str, str]]:
    return _load_i18n(packaged_templates_dir() / "i18n" / f"{DEFAULT_LANGUAGE}.yml")[0]


def _placeholders(message: str | Mapping[str, str]) -> set[str]:
    forms = message.values() if isinstance(message, Mapping) else (message,)
    return {name for form in forms for name in _I18N_PARAM.findall(form) if name}


def _check_placeholders(
    messages: Mapping[str, str | dict[str, str]], packaged: Mapping[str, str | dict[str, str]], path: Path
) -> None:
    """A translation may only name what the packaged English of its key is given: an unknown
    `{name}` would fail when the sentence is said, perhaps after the PR was written to. Checked when
    the file is read, before anything is sent or written."""
    for key, message in messages.items():
        if key in packaged and (extra := sorted(_placeholders(message) - _placeholders(packaged[key]))):
            given = ", ".join(f"{{{name}}}" for name in sorted(_placeholders(packaged[key]))) or "none"
            raise TemplateError(
                f"'{key}' names {{{extra[0]}}}, which it is never given (it has: {given})", str(path)
            )


def _format_param(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _as_text(value)
    if isinstance(value, int) or value.is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _interpolate(template: str, params: Mapping[str, Any], key: str) -> str:
    def repl(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        name = m.group(1)
        if name not in params:
            raise jinja2.TemplateRuntimeError(f"i18n string {key!r} needs the parameter {name!r}")
        return _format_param(params[name])

    return _I18N_PARAM.sub(repl, template)


Say = Callable[..., str]
"""`Renderer.translate` (`say(key, default=None, **params)`), handed to code that words a sentence a
user reads but holds no renderer: the model client, the sinks."""


def english(key: str, default: str | None = None, **params: Any) -> str:
    """A sentence from the packaged English strings, for a caller whose reader's language is unknown
    (a log line, a write outside any review). One renderer serves every call (it is only read)."""
    return _english_renderer().translate(key, default, **params)


@functools.cache
def _english_renderer() -> Renderer:
    return Renderer()


# --- the renderer -----------------------------------------------------------------------------


class Renderer:
    """One sandboxed Jinja environment over the user's template overrides and the packaged templates."""

    def __init__(self, *, language: str = DEFAULT_LANGUAGE, template_dir: str | Path | None = None) -> None:
        self._packaged = packaged_templates_dir()
        self._override: Path | None = None
        if template_dir is not None and str(template_dir):
            self._override = Path(template_dir)
            if not self._override.is_dir():
                raise ConfigError(f"template directory not found: {self._override}", "template-dir")
            if not any(self._override.rglob("*.j2")) and not any((self._override / "i18n").glob("*.yml")):
                raise ConfigError(
                    f"{self._override} holds no templates: expected files named like the packaged ones"
                    " (summary.md.j2, comment.md.j2, prompts/review.j2, i18n/<language>.yml)",
                    "template-dir",
                )
        roots = [p for p in (self._override, self._packaged) if p is not None]
        self._roots = tuple(r.resolve() for r in roots)
        self.language = self._pick_language(language, roots)
        self._messages: dict[str, str | dict[str, str]] = {}
        self._i18n_sources: list[tuple[str, str]] = []
        for lang in dict.fromkeys([DEFAULT_LANGUAGE, self.language]):
            for root in reversed(roots):
                path = root / "i18n" / f"{lang}.yml"
                if path.is_file():
                    messages, text = _load_i18n(path)
                    _check_placeholders(messages, packaged_english(), path)
                    self._messages.update(messages)
                    origin = "override" if root == self._override else "packaged"
                    self._i18n_sources.append((f"{origin}:{lang}", text))
        self._env = SandboxedEnvironment(
            loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(r)) for r in roots]),
            bytecode_cache=_bytecode_cache(self._cache_dir()),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        escaping = (
            untrusted,
            untrusted_line,
            link_text,
            code_span,
            code,
            short_sha,
            safe_url,
            prompt_data,
            prompt_code,
        )
        self._env.filters.update({f.__name__: f for f in (*escaping, blob_url, files_url)})
        self._env.filters.update(t=self.translate, plural=self.plural, num=self.num, usd=self.usd)
        self._env.tests["plausible_count"] = _plausible_count

    def _cache_dir(self) -> Path | None:
        """Jinja folds filters over constants (`'section.findings' | t`) into the compiled code, so
        compiled templates are only valid for these messages, this language and this filter code."""
        root = template_cache_dir()
        if root is None:
            return None
        digest = hashlib.sha256(f"{jinja2.__version__}\0{self.language}\0".encode())
        digest.update(Path(__file__).read_bytes())
        for label, text in self._i18n_sources:
            digest.update(f"{label}\0{text}\0".encode())
        return root / digest.hexdigest()[:24]

    def warm(self) -> int:
        """Compile every template into the cache now (the image build does, for its languages)."""
        names = self._env.list_templates(filter_func=lambda n: n.endswith(".j2"))
        for name in names:
            self._env.get_template(name)
        return len(names)

    @staticmethod
    def _pick_language(requested: str, roots: Sequence[Path]) -> str:
        """Exact tag (case-insensitive, `_` or `-`), else same primary subtag; anything else is an
        error listing what is available (a silent fallback would hide a typo)."""
        available = sorted({p.stem for r in roots for p in (r / "i18n").glob("*.yml")})
        wanted = _as_text(requested).strip().replace("_", "-").lower()
        if not wanted:
            return DEFAULT_LANGUAGE
        unknown = ConfigError(
            f"unknown language {_as_text(requested)!r}; supported: {', '.join(available)}"
            " (add templates/i18n/<language>.yml under template-dir for another)",
            "language",
        )
        if not _LANG_CODE.fullmatch(wanted):
            raise unknown
        for lang in available:
            if lang.lower() == wanted:
                return lang
        primary = wanted.split("-")[0]
        for lang in available:
            if lang.lower().split("-")[0] == primary:
                return lang
        raise unknown

    # filters that need the language

    def translate(self, key: str, default: str | None = None, **params: Any) -> str:
        """`{{ 'verdict.clean' | t(files=3) }}`; a plural entry picks its form from `n`."""
        entry = self._messages.get(key, default)
        if entry is None:
            raise jinja2.TemplateRuntimeError(f"no i18n string {key!r} (language {self.language})")
        if isinstance(entry, dict):
            n = params.get("n")
            form = "zero" if n == 0 and "zero" in entry else "one" if n == 1 and "one" in entry else "other"
            entry = entry[form]
        return _interpolate(entry, params, key)

    def messages(self, prefix: str) -> dict[str, str]:
        """The unformatted strings under `prefix` (e.g. `rules.`), for code that fills them itself."""
        return {
            key: value
            for key, value in self._messages.items()
            if key.startswith(prefix) and isinstance(value, str)
        }

    def plural(self, n: int | None, key: str, **params: Any) -> str:
        """`{{ 3 | plural('count.files') }}` → "3 files"; an unknown count is "unknown"."""
        return self.translate("common.unknown") if n is None else self.translate(key, n=n, **params)

    def num(self, value: Any) -> str:
        return self.translate("common.unknown") if value is None else _format_param(value)

    def usd(self, value: Any) -> str:
        return self.translate("common.unknown") if value is None else usd(float(value))

    def gap_text(self, why: str, **params: Any) -> str:
        """The localized `Gap.what` for a machine code; unknown codes get a generic sentence."""
        key = f"gap.{why}" if f"gap.{why}" in self._messages else "gap.other"
        return self.translate(key, why=why, **params)

    # rendering

    def render(self, name: str, **context: Any) -> str:
        """Render any template by name (the CLI's `render --template`); errors name file and line."""
        try:
            return self._env.get_template(name).render(**context)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(exc.message or str(exc), f"{exc.name or exc.filename}:{exc.lineno}") from exc
        except jinja2.TemplateNotFound as exc:
            raise TemplateError(f"template not found: {exc.name}") from exc
        except jinja2.TemplateError as exc:
            raise TemplateError(exc.message or str(exc), _template_location(exc, name, self._roots)) from exc

    def summary(self, report: Mapping[str, Any], *, annotations_dropped: int = 0) -> str:
        """The job summary: everything, verdict first."""
        return self.render("summary.md.j2", report=_checked(report), annotations_dropped=annotations_dropped)

    def comment(self, report: Mapping[str, Any], *, max_findings: int, summary_url: str | None = None) -> str:
        """The sticky PR comment, without its state marker (publish appends it)."""
        return self.render(
            "comment.md.j2",
            report=_checked(report),
            max_findings=max(max_findings, 0),
            summary_url=summary_url,
        )

    def inline(self, finding: Mapping[str, Any]) -> str:
        return self.render("inline.md.j2", finding=finding)

    def review_body(self, report: Mapping[str, Any], *, folded: Sequence[Mapping[str, Any]] = ()) -> str:
        """Body of the inline review; `folded` are findings GitHub would not take as inline comments."""
        return self.render("review_body.md.j2", report=_checked(report), folded=list(folded))

    def prompt(self, name: str, **context: Any) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise TemplateError(f"invalid prompt name {name!r}")
        nonce = context.get("nonce")
        if nonce is not None and not _NONCE.fullmatch(str(nonce)):
            raise ValueError("prompt nonce must be 8-64 letters or digits (use new_nonce())")
        return self.render(f"prompts/{name}.j2", **context)

    def templates_digest(self) -> str:
        """sha256 of every effective template source and the i18n files in use (for the config hash)."""
        digest = hashlib.sha256()
        loader = self._env.loader
        assert loader is not None
        for name in self._env.list_templates(filter_func=lambda n: n.endswith(".j2")):
            source, _, _ = loader.get_source(self._env, name)
            digest.update(f"template\0{name}\0{source}\0".encode())
        for label, text in self._i18n_sources:
            digest.update(f"i18n\0{label}\0{text}\0".encode())
        digest.update(f"language\0{self.language}".encode())
        return digest.hexdigest()


def _checked(report: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = report.get("schema") if isinstance(report, Mapping) else None
    if schema != SCHEMA_ID:
        raise UsageError(f"not an {SCHEMA_ID} report (schema: {schema!r})")
    return report


def _template_location(exc: BaseException, fallback: str, roots: Sequence[Path]) -> str:
    """`name:line` of the template frame that failed, relative to its root (no temp paths)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(".j2")]
    if not frames:
        return fallback
    path = Path(frames[-1].filename).resolve()
    name = next((str(path.relative_to(r)) for r in roots if path.is_relative_to(r)), path.name)
    return f"{name}:{frames[-1].lineno}"


def run_renderer(
    language: str | None, template_dir: str | Path | None = None, *, unread: bool = False
) -> Renderer:
    """The renderer of a run's own messages (skipped, failed, a command's reply, the scan table),
    built before any PR is read. With `unread` a template directory still to be read (the base
    branch's, per PR) may provide a language the package lacks: these messages are then English,
    and the PR's own renderer, built from those templates, rejects a language no one provides."""
    try:
        return Renderer(language=language or DEFAULT_LANGUAGE, template_dir=template_dir)
    except ConfigError:
        if not unread:
            raise
        return Renderer(template_dir=template_dir)


def language_files(language: str) -> tuple[str, ...]:
    """The i18n files a remote template directory must be asked for so that `language` is picked
    there as `Renderer` picks it from a local one (the exact tag in any case, then the primary
    subtag): none when the package has the exact tag."""
    tag = language.strip().replace("_", "-")
    if not _LANG_CODE.fullmatch(tag):  # never a path of its own making (`../x`)
        return ()
    if tag.lower() in {p.stem.lower() for p in (packaged_templates_dir() / "i18n").glob("*.yml")}:
        return ()
    primary, *rest = tag.split("-")
    cased = (part.upper() if len(part) == 2 else part.title() if len(part) == 4 else part for part in rest)
    names = (tag, "-".join([primary.lower(), *cased]), tag.lower(), primary.lower())
    return tuple(dict.fromkeys(f"i18n/{name}.yml" for name in names))
