"""Model behaviours seen on real servers, as handlers for `FakeModelServer(handler=...)`.

`echo_example` is what llama.cpp's `llama-server` did with a 135M model once litellm sent the
findings schema as `response_format` (issue 12): the grammar forced valid JSON and the model filled
it by copying the example from the prompt.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.model_server import Reply, text

EXAMPLE_START = '{"findings": [{"path"'


def last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    return str(users[-1]) if users else ""


def example_of(prompt: str) -> dict[str, Any]:
    """The answer-format example in a review or repair prompt, as the JSON a copying model returns."""
    start = prompt.index(EXAMPLE_START)
    example, _ = json.JSONDecoder().raw_decode(prompt[start:].replace("MERGE|DELETE|INLINE|MOVE", "MERGE"))
    return dict(example)


def echo_example(body: dict[str, Any]) -> Reply:
    """Answer every prompt with its own example, valid JSON of the schema's shape."""
    return text(json.dumps(example_of(last_user_text(body))), prompt_tokens=800, completion_tokens=160)
