"""Deterministic checks: each fires on the real thing and stays quiet on its nearest miss.

Token-shaped strings are assembled at run time so that this file itself holds no secret-shaped
literal (push protection and secret scanners would rightly flag one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from reviewer.diff import DiffFile
from reviewer.policy import skip_reason
from reviewer.render import packaged_templates_dir
from reviewer.report import finding_id
from reviewer.rules import english, redact, run_rules
from tests.factories import added_file, files_of

AWS = "AK" + "IA" + "Q3EGRV7M2XN4BTPL"
GITHUB = "gh" + "p_" + "aZ3kR9mQ2vL7pXw4Nf8Tj1Hc6Ys0Bd5Ue2Gi"
SLACK = "xo" + "xb-" + "2048117623-5fj38Kq9ZrTn"
STRIPE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GOOGLE = "AI" + "za" + "SyB7r9Xk2mQv4LpW8nTz1HcJd6Ys0Fq3Ue5"
OPENAI = "sk" + "-proj-" + "T7xq2LmZ9vRk4WpN8sYc1HdJ6fBg3Ue0Qa5"
ANTHROPIC = "sk" + "-ant-api03-" + "Zr8kQ2mW7vL4pXn9Tj1Hc6Ys0Bd5Ue3Gi"
KEY_BODY = "MIIEowIBAAKCAQEAu3Xb9kQ2mW7vL4pXn9Tj1Hc6Ys0Bd5Ue3GiRr8"
TOKENS = {
    "AWS access key ID": AWS,
    "GitHub token": GITHUB,
    "Slack token": SLACK,
    "Stripe live key": STRIPE,
    "Google API key": GOOGLE,
    "OpenAI API key": OPENAI,
    "Anthropic API key": ANTHROPIC,
}


def rules_on(path: str, lines: list[str], messages: Mapping[str, str] | None = None):
    return run_rules(files_of(added_file(path, lines)), messages=messages)


# conflict-marker


def test_conflict_block_is_one_p1_finding_spanning_the_block() -> None:
    lines = ["x = 0", "<<<<<<< HEAD", "a = 1", "=======", "a = 2", ">>>>>>> feature", "y = 3"]
    result = rules_on("src/app.py", lines)
    assert len(result.findings) == 1
    f = result.findings[0]
    assert (f.source, f.priority, f.path, f.line, f.end_line, f.side) == (
        "rule:conflict-marker",
        "P1",
        "src/app.py",
        2,
        6,
        "RIGHT",
    )
    assert f.quote == "<<<<<<< HEAD"
    assert f.confidence == 1.0
    assert f.id == finding_id("src/app.py", f.quote, f.title)
    assert f.title and f.trigger and f.observation and f.suggestion


def test_markdown_underline_and_quoted_markers_are_not_conflicts() -> None:
    readme = added_file("README.md", ["Title", "=======", "", "Some text."])
    code = added_file("src/doc.py", ['EXAMPLE = """', "    <<<<<<< HEAD", '"""', 's = ">>>>>>> x"'])
    assert run_rules(files_of(readme, code)).findings == ()


def test_closing_marker_alone_is_reported_but_a_lone_separator_is_not() -> None:
    result = rules_on("a.txt", ["one", "=======", "two", ">>>>>>> other-branch"])
    assert [(f.line, f.quote) for f in result.findings] == [(4, ">>>>>>> other-branch")]


# secret


@pytest.mark.parametrize(("kind", "token"), sorted(TOKENS.items()))
def test_known_token_formats_are_p1_findings_with_redacted_quote(kind: str, token: str) -> None:
    result = rules_on("src/settings.py", ["import os", f'CLIENT = Client("{token}")'])
    assert [(f.source, f.priority, f.line, f.title) for f in result.findings] == [
        ("rule:secret", "P1", 2, f"{kind} committed")
    ]
    quote = result.findings[0].quote
    assert token not in quote
    assert token[:4] + "…" in quote


def test_private_key_header_is_a_finding_and_its_body_never_quoted() -> None:
    result = rules_on(
        "deploy/key.txt", ["-----BEGIN RSA PRIVATE KEY-----", KEY_BODY, "-----END RSA PRIVATE KEY-----"]
    )
    assert [(f.title, f.line, f.quote) for f in result.findings] == [
        ("Private key committed", 1, "-----BEGIN RSA PRIVATE KEY-----")
    ]


def test_high_entropy_password_assignment_is_a_generic_finding() -> None:
    value = "Xk9#mQ2v" + "L7pZw4"
    result = rules_on("src/db.py", [f'DB_PASSWORD = "{value}"'])
    [f] = result.findings
    assert (f.title, f.confidence) == ("Hard-coded credential", 0.9)
    assert value not in f.quote and "Xk9#…" in f.quote


@pytest.mark.parametrize(
    "line",
    [
        'password = "changeme"',
        'password = "${DB_PASSWORD}"',
        'api_key = os.environ["API_KEY"]',
        'token = "<token>"',
        'secret = "xxxxxxxxxxxxxxxx"',
        'password = "your-password-here"',
        "aws_key = AKIAIOSFODNN7EXAMPLE",
        'password = get_password("db")',
        'secret_name = "prod-db-credentials-2024"',
        "password = settings.DB_PASSWORD",
        'PLACEHOLDER_API_KEY = "imreview-no-key"',
    ],
)
def test_placeholders_and_lookups_are_not_secrets(line: str) -> None:
    assert rules_on("src/config.py", [line]).findings == ()


def test_generic_assignments_in_tests_are_quiet_but_token_formats_are_not() -> None:
    value = "Xk9#mQ2v" + "L7pZw4"
    assert rules_on("tests/test_login.py", [f'client.login(password="{value}")']).findings == ()
    assert len(rules_on("tests/test_login.py", [f'TOKEN = "{GITHUB}"']).findings) == 1


def test_unquoted_value_counts_in_env_files_only() -> None:
    value = "Xk9mQ2v" + "L7pZw4T"
    assert len(rules_on(".env.production", [f"DB_PASSWORD={value}"]).findings) == 1
    assert rules_on("src/run.sh", [f"DB_PASSWORD={value}"]).findings == ()


def test_rules_run_on_files_the_plan_skips() -> None:
    env = added_file(".env", [f"GITHUB_TOKEN={GITHUB}"])
    lock = added_file(
        "package-lock.json", ["{", "<<<<<<< HEAD", '  "a": 1', "=======", '  "a": 2', ">>>>>>> x", "}"]
    )
    files = files_of(env, lock)
    assert [skip_reason(f) for f in files] == ["secret_file", "lockfile"]
    found = {(f.path, f.source) for f in run_rules(files).findings}
    assert found == {(".env", "rule:secret"), ("package-lock.json", "rule:conflict-marker")}


def test_same_secret_twice_in_a_file_is_one_finding_naming_both_lines() -> None:
    result = rules_on("src/a.py", [f'K = "{AWS}"', "x = 1", f'K = "{AWS}"'])
    [f] = result.findings
    assert f.line == 1 and "line 3" in f.observation


# redact


@pytest.mark.parametrize("token", sorted(TOKENS.values()))
def test_redact_never_leaves_a_full_token(token: str) -> None:
    text = f"line one\nvalue: '{token}' and again {token}\n"
    out = redact(text)
    assert token not in out
    assert out.count(token[:4] + "…") == 2
    assert redact(out) == out


def test_redact_masks_private_key_bodies_and_generic_values() -> None:
    value = "Xk9#mQ2v" + "L7pZw4"
    text = (
        f'    12 + password = "{value}"\n'
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        f"{KEY_BODY}\n{KEY_BODY[::-1]}\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
        "after = 1\n"
    )
    out = redact(text)
    assert value not in out and KEY_BODY not in out and KEY_BODY[::-1] not in out
    assert "-----BEGIN OPENSSH PRIVATE KEY-----" in out and "after = 1" in out


def test_redact_leaves_ordinary_code_alone() -> None:
    text = 'password = "changeme"\ntoken = make_token(user)\napi_key = settings.API_KEY\n'
    assert redact(text) == text


# debugger


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/a.py", "    breakpoint()"),
        ("src/a.py", "    import pdb; pdb.set_trace()"),
        ("src/a.py", "import ipdb"),
        ("web/app.ts", "  debugger;"),
        ("app/models/user.rb", "    binding.pry"),
    ],
)
def test_debugger_leftovers_are_p2_findings(path: str, line: str) -> None:
    [f] = rules_on(path, ["x = 1", line]).findings
    assert (f.source, f.priority, f.line, f.quote) == ("rule:debugger", "P2", 2, line.strip())


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/a.py", "    # breakpoint()"),
        ("src/a.py", 'HINT = "call breakpoint() here"'),
        ("web/app.js", 'console.log("debugger;")'),
        ("web/app.js", "const debuggerEnabled = true;"),
        ("docs/debugging.md", "debugger;"),
        ("tests/fixtures/leftover.py", "breakpoint()"),
        ("src/a.py", "def breakpoint_handler(): pass"),
    ],
)
def test_debugger_near_misses_are_quiet(path: str, line: str) -> None:
    assert rules_on(path, [line]).findings == ()


# duplicate-block

BLOCK = [
    "total = 0",
    "for item in items:",
    "    if item.price > 0:",
    "        total += item.price * item.qty",
    "    else:",
    "        skipped.append(item)",
]


def test_block_added_twice_is_a_merge_signal_not_a_finding() -> None:
    a = added_file("src/a.py", ["def f(items, skipped):", *BLOCK, "    return total"])
    b = added_file("src/b.py", ["import x", "", "def g(items, skipped):", *[f"  {t}  " for t in BLOCK], "}"])
    result = run_rules(files_of(a, b))
    assert result.findings == ()
    [s] = result.signals
    assert (s.kind, s.target, s.into) == ("MERGE", "src/b.py:4", "src/a.py:2")
    assert "6 lines" in s.reason


def test_five_line_repeat_and_trivial_lines_do_not_make_a_block() -> None:
    five = [*BLOCK[:5], "}", ")", ""]
    a = added_file("src/a.py", five)
    b = added_file("src/b.py", five)
    assert run_rules(files_of(a, b)).signals == ()


def test_duplicates_in_lockfiles_are_ignored() -> None:
    a = added_file("yarn.lock", BLOCK)
    b = added_file("sub/yarn.lock", BLOCK)
    assert run_rules(files_of(a, b)).signals == ()


def test_duplicates_in_tests_docs_and_data_are_ignored() -> None:
    for first, second in (
        ("tests/test_a.py", "tests/test_b.py"),
        ("docs/a.md", "README.md"),
        ("a.json", "b.yaml"),
    ):
        a = added_file(first, BLOCK)
        b = added_file(second, BLOCK)
        assert run_rules(files_of(a, b)).signals == (), (first, second)


def test_only_the_largest_copies_are_signalled() -> None:
    files = []
    for n in range(12):
        body = [f"value_{n}_{i} = compute({n}, {i})" for i in range(6 + n)]
        files += [added_file(f"src/a{n}.py", body), added_file(f"src/b{n}.py", body)]
    signals = run_rules(files_of(*files)).signals
    assert len(signals) == 10
    assert {s.target for s in signals} == {f"src/b{n}.py:1" for n in range(2, 12)}, (
        "the two smallest are dropped"
    )


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/detect.py", '_BEGIN = "-----BEGIN RSA PRIVATE KEY-----"'),
        ("docs/keys.md", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    ],
)
def test_a_key_header_without_a_key_body_is_quiet(path: str, line: str) -> None:
    assert rules_on(path, [line, "print('no key here')"]).findings == ()


def test_a_key_in_one_escaped_string_is_a_finding() -> None:
    line = f'KEY = "-----BEGIN PRIVATE KEY-----\\n{KEY_BODY}\\n-----END PRIVATE KEY-----"'
    [f] = rules_on("src/settings.py", [line]).findings
    assert f.title == "Private key committed" and KEY_BODY not in f.quote


# localized prose

HAN = re.compile(r"[\u4e00-\u9fff]")


def every_rule() -> tuple[DiffFile, ...]:
    """Patches that use every message key once at least."""
    value = "Xk9#mQ2v" + "L7pZw4"
    return files_of(
        added_file("src/merge.py", ["<<<<<<< HEAD", "a = 1", "=======", "a = 2", ">>>>>>> x"]),
        added_file("src/half.py", ["<<<<<<< HEAD", "a = 1", ">>>>>>> x", "b = 2", "<<<<<<< other"]),
        added_file("deploy/key.txt", ["-----BEGIN RSA PRIVATE KEY-----", KEY_BODY]),
        added_file("src/keys.py", [f'K = "{AWS}"', f'K = "{AWS}"', f'G = "{GITHUB}"', f'G = "{GITHUB}"']),
        added_file("src/again.py", [f'G = "{GITHUB}"', f'G = "{GITHUB}"', f'G = "{GITHUB}"']),
        added_file("src/db.py", [f'DB_PASSWORD = "{value}"']),
        added_file("src/debug.py", ["import pdb", "breakpoint()"]),
        added_file("web/app.ts", ["debugger;"]),
        added_file("app/user.rb", ["binding.pry"]),
        added_file("src/one.py", BLOCK),
        added_file("src/two.py", BLOCK),
    )


def prose_of(result: Any) -> list[str]:
    texts = [s.reason for s in result.signals]
    for f in result.findings:
        texts += [f.title, f.trigger, f.observation, f.suggestion]
    return texts


def flat(data: Mapping[str, Any], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def rules_table(language: str) -> dict[str, str]:
    path = packaged_templates_dir() / "i18n" / f"{language}.yml"
    return flat(yaml.safe_load(path.read_text(encoding="utf-8"))["rules"], "rules.")


FAKE_ZH = {
    "rules.conflict.title": "合并冲突未解决",
    "rules.conflict.observation_block_both": "第 {start} 至 {end} 行是冲突块。",
    "rules.secret.token.title": "提交了 {kind}",
    "rules.secret.token.observation": "第 {line} 行有 {kind}。",
    "rules.repeated_line": "{observation}第 {line} 行相同。",
    "rules.debugger.py_breakpoint.title": "遗留断点",
    "rules.duplicate.reason": "{path} 第 {start}-{end} 行重复了 {original_path} 第 {original_start} 行。",
}


def test_messages_localize_prose_but_ids_stay_those_of_the_english_run() -> None:
    files = every_rule()
    in_english, chinese = run_rules(files), run_rules(files, messages=FAKE_ZH)
    assert [f.id for f in chinese.findings] == [f.id for f in in_english.findings]
    by_id = {f.id: f for f in chinese.findings}
    block = next(f for f in in_english.findings if f.path == "src/merge.py")
    assert (by_id[block.id].title, by_id[block.id].observation) == (
        "合并冲突未解决",
        "第 1 至 5 行是冲突块。",
    )
    assert block.id == finding_id("src/merge.py", "<<<<<<< HEAD", "Unresolved merge conflict")
    aws = next(f for f in chinese.findings if f.path == "src/keys.py" and f.line == 1)
    assert (aws.title, aws.observation) == (
        "提交了 AWS access key ID",
        "第 1 行有 AWS access key ID。第 2 行相同。",
    )
    assert aws.trigger == english()["rules.secret.trigger"], "a key the table lacks stays English"
    assert {f.title for f in chinese.findings if f.path == "src/debug.py"} == {
        "遗留断点",
        "Debugger import left in",
    }
    [signal] = chinese.signals
    assert signal.reason == "src/two.py 第 1-6 行重复了 src/one.py 第 1 行。"
    assert (signal.target, signal.into) == (in_english.signals[0].target, in_english.signals[0].into)


@pytest.mark.parametrize("bad", ["冲突 {lien}", "冲突 {0}", "冲突 {kind}"])
def test_a_template_naming_an_unknown_parameter_falls_back_to_english(bad: str) -> None:
    messages = {"rules.conflict.title": bad, "rules.conflict.trigger": "每当解析此文件时。"}
    [f] = rules_on("a.txt", ["<<<<<<< HEAD"], messages=messages).findings
    assert (f.title, f.trigger) == ("Unresolved merge conflict", "每当解析此文件时。")


def test_literal_and_stray_braces_in_a_template_do_not_crash() -> None:
    messages = {"rules.conflict.title": "冲突 {{x}} {", "rules.conflict.trigger": "} 第 {line} 行"}
    [f] = rules_on("a.txt", ["<<<<<<< HEAD"], messages=messages).findings
    assert (f.title, f.trigger) == ("冲突 {x} {", "} 第 1 行")


def test_every_zh_cn_rule_template_formats_with_what_the_rules_pass() -> None:
    zh = rules_table("zh-CN")
    assert set(zh) == set(english())
    files = every_rule()
    in_english, chinese = run_rules(files), run_rules(files, messages=zh)
    assert len(chinese.findings) == 11 and len(chinese.signals) == 1  # one card per identical line (issue 20)
    assert [f.id for f in chinese.findings] == [f.id for f in in_english.findings]
    untranslated = [t for t in prose_of(chinese) if not HAN.search(t) or re.search(r"\{\w+\}", t)]
    assert untranslated == [], "a zh-CN template fell back to English or left a placeholder"
    observations = "".join(f.observation for f in chinese.findings)
    assert "第 2 行也添加了同一行" in observations and "第 2, 3 行也添加了同一行" in observations


def test_english_i18n_rules_section_is_the_default_table() -> None:
    assert rules_table("en") == dict(english())
