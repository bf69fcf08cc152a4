"""Model calls through litellm: budget-aware, with our own retries, fallbacks and one JSON repair.

This is the only module that imports litellm, and only inside functions: importing litellm costs
seconds and fetches a cost map unless told not to, so `--help` and rendering never pay for it.
"""

from __future__ import annotations

import email.utils
import functools
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from reviewer.budget import Budget
from reviewer.config import Config
from reviewer.errors import AnswerUnparsed, BudgetExhausted, ConfigError, ModelConfigError, ModelError

T = TypeVar("T")

ASSUMED_CONTEXT_WINDOW = 8192
MAX_ATTEMPTS = 3
CALL_TIMEOUT_SECONDS = 120.0
MIN_USEFUL_MAX_TOKENS = 256
BACKOFF_BASE_SECONDS = 1.0
PLACEHOLDER_API_KEY = "imreview-no-key"
_OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "LITELLM_OFFLINE_MODE": "true"}


@functools.cache
def _litellm() -> ModuleType:
    """litellm, imported offline: the bundled cost map, no tokenizer downloads, no debug banners."""
    for name, value in _OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
    import litellm

    litellm.suppress_debug_info = True
    if hasattr(litellm, "disable_hf_tokenizer_download"):
        litellm.disable_hf_tokenizer_download = True
    return litellm


