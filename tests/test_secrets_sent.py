"""What the model is sent never holds a secret, on every path a secret can take into a request: a
secret file renamed to an innocent name, a token inside a function whose definition is attached as
context, and the code around a finding that the verification call shows (issue 21's survivors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Repo, cli_env, run_cli
from tests.factories import model_answer, model_finding, review_args
from tests.fakes.model_server import FakeModelServer, text

GH_TOKEN = "ghp_" + "Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh1Gg0Ff9Dd8Ss7A"
HOOK = "hk-9f8e7d6c5b4a3928"  # a value no secret pattern knows: only the file's name says it is one


def _review(repo: Repo, model: FakeModelServer, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "out" / "r.json"
    proc = run_cli(
        review_args(repo.path, model.api_base, "--json", str(out)),
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert model.requests, "the model was called"
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_a_secret_file_renamed_to_an_innocent_name_is_never_sent(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    env = "".join(f"SETTING_{n}=value-{n}\n" for n in range(8)) + f"PAYMENT_HOOK={HOOK}\n"
    repo.commit({".env": env, "app.py": "x = 1\n"}, "base")
    repo.branch("feature")
    repo.git("mv", ".env", "env.txt")
    repo.commit({"env.txt": env.replace("SETTING_7=value-7", "SETTING_7=value-8"), "app.py": "x = 2\n"})
    model.handler = lambda body: text(model_answer())

    report = _review(repo, model, tmp_path)

    assert HOOK not in json.dumps(model.requests)
    (renamed,) = [f for f in report["coverage"]["files"] if f["path"] == "env.txt"]
    assert (renamed["status"], renamed["reason"]) == ("skipped", "secret_file")


FUNCTION = [
    "def charge(card):",
    "    amount = 10",
    *[f"    step_{n}(card)" for n in range(6)],
    "    return amount",
]


def _function_with_a_token(repo: Repo) -> None:
    """`charge` gains a token and a doubling six lines below its `def`, out of the hunk's own context,
    so the planner attaches the enclosing definition."""
    repo.commit({"app.py": "\n".join(FUNCTION) + "\n"}, "base")
    repo.branch("feature")
    changed = [*FUNCTION[:-1], f'    token = "{GH_TOKEN}"', "    amount = amount * 2", FUNCTION[-1]]
    repo.commit({"app.py": "\n".join(changed) + "\n"}, "feature")


def test_a_token_inside_a_function_is_cut_from_its_attached_definition(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    _function_with_a_token(repo)
    model.handler = lambda body: text(model_answer())

    _review(repo, model, tmp_path)

    sent = json.dumps(model.requests)
    assert "def charge(card):" in sent, "the enclosing definition was attached"
    assert GH_TOKEN not in sent


def test_the_code_around_a_finding_shown_to_the_verification_call_is_redacted(
    repo: Repo, model: FakeModelServer, tmp_path: Path
) -> None:
    _function_with_a_token(repo)
    claim = model_finding(
        path="app.py",
        line=11,
        priority="P1",
        title="Charge doubled",
        quote="amount = amount * 2",
        trigger="any charge",
        observation="every card is charged twice the amount",
        suggestion="drop the doubling",
    )

    def handler(body: dict[str, Any]) -> Any:
        if len(model.requests) == 1:
            return text(model_answer(claim))
        return text(json.dumps({"verdicts": []}))

    model.handler = handler

    _review(repo, model, tmp_path)

    assert len(model.requests) == 2, "the finding was re-checked in a second call"
    verify_prompt = model.requests[1]["messages"][-1]["content"]
    assert "amount = amount * 2" in verify_prompt, "the code around the finding is shown"
    assert GH_TOKEN not in verify_prompt
