"""The docs a stranger reads are generated from, and checked against, the code they describe."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from reviewer.config import CONFIG_KEYS, parse_config_text
from reviewer.errors import ConfigError
from reviewer.schema import load_report_schema
from scripts import gen_docs
from tests.conftest import ROOT, cli_env, run_cli

SCHEMA = json.loads((ROOT / "docs" / "imreview-config.schema.json").read_text(encoding="utf-8"))


def test_generated_docs_match_their_sources() -> None:
    """README's inputs/outputs tables (action.yml), the config schema and reference (config.py)."""
    stale = [
        path.relative_to(ROOT).as_posix()
        for path, text in gen_docs.rendered().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"out of date, run `python scripts/gen_docs.py`: {stale}"


def test_every_action_input_and_output_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    for name in [*spec["inputs"], *spec["outputs"]]:
        assert f"| `{name}` |" in readme, name


def _loader_accepts(document: Any) -> bool:
    try:
        parse_config_text(yaml.safe_dump(document, allow_unicode=True), "imreview.yml")
    except ConfigError:
        return False
    return True


def _schema_accepts(document: Any) -> bool:
    return jsonschema.Draft202012Validator(SCHEMA).is_valid(document)


def _documents() -> list[Any]:
    """Hand-picked edge cases plus, for every key, values of every JSON type."""
    docs: list[Any] = [
        None,
        {},
        {"model": "openai/gpt-4o-mini", "fallback_models": ["a/b", "c/d"], "language": "zh-CN"},
        {"model": "has space"},
        {"model": ""},
        {"model": None},
        {"language": ""},
        {"language": "english language"},
        {"fallback_models": "a/b, c/d"},
        {"include": ["src/**", ""]},
        {"max_cost_usd": 0.5},
        {"max_cost_usd": -1},
        {"max_calls": 0},
        {"max_concurrency": 0},
        {"max_output_tokens_per_call": 0},
        {"context_window": None},
        {"context_window": 32768},
        {"fail_on": "P2"},
        {"fail_on": "P4"},
        {"api_base": "http://localhost:8000/v1"},
        {"api_base": "ftp://host"},
        {"prices": {"m": {"input_usd_per_mtok": 0.2, "output_usd_per_mtok": 0.6}}},
        {"prices": {"m": {"input_usd_per_mtok": 0.2}}},
        {"prices": {"m": {"input_usd_per_mtok": 0.2, "output_usd_per_mtok": 0.6, "x": 1}}},
        {"prices": {"m": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 0.6}}},
        {"max_cost": 2},
        {"instructions": "be brief"},
        ["model"],
        "model",
    ]
    samples: list[Any] = [True, 3, 2.5, -7, "text", [1], ["x"], {"k": 1}, None]
    for key in CONFIG_KEYS:
        docs += [{key: value} for value in samples]
    return docs


@pytest.mark.parametrize("document", _documents(), ids=lambda d: json.dumps(d)[:60])
def test_schema_and_loader_accept_and_reject_the_same_documents(document: Any) -> None:
    assert _schema_accepts(document) == _loader_accepts(document)


def test_the_schema_covers_every_config_key_and_the_documented_example() -> None:
    assert set(SCHEMA["properties"]) == set(CONFIG_KEYS)
    guide = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = re.search(r"## A complete example\n\n```yaml\n(.*?)```", guide, re.S)
    assert example is not None
    document = yaml.safe_load(example.group(1))
    assert _schema_accepts(document) and _loader_accepts(document)


def test_the_sample_report_is_a_valid_report_and_renders(tmp_path: Path) -> None:
    sample = ROOT / "docs" / "sample-report.json"
    jsonschema.Draft202012Validator(load_report_schema()).validate(json.loads(sample.read_text("utf-8")))
    proc = run_cli(["render", str(sample)], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# imreview — 2 findings (1 P2, 1 P3)")
    proc = run_cli(["render", str(sample), "--template", "comment"], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.stdout.startswith("### imreview — 2 findings")
