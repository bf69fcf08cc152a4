"""Generate the reference parts of the docs from their sources, or check that they are current.

- README.md, between `<!-- BEGIN GENERATED: inputs -->` / `outputs` markers: tables from action.yml.
- docs/imreview-config.schema.json: the JSON Schema of `.github/imreview.yml`, from CONFIG_KEYS.
- docs/configuration.md, between `<!-- BEGIN GENERATED: config -->` markers: the key reference.

    python scripts/gen_docs.py           # rewrite what drifted
    python scripts/gen_docs.py --check   # exit 1 naming every file that drifted (CI, tests)

A new input in action.yml or a new key in `reviewer/config.py` flows in on the next run; a new
config value type must be taught to `_value_schema` (the test fails until it is).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reviewer import config as cfg  # noqa: E402

SCHEMA_PATH = ROOT / "docs" / "imreview-config.schema.json"
SCHEMA_ID = "https://github.com/imreview/imreview-action/blob/main/docs/imreview-config.schema.json"
FILE_ONLY_HELP = {
    "instructions": "Text appended to the review prompt as the maintainers' own words.",
    "max_output_tokens_per_call": "Cap of `max_tokens` sent with one model call.",
    "context_window": "Input window of a model litellm does not know (else 8,192 is assumed, warned).",
    "context_share": "Most of each model call that repository context may take (0 turns it off).",
    "prices": "USD per million tokens for models litellm cannot price; without it their cost is unknown.",
    "ignore": (
        "Findings never raised (on a PR, or by a local review against `--base`): each entry a `reason`"
        " and one of `rule`, `path`, `fingerprint`."
    ),
    "maintainer_associations": "Whose comment commands and dismissals count (`author_association`).",
}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN GENERATED: {name} .*?-->\n)(.*?)(<!-- END GENERATED: {name} -->)", re.S)


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _action() -> Mapping[str, Any]:
    data: Mapping[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    return data


def inputs_table() -> str:
    rows = ["| input | default | meaning |", "|---|---|---|"]
    for name, spec in (_action().get("inputs") or {}).items():
        default = str(spec.get("default", ""))
        shown = f"`{default}`" if default else "empty"
        rows.append(f"| `{name}` | {shown} | {_cell(spec.get('description', ''))} |")
    return "\n".join(rows) + "\n"


def outputs_table() -> str:
    rows = ["| output | value |", "|---|---|"]
    for name, spec in (_action().get("outputs") or {}).items():
        rows.append(f"| `{name}` | {_cell(spec.get('description', ''))} |")
    return "\n".join(rows) + "\n"


def _stripped(pattern: str) -> str:
    """What `_Str` accepts: the trimmed text matches the whole pattern."""
    return rf"^\s*(?:{pattern})\s*$"


def _list_text(item: Any) -> dict[str, Any]:
    """The text form of a list: split on newlines and commas, each stripped part empty or an item."""
    text: dict[str, Any] = {"type": "string", "description": "split on newlines and commas"}
    if isinstance(item, cfg._Str) and item.pattern is not None:
        part = rf"[^\S\n]*(?:{item.pattern.pattern})?[^\S\n]*"
        text["pattern"] = rf"^{part}(?:[,\n]{part})*$"
    return text


def _value_schema(value_type: Any, *, item: bool = False) -> dict[str, Any]:
    """JSON Schema of one config value type; `item` = inside a list (no nulls there)."""
    if isinstance(value_type, cfg._Int):
        schema: dict[str, Any] = {"type": ["integer", "null"] if value_type.nullable else "integer"}
        schema["minimum"] = value_type.minimum
        return schema
    if isinstance(value_type, cfg._Float):
        if value_type.above:
            return {"type": "number", "exclusiveMinimum": value_type.minimum}
        if value_type.maximum is not None:
            return {"type": "number", "minimum": value_type.minimum, "maximum": value_type.maximum}
        return {"type": "number", "minimum": value_type.minimum}
    if isinstance(value_type, cfg._Choice):
        return {"enum": list(value_type.choices)}
    if isinstance(value_type, cfg._Str):
        blank_ok = value_type.nullable or value_type.empty_ok
        text: dict[str, Any] = {"type": "string"}
        if value_type.pattern is not None:
            text["pattern"] = _stripped(value_type.pattern.pattern) + (r"|^\s*$" if blank_ok else "")
        elif not blank_ok:
            text["pattern"] = r"\S"
        text["description"] = f"{value_type.what}"
        if blank_ok and not item:
            return {"anyOf": [{"type": "null"}, text]}
        return text
    if isinstance(value_type, cfg._StrList):
        return {
            "anyOf": [
                {"type": "null"},
                _list_text(value_type.item),
                {"type": "array", "items": _value_schema(value_type.item, item=True)},
            ]
        }
    if isinstance(value_type, cfg._IgnoreList):
        selectors = {
            "rule": {"enum": list(cfg.RULE_IDS), "description": "a rule that raises findings"},
            "path": {"type": "string", "pattern": r"\S", "description": "a glob"},
            "fingerprint": {
                "type": "string",
                "pattern": _stripped(cfg.FINGERPRINT.pattern),
                "description": "a dismissal key (`imreview dismissed`)",
            },
        }
        entry: dict[str, Any] = {
            "type": "object",
            "additionalProperties": False,
            "required": ["reason"],
            "properties": {"reason": {"type": "string", "pattern": r"\S"}, **selectors},
            "oneOf": [{"required": [name]} for name in selectors],
        }
        return {"type": ["array", "null"], "items": entry}
    if isinstance(value_type, cfg._PriceTable):
        fields = list(cfg._PRICE_FIELDS)
        return {
            "type": ["object", "null"],
            "propertyNames": {"pattern": r"\S"},
            "additionalProperties": {
                "type": "object",
                "required": fields,
                "additionalProperties": False,
                "properties": {name: {"type": "number", "minimum": 0} for name in fields},
            },
        }
    raise TypeError(f"scripts/gen_docs.py: no JSON Schema for config value type {type(value_type).__name__}")


def _help(key: Any, inputs: Mapping[str, Any]) -> str:
    if key.input and key.input in inputs:
        return " ".join(str(inputs[key.input].get("description", "")).split())
    return FILE_ONLY_HELP.get(key.name, "")


def _default(key: Any) -> Any:
    value = getattr(cfg.Config().limits, key.limit) if key.limit else getattr(cfg.Config(), key.name)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def config_schema() -> dict[str, Any]:
    inputs = _action().get("inputs") or {}
    properties: dict[str, Any] = {}
    for name, key in cfg.CONFIG_KEYS.items():
        prop = _value_schema(key.type)
        prop["description"] = _help(key, inputs) or prop.get("description", "")
        default = _default(key)
        if default not in (None, "", [], {}):
            prop["default"] = default
        properties[name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "imreview repository configuration (.github/imreview.yml)",
        "description": "Generated from reviewer/config.py CONFIG_KEYS by scripts/gen_docs.py; do not edit.",
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": properties,
    }


def config_reference() -> str:
    inputs = _action().get("inputs") or {}
    rows = ["| key | type | default | also set by | meaning |", "|---|---|---|---|---|"]
    for name, key in cfg.CONFIG_KEYS.items():
        schema = _value_schema(key.type)
        kind = _kind(schema)
        default = _default(key)
        shown = "—" if default in (None, "", [], {}) else f"`{json.dumps(default)}`"
        also = ", ".join(
            x for x in (f"`{key.flag}`" if key.flag else "", f"input `{key.input}`" if key.input else "") if x
        )
        env = [e for e, k in cfg.ENV_KEYS.items() if k == name]
        if env:
            also = ", ".join([also, *(f"`{e}`" for e in env)]) if also else ", ".join(f"`{e}`" for e in env)
        rows.append(f"| `{name}` | {kind} | {shown} | {also or 'file only'} | {_cell(_help(key, inputs))} |")
    return "\n".join(rows) + "\n"


def _kind(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " / ".join(f"`{c}`" for c in schema["enum"])
    if "anyOf" in schema:
        kinds = [_kind(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(kinds)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "/".join(k for k in kind if k != "null")
    if kind == "array":
        return f"list of {_kind(schema['items'])}"
    if kind == "object":
        return "mapping"
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    if minimum is not None and maximum is not None:
        return f"{kind} {minimum:g}–{maximum:g}"
    if schema.get("exclusiveMinimum") is not None:
        return f"{kind} > {schema['exclusiveMinimum']:g}"
    return f"{kind} ≥ {minimum:g}" if minimum is not None else str(kind)


def rendered() -> dict[Path, str]:
    """Every generated file's full intended text."""
    out: dict[Path, str] = {SCHEMA_PATH: json.dumps(config_schema(), indent=2, ensure_ascii=False) + "\n"}
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    for name, table in (("inputs", inputs_table()), ("outputs", outputs_table())):
        text = _fill(text, name, table, readme)
    out[readme] = text
    conf = ROOT / "docs" / "configuration.md"
    out[conf] = _fill(conf.read_text(encoding="utf-8"), "config", config_reference(), conf)
    return out


def _fill(text: str, name: str, body: str, where: Path) -> str:
    pattern = _block(name)
    if not pattern.search(text):
        raise SystemExit(
            f"{where}: missing the markers <!-- BEGIN GENERATED: {name} --> … <!-- END GENERATED: {name} -->"
        )
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text, count=1)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    drifted = []
    for path, text in rendered().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            drifted.append(path.relative_to(ROOT).as_posix())
            if not check:
                path.write_text(text, encoding="utf-8")
    if check and drifted:
        print("out of date (run `python scripts/gen_docs.py`): " + ", ".join(drifted), file=sys.stderr)
        return 1
    print(("updated: " + ", ".join(drifted)) if drifted else "docs are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
