"""Model calls through litellm: budget-aware, with our own retries, fallbacks and one JSON repair.

The only module that imports litellm, and only inside functions: importing it costs seconds and
fetches a cost map unless told not to, so `--help` and rendering never pay for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import functools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from reviewer import model_facts
from reviewer.answer_json import last_answer, without_thinking
from reviewer.budget import EXACT_MARGIN_PERCENT, UNCERTAIN_MARGIN_PERCENT, Budget, Reservation, plausible
from reviewer.config import Config
from reviewer.errors import (
    AnswerUnparsed,
    BudgetExhausted,
    CallTimedOut,
    ConfigError,
    ContextExceeded,
    ModelConfigError,
    ModelError,
)

if TYPE_CHECKING:
    from reviewer.render import Say

T = TypeVar("T")

MAX_ATTEMPTS = 3
TIMEOUT_BASE_SECONDS = 60.0
TIMEOUT_SECONDS_PER_ANSWER_TOKEN = 0.1
TIMEOUT_SECONDS_PER_PROMPT_TOKEN = 0.05
"""Without `request_timeout`, a call may take 60 s plus these per answer and prompt token (a busy 2-core
CPU server reads ~30 prompt and writes ~10 answer tokens a second), within the seconds left."""
CUT_ANSWER_FINDINGS = 3
"""After an answer cut at `max_tokens` with no room for a larger one, the retry asks for at most this many."""
REPAIR_ANSWER_CHARS = 16_000
PROMPT_SAFETY_TOKENS = 64
MIN_USEFUL_MAX_TOKENS = 256
PLAUSIBLE_USAGE_RATIO = 2
"""A reported answer size below 1/this of the local count is a lie or a bug: charge the local count
(stand-in tokenizers differ from a server's by well under 2x)."""
PLAUSIBLE_USAGE_SLACK_TOKENS = 64
"""...and more than this many tokens below it: a few tokens of a short answer evade nothing."""
BACKOFF_BASE_SECONDS = 1.0
_RETRYABLE_ERRORS = (
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "Timeout",
    "APIConnectionError",
)
_CONFIG_ERRORS = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError")
_NO_CREDENTIALS = re.compile(r"missing credentials|api_key client option must be set", re.IGNORECASE)
_OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "LITELLM_OFFLINE_MODE": "true"}


def _import_litellm() -> ModuleType:
    """litellm, imported offline: the bundled cost map, no tokenizer downloads, no debug banners."""
    for name, value in _OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
    import litellm

    litellm.suppress_debug_info = True
    if hasattr(litellm, "disable_hf_tokenizer_download"):
        litellm.disable_hf_tokenizer_download = True
    return litellm


class _Preload(threading.Thread):
    """litellm's import (seconds on a 2-core runner), started while the PR is read. Not a daemon: a
    run that ends early waits for it rather than have the interpreter shut down under an import."""

    seconds: float | None = None

    def run(self) -> None:
        started = time.perf_counter()
        with contextlib.suppress(BaseException):  # `_litellm` imports again in the caller's thread
            _import_litellm()
        self.seconds = time.perf_counter() - started


_PRELOAD = _Preload(name="imreview-import-litellm")
_PRELOAD_LOCK = threading.Lock()


def preload_litellm() -> None:
    """Start importing litellm in the background (the PR path calls this before reading the diff)."""
    with _PRELOAD_LOCK:
        if _PRELOAD.ident is None:
            _PRELOAD.start()


def litellm_ready() -> tuple[float | None, float]:
    """Block until litellm is imported: (seconds the import took, seconds this call waited)."""
    started = time.perf_counter()
    preload_litellm()
    _PRELOAD.join()
    return _PRELOAD.seconds, time.perf_counter() - started


@functools.cache
def _litellm() -> ModuleType:
    """litellm once imported; a failed background import is retried here, where its error belongs."""
    litellm_ready()
    return _import_litellm()


