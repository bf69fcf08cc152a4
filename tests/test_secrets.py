"""Secrets stay put: what the rules catch and cut, which files are never sent, and that the PR's own
text (title, body, commit messages, file names) is cut before the model, the report or the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewer.diff import DiffFile, parse_patch
from reviewer.policy import skip_reason
from reviewer.rules import redact, run_rules
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import model_answer, review_args
from tests.fakes.model_server import FakeModelServer, text

GH_TOKEN = "ghp_" + "Q9w8E7r6T5y4U3i2O1p0A9s8D7f6G5h4J3k2"
KEY_LINES = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
    "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ",
]


def rules_on(path: str, added: list[str]):
    patch = (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,{len(added) + 1} @@\n x = 0\n"
    )
    patch += "".join(f"+{line}\n" for line in added)
    return run_rules(parse_patch(patch.encode()))


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ('SECRET_KEY = "django-insecure-8f#k2L9xQ7mZ"', "django-insecure-8f#k2L9xQ7mZ"),
        ('ENCRYPTION_KEY = "q8Zr4Tn2Vb7Xk1LmP0sW"', "q8Zr4Tn2Vb7Xk1LmP0sW"),
        ('DATABASE_URL = "postgres://app:Sup3rS3cret!x9@db.internal:5432/app"', "Sup3rS3cret!x9"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYz8q4Pw2Lk3",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz8q4Pw2Lk3",
        ),
        (
            'AWS_SECRET = "Zq1Xk9Lm2Vb7Tn4Rw8Ys5Pd3Hf6Jg0Nc+Ua/Ie2Oo"',
            "Zq1Xk9Lm2Vb7Tn4Rw8Ys5Pd3Hf6Jg0Nc+Ua/Ie2Oo",
        ),
    ],
)
def test_credential_assignments_are_p1_findings_and_never_quoted(line: str, secret: str) -> None:
    result = rules_on("src/settings.py", [line])
    assert [(f.priority, f.source) for f in result.findings] == [("P1", "rule:secret")], line
    assert secret not in result.findings[0].quote
    assert secret not in redact(line)


def test_a_short_password_in_a_url_is_cut_whole() -> None:
    assert redact("postgres://u:pw@host/db") == "postgres://u:…@host/db"


@pytest.mark.parametrize(
    "line",
    [
        "primary_key = 'user_id_12345678'",
        'cache_key = f"user:{uid}:v2"',
        "url = 'https://user:${PASSWORD}@host'",
        "git@github.com:owner/repo.git",
        "'http://localhost:8080/path'",
        "SECRET_KEY = os.environ['SECRET_KEY']",
        "ENCRYPTION_KEY = settings.ENCRYPTION_KEY",
    ],
)
def test_near_misses_stay_quiet(line: str) -> None:
    assert rules_on("src/settings.py", [line]).findings == ()


def test_private_key_body_shown_as_context_is_cut_without_its_begin_line() -> None:
    hunk = "\n".join([*KEY_LINES, "-----END PRIVATE KEY-----", "x = 1"])
    out = redact(hunk)
    assert not any(line in out for line in KEY_LINES)
    assert out.endswith("-----END PRIVATE KEY-----\nx = 1")
    numbered = "\n".join(f"  {n} {line}" for n, line in enumerate(KEY_LINES, 10))
    assert not any(line in redact(numbered) for line in KEY_LINES), "PEM-width base64 lines, numbered"
    assert redact("/" * 64) == "/" * 64, "separator comments are not keys"


@pytest.mark.parametrize(
    "name", [".env", ".env.local", "prod.env", "config/staging.env", ".env-prod", "app.env.json"]
)
def test_env_files_are_secret_files(name: str) -> None:
    assert skip_reason(DiffFile(path=name, status="added")) == "secret_file"


@pytest.mark.parametrize("name", ["env.py", "src/environment.ts", "settings.env.py"])
def test_code_named_env_is_reviewed(name: str) -> None:
    assert skip_reason(DiffFile(path=name, status="added")) != "secret_file"


def test_tokens_in_commit_messages_and_file_names_reach_neither_the_model_nor_the_outputs(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    repo.commit({"app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.commit({"app.py": "x = 1\ny = 2\n", f"notes/{GH_TOKEN}.md": "hello\n"}, f"use {GH_TOKEN} for now")
    model.handler = lambda body: text(model_answer())
    out = tmp_path / "out"
    proc = run_cli(
        review_args(repo.path, model.api_base, "--json", str(out / "r.json"), "--summary", str(out / "s.md")),
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert model.requests, "the model was called"
    assert GH_TOKEN not in json.dumps(model.requests)
    assert GH_TOKEN not in (out / "r.json").read_text()
    assert GH_TOKEN not in (out / "s.md").read_text()
    assert GH_TOKEN not in proc.stdout + proc.stderr
