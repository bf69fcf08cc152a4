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

import hashlib
import re
import secrets
import traceback
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import yaml
from jinja2.sandbox import SandboxedEnvironment

from reviewer.errors import ConfigError, TemplateError, UsageError
from reviewer.links import blob_url, files_url
from reviewer.report import SCHEMA_ID

DEFAULT_LANGUAGE = "en"
UNTRUSTED_LIMIT = 4000
LINE_LIMIT = 1000
CODE_LIMIT = 20000
PLURAL_FORMS = frozenset({"zero", "one", "other"})

_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")
_HTML_COMMENT = re.compile(r"<!--(?:-?>|.*?(?:-->|\Z))", re.S)
_MARKER = re.compile(r"imreview:(state|review)", re.I)
_MENTION = re.compile(r"(?<![\w@`])@(?=[A-Za-z0-9])")
_XREF = re.compile(r"(?<![\w&])#(?=\d)")
_IMAGE = re.compile(r"!\[")
_LINE_START = re.compile(r"^([ \t]*)(#|::|/(?=\w)|[-=*_+](?=[-=*_ \t]*$))", re.M)
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


def new_nonce() -> str:
    """A fresh random token for one prompt's untrusted-data delimiters."""
    return secrets.token_hex(8)


# --- text measures and truncation -------------------------------------------------------------


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _prefix_utf16(text: str, limit: int) -> str:
    return text.encode("utf-16-le")[: max(limit, 0) * 2].decode("utf-16-le", errors="ignore")


def _prefix_utf8(text: str, limit: int) -> str:
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", errors="ignore")


_UNITS: Mapping[str, tuple[Callable[[str], int], Callable[[str, int], str]]] = {
    "utf16": (_utf16_len, _prefix_utf16),
    "utf8": (_utf8_len, _prefix_utf8),
}


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
    size, prefix = _UNITS[unit]
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


def _show_invisible(text: str) -> str:
    """In code, hidden characters are evidence (Trojan Source): make them visible instead."""
    return "".join(f"<U+{ord(ch):04X}>" if _invisible(ch) and ch != "\t" else ch for ch in text)


def _strip_comments(text: str) -> str:
    while True:
        stripped = _HTML_COMMENT.sub("", text)
        if stripped == text:
            return text
        text = stripped


def _as_text(value: Any) -> str:
    return "" if value is None else str(value)


