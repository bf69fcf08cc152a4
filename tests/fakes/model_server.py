"""A loopback OpenAI-compatible model server, so litellm runs its real HTTP path in tests (DESIGN 9).

Script it with a queue of replies (one per request, in order) or a handler function that maps the
request body to a reply. Every request body is recorded, parsed, in `requests` (its headers, with
lower-case names, at the same index in `request_headers`).

    with FakeModelServer([status(429, retry_after="0"), text('{"findings": []}')]) as server:
        ...  # point litellm at server.api_base
        assert len(server.requests) == 2

Like a real server it can have a context window (`window`, counted with `count_prompt`): a longer
request is refused with a 400 in vLLM's words (`window_style="vllm"`) or llama.cpp's
(`"llamacpp"`) before any script or handler sees it. It can say its window the way vLLM does
(`GET /v1/models` with `max_model_len`) or llama.cpp does (`GET /props` with
`default_generation_settings.n_ctx`); every GET path is recorded in `gets`.

The server lives in the test process; a CLI under test in a subprocess reaches it by URL.

Behaviours of real servers, each off by default (llama.cpp's `llama-server` is the model):
`strict_roles` refuses conversations that strict chat templates refuse, with llama.cpp's 400;
`require_key` answers 401 unless the bearer token is that key; `cut_at_max_tokens` cuts a reply
longer than the request's `max_tokens` and says `finish_reason: "length"`; `reasoning_parser` moves
the thinking out of `content` into `message.reasoning_content` as vLLM's `--reasoning-parser
deepseek_r1` (and llama.cpp's `--reasoning-format deepseek`) do: the text before `</think>` is the
reasoning and the rest the content, and a reply with no `</think>` at all (a model that answered
inside its thinking) is ALL reasoning, with `content: null`. `llama_cpp_text` builds a reply with
`usage` and `timings` as llama.cpp sends them.

`tokenize` gives it a counting endpoint, counting with `tokenize_count` (by default `count_prompt`):
`"vllm"` answers `POST /tokenize` {model, messages} with {count, max_model_len, tokens};
`"llamacpp"` answers `POST /apply-template` {messages} with {prompt} and `POST /tokenize` {content}
with {tokens} (and `{"tokens": []}` to a body without `content`, as llama.cpp does); `"anthropic"`
answers `POST /v1/messages/count_tokens` {model, messages, system} with {input_tokens}. Every counting
request is recorded in `counts` as (path, body), never in `requests`; `tokenize_delay` slows them.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.loopback import LoopbackServer

CHAT_PATH = "/v1/chat/completions"
ANTHROPIC_COUNT_PATH = "/v1/messages/count_tokens"
COUNT_PATHS = ("/tokenize", "/apply-template", ANTHROPIC_COUNT_PATH)
ALTERNATION_ERROR = "Conversation roles must alternate user/assistant/user/assistant/..."


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer; `delay` seconds pass before anything is written."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0


def chat_completion(
    content: str,
    *,
    model: str = "fake-model",
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """The JSON body of an OpenAI `chat.completion` with `usage`."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text(
    content: str,
    *,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    finish_reason: str = "stop",
    model: str = "fake-model",
    delay: float = 0.0,
) -> Reply:
    """A 200 answer whose message content is `content`."""
    body = chat_completion(
        content,
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=finish_reason,
    )
    return Reply(200, json.dumps(body).encode(), (("Content-Type", "application/json"),), delay)


def status(
    code: int,
    *,
    retry_after: str | None = None,
    message: str | None = None,
    delay: float = 0.0,
) -> Reply:
    """An error answer in OpenAI's error shape, optionally with `Retry-After`."""
    error = {"error": {"message": message or f"fake error {code}", "type": "fake_error", "code": code}}
    headers = [("Content-Type", "application/json")]
    if retry_after is not None:
        headers.append(("Retry-After", retry_after))
    return Reply(code, json.dumps(error).encode(), tuple(headers), delay)


def delayed(seconds: float, then: Reply | None = None) -> Reply:
    """`then` (by default a small valid answer) after `seconds`: longer than the client's timeout
    makes a timeout."""
    reply = then or text("{}")
    return Reply(reply.status, reply.body, reply.headers, seconds)


def malformed(body: bytes = b'{"choices": [', *, code: int = 200) -> Reply:
    """A body that is not a chat.completion at all (truncated JSON by default)."""
    return Reply(code, body, (("Content-Type", "application/json"),))


def llama_cpp_text(
    content: str,
    *,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    finish_reason: str = "stop",
    model: str = "SmolLM2-135M-Instruct.Q4_1.gguf",
    prompt_ms: float = 250.0,
    predicted_ms: float = 900.0,
) -> Reply:
    """A 200 answer shaped like llama.cpp's `llama-server`: `usage` counted by the server, plus its
    `timings` block and `system_fingerprint`, which OpenAI's schema does not have."""
    body = chat_completion(
        content,
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=finish_reason,
    )
    body["system_fingerprint"] = "b6000-fake"
    body["timings"] = {
        "cache_n": 0,
        "prompt_n": prompt_tokens,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / max(prompt_tokens, 1),
        "prompt_per_second": 1000.0 * prompt_tokens / prompt_ms,
        "predicted_n": completion_tokens,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / max(completion_tokens, 1),
        "predicted_per_second": 1000.0 * completion_tokens / predicted_ms,
    }
    return Reply(200, json.dumps(body).encode(), (("Content-Type", "application/json"),))


