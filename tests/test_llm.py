"""The model client against a loopback OpenAI-compatible server, through litellm's real HTTP path."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reviewer.budget import Budget, BudgetExhausted, Limits
from reviewer.config import Config, Prices
from reviewer.errors import ConfigError, ModelConfigError, ModelError
from reviewer.llm import AnswerUnparsed, ModelClient
from tests.fakes.model_server import FakeModelServer, Reply, delayed, malformed, status, text

MODEL = "openai/fake-model"
ANSWER = '{"findings": []}'
MESSAGES = [
    {"role": "system", "content": "You review diffs. Answer with JSON only."},
    {"role": "user", "content": "diff --git a/x.py b/x.py\n+print('hi')\n"},
]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


class Harness:
    def __init__(self, server: FakeModelServer, limits: Limits, **config: Any) -> None:
        config.setdefault("model", MODEL)
        if "api_base" not in config:
            config["api_base"] = server.api_base
        self.config = Config(limits=limits, **config)
        self.budget = Budget(limits)
        self.warnings: list[str] = []
        self.sleeps: list[float] = []
        self.client = ModelClient(
            self.config, self.budget, warn=self.warnings.append, sleep=self.sleeps.append
        )


def harness(server: FakeModelServer, limits: Limits | None = None, **config: Any) -> Harness:
    return Harness(server, limits or Limits(), **config)


def parse_json(text: str) -> dict[str, Any]:
    """Accept an answer wrapped in a ```json fence, as the findings parser does."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1].rsplit("```", 1)[0]
    value = json.loads(body)
    if not isinstance(value, dict):
        raise ValueError("the answer is not a JSON object")
    return value


def test_good_answer_is_parsed_and_its_usage_recorded(server: FakeModelServer) -> None:
    server.queue(text(ANSWER, prompt_tokens=42, completion_tokens=7))
    h = harness(server)
    value, completions = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert value == {"findings": []}
    assert [(c.model, c.input_tokens, c.output_tokens, c.finish_reason) for c in completions] == [
        (MODEL, 42, 7, "stop")
    ]
    (request,) = server.requests
    assert request["model"] == "fake-model"
    assert request["messages"] == MESSAGES
    assert request["temperature"] == 0
    assert "response_format" not in request
    used = h.budget.report().used
    assert (used.calls, used.input_tokens, used.output_tokens) == (1, 42, 7)


def test_fenced_json_is_handled_by_the_parse_function(server: FakeModelServer) -> None:
    server.queue(text('```json\n{"findings": [{"title": "x"}]}\n```'))
    value, completions = harness(server).client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert value == {"findings": [{"title": "x"}]}
    assert len(completions) == 1
    assert len(server.requests) == 1


def test_invalid_json_gets_exactly_one_repair_call(server: FakeModelServer) -> None:
    server.queue(
        text("Sure! Here are my findings: none."), text(ANSWER, prompt_tokens=60, completion_tokens=4)
    )
    h = harness(server)
    value, completions = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert value == {"findings": []}
    assert len(server.requests) == 2
    assert len(completions) == 2
    repair = server.requests[1]["messages"]
    assert repair[: len(MESSAGES)] == MESSAGES
    assert repair[-2] == {"role": "assistant", "content": "Sure! Here are my findings: none."}
    assert repair[-1]["role"] == "user"
    assert "not valid JSON" in repair[-1]["content"]
    assert "only the JSON object" in repair[-1]["content"]
    phases = h.budget.report().by_phase
    assert (phases["review"].calls, phases["repair"].calls) == (1, 1)
    assert phases["repair"].input_tokens == 60


def test_an_answer_that_stays_invalid_after_repair_is_reported_unparsed(server: FakeModelServer) -> None:
    server.queue(text("not json"), text("still {not json"))
    with pytest.raises(AnswerUnparsed, match="did not parse, even after one repair") as unparsed:
        harness(server).client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert isinstance(unparsed.value, ModelError)
    assert unparsed.value.raw_text == "still {not json"
    assert len(server.requests) == 2


def test_rate_limit_with_retry_after_is_retried(server: FakeModelServer) -> None:
    server.queue(status(429, retry_after="0"), text(ANSWER))
    h = harness(server)
    value, completions = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert value == {"findings": []}
    assert len(server.requests) == 2
    assert h.sleeps == [0.0]
    assert len(completions) == 1
    assert h.budget.report().used.calls == 2