def _cap(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def _neutralize_marker(text: str) -> str:
    return _MARKER.sub(lambda m: f"imreview\u2236{m.group(1)}", text)


def _split_code_spans(text: str) -> list[tuple[bool, str]]:
    """CommonMark code spans: a run of N backticks closed by the next run of exactly N."""
    parts: list[tuple[bool, str]] = []
    pos = start = 0
    while m := _BACKTICKS.search(text, pos):
        run = m.group(0)
        close = next((c for c in _BACKTICKS.finditer(text, m.end()) if c.group(0) == run), None)
        if close is None:
            pos = m.end()
            continue
        if m.start() > start:
            parts.append((False, text[start : m.start()]))
        parts.append((True, text[m.start() : close.end()]))
        pos = start = close.end()
    if start < len(text):
        parts.append((False, text[start:]))
    return parts


def _escape_text(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MENTION.sub("\uff20", text)
    text = _XREF.sub("\uff03", text)
    text = _IMAGE.sub(r"!\\[", text)
    return text.replace("`", "\\`")


def _sanitize(text: str, limit: int | None, *, cell: bool) -> str:
    text = _strip_comments(_strip_invisible(_NEWLINES.sub("\n", text)))
    text = _neutralize_marker(_cap(text, limit))
    text = _LINE_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", text)
    out = "".join(part if is_code else _escape_text(part) for is_code, part in _split_code_spans(text))
    if cell:
        out = out.replace("|", "\\|")
    if (len(out) - len(out.rstrip("\\"))) % 2:
        out += "\\"
    return out


def untrusted(value: Any, limit: int | None = UNTRUSTED_LIMIT) -> str:
    """PR or model text for a Markdown block: sanitized, escaped, capped; newlines kept."""
    return _sanitize(_as_text(value).strip("\n"), limit, cell=False)


def untrusted_line(value: Any, limit: int | None = LINE_LIMIT, cell: bool = False) -> str:
    """Like `untrusted`, collapsed to one line; `cell=True` also escapes `|` for a table cell."""
    text = _WS.sub(" ", _strip_comments(_NEWLINES.sub("\n", _as_text(value)))).strip()
    return _sanitize(text, limit, cell=cell)


def code_span(value: Any, limit: int | None = LINE_LIMIT, cell: bool = False) -> str:
    """Untrusted text as one inline code span whose backtick fence cannot be closed from inside."""
    text = _strip_comments(_strip_invisible(_NEWLINES.sub("\n", _as_text(value))))
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
    text = _show_invisible(_NEWLINES.sub("\n", _as_text(value))).rstrip("\n")
    text = _neutralize_marker(_cap(text, limit))
    fence = "`" * max(3, max((len(r) for r in _BACKTICKS.findall(text)), default=0) + 1)
    info = re.sub(r"[^\w+#.-]", "", _as_text(lang))[:20]
    return f"{fence}{info}\n{text}\n{fence}"


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
    delimiters removed."""
    return _prompt_clean(_show_invisible(_NEWLINES.sub("\n", _as_text(value))), nonce, limit)


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


def _load_i18n(path: Path) -> tuple[dict[str, str | dict[str, str]], str]:
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise TemplateError(f"invalid YAML: {exc.problem}", where) from exc
    return _flatten(data or {}, str(path)), text


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
        roots = [p for p in (self._override, self._packaged) if p is not None]
        self.language = self._pick_language(language, roots)
        self._messages: dict[str, str | dict[str, str]] = {}
        self._i18n_sources: list[tuple[str, str]] = []
        for lang in dict.fromkeys([DEFAULT_LANGUAGE, self.language]):
            for root in reversed(roots):
                path = root / "i18n" / f"{lang}.yml"
                if path.is_file():
                    messages, text = _load_i18n(path)
                    self._messages.update(messages)
                    origin = "override" if root == self._override else "packaged"
                    self._i18n_sources.append((f"{origin}:{lang}", text))
        self._env = SandboxedEnvironment(
            loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(r)) for r in roots]),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        self._env.filters.update(
            untrusted=untrusted,
            untrusted_line=untrusted_line,
            code_span=code_span,
            code=code,
            short_sha=short_sha,
            safe_url=safe_url,
            prompt_data=prompt_data,
            prompt_code=prompt_code,
            t=self.translate,
            plural=self.plural,
            num=self.num,
            usd=self.usd,
            blob_url=blob_url,
            files_url=files_url,
        )

    @staticmethod
    def _pick_language(requested: str, roots: Sequence[Path]) -> str:
        """Exact tag (case-insensitive, `_` or `-`), else same primary subtag, else English."""
        available = sorted({p.stem for r in roots for p in (r / "i18n").glob("*.yml")})
        wanted = _as_text(requested).strip().replace("_", "-").lower()
        if not _LANG_CODE.fullmatch(wanted):
            return DEFAULT_LANGUAGE
        for lang in available:
            if lang.lower() == wanted:
                return lang
        primary = wanted.split("-")[0]
        for lang in available:
            if lang.lower().split("-")[0] == primary:
                return lang
        return DEFAULT_LANGUAGE

    # filters that need the language

    def translate(self, key: str, default: str | None = None, **params: Any) -> str:
        """`{{ 'verdict.clean' | t(files=3) }}`; a plural entry picks its form from `n`."""
        entry = self._messages.get(key)
        if entry is None:
            if default is None:
                raise jinja2.TemplateRuntimeError(f"no i18n string {key!r} (language {self.language})")
            return _interpolate(default, params, key)
        if isinstance(entry, dict):
            n = params.get("n")
            form = "zero" if n == 0 and "zero" in entry else "one" if n == 1 and "one" in entry else "other"
            entry = entry[form]
        return _interpolate(entry, params, key)

    t = translate

    def messages(self, prefix: str) -> dict[str, str]:
        """The unformatted strings under `prefix` (e.g. `rules.`), for code that fills them itself."""
        return {
            key: value
            for key, value in self._messages.items()
            if key.startswith(prefix) and isinstance(value, str)
        }

    def plural(self, n: int, key: str, **params: Any) -> str:
        """`{{ 3 | plural('count.files') }}` → "3 files"."""
        return self.translate(key, n=n, **params)

    def num(self, value: Any) -> str:
        if value is None:
            return self.translate("common.unknown")
        return _format_param(value)

    def usd(self, value: Any) -> str:
        if value is None:
            return self.translate("common.unknown")
        return f"${float(value):,.4f}"

    def gap_text(self, why: str, **params: Any) -> str:
        """The localized `Gap.what` for a machine code; unknown codes get a generic sentence."""
        if f"gap.{why}" in self._messages:
            return self.translate(f"gap.{why}", why=why, **params)
        return self.translate("gap.other", why=why, **params)

    # rendering

    def render(self, name: str, **context: Any) -> str:
        """Render any template by name (the CLI's `render --template`); errors name file and line."""
        try:
            return self._env.get_template(name).render(**context)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(exc.message or str(exc), f"{exc.filename or exc.name}:{exc.lineno}") from exc
        except jinja2.TemplateNotFound as exc:
            raise TemplateError(f"template not found: {exc.name}") from exc
        except jinja2.TemplateError as exc:
            raise TemplateError(exc.message or str(exc), _template_location(exc, name)) from exc

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


def _template_location(exc: BaseException, fallback: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(".j2")]
    if not frames:
        return fallback
    return f"{frames[-1].filename}:{frames[-1].lineno}"
