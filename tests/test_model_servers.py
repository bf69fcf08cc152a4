"""What real model servers (llama.cpp's `llama-server` first) do to the client, one behaviour per test:
strict role alternation, keys required or ignored, answers cut at `max_tokens`, llama.cpp's usage and
timings, slow calls and reasoning tokens. Everything goes through litellm's real HTTP path to the
loopback server; call counts are checked against the server's own count of requests."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from reviewer.action import settings_from
from reviewer.budget import Budget, Limits
from reviewer.config import Config, build_config
from reviewer.errors import ModelConfigError, ModelError
from reviewer.findings import json_object
from reviewer.llm import AnswerUnparsed, ModelClient
from tests.conftest import Repo, cli_env, run_cli
from tests.factories import model_answer, model_finding, review_args
from tests.fakes.model_server import (
    ALTERNATION_ERROR,
    FakeModelServer,
    Reply,
    delayed,
    llama_cpp_text,
    status,
    text,
)

MODEL = "openai/fake-model"
ANSWER = '{"findings": []}'
MESSAGES = [
    {"role": "system", "content": "You review diffs. Answer with JSON only."},
    {"role": "user", "content": "diff --git a/x.py b/x.py\n+print('hi')\n"},
]
PROVIDER_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE")


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def parse_json(answer: str) -> dict[str, Any]:
    value = json.loads(answer)
    if not isinstance(value, dict):
        raise ValueError("the answer is not a JSON object")
    return value


def parse_answer(answer: str) -> dict[str, Any]:
    """The JSON in an answer as the review reads it: after thinking or prose."""
    return parse_json(json.dumps(json_object(answer)))


def client_for(
    server: FakeModelServer | None, limits: Limits | None = None, **config: Any
) -> tuple[ModelClient, Budget]:
    config.setdefault("model", MODEL)
    if server is not None:
        config.setdefault("api_base", server.api_base)
    limits = limits or Limits()
    budget = Budget(limits)
    client = ModelClient(Config(limits=limits, **config), budget, warn=lambda _: None, sleep=lambda _: None)
    return client, budget


def repair_prompt(bad: str, error: str) -> str:
    return f"Your previous answer could not be used: {error}. Answer with only the JSON object."


def post(server: FakeModelServer, body: dict[str, Any], key: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        f"{server.api_base}/chat/completions", json.dumps(body).encode(), headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# --- strict role alternation ------------------------------------------------------------------


def test_the_strict_server_refuses_two_user_turns_as_llama_cpp_does() -> None:
    with FakeModelServer(strict_roles=True) as server:
        server.handler = lambda body: text(ANSWER)
        code, body = post(server, {"messages": [*MESSAGES, {"role": "user", "content": "again"}]})
        assert (code, body["error"]["message"]) == (400, ALTERNATION_ERROR)
        code, _ = post(server, {"messages": [*MESSAGES, {"role": "assistant", "content": "x"}, MESSAGES[1]]})
        assert code == 200


def test_repair_alternates_roles_and_every_request_is_one_counted_call() -> None:
    with FakeModelServer(strict_roles=True) as server:
        server.queue(text("Sure! No findings."), text(ANSWER))
        client, budget = client_for(server)
        value, _ = client.complete_json(
            MESSAGES, phase="review", parse=parse_json, repair_prompt=repair_prompt
        )
        assert value == {"findings": []}
        assert server.refused == []
        repair = server.requests[1]["messages"]
        assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
        assert repair[2]["content"] == "Sure! No findings."
        assert "Sure! No findings." not in repair[3]["content"]
        assert budget.report().used.calls == len(server.requests) == 2


def test_consecutive_turns_of_one_role_are_joined_before_sending() -> None:
    with FakeModelServer(strict_roles=True) as server:
        server.handler = lambda body: text(ANSWER)
        client, _ = client_for(server)
        two_users = [*MESSAGES, {"role": "user", "content": "Also check x.py."}]
        client.complete_json(two_users, phase="review", parse=parse_json)
        (request,) = server.requests
        assert [m["role"] for m in request["messages"]] == ["system", "user"]
        assert request["messages"][1]["content"].endswith("Also check x.py.")


def test_requests_litellm_resends_on_its_own_are_counted_against_max_calls() -> None:
    # litellm re-sends once, by itself, after an alternation error; both requests reach the server.
    with FakeModelServer([status(400, message=ALTERNATION_ERROR)] * 2) as server:
        client, budget = client_for(server)
        with pytest.raises(ModelError, match="gave up after 2 requests"):
            client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert len(server.requests) == 2
        assert budget.report().used.calls == len(server.requests)


def test_the_review_pipeline_sends_only_alternating_requests(feature_repo: Repo, tmp_path: Path) -> None:
    with FakeModelServer(strict_roles=True) as server:
        server.queue(text("I think it is fine."), text(model_answer()))
        report_path = tmp_path / "report.json"
        proc = run_cli(
            review_args(feature_repo.path, server.api_base, "--json", str(report_path), "--max-calls", "2"),
            cwd=tmp_path,
            env=cli_env(tmp_path),
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(report_path.read_text())
        assert server.refused == []
        assert [[m["role"] for m in r["messages"]] for r in server.requests] == [
            ["system", "user"],
            ["system", "user", "assistant", "user"],
        ]
        assert report["budget"]["used"]["calls"] == len(server.requests) == 2
        assert report["verdict"] == "clean"


# --- keys ---------------------------------------------------------------------------------------


def test_api_base_with_an_empty_key_sends_a_placeholder_that_a_keyless_server_ignores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")  # what the Action gives for a missing secret
    with FakeModelServer() as server:
        server.handler = lambda body: text(ANSWER)
        client, budget = client_for(server)
        assert client.credentials_missing() == []
        value, _ = client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert value == {"findings": []}
        (headers,) = server.request_headers
        assert headers["authorization"].startswith("Bearer ") and headers["authorization"] != "Bearer "
        assert budget.report().used.calls == 1


def test_a_server_that_requires_a_key_gets_the_configured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-secret")
    with FakeModelServer(require_key="sk-local-secret") as server:
        server.handler = lambda body: text(ANSWER)
        client, _ = client_for(server)
        client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert server.refused == [] and len(server.requests) == 1


def test_a_wrong_key_is_refused_once_and_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with FakeModelServer(require_key="sk-local-secret") as server:
        client, budget = client_for(server)
        with pytest.raises(ModelConfigError, match="Invalid API Key"):
            client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert server.refused == server.requests and len(server.requests) == 1
        assert budget.report().used.calls == 1


def test_a_hosted_model_with_an_empty_key_is_no_credentials_and_never_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with FakeModelServer() as server:
        server.handler = lambda body: text(ANSWER)
        monkeypatch.setenv("OPENAI_BASE_URL", server.api_base)  # where litellm would go if it were asked
        client, budget = client_for(None)
        assert client.credentials_missing() == ["OPENAI_API_KEY"]
        with pytest.raises(ModelConfigError, match="OPENAI_API_KEY is unset or empty"):
            client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert server.requests == []
        assert budget.report().used.calls == 0


def test_the_review_of_a_hosted_model_with_an_empty_key_is_a_no_credentials_gap(
    feature_repo: Repo, tmp_path: Path
) -> None:
    with FakeModelServer() as server:
        server.handler = lambda body: text(ANSWER)
        report_path = tmp_path / "report.json"
        env = cli_env(tmp_path, {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": server.api_base})
        proc = run_cli(
            # no --api-base: the model is reached through OPENAI_BASE_URL
            [
                *("review", str(feature_repo.path), "--base", "main", "--json", str(report_path)),
                *("--model", "openai/gpt-4o-mini"),
            ],
            cwd=tmp_path,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(report_path.read_text())
        assert server.requests == []
        (gap,) = [g for g in report["gaps"] if g["why"] == "no_credentials"]
        assert "OPENAI_API_KEY" in gap["what"]
        assert report["verdict"] == "incomplete"
        assert report["budget"]["used"]["calls"] == 0


# --- answers cut at max_tokens ------------------------------------------------------------------

LONG_ANSWER = json.dumps({"findings": [{"title": "x" * 40, "observation": "y" * 200}] * 4})


def test_a_cut_answer_is_asked_again_with_twice_the_room() -> None:
    with FakeModelServer(cut_at_max_tokens=True) as server:
        server.handler = lambda body: text(LONG_ANSWER, completion_tokens=700)
        client, budget = client_for(server, max_output_tokens_per_call=512)
        value, completions = client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert len(value["findings"]) == 4
        assert [r["max_tokens"] for r in server.requests] == [512, 1024]
        assert [c.finish_reason for c in completions] == ["length", "stop"]
        assert server.requests[1]["messages"] == server.requests[0]["messages"]
        assert budget.report().by_phase["repair"].calls == 1


def test_a_cut_answer_without_room_for_more_asks_for_fewer_findings() -> None:
    def answer(body: dict[str, Any]) -> Reply:
        if len(body["messages"]) > 2:
            return text(ANSWER, completion_tokens=20)
        return text(LONG_ANSWER, completion_tokens=700)

    with FakeModelServer(cut_at_max_tokens=True) as server:
        server.handler = answer
        client, _ = client_for(server, Limits(output_tokens=1000), max_output_tokens_per_call=512)
        value, _ = client.complete_json(
            MESSAGES, phase="review", parse=parse_json, repair_prompt=repair_prompt
        )
        assert value == {"findings": []}
        first, retry = server.requests
        assert retry["max_tokens"] <= first["max_tokens"] == 512
        assert [m["role"] for m in retry["messages"]] == ["system", "user", "assistant", "user"]
        assert "cut at 512 tokens" in retry["messages"][-1]["content"]
        assert "at most 3 findings" in retry["messages"][-1]["content"]


def test_an_answer_cut_twice_is_unparsed_and_says_it_was_cut() -> None:
    with FakeModelServer(cut_at_max_tokens=True) as server:
        server.handler = lambda body: text(LONG_ANSWER, completion_tokens=5000)
        client, _ = client_for(server, max_output_tokens_per_call=512)
        with pytest.raises(AnswerUnparsed, match="cut at 512 tokens") as unparsed:
            client.complete_json(MESSAGES, phase="review", parse=parse_json)
        message = str(unparsed.value)
        assert "cut at 512 tokens" in message and "again at 1024" in message
        assert "max_output_tokens_per_call" in message
        assert len(server.requests) == 2


# --- llama.cpp's usage and timings ----------------------------------------------------------------


def test_llama_cpp_usage_is_what_the_budget_records_and_timings_do_not_disturb() -> None:
    with FakeModelServer([llama_cpp_text(ANSWER, prompt_tokens=77, completion_tokens=9)]) as server:
        client, budget = client_for(server)
        value, (completion,) = client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert value == {"findings": []}
        assert (completion.input_tokens, completion.output_tokens) == (77, 9)
        assert completion.input_estimate > 0 and completion.input_estimate != 77
        used = budget.report().used
        assert (used.input_tokens, used.output_tokens, used.calls) == (77, 9, 1)


# --- slow calls and reasoning tokens --------------------------------------------------------------


def test_a_call_slower_than_request_timeout_names_the_timeout_and_how_to_raise_it() -> None:
    with FakeModelServer(handler=lambda body: delayed(3, text(ANSWER))) as server:
        client, _ = client_for(server, request_timeout=1.0)
        with pytest.raises(ModelError, match="no answer within 1 s") as failed:
            client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert len(server.requests) <= 3  # at most three attempts, none waited out past the timeout
        message = str(failed.value)
        assert "no answer within 1 s" in message
        assert "request_timeout" in message and "--request-timeout" in message


def test_the_default_timeout_grows_with_the_answer_and_prompt_and_stays_within_the_time_left() -> None:
    client, _ = client_for(None, api_base="http://127.0.0.1:9/v1")
    small, _ = client._timeout(256)
    large, _ = client._timeout(4096)
    long_prompt, _ = client._timeout(256, 4000)
    assert 60 < small < large <= 600 and small < long_prompt <= 600
    tight, _ = client_for(None, Limits(seconds=30), api_base="http://127.0.0.1:9/v1")
    assert tight._timeout(4096) == (pytest.approx(30, abs=1), True)


def test_reasoning_tokens_reported_apart_count_in_the_output_budget() -> None:
    body = json.loads(text(ANSWER, completion_tokens=12).body)
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 400}
    apart = Reply(200, json.dumps(body).encode(), (("Content-Type", "application/json"),))
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 8}
    inside = Reply(200, json.dumps(body).encode(), (("Content-Type", "application/json"),))
    with FakeModelServer([apart, inside]) as server:
        client, budget = client_for(server)
        _, (first,) = client.complete_json(MESSAGES, phase="review", parse=parse_json)
        _, (second,) = client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert (first.output_tokens, second.output_tokens) == (412, 12)
        assert budget.report().used.output_tokens == 424


# --- answers in reasoning_content (a reasoning parser on the server) ------------------------------

DIVISION = model_finding(
    path="lib/util.py",
    line=2,
    priority="P1",
    title="Division by zero",
    observation="div(1, 0) raises ZeroDivisionError",
    suggestion="check b before dividing",
    quote="return a / b",
)
THINKING = "Looking at `div(a, b)`: items[0] and {b} may be zero; [a, b] is the pair. " * 20


def test_the_reasoning_parser_moves_thinking_out_of_content_as_vllm_does() -> None:
    replies = [text(f"<think>{THINKING}</think>\n{ANSWER}"), text(f"{THINKING}{ANSWER}")]
    with FakeModelServer(replies, reasoning_parser=True) as server:
        closed = post(server, {"model": "fake-model", "messages": MESSAGES})[1]["choices"][0]["message"]
        never_closed = post(server, {"model": "fake-model", "messages": MESSAGES})[1]["choices"][0]["message"]
    assert (closed["content"], closed["reasoning_content"]) == (ANSWER, THINKING.strip())
    assert (never_closed["content"], never_closed["reasoning_content"]) == (
        None,
        f"{THINKING}{ANSWER}".strip(),
    )


def test_a_review_answered_inside_the_reasoning_is_read_not_incomplete(
    feature_repo: Repo, tmp_path: Path
) -> None:
    """DeepSeek-R1 / Qwen3 behind vLLM's `--reasoning-parser`: each JSON answer (the review's, the
    verification's) arrives in `reasoning_content` after a long thinking full of brackets, and
    `content` is null."""

    def thought(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.MULTILINE)
        verdicts = [{"id": id, "holds": True, "reason": "b may be 0"} for id in ids]
        json_answer = json.dumps({"verdicts": verdicts}) if ids else model_answer(DIVISION)
        answer = f"{THINKING}\nSo the answer is:\n{json_answer}"
        return text(answer, completion_tokens=len(answer) // 4)

    with FakeModelServer(handler=thought, reasoning_parser=True) as server:
        report_path = tmp_path / "report.json"
        proc = run_cli(
            review_args(feature_repo.path, server.api_base, "--json", str(report_path)),
            cwd=tmp_path,
            env=cli_env(tmp_path),
        )
        report = json.loads(report_path.read_text())
    assert proc.returncode == 0, proc.stderr
    assert report["verdict"] == "findings"
    assert [(f["path"], f["line"], f["title"], f["verified"]) for f in report["findings"]] == [
        ("lib/util.py", 2, "Division by zero", True)
    ]
    calls = {phase: used["calls"] for phase, used in report["budget"]["by_phase"].items() if used["calls"]}
    assert calls == {"review": 1, "verify": 1}  # no repair: each first answer was read


def test_an_answer_in_the_reasoning_is_charged_once() -> None:
    """Without usage the client counts what was sent: the reasoning that holds the answer once, not
    once as the answer and again as reasoning."""
    answer = f"{THINKING}{ANSWER}"
    replies = [text(answer, completion_tokens=0), text(answer, completion_tokens=0)]
    with FakeModelServer(replies[:1], reasoning_parser=True) as parsed, FakeModelServer(replies[1:]) as plain:
        in_reasoning = client_for(parsed)[0].complete_json(MESSAGES, phase="review", parse=parse_answer)
        in_content = client_for(plain)[0].complete_json(MESSAGES, phase="review", parse=parse_answer)
    assert in_reasoning[0] == in_content[0] == {"findings": []}
    assert in_reasoning[1][0].output_tokens == in_content[1][0].output_tokens > 0


def test_a_repair_sends_the_answer_back_without_its_thinking() -> None:
    """A long `<think>` block in content is not sent back (and paid for) as the assistant's turn, nor
    does it push the answer out of the characters a repair quotes."""
    thinking = "x" * 20_000
    with FakeModelServer([text(f"<think>{thinking}</think>\n{{oops"), text(ANSWER)]) as server:
        client, _ = client_for(server)
        value, _ = client.complete_json(
            MESSAGES, phase="review", parse=parse_json, repair_prompt=repair_prompt
        )
        assistant = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert value == {"findings": []}
    assert [m["content"] for m in assistant] == ["{oops"]


# --- the reservation and the timeout from flags and inputs ----------------------------------------


def test_the_answer_reservation_and_timeout_come_from_flags_and_inputs(
    feature_repo: Repo, tmp_path: Path
) -> None:
    settings = settings_from(
        {
            "RUNNER_TEMP": str(tmp_path),
            "GITHUB_EVENT_NAME": "workflow_dispatch",
            "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
            "GITHUB_REPOSITORY": "octo-org/widgets",
        },
        {"max-output-tokens-per-call": "300", "request-timeout": "900", "max-concurrency": "4"},
    )
    config = build_config(overrides=settings.job.overrides)
    assert (config.max_output_tokens_per_call, config.request_timeout) == (300, 900.0)
    with FakeModelServer() as server:
        server.handler = lambda body: text(model_answer())
        proc = run_cli(
            review_args(
                feature_repo.path,
                server.api_base,
                *("--json", str(tmp_path / "report.json"), "--max-output-tokens-per-call", "300"),
                *("--request-timeout", "900"),
            ),
            cwd=tmp_path,
            env=cli_env(tmp_path),
        )
        assert proc.returncode == 0, proc.stderr
        assert {r["max_tokens"] for r in server.requests} == {300}


def test_a_timed_out_unit_is_a_gap_that_says_how_to_allow_longer_calls(
    feature_repo: Repo, tmp_path: Path
) -> None:
    with FakeModelServer(handler=lambda body: delayed(5, text(ANSWER))) as server:
        report_path = tmp_path / "report.json"
        proc = run_cli(
            review_args(
                feature_repo.path, server.api_base, "--json", str(report_path), "--request-timeout", "1"
            ),
            cwd=tmp_path,
            env=cli_env(tmp_path),
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(report_path.read_text())
        (gap,) = [g for g in report["gaps"] if g["why"] == "model_error" and not g.get("path")]
        assert "no answer within 1 s" in gap["what"] and "request-timeout" in gap["what"]
        assert report["verdict"] == "incomplete"
        assert report["budget"]["used"]["calls"] == 3
        assert 1 <= len(server.requests) <= 3  # on a loaded machine 1 s may pass before one is sent


def test_the_window_probe_and_the_count_do_not_follow_a_redirect_with_the_key() -> None:
    """urllib resends `Authorization` to wherever a redirect points; the key is for `api-base` only."""
    from http.server import BaseHTTPRequestHandler

    from reviewer.model_facts import probe_window, server_count
    from tests.fakes.loopback import LoopbackServer

    seen: list[str | None] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = b'{"data": [{"id": "m", "max_model_len": 4096}], "count": 12, "tokens": [1, 2]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    elsewhere = LoopbackServer(Elsewhere, name="elsewhere")

    class Redirecting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.port}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    redirecting = LoopbackServer(Redirecting, name="redirecting")
    try:
        base = f"http://127.0.0.1:{redirecting.port}/v1"
        assert probe_window(base, "m", "sk-secret") is None
        assert server_count(base, "m", [{"role": "user", "content": "hi"}], "sk-secret", 2.0) is None
        assert seen == []
    finally:
        redirecting.stop()
        elsewhere.stop()


def test_a_negative_prompt_count_is_charged_as_reserved_not_credited() -> None:
    """A broken server's `prompt_tokens: -5` was recorded as -5 input tokens: room freed under
    `max-input-tokens` by a call that used some."""
    with FakeModelServer([llama_cpp_text(ANSWER, prompt_tokens=-5, completion_tokens=9)]) as server:
        client, budget = client_for(server)
        _, (completion,) = client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert completion.input_tokens == completion.input_estimate > 0
        assert budget.report().used.input_tokens == completion.input_estimate