def test_retry_after_seconds_are_honoured_and_backoff_grows_without_it(server: FakeModelServer) -> None:
    server.queue(status(429, retry_after="7"), status(503), text(ANSWER))
    h = harness(server)
    h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert h.sleeps == [7.0, 2.0]
    assert len(server.requests) == 3


def test_retry_after_beyond_the_seconds_budget_is_not_waited_for(server: FakeModelServer) -> None:
    server.queue(status(429, retry_after="3600"), text(ANSWER))
    h = harness(server, Limits(seconds=60))
    with pytest.raises(ModelError, match="fake-model"):
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert h.sleeps == []
    assert len(server.requests) == 1


def test_server_errors_three_times_then_the_fallback_model_answers(server: FakeModelServer) -> None:
    server.queue(status(500), status(500), status(500), text(ANSWER))
    h = harness(server, fallback_models=("openai/backup-model",))
    value, completions = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert value == {"findings": []}
    assert [r["model"] for r in server.requests] == ["fake-model"] * 3 + ["backup-model"]
    assert [c.model for c in completions] == ["openai/backup-model"]
    assert h.budget.report().used.calls == 4


def test_auth_error_falls_back_at_once(server: FakeModelServer) -> None:
    server.queue(status(401), text(ANSWER))
    h = harness(server, fallback_models=("openai/backup-model",))
    h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert [r["model"] for r in server.requests] == ["fake-model", "backup-model"]
    assert h.sleeps == []


def test_when_every_model_fails_the_error_names_them_and_the_last_error(server: FakeModelServer) -> None:
    server.queue(status(404, message="no such model"), status(400, message="bad things in the request"))
    h = harness(server, fallback_models=("openai/backup-model",))
    with pytest.raises(ModelConfigError, match="openai/fake-model") as failed:
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    message = str(failed.value)
    assert "openai/fake-model" in message
    assert "openai/backup-model" in message
    assert "bad things in the request" in message


def test_malformed_answer_body_is_retried(server: FakeModelServer) -> None:
    server.queue(malformed(), text(ANSWER))
    value, _ = harness(server).client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert value == {"findings": []}
    assert len(server.requests) == 2


def test_unreachable_server_is_a_model_error_after_three_attempts() -> None:
    with FakeModelServer() as gone:
        api_base = gone.api_base
    h = Harness(gone, Limits(), api_base=api_base)
    with pytest.raises(ModelError, match="openai/fake-model") as failed:
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert not isinstance(failed.value, ModelConfigError)
    assert h.sleeps == [1.0, 2.0]
    assert h.budget.report().used.calls == 3


def test_a_timeout_is_a_model_error_within_the_seconds_budget(server: FakeModelServer) -> None:
    server.queue(delayed(30))
    importlib.import_module("litellm")  # a loaded machine can take seconds here; not this test's subject
    h = harness(server, Limits(seconds=2))
    with pytest.raises(ModelError, match="fake-model"):
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert len(server.requests) == 1, "a client that ignored the 2 s budget would get the answer at 30 s"
    assert not any(s >= 2 for s in h.sleeps)


def test_max_tokens_is_always_sent_and_never_above_the_output_tokens_left(server: FakeModelServer) -> None:
    server.queue(text(ANSWER, completion_tokens=300), text(ANSWER, completion_tokens=10))
    h = harness(server, Limits(output_tokens=1000))
    for _ in range(2):
        expected = h.budget.output_tokens_left()
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert server.requests[-1]["max_tokens"] == expected
    # max_tokens is a cap the provider enforces, so it is held without a margin (issue 6 item 4)
    assert [r["max_tokens"] for r in server.requests] == [1000, 700]


def test_max_tokens_is_capped_per_call_and_by_the_model(server: FakeModelServer) -> None:
    server.handler = lambda body: text(ANSWER)
    harness(server).client.complete_json(MESSAGES, phase="review", parse=parse_json)
    big = Limits(output_tokens=1_000_000)
    harness(server, big, model="openai/gpt-4o-mini", max_output_tokens_per_call=100_000).client.complete_json(
        MESSAGES, phase="review", parse=parse_json
    )
    assert [r["max_tokens"] for r in server.requests] == [4096, 16384]