@dataclass(frozen=True)
class Completion:
    """One answered request, in our own types so litellm's response never leaves this module."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    finish_reason: str | None
    max_tokens: int = 0
    input_estimate: int = 0


@dataclass(frozen=True)
class Continuation(Generic[T]):
    """How to ask for the rest of an answer that parsed but ended early (cut, or a malformed tail).
    `affordable`: whether the budget has room for one more call beyond the work still planned."""

    missing: Callable[[T], bool]
    prompt: Callable[[str, T], str]
    join: Callable[[T, T], T]
    affordable: Callable[[int], bool] = lambda max_tokens: True


@dataclass(frozen=True)
class _Ask:
    """What one request sends and the phase it is charged to: retried, reserved and sent as one."""

    model: str
    messages: list[dict[str, str]]
    phase: str
    response_schema: Mapping[str, Any] | None


@dataclass(frozen=True)
class _Asked(Generic[T]):
    """A model's first answer to `complete_json` and what every follow-up call asks again with."""

    ask: _Ask
    first: Completion
    parse: Callable[[str], T]
    completions: list[Completion]
    repair_prompt: Callable[[str, str], str] | None
    max_tokens: int | None
    continuation: Continuation[T] | None


@dataclass(eq=False)
class _ModelFailed(Exception):
    """This model cannot answer now: ask it again (`retryable`, after `retry_after` seconds when the
    server said), else try the next one. `config` is true for auth/not-found/400. Never shown: callers
    raise its `cause`."""

    cause: Exception
    config: bool = False
    retryable: bool = False
    retry_after: float | None = None


@dataclass(eq=False)
class _Call:
    """A request once its worst case is held in the budget, and litellm's `logger_fn` counting the HTTP
    requests it sends (`sent`): it re-sends on its own after some errors, and each is a call."""

    reservation: Reservation
    max_tokens: int
    local_estimate: int
    input_estimate: int
    price: tuple[float, float] | None
    timeout: float
    capped: bool
    sent: int = 0

    def __call__(self, details: Mapping[str, Any]) -> None:
        self.sent += details.get("log_event_type") == "pre_api_call"


def _english(key: str, default: str | None = None, **params: Any) -> str:
    """The packaged English strings, read only when a warning is worded (Jinja is not loaded before)."""
    from reviewer.render import english

    return english(key, default, **params)


