"""Configuration as a user meets it: the file, the environment, inputs and flags, and their errors."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reviewer.budget import Limits
from reviewer.config import (
    CONFIG_KEYS,
    OVERRIDE_KEYS,
    Config,
    IgnoreRule,
    Overrides,
    Prices,
    build_config,
    config_hash,
    env_layer,
    load_config_file,
    parse_bool,
    parse_config_text,
    parse_input_value,
)
from reviewer.errors import ConfigError, UsageError

REPO_ROOT = Path(__file__).resolve().parents[1]
NAME = ".github/imreview.yml"


def parse(text: str) -> dict[str, object]:
    return parse_config_text(textwrap.dedent(text), NAME)


def error_of(text: str) -> str:
    with pytest.raises(ConfigError, match=re.escape(NAME)) as info:
        parse(text)
    return str(info.value)


def test_defaults_match_the_action_inputs_table() -> None:
    config = build_config()
    assert config == Config()
    assert config.limits == Limits(
        input_tokens=200_000, output_tokens=24_000, cost_usd=1.0, seconds=600, calls=24
    )
    assert (config.max_concurrency, config.max_findings, config.max_output_tokens_per_call) == (4, 6, 4096)
    assert (config.fail_on, config.on_error, config.language, config.model) == ("never", "warn", "en", None)


def test_every_key_of_a_full_file_reaches_the_config(tmp_path: Path) -> None:
    path = tmp_path / "imreview.yml"
    path.write_text(
        textwrap.dedent(
            """\
            model: openai/gpt-4o-mini
            fallback_models: [anthropic/claude-3-5-haiku, openai/gpt-4o]
            api_base: http://127.0.0.1:8000/v1
            language: zh-CN
            instructions: |
              Focus on concurrency.
            include: ["src/**"]
            exclude:
              - docs/**
              - "*.lock"
            max_cost_usd: 2
            max_input_tokens: 100000
            max_output_tokens: 8000
            max_output_tokens_per_call: 2048
            request_timeout: 900
            max_seconds: 300
            max_calls: 10
            max_concurrency: 2
            max_findings: 3
            context_window: 32768
            context_share: 0.25
            fail_on: P2
            maintainer_associations: [OWNER, MEMBER]
            ignore:
              - rule: debugger
                reason: scripts stop here on purpose
            prices:
              local/llama: {input_usd_per_mtok: 0.5, output_usd_per_mtok: 1}
            """
        ),
        encoding="utf-8",
    )
    layer = load_config_file(path)
    assert set(layer) == set(CONFIG_KEYS)
    config = build_config(file_layer=layer)
    assert config == Config(
        model="openai/gpt-4o-mini",
        fallback_models=("anthropic/claude-3-5-haiku", "openai/gpt-4o"),
        api_base="http://127.0.0.1:8000/v1",
        language="zh-CN",
        instructions="Focus on concurrency.",
        include=("src/**",),
        exclude=("docs/**", "*.lock"),
        limits=Limits(input_tokens=100_000, output_tokens=8000, cost_usd=2.0, seconds=300.0, calls=10),
        max_output_tokens_per_call=2048,
        request_timeout=900.0,
        max_concurrency=2,
        max_findings=3,
        context_window=32768,
        context_share=0.25,
        fail_on="P2",
        prices={"local/llama": Prices(input_usd_per_mtok=0.5, output_usd_per_mtok=1.0)},
        maintainer_associations=("OWNER", "MEMBER"),
        ignore=(IgnoreRule(reason="scripts stop here on purpose", rule="debugger"),),
    )
    assert isinstance(config.limits.cost_usd, float) and isinstance(config.limits.seconds, float)


def test_every_key_mirrors_its_flag_and_input() -> None:
    assert set(CONFIG_KEYS) == {
        "model", "fallback_models", "api_base", "language", "instructions", "include", "exclude",
        "max_cost_usd", "max_input_tokens", "max_output_tokens", "max_output_tokens_per_call", "max_seconds",
        "max_calls", "max_concurrency", "max_findings", "context_window", "fail_on", "prices",
        "request_timeout", "context_share", "maintainer_associations", "ignore",
    }  # fmt: skip
    assert CONFIG_KEYS["maintainer_associations"].input is None, "the base branch's file only, never an input"
    assert CONFIG_KEYS["max_output_tokens_per_call"].flag == "--max-output-tokens-per-call"
    assert CONFIG_KEYS["max_output_tokens_per_call"].input == "max-output-tokens-per-call"
    assert CONFIG_KEYS["request_timeout"].flag == "--request-timeout"
    assert CONFIG_KEYS["request_timeout"].input == "request-timeout"
    assert CONFIG_KEYS["max_cost_usd"].flag == "--max-cost-usd"
    assert CONFIG_KEYS["max_cost_usd"].input == "max-cost-usd"
    assert CONFIG_KEYS["fallback_models"].flag == "--fallback-model"
    assert CONFIG_KEYS["fallback_models"].input == "fallback-models"
    limits = {key.name: key.limit for key in CONFIG_KEYS.values() if key.limit}
    assert limits == {
        "max_cost_usd": "cost_usd",
        "max_input_tokens": "input_tokens",
        "max_output_tokens": "output_tokens",
        "max_seconds": "seconds",
        "max_calls": "calls",
    }


@pytest.mark.parametrize(
    ("key", "limit"),
    [
        ("max_cost_usd", "cost_usd"),
        ("max_input_tokens", "input_tokens"),
        ("max_output_tokens", "output_tokens"),
        ("max_seconds", "seconds"),
        ("max_calls", "calls"),
    ],
)
def test_each_budget_key_sets_its_limit_and_rejects_zero(key: str, limit: str) -> None:
    config = build_config(file_layer=parse(f"{key}: 1\n"))
    assert getattr(config.limits, limit) == 1
    others = {f.name for f in dataclasses.fields(Limits)} - {limit}
    assert all(getattr(config.limits, name) == getattr(Limits(), name) for name in others)
    with pytest.raises(ConfigError, match=f"key '{key}': must be (more than|at least)"):
        build_config(file_layer=parse(f"{key}: 0\n"))


def test_precedence_file_then_env_then_overrides() -> None:
    file_layer = parse(
        """\
        model: file-model
        api_base: http://127.0.0.1:1/file
        max_calls: 5
        language: fr
        """
    )
    env = env_layer({"IMREVIEW_MODEL": "env-model", "IMREVIEW_API_BASE": "http://127.0.0.1:1/env"})

    only_file = build_config(file_layer=file_layer)
    assert (only_file.model, only_file.api_base, only_file.limits.calls) == (
        "file-model",
        "http://127.0.0.1:1/file",
        5,
    )

    with_env = build_config(file_layer=file_layer, env=env)
    assert (with_env.model, with_env.api_base, with_env.language) == (
        "env-model",
        "http://127.0.0.1:1/env",
        "fr",
    )

    overrides = {
        "model": "flag-model",
        "max_calls": 7,
        "api_base": None,
        "on_error": "fail",
        "template_dir": "t",
    }
    everything = build_config(file_layer=file_layer, env=env, overrides=overrides)
    assert everything.model == "flag-model"
    assert everything.limits.calls == 7
    assert everything.api_base == "http://127.0.0.1:1/env"
    assert everything.language == "fr"
    assert (everything.on_error, everything.template_dir) == ("fail", "t")


def test_env_layer_reads_only_our_variables_and_ignores_blank_ones() -> None:
    assert env_layer({"IMREVIEW_MODEL": "  ", "IMREVIEW_API_BASE": "", "OPENAI_API_KEY": "sk"}) == {}
    assert env_layer({"IMREVIEW_MODEL": " m "}) == {"model": "m"}
    with pytest.raises(ConfigError, match="IMREVIEW_API_BASE"):
        env_layer({"IMREVIEW_API_BASE": "not a url"})


def test_unknown_key_names_the_nearest_key_and_the_line() -> None:
    message = error_of(
        """\
        # budget
        model: x
        max_cost: 3
        """
    )
    assert message == ".github/imreview.yml:3: unknown key 'max_cost' (did you mean 'max_cost_usd'?)"


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [
        ("max_cost", "max_cost_usd"),
        ("max-cost-usd", "max_cost_usd"),
        ("MAX_CALLS", "max_calls"),
        ("max_input_token", "max_input_tokens"),
        ("max_output_token", "max_output_tokens"),
        ("max_second", "max_seconds"),
        ("max_call", "max_calls"),
    ],
)
def test_a_typo_in_a_budget_key_is_an_error_not_the_default(typo: str, nearest: str) -> None:
    message = error_of(f"model: x\n{typo}: 0\n")
    assert message.startswith(f"{NAME}:2: unknown key '{typo}'")
    assert f"did you mean '{nearest}'?" in message


def test_unknown_key_without_a_near_match_lists_the_valid_keys() -> None:
    message = error_of("colour: blue\n")
    assert "unknown key 'colour'" in message and "max_cost_usd" in message


def test_a_typo_inside_prices_names_the_field_and_its_line() -> None:
    message = error_of(
        """\
        prices:
          local/llama:
            input_usd_per_mtok: 1
            output: 2
        """
    )
    assert message.startswith(f"{NAME}:4: ")
    assert "unknown field 'output' (did you mean 'output_usd_per_mtok'?)" in message


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("model: m\nmax_cost_usd: -1\n", 2, "key 'max_cost_usd': must be more than 0, got -1"),
        ("max_calls: 1.5\n", 1, "key 'max_calls': expected a whole number, got 1.5"),
        ("max_calls: many\n", 1, "key 'max_calls': expected a whole number, got 'many'"),
        ("max_seconds: true\n", 1, "key 'max_seconds': expected a number, got true"),
        ("max_seconds: .inf\n", 1, "expected a finite number"),
        ("max_concurrency: 0\n", 1, "key 'max_concurrency': must be at least 1, got 0"),
        ("max_input_tokens:\n", 1, "key 'max_input_tokens': expected a whole number, got an empty value"),
        ("fail_on: P4\n", 1, "key 'fail_on': expected one of never, P1, P2, P3, got 'P4'"),
        ("language: english\n", 1, "key 'language': expected a language tag like 'en' or 'zh-CN'"),
        ("language: no\n", 1, "quote it if you meant text"),
        ("model: [a, b]\n", 1, "key 'model': expected a model name without spaces, got a list"),
        ("api_base: localhost:8000\n", 1, "key 'api_base': expected an http(s) URL"),
        ("exclude:\n  - docs/**\n  - 3\n", 3, "key 'exclude': item 2: expected a glob, got 3"),
        ("fallback_models: [a, b c]\n", 1, "item 2: expected a model name without spaces, got 'b c'"),
        (
            "prices:\n  m:\n    input_usd_per_mtok: 1\n    output_usd_per_mtok: -2\n",
            4,
            "'output_usd_per_mtok' must be at least 0, got -2",
        ),
        ("prices:\n  m:\n    input_usd_per_mtok: 1\n", 3, "prices for 'm': missing 'output_usd_per_mtok'"),
        ("prices: 3\n", 1, "key 'prices': expected a mapping of model name to prices, got 3"),
    ],
)
def test_a_bad_value_names_the_key_and_its_line(text: str, line: int, expected: str) -> None:
    message = error_of(text)
    assert message.startswith(f"{NAME}:{line}: ")
    assert expected in message


def test_integers_are_accepted_where_numbers_are_expected() -> None:
    layer = parse("max_cost_usd: 3\nmax_seconds: 90\n")
    assert layer == {"max_cost_usd": 3.0, "max_seconds": 90.0}
    assert all(isinstance(value, float) for value in layer.values())


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n", "~\n"])
def test_an_empty_file_is_an_empty_layer(text: str) -> None:
    assert parse(text) == {}


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("- model\n- x\n", 1, "expected a mapping of settings at the top level, got a list"),
        ("just text\n", 1, "got a single value"),
        ("model: x\nmax_calls: [1,\n", 3, "invalid YAML"),
        ("model: a\nmax_calls: 2\nmodel: b\n", 3, "duplicate key 'model' (first set on line 1)"),
        ("1: x\n", 1, "expected a setting name, got 1"),
    ],
)
def test_a_file_that_is_not_a_mapping_of_settings_names_the_line(text: str, line: int, expected: str) -> None:
    message = error_of(text)
    assert message.startswith(f"{NAME}:{line}: ")
    assert expected in message


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("rule: secrets", "unknown rule 'secrets' (did you mean 'secret'?)"),
        (
            "rule: duplicate-block",
            "unknown rule 'duplicate-block' (valid: conflict-marker, secret, debugger)",
        ),
        ("fingerprint: abc", "`fingerprint` must be 12 hex characters, got 'abc'"),
    ],
)
def test_an_ignore_entry_that_could_quiet_nothing_names_its_line(entry: str, expected: str) -> None:
    """`ignore:` is how a finding is never raised again: an entry no finding can match is a mistake
    the user must see, not an ignore list that silently ignores nothing."""
    message = error_of(f"model: m\nignore:\n  - reason: on purpose\n    {entry}\n")
    assert message == f"{NAME}:4: key 'ignore': item 1: {expected}"


def test_blank_optional_values_leave_the_defaults() -> None:
    assert parse("model:\napi_base: ''\ncontext_window:\ninclude:\n") == {"include": ()}
    assert build_config(file_layer=parse("model:\n")).model is None


def test_a_list_can_be_written_as_text_in_the_file() -> None:
    assert parse("include: 'src/**, lib/**'\n") == {"include": ("src/**", "lib/**")}


def test_missing_file_is_empty_unless_required(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    assert load_config_file(missing) == {}
    with pytest.raises(ConfigError, match="not found"):
        load_config_file(missing, required=True)


def test_unreadable_or_undecodable_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "imreview.yml"
    path.write_bytes(b"model: x\nlanguage: \xff\xfe\n")
    with pytest.raises(ConfigError, match="UTF-8") as info:
        load_config_file(path)
    assert str(info.value).startswith(f"{path}:2: ") and "UTF-8" in str(info.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path)


def test_errors_from_a_file_on_disk_carry_its_path(tmp_path: Path) -> None:
    path = tmp_path / "imreview.yml"
    path.write_text("\ufeffmodel: x\nmax_calls: -3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"{path}:2")) as info:
        load_config_file(path)
    assert info.value.location == f"{path}:2"
    assert isinstance(info.value, UsageError)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("src/**\nlib/**", ("src/**", "lib/**")),
        (" a , b ,, \n\n c \n", ("a", "b", "c")),
        ("a\r\nb", ("a", "b")),
        (",\n,", ()),
    ],
)
def test_list_inputs_split_on_newlines_and_commas(raw: str, expected: tuple[str, ...]) -> None:
    assert parse_input_value("exclude", raw, "input 'exclude'") == expected


def test_input_values_are_typed() -> None:
    assert parse_input_value("max_cost_usd", " 0.25 ", "input 'max-cost-usd'") == 0.25
    assert parse_input_value("max_calls", "1", "input 'max-calls'") == 1
    assert parse_input_value("fail_on", "P1", "input 'fail-on'") == "P1"
    assert parse_input_value("on_error", "fail", "input 'on-error'") == "fail"
    assert parse_input_value("fallback_models", "a,b", "input 'fallback-models'") == ("a", "b")
    assert parse_input_value("max_calls", "  ", "input 'max-calls'") is None


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("max_cost_usd", "lots", "input 'max-cost-usd': expected a number, got 'lots'"),
        ("max_cost_usd", "nan", "input 'max-cost-usd': expected a finite number, got nan"),
        ("max_calls", "2.5", "input 'max-calls': expected a whole number, got '2.5'"),
        ("max_calls", "0", "input 'max-calls': must be at least 1, got 0"),
        ("fail_on", "p9", "input 'fail-on': expected one of never, P1, P2, P3, got 'p9'"),
        ("on_error", "ignore", "input 'on-error': expected one of warn, fail, got 'ignore'"),
        ("language", "en_US", "input 'language': expected a language tag like 'en' or 'zh-CN', got 'en_US'"),
        ("prices", "x", "input 'prices': cannot be given as text"),
    ],
)
def test_bad_input_values_name_the_input(key: str, raw: str, expected: str) -> None:
    origin = f"input '{key.replace('_', '-')}'"
    with pytest.raises(ConfigError, match="^" + re.escape(expected)) as info:
        parse_input_value(key, raw, origin)
    assert str(info.value).startswith(expected)


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("FALSE", False), (" True ", True)])
def test_booleans_accept_true_and_false_in_any_case(raw: str, expected: bool) -> None:
    assert parse_bool(raw, "input 'post-comment'") is expected


@pytest.mark.parametrize("raw", ["yes", "1", "on", "", "truee"])
def test_other_booleans_are_an_error_naming_the_input(raw: str) -> None:
    with pytest.raises(ConfigError, match="expected true or false") as info:
        parse_bool(raw, "input 'post-comment'")
    assert str(info.value).startswith("input 'post-comment': expected true or false")


@pytest.mark.parametrize(
    ("overrides", "flag"),
    [
        ({"max_calls": -1}, "option '--max-calls'"),
        ({"max_cost_usd": "cheap"}, "option '--max-cost-usd'"),
        ({"fail_on": "P0"}, "option '--fail-on'"),
        ({"on_error": "explode"}, "option '--on-error'"),
        ({"fallback_models": ("ok", "not ok")}, "option '--fallback-model'"),
        ({"language": "english"}, "option '--language'"),
    ],
)
def test_bad_overrides_name_the_flag(overrides: dict[str, object], flag: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(flag + ": ")) as info:
        build_config(overrides=overrides)
    assert str(info.value).startswith(flag + ": ")


def test_the_typed_overrides_have_a_field_for_every_key_a_flag_or_an_input_sets() -> None:
    settable = {name for name, key in OVERRIDE_KEYS.items() if key.flag or key.input}
    assert {f.name for f in dataclasses.fields(Overrides)} == settable


def test_typed_overrides_layer_over_the_file_and_a_bad_one_names_the_flag() -> None:
    file_layer = {"max_calls": 3, "language": "zh-CN", "include": ("src/**",)}
    given = Overrides.given({"max_calls": 5, "include": [], "model": None, "unrelated": 1})
    assert given == Overrides(max_calls=5)
    config = build_config(file_layer=file_layer, overrides=given)
    assert (config.limits.calls, config.language, config.include) == (5, "zh-CN", ("src/**",))
    with pytest.raises(ConfigError, match=r"^option '--max-findings': must be at least 0, got -1"):
        build_config(overrides=Overrides(max_findings=-1))


@pytest.mark.parametrize("name", [n for n, k in OVERRIDE_KEYS.items() if "default " in k.flag_help])
def test_a_flags_help_line_names_the_default_the_table_has(name: str) -> None:
    """`imreview --help` is built from the table's rows: the default a help line names is the key's."""
    key = OVERRIDE_KEYS[name]
    default = getattr(Config().limits, key.limit) if key.limit else getattr(Config(), key.name)
    match = re.search(r"default ([\w.,]+?)[):;]", key.flag_help)
    if default is None:
        assert match is None, f"{name}: the help names a default the table does not have"
        return
    assert match is not None, key.flag_help
    said = match.group(1).replace(",", "")
    if isinstance(default, str):
        assert said == default
    else:
        assert float(said) == float(default)


HASH_SCRIPT = """
from reviewer.config import Config, Prices, config_hash
from reviewer.budget import Limits
config = Config(model="m", fallback_models=("a", "b"), include=("x",), limits=Limits(calls=3),
                prices={"z": Prices(1, 2), "a": Prices(0.5, 1.5)})
print(config_hash(config, "digest"))
"""


def test_config_hash_is_stable_across_processes() -> None:
    config = Config(
        model="m",
        fallback_models=("a", "b"),
        include=("x",),
        limits=Limits(calls=3),
        prices={"a": Prices(0.5, 1.5), "z": Prices(1.0, 2.0)},
    )
    expected = config_hash(config, "digest")
    assert len(expected) == 16 and int(expected, 16) >= 0
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
        result = subprocess.run(
            [sys.executable, "-c", HASH_SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            check=True,
        )
        assert result.stdout.strip() == expected


BASE = Config(model="m")


@pytest.mark.parametrize(
    "changed",
    [
        dataclasses.replace(BASE, model="m2"),
        dataclasses.replace(BASE, fallback_models=("f",)),
        dataclasses.replace(BASE, api_base="http://127.0.0.1:9/v1"),
        dataclasses.replace(BASE, language="de"),
        dataclasses.replace(BASE, instructions="be brief"),
        dataclasses.replace(BASE, include=("src/**",)),
        dataclasses.replace(BASE, exclude=("src/**",)),
        dataclasses.replace(BASE, max_findings=2),
        dataclasses.replace(BASE, context_window=8192),
        dataclasses.replace(BASE, prices={"m": Prices(1.0, 2.0)}),
        dataclasses.replace(BASE, limits=Limits(cost_usd=0.5)),
        dataclasses.replace(BASE, limits=Limits(calls=0)),
        dataclasses.replace(BASE, max_output_tokens_per_call=1024),
        dataclasses.replace(BASE, ignore=(IgnoreRule(reason="on purpose", rule="debugger"),)),
    ],
)
def test_config_hash_changes_with_anything_that_shapes_the_review(changed: Config) -> None:
    assert config_hash(changed, "t") != config_hash(BASE, "t")


def test_config_hash_depends_on_templates_but_not_on_run_mechanics() -> None:
    assert config_hash(BASE, "t1") != config_hash(BASE, "t2")
    assert config_hash(BASE, "t") == config_hash(dataclasses.replace(BASE, limits=Limits(cost_usd=1)), "t")
    same_review = dataclasses.replace(
        BASE, max_concurrency=1, fail_on="P1", on_error="fail", template_dir="x"
    )
    assert config_hash(same_review, "t") == config_hash(BASE, "t")
