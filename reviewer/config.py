"""Configuration: defaults < .github/imreview.yml < environment < inputs/flags (DESIGN 10.6).

Every setting is one row of `CONFIG_KEYS`: its value type, the flag and Action input it mirrors,
and, for budget keys, the `Limits` field it fills. Parsing, layering and error messages are driven
by that table, so a key cannot be readable in one place and silently ignored in another.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reviewer.budget import DEFAULT_LIMITS, Limits
from reviewer.errors import ConfigError
from reviewer.policy import glob_regex
from reviewer.rules import RULE_IDS


@dataclass(frozen=True)
class Prices:
    input_usd_per_mtok: float
    output_usd_per_mtok: float


@dataclass(frozen=True)
class IgnoreRule:
    """One entry of `ignore:` in the base branch's config: findings it matches are raised on no PR.
    Exactly one of `rule` (a rule id such as `debugger`), `path` (a glob) or `fingerprint` (the
    dismissal key `imreview dismissed` prints) is set; `reason` says why."""

    reason: str
    rule: str = ""
    path: str = ""
    fingerprint: str = ""


@dataclass(frozen=True)
class Config:
    model: str | None = None
    fallback_models: tuple[str, ...] = ()
    api_base: str | None = None
    language: str = "en"
    instructions: str = ""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    limits: Limits = DEFAULT_LIMITS
    max_output_tokens_per_call: int = 4096
    request_timeout: float | None = None
    max_concurrency: int = 4
    max_findings: int = 6
    context_window: int | None = None
    context_share: float = 0.3
    fail_on: str = "never"
    on_error: str = "warn"
    prices: Mapping[str, Prices] = field(default_factory=dict)
    template_dir: str | None = None
    maintainer_associations: tuple[str, ...] = ("OWNER", "MEMBER", "COLLABORATOR")
    """Whose comment commands and dismissals count (GitHub's `author_association`); docs/commands.md."""
    ignore: tuple[IgnoreRule, ...] = ()


class _Invalid(Exception):
    """A value failed its check; `path` leads from the key's value to the offending part."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        self.message = message
        self.path = path
        super().__init__(message)


class ValueType:
    """How one setting is checked (typed value, e.g. from YAML) and parsed (text, e.g. an input)."""

    def check(self, value: object) -> object:
        raise NotImplementedError

    def parse(self, raw: str) -> object:
        return self.check(raw)


def _show(value: object) -> str:
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"{str(value).lower()} (YAML reads yes/no/on/off as true/false; quote it if you meant text)"
    if isinstance(value, str):
        text = value.replace("\n", "\\n")
        return f"'{text[:60]}…'" if len(text) > 60 else f"'{text}'"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__} ({value})"


def _unknown(kind: str, word: str, choices: Sequence[str]) -> str:
    normal = word.strip().lower().replace("-", "_")
    prefixed = [choice for choice in choices if normal and choice.startswith(normal)]
    close = difflib.get_close_matches(normal, choices, n=1, cutoff=0.6)
    near = normal if normal in choices else prefixed[0] if len(prefixed) == 1 else next(iter(close), None)
    hint = f"did you mean '{near}'?" if near else "valid: " + ", ".join(choices)
    return f"unknown {kind} '{word}' ({hint})"


def _number(raw: str, convert: Callable[[str], float], expected: str) -> float:
    """`raw` (a flag, an input or an environment variable) read by `convert`, or why it cannot be."""
    try:
        return convert(raw.strip())
    except ValueError:
        raise _Invalid(f"expected {expected}, got {_show(raw)}") from None


@dataclass(frozen=True)
class _Int(ValueType):
    minimum: int
    nullable: bool = False

    def check(self, value: object) -> object:
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(f"expected a whole number, got {_show(value)}")
        if value < self.minimum:
            raise _Invalid(f"must be at least {self.minimum}, got {value}")
        return value

    def parse(self, raw: str) -> object:
        return self.check(_number(raw, int, "a whole number"))


@dataclass(frozen=True)
class _Float(ValueType):
    minimum: float
    above: bool = False  # the minimum itself is not allowed (a budget of 0 seconds cannot run)
    maximum: float | None = None  # a share of each call

    def check(self, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Invalid(f"expected a number, got {_show(value)}")
        if not math.isfinite(value):
            raise _Invalid(f"expected a finite number, got {value}")
        if self.above and value <= self.minimum:
            raise _Invalid(f"must be more than {self.minimum:g}, got {value:g}")
        if value < self.minimum:
            raise _Invalid(f"must be at least {self.minimum:g}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise _Invalid(f"must be at most {self.maximum:g} (a share of each call), got {value}")
        return float(value)

    def parse(self, raw: str) -> object:
        return self.check(_number(raw, float, "a number"))


@dataclass(frozen=True)
class _Str(ValueType):
    """A trimmed string; empty means None when `nullable`, "" when `empty_ok`, else an error. A
    `glob` must compile (`[z-a]` would otherwise fail mid-review)."""

    what: str
    pattern: re.Pattern[str] | None = None
    nullable: bool = False
    empty_ok: bool = False
    glob: bool = False

    def check(self, value: object) -> object:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if value is not None and not isinstance(value, str):
            raise _Invalid(f"expected {self.what}, got {_show(value)}")
        text = (value or "").strip()
        if not text:
            if self.empty_ok:
                return ""
            if self.nullable:
                return None
            raise _Invalid(f"expected {self.what}, got {_show(value)}")
        if self.pattern is not None and not self.pattern.fullmatch(text):
            raise _Invalid(f"expected {self.what}, got {_show(value)}")
        if self.glob:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    glob_regex(text)
            except re.error as exc:
                raise _Invalid(f"invalid glob {_show(text)}: {exc.msg}") from None
        return text


@dataclass(frozen=True)
class _Choice(ValueType):
    choices: tuple[str, ...]

    def check(self, value: object) -> object:
        if not isinstance(value, str) or value.strip() not in self.choices:
            raise _Invalid(f"expected one of {', '.join(self.choices)}, got {_show(value)}")
        return value.strip()


_LIST_SEPARATORS = re.compile(r"[\n,]")


@dataclass(frozen=True)
class _StrList(ValueType):
    """A list in YAML, or text split on newlines and commas (DESIGN 10.5); empties are dropped."""

    item: _Str

    def check(self, value: object) -> object:
        if value is None:
            return ()
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, (list, tuple)):
            raise _Invalid(f"expected a list of {self.item.what}s, got {_show(value)}")
        items: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise _Invalid(f"item {index + 1}: expected {self.item.what}, got {_show(item)}", (index,))
            try:
                text = self.item.check(item)
            except _Invalid as exc:
                raise _Invalid(f"item {index + 1}: {exc.message}", (index,)) from None
            if text:
                items.append(str(text))
        return tuple(items)

    def parse(self, raw: str) -> object:
        parts = (part.strip() for part in _LIST_SEPARATORS.split(raw))
        return tuple(str(self.item.check(part)) for part in parts if part)


IGNORE_SELECTORS = ("rule", "path", "fingerprint")
FINGERPRINT = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True)
class _IgnoreList(ValueType):
    """`ignore:`: a list of mappings, each with `reason` and exactly one of rule, path, fingerprint."""

    def check(self, value: object) -> object:
        if value is None:
            return ()
        if isinstance(value, tuple) and all(isinstance(v, IgnoreRule) for v in value):
            return value  # already checked (the file layer, checked again when layers merge)
        if not isinstance(value, list):
            raise _Invalid(
                f"expected a list of entries (reason and one of rule, path, fingerprint), got {_show(value)}"
            )
        entries: list[IgnoreRule] = []
        for index, item in enumerate(value):
            try:
                entries.append(self._entry(item))
            except _Invalid as exc:
                raise _Invalid(f"item {index + 1}: {exc.message}", (index, *exc.path)) from None
        return tuple(entries)

    @staticmethod
    def _entry(item: object) -> IgnoreRule:
        if not isinstance(item, dict):
            raise _Invalid("expected a mapping with `reason` and one of rule, path, fingerprint")
        unknown = sorted(str(k) for k in item if k not in (*IGNORE_SELECTORS, "reason"))
        if unknown:
            raise _Invalid(f"unknown key {unknown[0]!r} (use rule, path, fingerprint, reason)")
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise _Invalid("`reason` is required: say why this is never raised")
        chosen = [k for k in IGNORE_SELECTORS if k in item]
        if len(chosen) != 1:
            raise _Invalid("give exactly one of rule, path, fingerprint")
        key = chosen[0]
        return IgnoreRule(reason=reason.strip(), **{key: _IgnoreList._selector(key, item[key])})

    @staticmethod
    def _selector(key: str, raw: object) -> str:
        """Checked for its kind: an entry that can never match would silently ignore nothing."""
        text = raw.strip() if isinstance(raw, str) else ""
        if key == "rule" and text and text not in RULE_IDS:  # `secrets` would quiet nothing
            raise _Invalid(_unknown("rule", text, RULE_IDS), (key,))
        if not text or (key == "fingerprint" and not FINGERPRINT.fullmatch(text)):
            what = {"rule": "a rule id like 'debugger'", "path": "a glob", "fingerprint": "12 hex characters"}
            raise _Invalid(f"`{key}` must be {what[key]}, got {_show(raw)}", (key,))
        if key == "path":
            try:
                _GLOB.check(text)
            except _Invalid as exc:
                raise _Invalid(exc.message, (key,)) from None
        return text

    def parse(self, raw: str) -> object:
        raise _Invalid("`ignore` is set in the config file only")


_PRICE_FIELDS = tuple(f.name for f in dataclasses.fields(Prices))


@dataclass(frozen=True)
class _PriceTable(ValueType):
    """`{model: {input_usd_per_mtok, output_usd_per_mtok}}`, for models litellm cannot price."""

    def check(self, value: object) -> object:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise _Invalid(f"expected a mapping of model name to prices, got {_show(value)}")
        table: dict[str, Prices] = {}
        for model, entry in value.items():
            if not isinstance(model, str) or not model.strip():
                raise _Invalid(f"expected model names as keys, got {_show(model)}")
            try:
                table[model.strip()] = self._entry(entry)
            except _Invalid as exc:
                raise _Invalid(f"prices for '{model}': {exc.message}", (model, *exc.path)) from None
        return dict(sorted(table.items()))

    @staticmethod
    def _entry(entry: object) -> Prices:
        if isinstance(entry, Prices):
            entry = dataclasses.asdict(entry)
        if not isinstance(entry, Mapping):
            raise _Invalid(f"expected a mapping with {' and '.join(_PRICE_FIELDS)}, got {_show(entry)}")
        unknown = [str(name) for name in entry if name not in _PRICE_FIELDS]
        if unknown:
            raise _Invalid(_unknown("field", unknown[0], _PRICE_FIELDS), (unknown[0],))
        values: dict[str, float] = {}
        for name in _PRICE_FIELDS:
            if name not in entry:
                raise _Invalid(f"missing '{name}'")
            try:
                values[name] = _Float(0).check(entry[name])
            except _Invalid as exc:
                raise _Invalid(f"'{name}' {exc.message}", (name,)) from None
        return Prices(**values)

    def parse(self, raw: str) -> object:
        raise _Invalid("cannot be given as text; set `prices` in the config file")


@dataclass(frozen=True)
class ConfigKey:
    """One setting: its value type, the flag and Action input it mirrors, and where it lands.
    `flag_help` is the flag's line in `imreview --help` (`cli.py` builds the option from this row)."""

    name: str
    type: ValueType
    flag: str | None = None
    input: str | None = None
    limit: str | None = None
    flag_help: str = ""

    @property
    def input_origin(self) -> str:
        return f"input '{self.input}'" if self.input else f"setting '{self.name}'"


def _mirrored(name: str, value_type: ValueType, flag_help: str, *, limit: str | None = None) -> ConfigKey:
    kebab = name.replace("_", "-")
    return ConfigKey(name, value_type, flag=f"--{kebab}", input=kebab, limit=limit, flag_help=flag_help)


_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*")
_NO_SPACE = re.compile(r"\S+")
_URL = re.compile(r"https?://\S+", re.IGNORECASE)
_MODEL = _Str("a model name without spaces", _NO_SPACE, nullable=True)
_ASSOCIATIONS = (
    "OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, FIRST_TIME_CONTRIBUTOR, FIRST_TIMER, MANNEQUIN, NONE"
)
_GLOB = _Str("a glob", empty_ok=True, glob=True)

_KEYS: tuple[ConfigKey, ...] = (
    _mirrored("model", _MODEL, "litellm model string, e.g. openai/gpt-4o-mini (env IMREVIEW_MODEL)."),
    ConfigKey(
        "fallback_models",
        _StrList(_Str("a model name without spaces", _NO_SPACE, empty_ok=True)),
        flag="--fallback-model",
        input="fallback-models",
        flag_help="Fallback model (repeatable).",
    ),
    _mirrored(
        "api_base",
        _Str("an http(s) URL", _URL, nullable=True),
        "OpenAI-compatible base URL (env IMREVIEW_API_BASE).",
    ),
    _mirrored(
        "language",
        _Str("a language tag like 'en' or 'zh-CN'", _LANGUAGE),
        "Language of prompts and reports, e.g. en, zh-CN.",
    ),
    ConfigKey("instructions", _Str("text", empty_ok=True)),
    _mirrored("include", _StrList(_GLOB), "Only review paths matching this glob (repeatable)."),
    _mirrored("exclude", _StrList(_GLOB), "Never review paths matching this glob (repeatable)."),
    _mirrored(
        "max_cost_usd",
        _Float(0, above=True),
        "Budget: most US dollars the model calls may cost (default 1.00).",
        limit="cost_usd",
    ),
    _mirrored(
        "max_input_tokens",
        _Int(1),
        "Budget: most prompt tokens over all calls (default 200,000).",
        limit="input_tokens",
    ),
    _mirrored(
        "max_output_tokens",
        _Int(1),
        "Budget: most answer tokens over all calls (default 24,000).",
        limit="output_tokens",
    ),
    _mirrored(
        "max_output_tokens_per_call",
        _Int(1),
        "Answer tokens reserved per model call (max_tokens; default 4096).",
    ),
    _mirrored(
        "request_timeout",
        _Float(1),
        "Seconds one model call may take (default scales with the tokens; within max-seconds).",
    ),
    _mirrored(
        "max_seconds",
        _Float(0, above=True),
        "Budget: seconds the whole review may take (default 600).",
        limit="seconds",
    ),
    _mirrored(
        "max_calls", _Int(1), "Budget: most model requests, retries included (default 24).", limit="calls"
    ),
    _mirrored("max_concurrency", _Int(1), "Model requests in flight at once (default 4)."),
    _mirrored("max_findings", _Int(0), "Findings published to the PR (default 6)."),
    ConfigKey("context_window", _Int(1, nullable=True)),
    ConfigKey("context_share", _Float(0, maximum=0.9)),
    _mirrored(
        "fail_on",
        _Choice(("never", "P1", "P2", "P3")),
        "Exit 1 on a finding at or above this priority (any case; default never).",
    ),
    ConfigKey("prices", _PriceTable()),
    ConfigKey("ignore", _IgnoreList()),
    ConfigKey(
        "maintainer_associations",
        _StrList(_Str(f"one of {_ASSOCIATIONS}", re.compile(_ASSOCIATIONS.replace(", ", "|")))),
    ),
)

CONFIG_KEYS: Mapping[str, ConfigKey] = MappingProxyType({key.name: key for key in _KEYS})
"""The keys of `.github/imreview.yml` (DESIGN 10.6), also settable from env, inputs and flags."""

OVERRIDE_KEYS: Mapping[str, ConfigKey] = MappingProxyType(
    {
        **CONFIG_KEYS,
        "on_error": _mirrored(
            "on_error",
            _Choice(("warn", "fail")),
            "fail: an incomplete review exits 3 (default warn: exits 0 and says why).",
        ),
        "template_dir": _mirrored(
            "template_dir",
            _Str("a directory path", nullable=True),
            "Folder of template overrides (summary.md.j2, i18n/<language>.yml, ...).",
        ),
    }
)
"""Everything `build_config(overrides=...)` and `parse_input_value` accept: file keys plus run-only ones."""


def flag_settings(key: ConfigKey) -> dict[str, Any]:
    """The click option's type, multiplicity and help for `key`'s flag (`cli.config_option`)."""
    import click

    kind = key.type
    flag_type: click.ParamType | None = None
    if isinstance(kind, _Int):
        flag_type = click.IntRange(min=kind.minimum)
    elif isinstance(kind, _Float):
        flag_type = click.FloatRange(min=kind.minimum, min_open=kind.above)
    elif isinstance(kind, _Choice):
        flag_type = click.Choice(list(kind.choices))
    return {"type": flag_type, "multiple": isinstance(kind, _StrList), "help": key.flag_help}


@dataclass(frozen=True)
class Overrides:
    """What one run was given as flags or Action inputs, typed: `build_config`'s top layer (None: not
    given, the config file applies). One field per key of `OVERRIDE_KEYS` a flag or an input sets."""

    model: str | None = None
    fallback_models: tuple[str, ...] | None = None
    api_base: str | None = None
    language: str | None = None
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    max_cost_usd: float | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_output_tokens_per_call: int | None = None
    request_timeout: float | None = None
    max_seconds: float | None = None
    max_calls: int | None = None
    max_concurrency: int | None = None
    max_findings: int | None = None
    fail_on: str | None = None
    on_error: str | None = None
    template_dir: str | None = None

    @classmethod
    def given(cls, values: Mapping[str, object]) -> Overrides:
        """The fields named in `values` (e.g. a command's options by key name); an empty value
        (None, an empty list) is not given, other names are ignored, lists become tuples."""
        names = {f.name for f in dataclasses.fields(cls)}
        chosen = {
            name: tuple(value) if isinstance(value, (list, tuple)) else value
            for name, value in values.items()
            if name in names and value is not None and value != () and value != []
        }
        return cls(**chosen)  # type: ignore[arg-type]

    def layer(self) -> dict[str, object]:
        """The settings given, by key name (what `build_config` layers over the file)."""
        return {name: value for name, value in vars(self).items() if value is not None}


NO_OVERRIDES = Overrides()

ENV_KEYS: Mapping[str, str] = MappingProxyType({"IMREVIEW_MODEL": "model", "IMREVIEW_API_BASE": "api_base"})


def _location(filename: str, node: Node) -> str:
    return f"{filename}:{node.start_mark.line + 1}"


def _node_at(node: Node, path: tuple[str | int, ...]) -> Node:
    """Walk `path` down the YAML tree as far as it goes, so an error points at the deepest line known."""
    for step in path:
        if isinstance(node, MappingNode):
            match = next(
                (v for k, v in node.value if isinstance(k, ScalarNode) and k.value == str(step)), None
            )
        elif isinstance(node, SequenceNode) and isinstance(step, int) and step < len(node.value):
            match = node.value[step]
        else:
            match = None
        if match is None:
            break
        node = match
    return node


def _reject_duplicates(root: MappingNode, filename: str) -> None:
    """YAML keeps the last of two equal keys; in a config that hides a mistake, so it is an error."""
    first_line: dict[str, int] = {}
    for key_node, _ in root.value:
        if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        if key_node.value in first_line:
            raise ConfigError(
                f"duplicate key '{key_node.value}' (first set on line {first_line[key_node.value]})",
                _location(filename, key_node),
            )
        first_line[key_node.value] = key_node.start_mark.line + 1


MAX_CONFIG_NODES = 10_000
"""Nodes a config may expand to through anchors, aliases and merge keys (a few hundred in practice)."""


def _bound_expansion(root: Node, filename: str) -> None:
    """Count every node as construction would visit it, aliases expanded: a few bytes of nested
    aliases or merge keys (a "billion laughs") otherwise take seconds to hours, and a recursive
    alias never ends."""
    count = 0
    stack: list[tuple[Node, tuple[int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        count += 1
        if count > MAX_CONFIG_NODES:
            raise ConfigError(
                f"the config expands to more than {MAX_CONFIG_NODES:,} values through anchors, aliases"
                " or merge keys; write the values out",
                _location(filename, node),
            )
        if id(node) in path:
            raise ConfigError("an alias refers to itself (a recursive anchor)", _location(filename, node))
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        stack.extend((child, (*path, id(node))) for child in children)


def parse_config_text(text: str, filename: str) -> dict[str, object]:
    """Validate a config file's text into a layer of typed values; errors say `filename:line`."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None or (isinstance(root, ScalarNode) and root.tag == "tag:yaml.org,2002:null"):
            return {}
        if not isinstance(root, MappingNode):
            kind = "a list" if isinstance(root, SequenceNode) else "a single value"
            raise ConfigError(
                f"expected a mapping of settings at the top level, got {kind}", _location(filename, root)
            )
        _bound_expansion(root, filename)
        _reject_duplicates(root, filename)
        loader.flatten_mapping(root)
        layer: dict[str, object] = {}
        for key_node, value_node in root.value:
            key = loader.construct_object(key_node, deep=True)
            where = _location(filename, key_node)
            if not isinstance(key, str):
                raise ConfigError(f"expected a setting name, got {_show(key)}", where)
            spec = CONFIG_KEYS.get(key)
            if spec is None:
                raise ConfigError(_unknown("key", key, tuple(CONFIG_KEYS)), where)
            value = loader.construct_object(value_node, deep=True)
            try:
                checked = spec.type.check(value)
            except _Invalid as exc:
                raise ConfigError(
                    f"key '{key}': {exc.message}", _location(filename, _node_at(value_node, exc.path))
                ) from None
            if checked is None:
                layer.pop(key, None)
            else:
                layer[key] = checked
        return layer
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f"{filename}:{mark.line + 1}" if mark is not None else filename
        raise ConfigError(f"invalid YAML: {problem}", where) from None
    finally:
        loader.dispose()


def load_config_file(path: str | os.PathLike[str], *, required: bool = False) -> dict[str, object]:
    """Read and parse a config file; a missing file is an empty layer unless `required`."""
    filename = os.fspath(path)
    try:
        with open(filename, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file not found: {filename}") from None
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", filename) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError("config file is not valid UTF-8", f"{filename}:{line}") from None
    return parse_config_text(text, filename)


def parse_bool(raw: str, origin: str) -> bool:
    """`true`/`false` in any case (DESIGN 10.5); anything else is an error naming `origin`."""
    text = raw.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{origin}: expected true or false, got {_show(raw)}")


def parse_input_value(key: str, raw: str, origin: str) -> object:
    """Coerce text from an input or env var into `key`'s typed value; blank text is None (not given).

    `origin` is how the user sees the source, e.g. "input 'max-cost-usd'" (see `ConfigKey.input_origin`).
    """
    if not raw.strip():
        return None
    try:
        return OVERRIDE_KEYS[key].type.parse(raw)
    except _Invalid as exc:
        raise ConfigError(f"{origin}: {exc.message}") from None


def env_layer(env: Mapping[str, str]) -> dict[str, object]:
    """The environment layer: `IMREVIEW_MODEL` and `IMREVIEW_API_BASE`, blank values ignored."""
    read = {k: parse_input_value(k, env.get(v, ""), f"environment variable {v}") for v, k in ENV_KEYS.items()}
    return {key: value for key, value in read.items() if value is not None}


def _apply(
    values: dict[str, object],
    layer: Mapping[str, object],
    table: Mapping[str, ConfigKey],
    origin: Callable[[ConfigKey], str],
) -> None:
    for key, value in layer.items():
        spec = table[key]
        if value is None:
            continue
        try:
            values[key] = spec.type.check(value)
        except _Invalid as exc:
            raise ConfigError(f"{origin(spec)}: {exc.message}") from None


def build_config(
    *,
    file_layer: Mapping[str, object] | None = None,
    env: Mapping[str, object] | None = None,
    overrides: Overrides | Mapping[str, object] | None = None,
) -> Config:
    """Layer defaults < file < env < overrides into one `Config`; None in a layer means "not given".
    `overrides` is what the run was given (`Overrides`; a mapping by key name is also accepted, which
    may set file-only keys too)."""
    values: dict[str, object] = {}
    _apply(values, file_layer or {}, CONFIG_KEYS, lambda spec: f"config key '{spec.name}'")
    _apply(values, env or {}, CONFIG_KEYS, lambda spec: f"environment setting '{spec.name}'")
    given = overrides.layer() if isinstance(overrides, Overrides) else overrides or {}
    _apply(values, given, OVERRIDE_KEYS, lambda k: f"option '{k.flag}'" if k.flag else f"setting '{k.name}'")
    limits = {OVERRIDE_KEYS[k].limit: v for k, v in values.items() if OVERRIDE_KEYS[k].limit}
    fields = {k: v for k, v in values.items() if not OVERRIDE_KEYS[k].limit}
    return Config(**fields, limits=dataclasses.replace(DEFAULT_LIMITS, **limits))  # type: ignore[arg-type]


def _canonical(value: object) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    raise TypeError(f"cannot hash a {type(value).__name__}")


_UNHASHED = (
    "request_timeout",
    "max_concurrency",
    "fail_on",
    "on_error",
    "template_dir",
    "maintainer_associations",
)
"""Settings that change how a review runs or exits, not what it says."""


def config_hash(config: Config, templates_digest: str) -> str:
    """16 hex chars of sha256 over what shapes the review output; a rerun skips the model only on a match."""
    names = [f.name for f in dataclasses.fields(config) if f.name not in _UNHASHED]
    payload = {name: _canonical(getattr(config, name)) for name in names}
    payload["templates"] = templates_digest
    payload["schema"] = "imreview.config/v1"
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