def roles_alternate(messages: list[dict[str, Any]]) -> bool:
    """What a strict chat template (Gemma's, Mistral's) accepts: an optional system message first,
    then user/assistant turns alternating, starting with the user."""
    roles = [m.get("role") for m in messages]
    if roles[:1] == ["system"]:
        roles = roles[1:]
    expected = ("user", "assistant")
    return bool(roles) and all(role == expected[i % 2] for i, role in enumerate(roles))


def _cut(reply: Reply, max_tokens: int) -> Reply:
    """`reply` as a server that stops at `max_tokens` sends it: content cut in proportion to the
    tokens kept, `completion_tokens` = max_tokens, `finish_reason: "length"`."""
    try:
        body = json.loads(reply.body)
        used = int(body["usage"]["completion_tokens"])
        content = body["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return reply
    if used <= max_tokens:
        return reply
    body["choices"][0]["message"]["content"] = content[: math.floor(len(content) * max_tokens / used)]
    body["choices"][0]["finish_reason"] = "length"
    body["usage"]["completion_tokens"] = max_tokens
    body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"] + max_tokens
    return Reply(reply.status, json.dumps(body).encode(), reply.headers, reply.delay)


def _reasoning_split(reply: Reply) -> Reply:
    """`reply` as a server with a reasoning parser sends it: the text before the first `</think>` (an
    opening `<think>` taken off) in `reasoning_content`, the rest in `content`; without `</think>`,
    everything is reasoning and `content` is null. `usage` is untouched: the server generated it all."""
    try:
        body = json.loads(reply.body)
        message = body["choices"][0]["message"]
        content = message["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return reply
    thinking, closed, answer = content.partition("</think>")
    reasoning = thinking if closed else content
    message["reasoning_content"] = reasoning.replace("<think>", "", 1).strip()
    message["content"] = (answer.strip() or None) if closed else None
    return Reply(reply.status, json.dumps(body).encode(), reply.headers, reply.delay)


Handler = Callable[[dict[str, Any]], Reply]


def context_exceeded(style: str, window: int, prompt_tokens: int, max_tokens: int) -> Reply:
    """A 400 for a request longer than the window, worded as vLLM or llama.cpp word it."""
    if style == "llamacpp":
        error: dict[str, Any] = {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt_tokens,
            "n_ctx": window,
        }
    else:
        error = {
            "object": "error",
            "message": f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    return Reply(400, json.dumps({"error": error}).encode(), (("Content-Type", "application/json"),))


def json_reply(data: Any, code: int = 200) -> Reply:
    return Reply(code, json.dumps(data).encode(), (("Content-Type", "application/json"),))


class FakeModelServer:
    """A threaded stdlib HTTP server on 127.0.0.1 with an ephemeral port."""

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        handler: Handler | None = None,
        window: int | None = None,
        window_style: str = "vllm",
        count_prompt: Callable[[dict[str, Any]], int] | None = None,
        models_max_len: int | None = None,
        props_n_ctx: int | None = None,
        served_model: str = "fake-model",
        strict_roles: bool = False,
        require_key: str | None = None,
        cut_at_max_tokens: bool = False,
        reasoning_parser: bool = False,
        tokenize: str | None = None,
        tokenize_count: Callable[[dict[str, Any]], int] | None = None,
        tokenize_delay: float = 0.0,
    ) -> None:
        self.tokenize = tokenize
        self.tokenize_count = tokenize_count
        self.tokenize_delay = tokenize_delay
        self.counts: list[tuple[str, dict[str, Any]]] = []
        self.strict_roles = strict_roles
        self.require_key = require_key
        self.cut_at_max_tokens = cut_at_max_tokens
        self.reasoning_parser = reasoning_parser
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.refused: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.window = window
        self.window_style = window_style
        self.count_prompt = count_prompt or (lambda body: len(json.dumps(body.get("messages", []))) // 4)
        self.models_max_len = models_max_len
        self.props_n_ctx = props_n_ctx
        self.served_model = served_model
        self.handler = handler
        self._script: deque[Reply] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: LoopbackServer | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake model server is not running")
        return self._server.port

    @property
    def api_base(self) -> str:
        """What litellm takes as `api_base` (requests go to `{api_base}/chat/completions`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        """Append replies to the script; they are used before the handler."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._script)

    def start(self) -> FakeModelServer:
        self._stopping.clear()
        self._server = LoopbackServer(_make_request_handler(self), name="fake-model")
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.stop()
        self._server = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answer(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        if self.window is not None:
            prompt = self.count_prompt(body)
            answer = int(body.get("max_tokens") or 0) if self.window_style == "vllm" else 0
            if prompt + answer > self.window:
                with self._lock:
                    self.requests.append(body)
                    self.request_headers.append(headers)
                    self.refused.append(body)
                return context_exceeded(
                    self.window_style, self.window, prompt, int(body.get("max_tokens") or 0)
                )
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            refusal = self._refusal(body, headers)
            if refusal is not None:
                self.refused.append(body)
                return refusal
            reply = self._script.popleft() if self._script else None
        if reply is None and self.handler is not None:
            reply = self.handler(body)
        if reply is None:
            return status(500, message="fake model server: script exhausted and no handler set")
        max_tokens = body.get("max_tokens")
        if self.cut_at_max_tokens and isinstance(max_tokens, int):
            reply = _cut(reply, max_tokens)
        return _reasoning_split(reply) if self.reasoning_parser else reply

    def _refusal(self, body: dict[str, Any], headers: dict[str, str]) -> Reply | None:
        """What a real server answers before looking at the conversation's meaning, if anything."""
        if self.require_key is not None and headers.get("authorization") != f"Bearer {self.require_key}":
            error = {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}
            return Reply(401, json.dumps(error).encode(), (("Content-Type", "application/json"),))
        if self.strict_roles and not roles_alternate(list(body.get("messages") or [])):
            error = {"error": {"code": 400, "message": ALTERNATION_ERROR, "type": "invalid_request_error"}}
            return Reply(400, json.dumps(error).encode(), (("Content-Type", "application/json"),))
        return None

    def _get(self, path: str) -> Reply:
        """`GET /v1/models` and `GET /props`, as vLLM and llama.cpp answer them when so configured."""
        with self._lock:
            self.gets.append(path)
        route = path.split("?", 1)[0].rstrip("/")
        if route == "/v1/models" and self.models_max_len is not None:
            entry = {
                "id": self.served_model,
                "object": "model",
                "owned_by": "vllm",
                "root": self.served_model,
            }
            return json_reply({"object": "list", "data": [{**entry, "max_model_len": self.models_max_len}]})
        if route == "/v1/models" and self.props_n_ctx is not None:
            entry = {"id": self.served_model, "object": "model", "owned_by": "llamacpp"}
            return json_reply({"object": "list", "data": [{**entry, "meta": {"n_ctx_train": 131072}}]})
        if route == "/props" and self.props_n_ctx is not None:
            settings = {"n_ctx": self.props_n_ctx, "n_predict": -1, "temperature": 0.8}
            return json_reply({"default_generation_settings": settings, "total_slots": 1})
        return status(404, message=f"fake model server: no route {path}")

    def _count(self, path: str, body: dict[str, Any]) -> Reply:
        """The counting endpoints of vLLM (`/tokenize` with messages) or llama.cpp (`/apply-template`,
        then `/tokenize` of the prompt); the prompt this server templates is the messages' JSON."""
        count = self.tokenize_count or self.count_prompt
        messages = body.get("messages")
        if self.tokenize == "vllm" and path == "/tokenize" and isinstance(messages, list):
            n = count({"messages": messages})
            return json_reply({"count": n, "max_model_len": self.models_max_len or 8192, "tokens": [0] * n})
        if self.tokenize == "llamacpp" and path == "/apply-template" and isinstance(messages, list):
            return json_reply({"prompt": json.dumps(messages)})
        if self.tokenize == "llamacpp" and path == "/tokenize":
            content = body.get("content")
            if not isinstance(content, str):
                return json_reply({"tokens": []})
            return json_reply({"tokens": [0] * count({"messages": json.loads(content)})})
        if self.tokenize == "anthropic" and path == ANTHROPIC_COUNT_PATH and isinstance(messages, list):
            return json_reply({"input_tokens": count({"messages": messages})})
        return status(404, message=f"fake model server: no route {path}")

    def _wait(self, seconds: float) -> bool:
        """Sleep `seconds` unless the server stops first; False when it stopped."""
        return not self._stopping.wait(seconds)


def _make_request_handler(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class _RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            if self.path.rstrip("/") in COUNT_PATHS:
                with server._lock:
                    server.counts.append((self.path.rstrip("/"), body))
                if server.tokenize_delay and not server._wait(server.tokenize_delay):
                    return
                self._send(server._count(self.path.rstrip("/"), body))
                return
            if self.path.rstrip("/") != CHAT_PATH:
                self._send(status(404, message=f"fake model server: no route {self.path}"))
                return
            reply = server._answer(body, {name.lower(): value for name, value in self.headers.items()})
            if reply.delay and not server._wait(reply.delay):
                return
            self._send(reply)

        def do_GET(self) -> None:
            self._send(server._get(self.path))

        def _send(self, reply: Reply) -> None:
            try:
                self.send_response(reply.status)
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return _RequestHandler