def test_too_few_output_tokens_left_is_budget_exhaustion_without_a_request(server: FakeModelServer) -> None:
    h = harness(server, Limits(output_tokens=250))
    with pytest.raises(BudgetExhausted, match="output_tokens") as refused:
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert refused.value.limit == "output_tokens"
    assert server.requests == []
    assert h.budget.report().exhausted


def test_a_call_the_budget_refuses_is_never_sent(server: FakeModelServer) -> None:
    h = harness(server, Limits(calls=1))
    server.queue(text("oops"), text(ANSWER))
    with pytest.raises(BudgetExhausted, match="calls") as refused:
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert refused.value.limit == "calls"
    assert len(server.requests) == 1


def test_unknown_price_gives_unknown_cost_and_one_warning(server: FakeModelServer) -> None:
    server.handler = lambda body: text(ANSWER)
    h = harness(server)
    _, completions = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert completions[0].cost_usd is None
    assert h.budget.report().used.cost_usd is None
    price_warnings = [w for w in h.warnings if "price" in w]
    assert len(price_warnings) == 1
    assert "openai/fake-model" in price_warnings[0]
    assert "cost" in price_warnings[0]


def test_configured_prices_give_the_exact_cost(server: FakeModelServer) -> None:
    server.queue(text(ANSWER, prompt_tokens=42, completion_tokens=7))
    h = harness(server, prices={MODEL: Prices(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)})
    _, (completion,) = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert completion.cost_usd == pytest.approx(42e-6 + 14e-6, rel=1e-12)
    assert h.budget.report().used.cost_usd == pytest.approx(5.6e-05, rel=1e-12)
    assert not [w for w in h.warnings if "completion tokens" in w]


def test_cost_limit_refuses_a_priced_call_before_sending(server: FakeModelServer) -> None:
    h = harness(server, Limits(cost_usd=0.001), prices={MODEL: Prices(10.0, 30.0)})
    with pytest.raises(BudgetExhausted, match="cost_usd") as refused:
        h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert refused.value.limit == "cost_usd"
    assert server.requests == []


def test_known_model_is_priced_from_litellm_and_asked_for_the_schema(server: FakeModelServer) -> None:
    server.queue(text(ANSWER, prompt_tokens=1000, completion_tokens=100))
    h = harness(server, model="openai/gpt-4o-mini")
    schema = {"type": "object", "properties": {"findings": {"type": "array"}}}
    _, (completion,) = h.client.complete_json(
        MESSAGES, phase="review", parse=parse_json, response_schema=schema
    )
    assert completion.cost_usd == pytest.approx(1000 * 1.5e-07 + 100 * 6e-07)
    (request,) = server.requests
    assert request["model"] == "gpt-4o-mini"
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["schema"] == schema


def test_unknown_model_is_not_asked_for_a_schema(server: FakeModelServer) -> None:
    server.queue(text(ANSWER))
    harness(server).client.complete_json(
        MESSAGES, phase="review", parse=parse_json, response_schema={"type": "object"}
    )
    assert "response_format" not in server.requests[0]


def test_context_window_of_an_unknown_model_is_8192_with_a_warning(server: FakeModelServer) -> None:
    h = harness(server, fallback_models=("openai/gpt-4o-mini",))
    assert h.client.context_window() == 8192
    assert h.client.context_window() == 8192
    assert len(h.warnings) == 1
    assert "openai/fake-model" in h.warnings[0]
    assert "8192" in h.warnings[0]


def test_context_window_is_the_smallest_in_the_chain_or_the_configured_one(server: FakeModelServer) -> None:
    known = harness(server, model="anthropic/claude-sonnet-4-5", fallback_models=("openai/gpt-4o-mini",))
    assert known.client.context_window() == 128_000
    configured = harness(server, context_window=32_000)
    assert configured.client.context_window() == 32_000
    assert known.warnings == configured.warnings == []


def test_a_servers_window_is_never_believed_above_what_the_model_can_take() -> None:
    """vLLM says 1,000,000 for a model litellm's map knows at 128,000: the plan is sized for 128,000;
    a window below the model's is the server's, as it was started with."""
    with FakeModelServer(models_max_len=1_000_000, served_model="gpt-4o-mini") as big:
        h = harness(big, model="openai/gpt-4o-mini")
        assert h.client.window() == (128_000, "litellm")
    with FakeModelServer(models_max_len=8192, served_model="gpt-4o-mini") as small:
        assert harness(small, model="openai/gpt-4o-mini").client.window() == (8192, "server")
    with FakeModelServer(models_max_len=1_000_000) as unknown:
        assert harness(unknown).client.window() == (1_000_000, "server")


