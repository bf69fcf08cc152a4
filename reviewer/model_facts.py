"""What we know about a model, apart from calling it: window, price, tokenizer, credentials, schema.

Read offline from litellm's bundled map, the configuration and the environment (`read`); a
self-hosted server is asked its window (`probe_window`). Token counts are local (`count`): exact with
the model's own tokenizer, else a stand-in the ledger holds with a margin until the provider's count
calibrates it (`provider_count`, or an answer's usage). `reviewer.llm` passes litellm in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from reviewer.budget import plausible
from reviewer.config import Config

ASSUMED_CONTEXT_WINDOW = 8192
PLACEHOLDER_API_KEY = "imreview-no-key"
PROBE_TIMEOUT_SECONDS = 3.0
COUNT_TIMEOUT_SECONDS = 3.0
"""A count asked of the provider before the first call waits at most this long (within the seconds left)."""
_COUNTING_PROVIDERS = frozenset({"anthropic", "gemini", "vertex_ai", "bedrock", "azure_ai", "openai"})
"""The providers whose litellm token counter asks a counting API (`should_use_token_counting_api` in
litellm 1.110.2); for any other, `litellm.acount_tokens` counts locally, which is no count."""
_SELF_HOSTED = frozenset({"openai", "hosted_vllm"})
"""Providers that, with an `api_base`, are an OpenAI-compatible server: asked at its `/tokenize`."""
_WINDOW_IN_ERROR = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"\bn_ctx\W{1,4}(\d+)", re.IGNORECASE),
    re.compile(r"context (?:size|window|length)(?: of| is|:)? (\d{3,})", re.IGNORECASE),
)
_ENV_LOCK = threading.Lock()
T = TypeVar("T")


@dataclass(frozen=True)
class ModelFacts:
    """One model as litellm's map, the configuration and the environment describe it (None: unknown);
    `missing_keys` are the provider's environment variables that are unset or empty."""

    name: str
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    price: tuple[float, float] | None = None
    exact_tokenizer: bool = False
    supports_schema: bool = False
    missing_keys: tuple[str, ...] = ()


CALIBRATED_MARGIN_PERCENT = 103
"""The input margin once the provider's counts calibrated a stand-in: what is left is the spread between
prompts (llama.cpp: 0.87 and 0.89 on two prompts of one run, benchmarks/real_model.md)."""