@dataclass(frozen=True)
class Completion:
    """One answered request, in our own types so litellm's response never leaves this module."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    finish_reason: str | None


class _Retryable(Exception):
    def __init__(self, cause: Exception, retry_after: float | None) -> None:
        self.cause = cause
        self.retry_after = retry_after
        super().__init__(str(cause))


class _ModelFailed(Exception):
    """This model cannot answer now; try the next one. `config` is true for auth/not-found/400."""

    def __init__(self, cause: Exception, *, config: bool) -> None:
        self.cause = cause
        self.config = config
        super().__init__(str(cause))


class ModelClient:
    """One configured model chain (primary + fallbacks) spending from one Budget; thread-safe."""

    def __init__(
        self,
        config: Config,
        budget: Budget,
        *,
        warn: Callable[[str], None],
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
        self._sleep = sleep
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._info: dict[str, Mapping[str, Any] | None] = {}
        self._keys_missing: dict[str, list[str]] = {}

    def credentials_missing(self) -> list[str]:
        """Environment keys the primary model needs and lacks; none when `api_base` is set, because
        a self-hosted server gets a placeholder key."""
        if self.config.api_base:
            return []
        return self._missing_keys(self.models[0])

    def context_window(self) -> int:
        """The smallest input window in the chain, so a unit packed for it fits every fallback."""
        if self.config.context_window:
            return self.config.context_window
        windows = []
        for model in self.models:
            info = self._model_info(model)
            window = info and (info.get("max_input_tokens") or info.get("max_tokens"))
            if not window:
                self._warn_once(
                    f"context:{model}",
                    f"model {model!r} is unknown to litellm's model map: assuming a context window of "
                    f"{ASSUMED_CONTEXT_WINDOW} tokens (set `context_window` to override)",
                )
                window = ASSUMED_CONTEXT_WINDOW
            windows.append(int(window))
        return min(windows)

    def count_tokens(self, text: str) -> int:
        return self._count(self.models[0], text=text)

    def price(self, model: str) -> tuple[float, float] | None:
        """(input, output) USD per token: configured prices first, then litellm's bundled map."""
        configured = self.config.prices.get(model) or self.config.prices.get(model.partition("/")[2])
        if configured is not None:
            return configured.input_usd_per_mtok / 1e6, configured.output_usd_per_mtok / 1e6
        info = self._model_info(model)
        if info is not None:
            input_price, output_price = info.get("input_cost_per_token"), info.get("output_cost_per_token")
            if input_price is not None and output_price is not None:
                return float(input_price), float(output_price)
        self._warn_once(
            f"price:{model}",
            f"no price known for model {model!r}: its cost is reported as unknown; the token and call "
            "limits still hold (set `prices` to enable the cost limit)",
        )
        return None

    def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        phase: str,
        parse: Callable[[str], T],
        response_schema: Mapping[str, Any] | None = None,
        repair_prompt: Callable[[str, str], str] | None = None,
    ) -> tuple[T, list[Completion]]:
        """Ask the chain for an answer `parse` accepts (it raises ValueError otherwise), repairing an
        unparsable answer once with the same model. `response_schema` is sent as `response_format`
        only to models litellm says support it; `parse` must validate regardless.

        Raises BudgetExhausted unchanged, AnswerUnparsed when the repair did not parse either, and
        ModelError (ModelConfigError when no model was usable at all) when every model failed.
        """
        completions: list[Completion] = []
        failures: list[_ModelFailed] = []
        for model in self.models:
            try:
                first = self._complete_with_retries(model, messages, phase, response_schema)
            except _ModelFailed as failed:
                failures.append(failed)
                continue
            completions.append(first)
            try:
                return parse(first.text), completions
            except ValueError as error:
                return self._repair(
                    model, messages, first, error, parse, response_schema, completions, repair_prompt
                )
        last = failures[-1].cause
        message = f"model call failed for {', '.join(self.models)}; last error: {_short(last)}"
        if all(failed.config for failed in failures):
            raise ModelConfigError(message) from last
        raise ModelError(message) from last

    def _repair(
        self,
        model: str,
        messages: list[dict[str, str]],
        first: Completion,
        error: ValueError,
        parse: Callable[[str], T],
        response_schema: Mapping[str, Any] | None,
        completions: list[Completion],
        repair_prompt: Callable[[str, str], str] | None = None,
    ) -> tuple[T, list[Completion]]:
        """One more call with the same model; the template (when given) quotes the bad answer itself."""
        if repair_prompt is not None:
            retry = [*messages, {"role": "user", "content": repair_prompt(first.text, _short(error))}]
        else:
            retry = [
                *messages,
                {"role": "assistant", "content": first.text},
                {
                    "role": "user",
                    "content": f"Your answer was not valid JSON for the requested schema ({_short(error)}). "
                    "Answer again with only the JSON object: no prose, no code fences.",
                },
            ]
        try:
            second = self._complete_with_retries(model, retry, "repair", response_schema)
        except _ModelFailed as failed:
            raise AnswerUnparsed(
                first.text,
                f"answer from {model} did not parse ({_short(error)}) and the repair call failed: "
                f"{_short(failed.cause)}",
            ) from failed.cause
        completions.append(second)
        try:
            return parse(second.text), completions
        except ValueError as again:
            raise AnswerUnparsed(
                second.text, f"answer from {model} did not parse, even after one repair: {_short(again)}"
            ) from again

    def _complete_with_retries(
        self,
        model: str,
        messages: list[dict[str, str]],
        phase: str,
        response_schema: Mapping[str, Any] | None,
    ) -> Completion:
        """Up to MAX_ATTEMPTS requests on retryable errors, never sleeping past the seconds budget."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                return self._complete_once(model, messages, phase, response_schema)
            except _Retryable as retryable:
                delay = retryable.retry_after
                if delay is None:
                    delay = BACKOFF_BASE_SECONDS * 2**attempt
                if attempt == MAX_ATTEMPTS - 1 or delay >= self.budget.seconds_left():
                    raise _ModelFailed(retryable.cause, config=False) from retryable.cause
                self._sleep(delay)
        raise AssertionError("unreachable")

    def _complete_once(
        self,
        model: str,
        messages: list[dict[str, str]],
        phase: str,
        response_schema: Mapping[str, Any] | None,
    ) -> Completion:
        """One HTTP request: reserve, send, settle. The only place that calls litellm.completion."""
        litellm = _litellm()
        max_tokens = self._max_tokens(model)
        if max_tokens < min(MIN_USEFUL_MAX_TOKENS, self.config.max_output_tokens_per_call):
            self.budget.mark_exhausted()
            raise BudgetExhausted("output_tokens", f"only {max_tokens} output tokens left for a call")
        input_estimate = self._count(model, messages=messages)
        price = self.price(model)
        estimate = None if price is None else input_estimate * price[0] + max_tokens * price[1]
        reservation = self.budget.reserve(
            phase=phase, input_tokens=input_estimate, max_output_tokens=max_tokens, cost_usd=estimate
        )
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "timeout": max(min(CALL_TIMEOUT_SECONDS, self.budget.seconds_left()), 0.1),
            "temperature": 0,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
        }
        if self.config.api_base:
            kwargs["api_base"] = self.config.api_base
            if self._missing_keys(model):
                kwargs["api_key"] = PLACEHOLDER_API_KEY
        if response_schema is not None and self._supports_schema(model):
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "imreview_answer", "schema": dict(response_schema)},
            }
        try:
            response = litellm.completion(**kwargs)
            choice = response.choices[0]
            text = choice.message.content or ""
            finish_reason = choice.finish_reason
        except Exception as error:
            timed_out = isinstance(error, litellm.Timeout)
            spent_input = input_estimate if timed_out else 0
            self.budget.settle(
                reservation,
                input_tokens=spent_input,
                output_tokens=0,
                cost_usd=None if price is None else spent_input * price[0],
            )
            raise _classify(litellm, error) from error
        usage = getattr(response, "usage", None)
        input_tokens = int(getattr(usage, "prompt_tokens", None) or input_estimate)
        output_tokens = int(getattr(usage, "completion_tokens", None) or self._count(model, text=text))
        cost = None if price is None else input_tokens * price[0] + output_tokens * price[1]
        self.budget.settle(reservation, input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost)
        return Completion(
            text=text,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost,
            finish_reason=finish_reason,
        )

    def _max_tokens(self, model: str) -> int:
        candidates = [self.config.max_output_tokens_per_call, self.budget.output_tokens_left()]
        info = self._model_info(model)
        model_max = info and (info.get("max_output_tokens") or info.get("max_tokens"))
        if model_max:
            candidates.append(int(model_max))
        return min(candidates)

    def _count(
        self, model: str, *, text: str | None = None, messages: Sequence[Mapping[str, str]] = ()
    ) -> int:
        """A local, offline token count; a rough len/3 when litellm cannot count for this model."""
        try:
            if text is not None:
                return int(_litellm().token_counter(model=model, text=text))
            return int(_litellm().token_counter(model=model, messages=list(messages)))
        except Exception:
            chars = len(text) if text is not None else sum(len(m.get("content") or "") for m in messages)
            return chars // 3

    def _model_info(self, model: str) -> Mapping[str, Any] | None:
        with self._lock:
            if model in self._info:
                return self._info[model]
        try:
            info: Mapping[str, Any] | None = dict(_litellm().get_model_info(model=model))
        except Exception:
            info = None
        with self._lock:
            self._info[model] = info
        return info

    def _missing_keys(self, model: str) -> list[str]:
        with self._lock:
            if model in self._keys_missing:
                return list(self._keys_missing[model])
        try:
            missing = list(_litellm().validate_environment(model=model).get("missing_keys") or [])
        except Exception:
            missing = []
        with self._lock:
            self._keys_missing[model] = missing
        return list(missing)

    def _supports_schema(self, model: str) -> bool:
        try:
            return bool(_litellm().supports_response_schema(model=model))
        except Exception:
            return False

    def _warn_once(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._warn(message)


def _classify(litellm: ModuleType, error: Exception) -> Exception:
    """Retry rate limits, 5xx, timeouts and connection errors; fall back on anything else."""
    retryable_types = (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.Timeout,
        litellm.APIConnectionError,
    )
    status = getattr(error, "status_code", None)
    if isinstance(error, retryable_types) or (isinstance(status, int) and (status >= 500 or status == 429)):
        return _Retryable(error, _retry_after(error))
    config_types = (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.BadRequestError,
    )
    return _ModelFailed(error, config=isinstance(error, config_types))


def _retry_after(error: Exception) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date), if the answer had one."""
    headers = getattr(getattr(error, "response", None), "headers", None) or getattr(
        error, "litellm_response_headers", None
    )
    if not headers:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(float(millis) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError):
        return None


def _short(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