def test_credentials_missing_names_the_provider_key(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert harness(server, api_base=None).client.credentials_missing() == ["OPENAI_API_KEY"]
    assert harness(server).client.credentials_missing() == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-present")
    assert harness(server, api_base=None).client.credentials_missing() == []


def test_api_base_without_a_key_sends_a_placeholder_and_leaves_the_environment_alone(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.handler = lambda body: text(ANSWER)
    harness(server).client.complete_json(MESSAGES, phase="review", parse=parse_json)
    assert "OPENAI_API_KEY" not in os.environ
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    harness(server).client.complete_json(MESSAGES, phase="review", parse=parse_json)
    auth = [h["authorization"] for h in server.request_headers]
    assert auth[0].startswith("Bearer ") and auth[0] != "Bearer sk-from-env"
    assert auth[1] == "Bearer sk-from-env"


def test_count_tokens_works_offline(server: FakeModelServer) -> None:
    client = harness(server).client
    assert 0 < client.count_tokens("def f(x):\n    return x + 1\n") < 30


def test_parallel_workers_never_send_more_calls_than_the_budget(server: FakeModelServer) -> None:
    def slow_answer(body: dict[str, Any]) -> Reply:
        return delayed(0.05, text(ANSWER))

    server.handler = slow_answer
    h = harness(server, Limits(calls=5, output_tokens=1_000_000))
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
            outcome = "ok"
        except BudgetExhausted as error:
            outcome = error.limit
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["calls"] * 3 + ["ok"] * 5
    assert len(server.requests) == 5


def test_a_client_needs_a_model() -> None:
    with pytest.raises(ConfigError, match="model") as missing:
        ModelClient(Config(), Budget(Limits()), warn=print)
    assert "model" in str(missing.value)


def test_importing_the_module_does_not_import_litellm() -> None:
    code = "import sys, reviewer.llm; assert 'litellm' not in sys.modules, 'litellm imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_an_answer_far_larger_than_its_reported_usage_is_charged_its_own_size(
    server: FakeModelServer,
) -> None:
    """A server cannot evade the budget by under-reporting: 4 MB reported as 5 completion tokens is
    charged what the answer counts locally, the overrun is disclosed, and one warning says why."""
    huge = json.dumps({"findings": [], "note": "overflow " * 450_000})
    server.queue(text(huge, prompt_tokens=42, completion_tokens=5))
    h = harness(server, Limits(output_tokens=24_000))
    _, (completion,) = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
    local = h.client.count_tokens(huge)
    assert local > 400_000 and completion.output_tokens == local
    report = h.budget.report()
    assert report.used.output_tokens == local
    assert [(o.limit, o.used) for o in report.overrun] == [("output_tokens", local)]
    assert [w for w in h.warnings if "completion tokens" in w] == [
        f"model '{MODEL}' reported 5 completion tokens for an answer counted locally as {local}: "
        f"charged {local}"
    ]


def test_a_plausible_usage_report_is_charged_as_reported(server: FakeModelServer) -> None:
    """Tokenizers differ: a report within a factor of two of the local count is the provider's bill."""
    answer = json.dumps({"findings": [], "note": "a short answer with a few words in it " * 20})
    local = len(answer.encode()) // 4
    server.queue(text(answer, completion_tokens=local // 2 + 1), text(answer, completion_tokens=local * 3))
    h = harness(server)
    for expected in (local // 2 + 1, local * 3):
        _, (completion,) = h.client.complete_json(MESSAGES, phase="review", parse=parse_json)
        assert completion.output_tokens == expected
    assert not [w for w in h.warnings if "completion tokens" in w]


def test_an_openai_model_is_counted_exactly_from_the_first_plan_of_a_process() -> None:
    """The margin is decided before the first count: it must not depend on whether something in the
    process already made litellm set up its offline tokenizer files (was: 10 % of a fresh run's
    input budget held back for gpt-4o-mini)."""
    code = (
        "from reviewer.budget import Budget, Limits\n"
        "from reviewer.config import Config\n"
        "from reviewer.llm import ModelClient\n"
        "client = ModelClient(Config(model='openai/gpt-4o-mini'), Budget(Limits()), warn=print)\n"
        "print(client.margin_percent())\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "CUSTOM_TIKTOKEN_CACHE_DIR")
    }
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "100"