@dataclass(frozen=True)
class Calibration:
    """A stand-in count corrected by the provider's: `estimated` tokens counted locally were `reported`
    by the provider; every later count is scaled by their ratio, in both directions."""

    estimated: int = 0
    reported: int = 0

    @property
    def calibrated(self) -> bool:
        return self.estimated > 0 and self.reported > 0

    def add(self, estimated: int, reported: int) -> Calibration:
        """With one more answered request; an implausible count (PLAUSIBLE_CALIBRATION) is ignored."""
        if not plausible(estimated, reported):
            return self
        return Calibration(self.estimated + estimated, self.reported + reported)

    def apply(self, tokens: int) -> int:
        """`tokens` counted locally, as the provider will count them (rounded up)."""
        if not self.calibrated:
            return tokens
        return -(-tokens * self.reported // self.estimated)


def read(litellm: ModuleType, model: str, config: Config) -> ModelFacts:
    """The facts of `model`, read offline (litellm's bundled map, `config.prices`, the environment)."""
    info: Mapping[str, Any] | None = _quietly(None, lambda: dict(litellm.get_model_info(model=model)))
    window = info and (info.get("max_input_tokens") or info.get("max_tokens"))
    answer = info and (info.get("max_output_tokens") or info.get("max_tokens"))
    return ModelFacts(
        name=model,
        max_input_tokens=int(window) if window else None,
        max_output_tokens=int(answer) if answer else None,
        price=_price(model, config, info),
        exact_tokenizer=_exact_tokenizer(litellm, model),
        supports_schema=_quietly(False, lambda: bool(litellm.supports_response_schema(model=model))),
        missing_keys=tuple(_missing_provider_keys(litellm, model)),
    )


def _price(model: str, config: Config, info: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """(input, output) USD per token: configured prices first, then litellm's bundled map."""
    configured = config.prices.get(model) or config.prices.get(model.partition("/")[2])
    if configured is not None:
        return configured.input_usd_per_mtok / 1e6, configured.output_usd_per_mtok / 1e6
    if info is not None:
        input_price, output_price = info.get("input_cost_per_token"), info.get("output_cost_per_token")
        if input_price is not None and output_price is not None:
            return float(input_price), float(output_price)
    return None


def count(
    litellm: ModuleType, model: str, *, text: str | None = None, messages: Sequence[Mapping[str, str]] = ()
) -> int:
    """A local, offline token count; a rough len/3 when litellm cannot count for this model."""
    try:
        if text is not None:
            return int(litellm.token_counter(model=model, text=text))
        return int(litellm.token_counter(model=model, messages=list(messages)))
    except Exception:
        chars = len(text) if text is not None else sum(len(m.get("content") or "") for m in messages)
        return chars // 3


def find_window(config: Config, chain: Sequence[ModelFacts]) -> tuple[int, str, tuple[str, ...]]:
    """(tokens, source, models assumed). A self-hosted server (`api_base`) is asked first, because
    litellm's map describes the hosted model of that name, not what this server was started with;
    never believed above the model's map window. Then config `context_window` (which wins when
    smaller), then the smallest map window of the chain, ASSUMED_CONTEXT_WINDOW where unknown."""
    configured = config.context_window
    if config.api_base:
        primary = chain[0]
        served = probe_window(config.api_base, primary.name, probe_key())
        if served:
            if configured and configured < served:
                return configured, "config", ()
            if primary.max_input_tokens and primary.max_input_tokens < served:
                return primary.max_input_tokens, "litellm", ()
            return served, "server", ()
    if configured:
        return configured, "config", ()
    window, source = min(
        (f.max_input_tokens, "litellm") if f.max_input_tokens else (ASSUMED_CONTEXT_WINDOW, "assumed")
        for f in chain
    )
    return window, source, tuple(f.name for f in chain if not f.max_input_tokens)


def probe_key() -> str | None:
    """The key a window probe sends to a self-hosted server, if the environment has one."""
    return os.environ.get("OPENAI_API_KEY") or os.environ.get("HOSTED_VLLM_API_KEY") or None


def api_key(facts: ModelFacts, config: Config) -> str | None:
    """The key to pass explicitly: None when the provider's variables are set (litellm reads them), a
    placeholder for a self-hosted server (`api_base`); LookupError naming them for a hosted model."""
    if not facts.missing_keys:
        return None
    if config.api_base:
        return PLACEHOLDER_API_KEY
    raise LookupError(", ".join(facts.missing_keys))


def _quietly(default: T, answer: Callable[[], T]) -> T:
    """What litellm answers, or `default` where it raises (a model or provider it does not know)."""
    try:
        return answer()
    except Exception:
        return default


def _missing_provider_keys(litellm: ModuleType, model: str) -> list[str]:
    """The variables `model`'s provider needs and lacks; empty counts as lacking (a missing secret is "")."""
    with _ENV_LOCK:
        blank = {name: value for name, value in os.environ.items() if not value.strip()}
        for name in blank:
            del os.environ[name]
        try:
            return _quietly(
                [], lambda: list(litellm.validate_environment(model=model).get("missing_keys") or [])
            )
        finally:
            os.environ.update(blank)


def _exact_tokenizer(litellm: ModuleType, model: str) -> bool:
    """True when litellm counts this model with its own tokenizer (tiktoken knows OpenAI models)."""
    try:
        name, provider, _, _ = litellm.get_llm_provider(model)
        if provider not in ("openai", "azure"):
            return False
        litellm.token_counter(model=model, text="")  # points tiktoken at litellm's bundled files (offline)
        import tiktoken

        tiktoken.encoding_for_model(name)
        return True
    except Exception:
        return False


def window_in_error(message: str) -> int | None:
    """The context window a server names in its refusal (vLLM/OpenAI, llama.cpp), or None."""
    return next((int(m.group(1)) for pattern in _WINDOW_IN_ERROR if (m := pattern.search(message))), None)


def probe_window(api_base: str, model: str, api_key: str | None = None) -> int | None:
    """Ask an OpenAI-compatible server its context window: `GET /v1/models` (vLLM, LM Studio), then
    llama.cpp's `GET /props`. None when neither answers; never raises."""
    bare = api_base.rstrip("/").removesuffix("/v1")
    window = _window_in_models(_get_json(f"{bare}/v1/models", api_key), model)
    props = _get_json(f"{bare}/props", api_key) if window is None else None
    if not isinstance(props, dict):
        return window
    settings = props.get("default_generation_settings")  # newer llama.cpp servers nest `n_ctx` there
    nested = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive_int(nested) or _positive_int(props.get("n_ctx"))


def _window_in_models(models: Any, model: str) -> int | None:
    """vLLM-style `/v1/models`: this model's entry (with or without its provider), or the only one."""
    entries = models.get("data") if isinstance(models, dict) else None
    if not isinstance(entries, list):
        return None
    name = model.split("/", 1)[1] if "/" in model else model
    dicts = [e for e in entries if isinstance(e, dict)]
    chosen = [e for e in dicts if e.get("id") in (name, model)] or (dicts if len(dicts) == 1 else [])
    keys = ("max_model_len", "context_length", "max_context_length")
    return next((window for e in chosen for key in keys if (window := _positive_int(e.get(key)))), None)


def _positive_int(value: Any) -> int | None:
    """A server's JSON may hold anything where a window is expected; only a positive int is one."""
    return value if type(value) is int and value > 0 else None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib resends every header, `Authorization` too, to wherever a redirect points: the key is
    for `api-base` alone, so a redirect is an answer we do not follow (litellm's httpx does not either)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _get_json(url: str, api_key: str | None, body: Any = None, timeout: float = PROBE_TIMEOUT_SECONDS) -> Any:
    """The JSON a server answers to a GET (or, with `body`, a POST of it); None for anything else."""
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"

    def ask() -> Any:
        request = urllib.request.Request(url, data=data, headers=headers)
        with _OPENER.open(request, timeout=max(timeout, 0.01)) as response:
            return json.loads(response.read(1_000_000))

    # urlopen's timeout bounds each socket read, not the request: a server dripping its answer a
    # byte at a time would hold the run; the whole request gets `timeout`
    return _within(ask, max(timeout, 0.01), "imreview-probe")


def provider_count(
    litellm: ModuleType,
    model: str,
    messages: Sequence[Mapping[str, str]],
    *,
    api_base: str | None,
    api_key: str | None,
    timeout: float = COUNT_TIMEOUT_SECONDS,
) -> int | None:
    """The provider's own count of a chat prompt, asked before it is sent where it is free: a
    self-hosted server's `/tokenize` (`server_count`), else `litellm.acount_tokens` when it asks an
    API (`_COUNTING_PROVIDERS`). None without a positive count within `timeout`; never raises."""
    provider = _quietly(None, lambda: litellm.get_llm_provider(model)[1])
    if api_base and provider in _SELF_HOSTED:
        return server_count(api_base, model, messages, api_key or probe_key(), timeout)
    if provider not in _COUNTING_PROVIDERS:
        return None
    result = _within(
        lambda: asyncio.run(
            litellm.acount_tokens(model=model, messages=list(messages), api_key=api_key, api_base=api_base)
        ),
        timeout,
        "imreview-count",
    )
    if getattr(result, "error", False) or getattr(result, "tokenizer_type", None) == "local_tokenizer":
        return None
    return _positive_int(getattr(result, "total_tokens", None))


def _within(work: Callable[[], Any], timeout: float, name: str) -> Any:
    """What `work` returns in a daemon thread, or None when it raised or took longer than `timeout`: a
    socket's timeout bounds each read, not the answer, and `asyncio.run` waits for its executor."""
    box: list[Any] = []

    def run() -> None:
        with contextlib.suppress(Exception):
            box.append(work())

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(timeout)
    return box[0] if box else None


def server_count(
    api_base: str, model: str, messages: Sequence[Mapping[str, str]], api_key: str | None, timeout: float
) -> int | None:
    """An OpenAI-compatible server's count of a chat prompt, chat template applied: vLLM's `/tokenize`
    takes the messages; llama.cpp's takes only text (it answers `{"tokens": []}` to messages), so
    there the prompt comes from `/apply-template` first. All within `timeout`."""
    deadline = time.monotonic() + timeout
    bare = api_base.rstrip("/").removesuffix("/v1")
    name = model.split("/", 1)[1] if "/" in model else model
    answer = _get_json(f"{bare}/tokenize", api_key, {"model": name, "messages": list(messages)}, timeout)
    if not isinstance(answer, dict) or "count" in answer or "tokens" not in answer:
        return _positive_int(answer.get("count")) if isinstance(answer, dict) else None
    templated = _get_json(
        f"{bare}/apply-template", api_key, {"messages": list(messages)}, deadline - time.monotonic()
    )
    prompt = templated.get("prompt") if isinstance(templated, dict) else None
    if not isinstance(prompt, str) or time.monotonic() >= deadline:
        return None
    text = {"content": prompt, "add_special": True, "parse_special": True}
    tokens = _get_json(f"{bare}/tokenize", api_key, text, deadline - time.monotonic())
    listed = tokens.get("tokens") if isinstance(tokens, dict) else None
    return _positive_int(len(listed)) if isinstance(listed, list) else None
