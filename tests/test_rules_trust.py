"""Issue 20 item 2: deterministic checks a maintainer trusts.

Credentials in tests, fixtures, examples and docs are reported as P3 (made up far more often than
leaked, still worth a look); documentation example keys and placeholders are not reported; the same
line added in several places is one card that lists them; a debugger's trigger says where the line
runs.
"""

from __future__ import annotations

import pytest

from reviewer.diff import parse_patch
from reviewer.policy import holds_sample_data
from reviewer.rules import run_rules
from tests.factories import added_file, files_of

GITHUB = "gh" + "p_" + "aZ3kR9mQ2vL7pXw4Nf8Tj1Hc6Ys0Bd5Ue2Gi"
AWS = "AK" + "IA" + "Q3EGRV7M2XN4BTPL"


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_auth.py",
        "src/auth_test.go",
        "testdata/creds.json",
        "examples/client.py",
        "docs/setup.md",
        "README.md",
        "spec/fixtures/keys.yml",
        "samples/app.js",
    ],
)
def test_a_credential_in_tests_fixtures_examples_or_docs_is_p3_with_a_question(path: str) -> None:
    assert holds_sample_data(path)
    [f] = run_rules(files_of(added_file(path, [f'token = "{GITHUB}"']))).findings
    assert f.priority == "P3"
    assert f.suggestion.startswith("This file holds tests, fixtures, examples or docs")


@pytest.mark.parametrize("path", ["src/auth.py", "deploy/settings.py", "app/config.js", "latest/notes.py"])
def test_a_credential_in_source_stays_p1(path: str) -> None:
    assert not holds_sample_data(path)
    [f] = run_rules(files_of(added_file(path, [f'token = "{GITHUB}"']))).findings
    assert f.priority == "P1" and f.suggestion.startswith("Revoke and rotate")


@pytest.mark.parametrize(
    "value",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "gh" + "p_" + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "gh" + "p_" + "<token>",
        "sk" + "-proj-" + "your_api_key_here_0000000000",
        "sk" + "_live_" + "changeme_changeme_changeme",
    ],
)
def test_well_known_example_keys_and_placeholders_are_not_reported(value: str) -> None:
    assert run_rules(files_of(added_file("src/settings.py", [f'KEY = "{value}"']))).findings == ()


def test_the_same_line_in_four_files_is_one_card_listing_the_places() -> None:
    files = files_of(*(added_file(f"src/m{i}.py", ["x = 1", f'KEY = "{AWS}"']) for i in range(4)))
    [f] = run_rules(files).findings
    assert (f.path, f.line) == ("src/m0.py", 2)
    assert f.observation.endswith("The same line is also added at src/m1.py:2, src/m2.py:2, src/m3.py:2.")


def test_many_places_are_counted_after_the_first_ten() -> None:
    files = files_of(*(added_file(f"src/m{i:02d}.py", ["import pdb"]) for i in range(14)))
    [f] = run_rules(files).findings
    assert "src/m10.py:1 and 3 more" in f.observation and "src/m11.py" not in f.observation


def test_different_secrets_stay_different_cards() -> None:
    other = "AK" + "IA" + "Z7KQ2MV9RX3NB4TP"
    files = files_of(added_file("src/a.py", [f'K = "{AWS}"']), added_file("src/b.py", [f'K = "{other}"']))
    assert len(run_rules(files).findings) == 2


def test_a_debugger_import_at_module_level_runs_on_import() -> None:
    [f] = run_rules(files_of(added_file("src/app.py", ["import pdb", "x = 1"]))).findings
    assert f.trigger == "When this module is imported: the line is at module level."


def test_a_debugger_inside_a_function_names_the_function() -> None:
    lines = ["def handler(request):", "    import pdb", "    pdb.set_trace()", "    return 1"]
    findings = run_rules(files_of(added_file("src/app.py", lines))).findings
    assert findings and all(
        f.trigger == "Whenever `handler()` runs: the line is inside it." for f in findings
    )
    assert not any("imported" in f.trigger for f in findings)


def test_a_debugger_inside_a_method_names_the_method_not_the_class() -> None:
    lines = ["class A:", "    def run(self):", "        breakpoint()"]
    [f] = run_rules(files_of(added_file("src/app.py", lines))).findings
    assert f.trigger == "Whenever `run()` runs: the line is inside it."


def test_a_debugger_in_a_function_above_the_hunk_uses_the_hunk_header() -> None:
    patch = (
        "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n"
        "@@ -10,2 +10,3 @@ def process(items):\n     total = 0\n+    breakpoint()\n     return total\n"
    )
    [f] = run_rules(parse_patch(patch)).findings
    assert f.trigger == "Whenever `process()` runs: the line is inside it."


def test_two_different_private_keys_stay_two_cards() -> None:
    header = "-----BEGIN RSA PRIVATE KEY-----"
    one = "MIIEowIBAAKCAQEAu3Xb9kQ2mW7vL4pXn9Tj1Hc6Ys0Bd5Ue3GiRr8"
    two = "MIIEpAIBAAKCAQEAz8Yq3LmW2vK7pRn4Tj9Hc1Ys6Bd0Ue5GiRr3Xb"
    files = files_of(added_file("deploy/a.txt", [header, one]), added_file("deploy/b.txt", [header, two]))
    assert len(run_rules(files).findings) == 2
    same = files_of(added_file("deploy/a.txt", [header, one]), added_file("deploy/c.txt", [header, one]))
    assert len(run_rules(same).findings) == 1