class ModelClient:
    """One configured model chain (primary + fallbacks) spending from one Budget; thread-safe."""

    def __init__(
        self,
        config: Config,
        budget: Budget,
        *,
        warn: Callable[[str], None],
        say: Say | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.model:
            raise ConfigError(
                "no model configured: set `model` (--model, IMREVIEW_MODEL or the `model` input)"
            )
        self.config = config
        self.budget = budget
        self.models: tuple[str, ...] = tuple(dict.fromkeys((config.model, *config.fallback_models)))
        self._warn = warn
        self._say: Say = _english if say is None else say
        """Words the warnings (`Renderer.translate` of the report's language; English by default)."""
        self._sleep = sleep
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._facts: dict[str, model_facts.ModelFacts] = {}
        self._calibration: dict[str, model_facts.Calibration] = {}
        self._window: tuple[int, str] | None = None
        self.assumed_window: int | None = None
        """The window first assumed, when a server's answer taught us a smaller one."""
        self._per_thread = threading.local()

    def calls_in_this_thread(self) -> int:
        """Requests this thread has sent (as the budget counts them), to say what a failure cost."""
        return int(getattr(self._per_thread, "calls", 0))

    def facts(self, model: str) -> model_facts.ModelFacts:
        """What we know about `model` (window, price, tokenizer, credentials, schema), read once."""
        known = self._facts.get(model)
        return known or self._facts.setdefault(model, model_facts.read(_litellm(), model, self.config))

    def credentials_missing(self) -> list[str]:
        """Environment keys the primary model needs and lacks (a self-hosted server gets a placeholder)."""
        return [] if self.config.api_base else list(self.facts(self.models[0]).missing_keys)

    def context_window(self) -> int:
        """The smallest input window in the chain, so a unit packed for it fits every fallback."""
        return self.window()[0]

    def window(self) -> tuple[int, str]:
        """(tokens, source), found once (`model_facts.find_window`) or told by a refusal (`learned`)."""
        if self._window is None:
            window, source, unknown = model_facts.find_window(
                self.config, [self.facts(m) for m in self.models]
            )
            key = "warning.unknown_window_server" if self.config.api_base else "warning.unknown_window"
            for model in unknown:
                self._warn_once(
                    f"context:{model}",
                    self._say(key, model=repr(model), window=str(model_facts.ASSUMED_CONTEXT_WINDOW)),
                )
            with self._lock:
                self._window = self._window or (window, source)
        return self._window

    def learn_window(self, window: int) -> None:
        """Record the window a server told us in a context-exceeded answer (never grows)."""
        current = self.window()
        with self._lock:
            if window < current[0]:
                self.assumed_window = self.assumed_window or current[0]
                self._window = (window, "learned")

    def answer_cap(self) -> int:
        """The largest answer one call may ask for: the per-call setting, within every model's own cap."""
        caps = [self.config.max_output_tokens_per_call]
        caps += [cap for model in self.models if (cap := self.facts(model).max_output_tokens)]
        return max(1, min(caps))

    def margin_percent(self) -> int:
        """The reservation margin on the primary model's input counts (`_margin`)."""
        return self._margin(self.models[0])

    def _margin(self, model: str) -> int:
        """None when litellm counts with the model's own tokenizer (OpenAI models through tiktoken),
        a small one where its count is a stand-in, a smaller one once the provider calibrated it."""
        if self.calibration(model).calibrated:
            return model_facts.CALIBRATED_MARGIN_PERCENT
        return EXACT_MARGIN_PERCENT if self.facts(model).exact_tokenizer else UNCERTAIN_MARGIN_PERCENT

    def needs_calibration(self) -> bool:
        """True while the primary model's count is a stand-in no provider answer has calibrated."""
        model = self.models[0]
        return not self.facts(model).exact_tokenizer and not self.calibration(model).calibrated

    def calibration(self, model: str) -> model_facts.Calibration:
        return self._calibration.get(model, model_facts.Calibration())

    def _calibrate(self, model: str, estimated: int, reported: int) -> None:
        """Learn from the provider's prompt count of an answered request (stand-in tokenizers only)."""
        if reported <= 0 or estimated <= 0 or self.facts(model).exact_tokenizer:
            return
        with self._lock:
            self._calibration[model] = self.calibration(model).add(estimated, reported)

    def count_with_provider(self, messages: Sequence[Mapping[str, str]]) -> bool:
        """Calibrate the primary model's stand-in count with the provider's count of a prompt before it
        is sent (`model_facts.provider_count`), recorded in the ledger. True when now calibrated."""
        model = self.models[0]
        timeout = min(model_facts.COUNT_TIMEOUT_SECONDS, self.budget.seconds_left() / 2)
        if not self.needs_calibration() or timeout < 0.1:
            return False
        sent = alternating(messages)
        try:
            key = model_facts.api_key(self.facts(model), self.config)
        except LookupError:
            return False
        litellm = _litellm()
        counted = model_facts.provider_count(
            litellm, model, sent, api_base=self.config.api_base, api_key=key, timeout=timeout
        )
        if counted is None:
            return False
        local = model_facts.count(litellm, model, messages=sent)
        # trusted upward only: the endpoint that counts is not the one that bills, so a count below
        # our own confirms ours (margin 3 %) but never makes the first calls hold less than it
        trusted = max(counted, local) if plausible(local, counted) else counted
        self._calibrate(model, local, trusted)
        calibrated = self.calibration(model).calibrated
        self.budget.record_count(local, counted, trusted if calibrated else local)
        return calibrated

    def count_request(
        self, messages: Sequence[Mapping[str, str]], response_schema: Mapping[str, Any] | None = None
    ) -> int:
        """Tokens of a request as the primary model will count it (calibrated, when it can be)."""
        model = self.models[0]
        return self.calibration(model).apply(self._count_local(model, messages, response_schema))

    def _count_local(
        self, model: str, messages: Sequence[Mapping[str, str]], response_schema: Mapping[str, Any] | None
    ) -> int:
        """The messages with their framing, plus the schema when it goes out as `response_format`."""
        tokens = model_facts.count(_litellm(), model, messages=messages)
        if response_schema is not None and self.facts(model).supports_schema:
            tokens += model_facts.count(_litellm(), model, text=json.dumps(dict(response_schema)))
        return tokens

    def count_tokens(self, text: str) -> int:
        """A text's tokens for the primary model, counted locally."""
        return model_facts.count(_litellm(), self.models[0], text=text)

    def count_tokens_calibrated(self, text: str) -> int:
        """`count_tokens` as the provider will count it (`calibration`), for the planner."""
        return self.calibration(self.models[0]).apply(self.count_tokens(text))

    def price(self, model: str) -> tuple[float, float] | None:
        """(input, output) USD per token: configured prices first, then litellm's bundled map."""
        price = self.facts(model).price
        if price is None:
            self._warn_once(f"price:{model}", self._say("warning.no_price", model=repr(model)))
        return price

    def sends_schema(self) -> bool:
        """Whether every model of the chain gets the schema, so a prompt can leave the shape to it."""
        return all(self.facts(model).supports_schema for model in self.models)

    def _warn_once(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._warn(message)

    def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        phase: str,
        parse: Callable[[str], T],
        response_schema: Mapping[str, Any] | None = None,
        repair_prompt: Callable[[str, str], str] | None = None,
        max_tokens: int | None = None,
        continuation: Continuation[T] | None = None,
    ) -> tuple[T, list[Completion]]:
        """Ask the chain for an answer `parse` accepts (else it raises ValueError), repairing it once,
        continuing one that ended early when a `continuation` says how and the budget allows. `parse`
        must validate even with `response_schema`. Raises BudgetExhausted, ContextExceeded (the caller
        re-splits), AnswerUnparsed, ModelError (ModelConfigError when no model was usable at all)."""
        failures: list[_ModelFailed] = []
        for model in self.models:
            ask = _Ask(model, messages, phase, response_schema)
            try:
                first = self._complete_with_retries(ask, max_tokens)
            except _ModelFailed as failed:
                failures.append(failed)
                continue
            asked = _Asked(ask, first, parse, [first], repair_prompt, max_tokens, continuation)
            return self._followed_up(asked)
        last = failures[-1].cause
        message = f"model call failed for {', '.join(self.models)}; last error: {_short(last)}"
        if all(failed.config for failed in failures):
            raise ModelConfigError(message) from last
        raise ModelError(message) from last

    def _followed_up(self, asked: _Asked[T]) -> tuple[T, list[Completion]]:
        """The first answer as `complete_json` returns it: a cut one that did not parse asked again
        with more room, any other repaired once, a parsed but incomplete one continued."""
        try:
            value = asked.parse(asked.first.text)
        except ValueError as error:
            if asked.first.finish_reason == "length":
                return self._retry_cut(asked)
            return self._repair(asked, error)
        if asked.continuation is not None and asked.continuation.missing(value):
            value = self._continue(asked, value, asked.continuation)
        return value, asked.completions

    def _repair(self, asked: _Asked[T], error: ValueError) -> tuple[T, list[Completion]]:
        model = asked.ask.model
        second = self._follow_up(asked, _short(error), asked.repair_prompt, asked.max_tokens)
        if isinstance(second, Exception):
            raise AnswerUnparsed(
                asked.first.text,
                f"answer from {model} did not parse ({_short(error)}) and the repair call failed: "
                f"{_short(second)}",
            ) from second
        asked.completions.append(second)
        try:
            return asked.parse(second.text), asked.completions
        except ValueError as again:
            raise AnswerUnparsed(
                second.text, f"answer from {model} did not parse, even after one repair: {_short(again)}"
            ) from again

    def _continue(self, asked: _Asked[T], value: T, continuation: Continuation[T]) -> T:
        """One call for the rest of an answer; what the first one holds is kept whatever happens."""
        room = self._max_tokens(asked.ask.model, asked.max_tokens)
        if room < min(MIN_USEFUL_MAX_TOKENS, self.config.max_output_tokens_per_call) or not (
            continuation.affordable(room)
        ):
            return value
        prompt = continuation.prompt(asked.first.text, value)
        try:
            second = self._follow_up(asked, "", lambda _a, _b: prompt, asked.max_tokens)
        except (BudgetExhausted, ContextExceeded):
            return value
        if isinstance(second, Exception):
            return value
        asked.completions.append(second)
        with contextlib.suppress(ValueError):  # an unparsable continuation adds nothing
            value = continuation.join(value, asked.parse(second.text))
        return value

    def _retry_cut(self, asked: _Asked[T]) -> tuple[T, list[Completion]]:
        """A cut answer asked for again with twice the room when the model and the budget allow it,
        else for at most CUT_ANSWER_FINDINGS findings: a repair in the same room would be cut again."""
        first = asked.first
        cut_at = first.max_tokens or first.output_tokens
        cut = f"the answer was cut at {cut_at} tokens (max_tokens)"
        window_room = self.context_window() - first.input_tokens - PROMPT_SAFETY_TOKENS
        larger = min(2 * cut_at, self._answer_room(asked.ask.model), window_room)
        try:
            if larger >= cut_at + cut_at // 2:
                retry = dataclasses.replace(asked.ask, phase="repair")
                second: Completion | Exception = self._complete_with_retries(retry, answer_tokens=larger)
            else:
                reason = (
                    f"{cut}; answer again with at most {CUT_ANSWER_FINDINGS} findings, "
                    "the most important first, each as short as it can be"
                )
                second = self._follow_up(asked, reason, asked.repair_prompt, None)
        except BudgetExhausted as refused:
            raise AnswerUnparsed(
                first.text, f"{cut} and the budget has no room for a retry ({refused.limit})"
            ) from refused
        except ContextExceeded as refused:
            detail = f"{cut} and the retry did not fit the server's window"
            raise AnswerUnparsed(first.text, detail) from refused
        except _ModelFailed as failed:
            second = failed.cause
        if isinstance(second, Exception):
            raise AnswerUnparsed(first.text, f"{cut} and the retry failed: {_short(second)}") from second
        asked.completions.append(second)
        try:
            return asked.parse(second.text), asked.completions
        except ValueError as again:
            if second.finish_reason == "length":
                detail = (
                    f"{cut}, and again at {second.max_tokens or second.output_tokens} tokens on the retry; "
                    "raise `max_output_tokens_per_call` (--max-output-tokens-per-call, input "
                    "`max-output-tokens-per-call`) or `max_output_tokens`"
                )
            else:
                detail = f"{cut}, and the retry did not parse: {_short(again)}"
            raise AnswerUnparsed(second.text, detail) from again

    def _follow_up(
        self,
        asked: _Asked[Any],
        reason: str,
        repair_prompt: Callable[[str, str], str] | None,
        answer_tokens: int | None,
    ) -> Completion | Exception:
        """user → assistant (the previous answer) → user (what was wrong; strict templates refuse two
        user turns in a row): one more "repair" call, or the error that stopped it but BudgetExhausted."""
        first = asked.first
        if repair_prompt is not None:
            request = repair_prompt(first.text, reason)
        else:
            request = (
                f"Your answer was not valid JSON for the requested schema ({reason}). "
                "Answer again with only the JSON object: no prose, no code fences."
            )
        retry = [
            *asked.ask.messages,
            {
                "role": "assistant",
                "content": without_thinking(first.text).strip()[:REPAIR_ANSWER_CHARS] or "(no answer)",
            },
            {"role": "user", "content": request},
        ]
        ask = dataclasses.replace(asked.ask, messages=retry, phase="repair")
        try:
            return self._complete_with_retries(ask, answer_tokens=answer_tokens)
        except _ModelFailed as failed:
            return failed.cause

    def _complete_with_retries(
        self, ask: _Ask, max_tokens: int | None = None, *, answer_tokens: int | None = None
    ) -> Completion:
        """Up to MAX_ATTEMPTS requests on retryable errors, never sleeping past the seconds budget.
        `answer_tokens` overrides the per-call cap (a cut answer's retry), within what is left."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                return self._complete_once(ask, max_tokens, answer_tokens)
            except _ModelFailed as failed:
                delay = (
                    BACKOFF_BASE_SECONDS * 2**attempt if failed.retry_after is None else failed.retry_after
                )
                if not failed.retryable or attempt == MAX_ATTEMPTS - 1 or delay >= self.budget.seconds_left():
                    raise
                self._sleep(delay)
        raise AssertionError("unreachable")

    def _complete_once(self, ask: _Ask, requested: int | None, answer_tokens: int | None) -> Completion:
        """One HTTP request: reserve, send, settle. The only place that calls litellm.completion."""
        litellm = _litellm()
        ask = dataclasses.replace(ask, messages=alternating(ask.messages))
        api_key = self._api_key(ask.model)
        max_tokens = self._max_tokens(ask.model, requested)
        if answer_tokens is not None:  # a cut answer's retry may pass the per-call cap
            max_tokens = min(answer_tokens, self._answer_room(ask.model))
        if max_tokens < min(MIN_USEFUL_MAX_TOKENS, self.config.max_output_tokens_per_call):
            self.budget.mark_exhausted()
            raise BudgetExhausted("output_tokens", f"only {max_tokens} output tokens left for a call")
        call = self._reserve(ask, max_tokens)
        kwargs = self._request(ask, call, api_key)
        try:
            response = litellm.completion(**kwargs)
            if response is None:  # litellm re-sent after an error it handles itself, then gave up
                raise ModelError(f"no answer: litellm gave up after {call.sent} requests")
            choice = response.choices[0]
            text, finish_reason = answer_text(choice.message), choice.finish_reason
        except Exception as error:
            raise self._failed(litellm, ask.model, error, call) from error
        completion = Completion(text, ask.model, 0, 0, None, finish_reason, max_tokens, call.input_estimate)
        return self._settled(completion, getattr(response, "usage", None), choice.message, call)

    def _reserve(self, ask: _Ask, max_tokens: int) -> _Call:
        """Hold the request's worst case (calibrated count) and the timeout that fits the seconds left."""
        model = ask.model
        local_estimate = self._count_local(model, ask.messages, ask.response_schema)
        input_estimate = self.calibration(model).apply(local_estimate)
        price = self.price(model)
        estimate = None if price is None else input_estimate * price[0] + max_tokens * price[1]
        reservation = self.budget.reserve(
            phase=ask.phase,
            input_tokens=input_estimate,
            max_output_tokens=max_tokens,
            cost_usd=estimate,
            answer_cost_usd=0.0 if price is None else max_tokens * price[1],
            margin_percent=self._margin(model),
            local_input_tokens=local_estimate,
        )
        timeout, capped = self._timeout(max_tokens, input_estimate)
        return _Call(reservation, max_tokens, local_estimate, input_estimate, price, timeout, capped)

    def _request(self, ask: _Ask, call: _Call, api_key: str | None) -> dict[str, Any]:
        """litellm's arguments: its own retries off (ours wait within the seconds left), requests counted."""
        kwargs: dict[str, Any] = {
            "model": ask.model,
            "messages": ask.messages,
            "max_tokens": call.max_tokens,
            "timeout": call.timeout,
            "temperature": 0,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
            "logger_fn": call,
        }
        if self.config.api_base:
            kwargs["api_base"] = self.config.api_base
        if api_key is not None:
            kwargs["api_key"] = api_key
        if ask.response_schema is not None and self.facts(ask.model).supports_schema:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "imreview_answer", "schema": dict(ask.response_schema)},
            }
        return kwargs

    def _failed(self, litellm: ModuleType, model: str, error: Exception, call: _Call) -> Exception:
        """Settle a request without an answer and say what to raise: one never sent (no credentials) or
        refused as too long costs nothing; a timeout is charged its prompt (the server read it)."""
        if call.sent == 0 and _NO_CREDENTIALS.search(str(error)):
            self.budget.cancel(call.reservation)
            return _ModelFailed(ModelConfigError(f"no credentials for {model}: {_short(error)}"), config=True)
        if isinstance(error, litellm.ContextWindowExceededError):
            self._charge(call, 0, 0, 0.0)
            return self._context_exceeded(model, error, call.input_estimate + call.max_tokens)
        timed_out = isinstance(error, litellm.Timeout)
        spent = call.input_estimate if timed_out else 0
        cost = None if call.price is None else spent * call.price[0]
        self._charge(call, spent, 0, cost)
        if timed_out:
            return _ModelFailed(CallTimedOut(call.timeout, capped=call.capped), retryable=True)
        return _classify(litellm, error)

    def _settled(self, answer: Completion, usage: Any, message: Any, call: _Call) -> Completion:
        """Charge an answered request as the provider counted it (the prompt count calibrates ours)."""
        model = answer.model
        reported_input = int(getattr(usage, "prompt_tokens", None) or 0)
        input_tokens = reported_input if reported_input > 0 else call.input_estimate
        self._calibrate(model, call.local_estimate, reported_input)
        output_tokens, trusted = _output_tokens(
            usage, lambda text: model_facts.count(_litellm(), model, text=text), message
        )
        price = call.price
        cost = None if price is None else input_tokens * price[0] + output_tokens * price[1]
        self._charge(call, input_tokens, output_tokens, cost)  # before any wording: a paid call stays settled
        reported = getattr(usage, "completion_tokens", None)
        if not trusted and reported:
            self._warn_once(
                f"usage:{model}",
                self._say(
                    "warning.usage_mismatch",
                    model=repr(model),
                    reported=str(reported),
                    counted=str(output_tokens),
                ),
            )
        return dataclasses.replace(
            answer, input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost
        )

    def _charge(self, call: _Call, input_tokens: int, output_tokens: int, cost: float | None) -> None:
        """Settle a sent request as every HTTP request litellm made for it (at least one)."""
        calls = max(call.sent, 1)
        self._per_thread.calls = self.calls_in_this_thread() + calls
        self.budget.settle(
            call.reservation,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost,
            calls=calls,
        )

    def _api_key(self, model: str) -> str | None:
        """The key to pass explicitly: a hosted model without its key is never sent a request."""
        try:
            return model_facts.api_key(self.facts(model), self.config)
        except LookupError as missing:
            raise _ModelFailed(
                ModelConfigError(f"no credentials for {model}: {missing} is unset or empty"),
                config=True,
            ) from None

    def _timeout(self, max_tokens: int, input_tokens: int = 0) -> tuple[float, bool]:
        """(seconds, whether the seconds left cut it short): `request_timeout`, else scaled with the size."""
        wanted = self.config.request_timeout
        if wanted is None:
            wanted = (
                TIMEOUT_BASE_SECONDS
                + max_tokens * TIMEOUT_SECONDS_PER_ANSWER_TOKEN
                + input_tokens * TIMEOUT_SECONDS_PER_PROMPT_TOKEN
            )
        left = self.budget.seconds_left()
        return max(min(wanted, left), 0.1), left < wanted

    def _answer_room(self, model: str) -> int:
        """The largest answer this model and the budget allow now, past `max_output_tokens_per_call`."""
        room = self.budget.output_tokens_left()
        model_max = self.facts(model).max_output_tokens
        return min(room, model_max) if model_max else room

    def _max_tokens(self, model: str, requested: int | None) -> int:
        caps = (self.config.max_output_tokens_per_call, requested, self._answer_room(model))
        return min(cap for cap in caps if cap is not None)

    def _context_exceeded(self, model: str, error: Exception, sent: int) -> ContextExceeded:
        """The window a refusal teaches: the one it names, else a probe's, else 3/4 of what was sent."""
        assumed = self.context_window()
        body = getattr(getattr(error, "response", None), "text", None)
        told = model_facts.window_in_error(f"{error} {body[:10_000] if isinstance(body, str) else ''}")
        if told is None and self.config.api_base:
            told = model_facts.probe_window(self.config.api_base, model, model_facts.probe_key())
        if told is None or told >= assumed:
            told = min(assumed, sent) * 3 // 4
        self.learn_window(told)
        return ContextExceeded(
            f"{model} refused the request as longer than its context window: assumed {assumed} tokens, "
            f"the server has {told}",
            window=told,
            assumed=assumed,
        )


