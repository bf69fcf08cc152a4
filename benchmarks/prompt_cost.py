"""What the fixed part of a review request costs, per call, piece by piece (issue 18 item 4).

Renders the real prompts (templates/prompts, English, no instructions, an empty PR title and body,
no diff) and counts each piece with litellm's offline token counter: gpt-4o-mini (o200k, exact for
OpenAI) and a name litellm does not know (its cl100k stand-in). The pieces: the system prompt (its
method and its rules), the user message's answer format with and without structured output, the
rest of the user message (delimiters, legend, notices) and the response schema that goes out as
`response_format`.

    /work/main/.venv/bin/python benchmarks/prompt_cost.py            # prints the Markdown table
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from reviewer.findings import ANSWER_SCHEMA  # noqa: E402
from reviewer.plan import LEGEND  # noqa: E402
from reviewer.render import Renderer  # noqa: E402

MODELS = ("openai/gpt-4o-mini", "openai/unknown-model")
NONCE = "12345678901234567890"


def _section(text: str, start: str, end: str | None) -> str:
    """The text from the heading `start` to the heading `end` (or the end)."""
    head = text.index(start)
    stop = text.index(end, head) if end else len(text)
    return text[head:stop]


def pieces() -> dict[str, tuple[str, str]]:
    """name → (text, what it is)."""
    renderer = Renderer()
    system = renderer.prompt("system", language="en")

    def user(schema_sent: bool) -> str:
        return renderer.prompt(
            "review",
            title="",
            body="",
            instructions="",
            language="en",
            units="",
            context="",
            legend=LEGEND,
            nonce=NONCE,
            schema_sent=schema_sent,
        )

    with_schema, without = user(True), user(False)
    fields = _section(with_schema, "## Answer format", "## The pull request")
    full = _section(without, "## Answer format", "## The pull request")
    return {
        "system prompt (all)": (system, "every call"),
        "  method": (_section(system, "## Method", "## Rules"), "part of the system prompt"),
        "  rules": (_section(system, "## Rules", None), "part of the system prompt"),
        "answer format, schema sent (fields' meaning)": (fields, "user message, with `response_format`"),
        "answer format, no schema (shape in prose + example)": (full, "user message, without it"),
        "user message rest (delimiters, legend, notices)": (
            with_schema.replace(fields, ""),
            "every call",
        ),
        "response schema (`response_format`)": (json.dumps(ANSWER_SCHEMA), "only with structured output"),
    }


def count(model: str, text: str) -> int:
    import litellm

    return int(litellm.token_counter(model=model, text=text))


def main() -> int:
    import litellm

    parts = pieces()
    head = "| piece | sent | " + " | ".join(f"`{m}`" for m in MODELS) + " |"
    print(head)
    print("|---|---|" + "---:|" * len(MODELS))
    for name, (text, sent) in parts.items():
        print(f"| {name} | {sent} | " + " | ".join(f"{count(m, text):,}" for m in MODELS) + " |")
    renderer_msgs = {
        True: parts["answer format, schema sent (fields' meaning)"][0],
        False: parts["answer format, no schema (shape in prose + example)"][0],
    }
    rest = parts["user message rest (delimiters, legend, notices)"][0]
    system = parts["system prompt (all)"][0]
    for model in MODELS:
        on = int(
            litellm.token_counter(
                model=model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": rest + renderer_msgs[True]},
                ],
            )
        ) + count(model, json.dumps(ANSWER_SCHEMA))
        off = int(
            litellm.token_counter(
                model=model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": rest + renderer_msgs[False]},
                ],
            )
        )
        print(
            f"\n`{model}`: fixed part of a call with the schema {on:,} tokens, without it {off:,} "
            f"(the schema costs {on - off:+,} per call)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