def alternating(messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """Messages as strict chat templates (Gemma's, Mistral's) accept them: one optional system message,
    then user and assistant turns alternating from the user's, adjacent turns of one role joined."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role, content = message.get("role", "user"), message.get("content") or ""
        if role == "system" and not turns:
            system.append(content)
            continue
        role = role if role in ("user", "assistant") else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{content}"}
        else:
            turns.append({"role": role, "content": content})
    if not turns or turns[0]["role"] != "user":
        raise ValueError("a conversation must start with a user turn after the system message")
    head = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    return head + turns


def answer_text(message: Any) -> str:
    """The answer in a reply: its `content`, or, when that is empty, its `reasoning_content`. A server
    with a reasoning parser (vLLM `--reasoning-parser`, llama.cpp `--reasoning-format deepseek`) puts
    everything before `</think>` there, so a model that answered without closing its thinking
    (DeepSeek-R1, Qwen3) sends its JSON there and no content at all."""
    content = getattr(message, "content", None)
    if isinstance(content, str) and content.strip():
        return content
    hidden = getattr(message, "reasoning_content", None)
    return last_answer(hidden) if isinstance(hidden, str) else ""


def _output_tokens(usage: Any, count: Callable[[str], int], message: Any) -> tuple[int, bool]:
    """(answer tokens, whether the server's report was used): reasoning counts too, once, whether it
    held the answer or not; a report implausibly below the local count (of the content and the
    reasoning) is not trusted, so a server cannot send megabytes and charge a handful."""
    completion = getattr(usage, "completion_tokens", None)
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(details, "reasoning_tokens", None) or 0
    content = getattr(message, "content", None)
    hidden = getattr(message, "reasoning_content", None)
    sent = (content if isinstance(content, str) else "") + (hidden if isinstance(hidden, str) else "")
    if not completion:
        return count(sent), False
    reported = int(completion)
    reported = reported + int(reasoning) if reasoning > reported else reported
    if len(sent.encode()) <= PLAUSIBLE_USAGE_RATIO * reported + PLAUSIBLE_USAGE_SLACK_TOKENS:
        return reported, True  # a token is at least one byte: the report cannot be implausibly low
    local = count(sent)
    implausible = local > PLAUSIBLE_USAGE_RATIO * reported + PLAUSIBLE_USAGE_SLACK_TOKENS
    return (local, False) if implausible else (reported, True)


def _classify(litellm: ModuleType, error: Exception) -> Exception:
    """Retry rate limits, 5xx, timeouts and connection errors; fall back on anything else."""
    status = getattr(error, "status_code", None)
    retryable = tuple(getattr(litellm, name) for name in _RETRYABLE_ERRORS)
    if isinstance(error, retryable) or (isinstance(status, int) and (status >= 500 or status == 429)):
        return _ModelFailed(error, retryable=True, retry_after=_retry_after(error))
    return _ModelFailed(error, config=isinstance(error, tuple(getattr(litellm, n) for n in _CONFIG_ERRORS)))


def _retry_after(error: Exception) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date), if the answer had one."""
    headers = getattr(getattr(error, "response", None), "headers", None) or getattr(
        error, "litellm_response_headers", None
    )
    if not headers:
        return None
    try:
        millis, value = headers.get("retry-after-ms"), headers.get("retry-after")
        if millis is not None:
            return max(float(millis) / 1000, 0.0)
        if value is None:
            return None
        with contextlib.suppress(ValueError):
            return max(float(value), 0.0)
        return max(email.utils.parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError):
        return None


def _short(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_kind(error: BaseException) -> str:
    """What a failed model call means to the user, from its cause chain: `unreachable` (no
    connection to the endpoint), `auth` (key refused), `unknown_model` (404), else `error`."""
    litellm = _litellm()
    import openai

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
            return "auth"
        if isinstance(current, litellm.NotFoundError):
            return "unknown_model"
        if isinstance(current, openai.APITimeoutError):
            return "error"
        if isinstance(current, (openai.APIConnectionError, ConnectionError)):
            return "unreachable"
        current = current.__cause__ or current.__context__
    return "error"


_LIBRARY_NAMES = re.compile(
    r"\b(?:litellm|openai|httpx|httpcore)\.[\w.]*:\s*"  # litellm.InternalServerError:
    r"|\b[A-Z]\w*(?:Error|Exception)\s*(?::|-(?=\s))\s*"  # InternalServerError: / OpenAIException -
)
_LAST_ERROR = re.compile(r"^model call failed for ([^;]*); last error:\s*")


def human_error(message: str) -> str:
    """A provider's error text without the libraries' class names: `model call failed for m1, m2;
    last error: litellm.InternalServerError: InternalServerError: OpenAIException - Connection
    error.` → `m1, m2: Connection error.` (the gap's sentence already says the call failed)."""
    text = " ".join(message.split())
    frame = _LAST_ERROR.match(text)
    models = f"{frame.group(1)}: " if frame else ""
    text = text[frame.end() :] if frame else text
    previous = None
    while previous != text:
        previous, text = text, _LIBRARY_NAMES.sub("", text, count=1) if _LIBRARY_NAMES.match(text) else text
    return models + text.strip()
