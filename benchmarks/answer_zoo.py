"""The model-answer zoo: answer styles real models and servers are documented to return, each run
through `imreview review` (in-process, the real CLI path) against the loopback model on a planted PR.

The PR is a real git repository in a temp dir with 5 planted defects over 4 files. For each style
the loopback model names all 5 defects, written the way that style writes them (its source is in
the table); the question is how many reach the report on their exact line, with no fabricated
finding, and what that cost in calls and tokens.

    /work/main/.venv/bin/python benchmarks/answer_zoo.py          # writes benchmarks/ANSWER_ZOO.md
    /work/main/.venv/bin/python benchmarks/answer_zoo.py --quick  # prints the table only

tests/test_answer_zoo.py runs every style as a test.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.model_server import FakeModelServer, Reply, chat_completion  # noqa: E402

MODEL = "openai/fake-model"
CONTINUE_MARK = "ended before it was complete"

# --- the planted PR ------------------------------------------------------------------------------

BASE = {
    "app/db.py": (
        "import sqlite3\n\n\ndef connect(path):\n    return sqlite3.connect(path)\n\n\n"
        "def find_user(conn, name):\n    cursor = conn.cursor()\n"
        '    cursor.execute("SELECT * FROM users WHERE name = ?", (name,))\n    return cursor.fetchone()\n'
    ),
    "app/auth.py": (
        "import hmac\n\n\ndef check_password(given, stored):\n"
        "    return hmac.compare_digest(given, stored)\n\n\n"
        "def page(items, size):\n    out = []\n    for i in range(0, len(items), size):\n"
        "        out.append(items[i : i + size])\n    return out\n"
    ),
    "app/fetch.py": (
        "import requests\n\n\ndef get_json(url):\n    response = requests.get(url, timeout=10)\n"
        "    response.raise_for_status()\n    return response.json()\n"
    ),
    "app/cache.py": (
        "import json\n\n\ndef load(path):\n    with open(path) as handle:\n        return json.load(handle)\n"
    ),
}
HEAD = {
    "app/db.py": (
        "import sqlite3\n\n\ndef connect(path):\n    return sqlite3.connect(path)\n\n\n"
        "def find_user(conn, name):\n    cursor = conn.cursor()\n"
        "    cursor.execute(f\"SELECT * FROM users WHERE name = '{name}'\")\n"
        "    return cursor.fetchone()\n\n\n"
        "def count_users(conn):\n    return conn.execute('SELECT COUNT(*) FROM users').fetchone()[0]\n"
    ),
    "app/auth.py": (
        "import hmac\n\n\ndef check_password(given, stored):\n    return given == stored\n\n\n"
        "def page(items, size):\n    out = []\n    for i in range(0, len(items) + size, size):\n"
        "        out.append(items[i : i + size])\n    return out\n"
    ),
    "app/fetch.py": (
        "import requests\n\n\ndef get_json(url):\n    response = requests.get(url)\n"
        "    response.raise_for_status()\n    return response.json()\n"
    ),
    "app/cache.py": (
        "import json\n\n\ndef load(path):\n    try:\n        with open(path) as handle:\n"
        "            return json.load(handle)\n    except Exception:\n        pass\n"
    ),
}


@dataclass(frozen=True)
class Planted:
    path: str
    line: int
    quote: str
    priority: str
    title: str
    observation: str
    fix: str


PLANTED = (
    Planted(
        "app/db.py",
        10,
        "cursor.execute(f\"SELECT * FROM users WHERE name = '{name}'\")",
        "P1",
        "SQL injection through the user name",
        "a name like x' OR '1'='1 returns every user",
        "pass the name as a query parameter",
    ),
    Planted(
        "app/auth.py",
        5,
        "return given == stored",
        "P2",
        "Password compared with == leaks timing",
        "the comparison stops at the first differing byte",
        "use hmac.compare_digest",
    ),
    Planted(
        "app/auth.py",
        10,
        "for i in range(0, len(items) + size, size):",
        "P2",
        "Pagination adds an empty last page",
        "an exact multiple of size yields a trailing empty page",
        "iterate to len(items)",
    ),
    Planted(
        "app/fetch.py",
        5,
        "response = requests.get(url)",
        "P2",
        "HTTP call without a timeout can hang forever",
        "a server that never answers blocks the worker",
        "pass timeout=10",
    ),
    Planted(
        "app/cache.py",
        8,
        "except Exception:",
        "P3",
        "Every error is swallowed and None returned",
        "a corrupt cache file silently becomes None",
        "catch only FileNotFoundError",
    ),
)


def git(cwd: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def planted_repo(root: Path) -> Path:
    """A real git repository: `main` has the base, `feature` the change with the planted defects."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for files in (BASE, HEAD):
        for name, content in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(content, encoding="utf-8")
        if files is HEAD:
            git(repo, "checkout", "-q", "-b", "feature")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", "base" if files is BASE else "change")
    return repo


# --- answer styles -------------------------------------------------------------------------------


def ours(p: Planted, **extra: Any) -> dict[str, Any]:
    """A finding in our exact schema."""
    return {
        "path": p.path,
        "line": p.line,
        "end_line": None,
        "side": "RIGHT",
        "priority": p.priority,
        "title": p.title,
        "trigger": "the input the title names",
        "observation": p.observation,
        "suggestion": p.fix,
        "quote": p.quote,
        "confidence": 0.9,
        **extra,
    }


SEVERITY = {"P1": "high", "P2": "medium", "P3": "low"}


def answer(findings: Sequence[dict[str, Any]], **top: Any) -> str:
    return json.dumps({"findings": list(findings), "exclusions": [], "signals": [], **top}, indent=1)


@dataclass(frozen=True)
class Turn:
    """One reply: its content, `finish_reason`, and optional `reasoning_content` (sent beside it)."""

    content: str
    finish_reason: str = "stop"
    reasoning: str | None = None


def cut_after(text: str, marker_count: int, marker: str = '"path"', extra: int = 40) -> Turn:
    """`text` cut `extra` characters into the `marker_count`+1-th finding, as a server cuts at
    `max_tokens` (finish_reason "length")."""
    at = -1
    for _ in range(marker_count + 1):
        at = text.index(marker, at + 1)
    return Turn(text[: at + extra], "length")


@dataclass(frozen=True)
class Style:
    name: str
    source: str
    first: Callable[[Sequence[Planted]], Turn]
    rest: Callable[[Sequence[Planted], str], Turn] | None = None
    """The continuation's answer, given the planted defects and the continuation prompt."""


def _not_kept(planted: Sequence[Planted], prompt: str) -> list[Planted]:
    return [p for p in planted if p.title not in prompt]


def continue_ours(planted: Sequence[Planted], prompt: str) -> Turn:
    return Turn(answer([ours(p) for p in _not_kept(planted, prompt)]))


def exact(planted: Sequence[Planted]) -> Turn:
    return Turn(answer([ours(p) for p in planted]))


def with_findings(
    build: Callable[[Planted], dict[str, Any]], **top: Any
) -> Callable[[Sequence[Planted]], Turn]:
    return lambda planted: Turn(answer([build(p) for p in planted], **top))


def severity_word(words: dict[str, str]) -> Callable[[Planted], dict[str, Any]]:
    return lambda p: ours(p, priority=words[p.priority])


def minimal(p: Planted) -> dict[str, Any]:
    return {
        "path": p.path,
        "line": p.line,
        "priority": p.priority,
        "title": p.title,
        "observation": p.observation,
        "suggestion": p.fix,
    }


def issues_shape(p: Planted, offset: int = 0) -> dict[str, Any]:
    return {
        "file": p.path,
        "lineNumber": p.line + offset,
        "severity": SEVERITY[p.priority],
        "message": p.title,
    }


OFFSETS = (1, -2, 3, -1, 2)


STYLES: tuple[Style, ...] = (
    Style("exact schema", "OpenAI structured outputs (json_schema, strict)", exact),
    Style(
        "<think> first",
        "Qwen3 on vLLM without --reasoning-parser: <think>…</think> in content (vllm#21130)",
        lambda ps: Turn(
            f"<think>\nLet me check {ps[0].path} for injection {{quote}}.\n</think>\n\n{exact(ps).content}"
        ),
    ),
    Style(
        "lone </think>",
        "Qwen3-Thinking-2507 / DeepSeek-R1 templates open <think> in the prompt: only </think> "
        "(QwenLM/Qwen3-VL#1504)",
        lambda ps: Turn(f"The diff changes four files; check each.\n</think>\n{exact(ps).content}"),
    ),
    Style(
        "reasoning_content beside content",
        "DeepSeek API deepseek-reasoner: reasoning_content at the level of content (api-docs.deepseek.com)",
        lambda ps: Turn(exact(ps).content, reasoning='First I read app/db.py {"draft": true}'),
    ),
    Style(
        "prose + fenced block",
        "Gemini returning ```json fenced JSON (langgenius/dify#31966)",
        lambda ps: Turn(
            f"Here is my review.\n\n```json\n{exact(ps).content}\n```\nLet me know if you need more."
        ),
    ),
    Style(
        "chatty preamble, no fence",
        'Claude without prefill: "Here\'s the JSON you requested:" before the object '
        "(Anthropic prefill guide)",
        lambda ps: Turn(f"Sure! Here's the JSON you requested:\n{exact(ps).content}"),
    ),
    Style(
        "prose after the object",
        "Ollama models adding a sentence after the JSON (567-labs/instructor#356, trailing characters)",
        lambda ps: Turn(f"{exact(ps).content}\n\nI hope this helps, please let me know."),
    ),
    Style(
        "string line numbers",
        'small models writing "line": "18" (issue 17)',
        with_findings(lambda p: ours(p, line=str(p.line))),
    ),
    Style(
        "./ paths",
        "models prefixing paths with ./ (issue 17)",
        with_findings(lambda p: ours(p, path=f"./{p.path}")),
    ),
    Style(
        "b/ paths",
        "models copying the diff header's b/ prefix (git diff output)",
        with_findings(lambda p: ours(p, path=f"b/{p.path}")),
    ),
    Style(
        "severity high/medium/low",
        "review prompts with severity low|medium|high (drep CodeIssue, many review tools)",
        with_findings(severity_word(SEVERITY)),
    ),
    Style(
        "severity Critical/Major/Minor",
        "Critical/Major/Minor severity scale (tafreeman/prompts code-review-expert-structured)",
        with_findings(severity_word({"P1": "Critical", "P2": "Major", "P3": "Minor"})),
    ),
    Style(
        "severity BLOCKER/moderate/nit",
        "review-bot vocabularies: blocker, moderate, nit (issue 17)",
        with_findings(severity_word({"P1": "BLOCKER", "P2": "moderate", "P3": "nit"})),
    ),
    Style(
        "numeric priority",
        "priority as a number 1-3 (small models asked for P1-P3)",
        with_findings(lambda p: ours(p, priority=int(p.priority[1]))),
    ),
    Style(
        "fields dropped",
        "only path, line, priority, title, observation, suggestion (issue 17, small self-hosted models)",
        with_findings(minimal),
    ),
    Style(
        "issues wrapper, other field names",
        "{issues:[{file,lineNumber,severity,message}]} (issue 17; sevigo/code-warden StructuredReview)",
        lambda ps: Turn(json.dumps({"issues": [issues_shape(p) for p in ps]})),
    ),
    Style(
        "comments wrapper, file_path/line_number/comment",
        "code-warden Suggestion shape: file_path, line_number, severity, comment",
        lambda ps: Turn(
            json.dumps(
                {
                    "summary": "Four files changed.",
                    "comments": [
                        {
                            "file_path": p.path,
                            "line_number": p.line,
                            "severity": SEVERITY[p.priority].title(),
                            "comment": f"{p.title}. {p.observation}.",
                        }
                        for p in ps
                    ],
                }
            )
        ),
    ),
    Style(
        "review object wrapper",
        'answers nested one level down: {"review": {"findings": [...]}}',
        lambda ps: Turn(json.dumps({"review": json.loads(exact(ps).content)})),
    ),
    Style(
        "bare list",
        "a JSON array of findings with no top-level object (llama.cpp json grammar, Ollama format=json)",
        lambda ps: Turn(json.dumps([ours(p) for p in ps])),
    ),
    Style(
        "filename/start_line/description/recommendation",
        "novaguard LLMSingleFinding-like: file_path, line_start, description, recommendation",
        lambda ps: Turn(
            json.dumps(
                {
                    "findings": [
                        {
                            "filename": p.path,
                            "start_line": p.line,
                            "severity": SEVERITY[p.priority],
                            "description": p.observation,
                            "issue": p.title,
                            "recommendation": p.fix,
                            "code": p.quote,
                        }
                        for p in ps
                    ]
                }
            )
        ),
    ),
    Style(
        "location path:line",
        '"[SEVERITY] Title — path/to/file.ext:line" review outputs (PaulRBerg/agent-skills output schema)',
        lambda ps: Turn(
            json.dumps(
                {
                    "findings": [
                        {
                            "location": f"{p.path}:{p.line}",
                            "severity": SEVERITY[p.priority].upper(),
                            "title": p.title,
                        }
                        for p in ps
                    ]
                }
            )
        ),
    ),
    Style(
        "confidence as a word / percent",
        "confidence: high | medium | low (agent-skills output schema) and 85 for 85 %",
        with_findings(lambda p: ours(p, confidence="high" if p.priority == "P1" else 85)),
    ),
    Style(
        "trailing comma",
        "a trailing comma before ] (lm-format-enforcer#80: spurious commas from llama-cpp-python)",
        lambda ps: Turn(exact(ps).content.replace('\n ],\n "exclusions"', ',\n ],\n "exclusions"', 1)),
    ),
    Style(
        "unclosed outer brace",
        "a malformed tail: the last } missing (graphrag#663 with small Ollama models)",
        lambda ps: Turn(exact(ps).content.rstrip().removesuffix("}")),
    ),
    Style(
        "single quotes and comments",
        "JavaScript-style JSON: single quotes, // comments (small llama.cpp models without a grammar)",
        lambda ps: Turn(
            "{\n // review\n 'findings': ["
            + ",".join(json.dumps(ours(p)).replace('"priority"', "'priority'") for p in ps)
            + "],\n 'exclusions': [], 'signals': []}"
        ),
    ),
    Style(
        "cut after the third finding",
        "finish_reason length at max_tokens (OpenAI API reference; watsonx JSON mode note)",
        lambda ps: cut_after(exact(ps).content, 3),
        continue_ours,
    ),
    Style(
        "cut inside fenced block",
        "Gemini fenced JSON cut at MAX_TOKENS (Vertex AI FinishReason.MAX_TOKENS)",
        lambda ps: cut_after(f"```json\n{exact(ps).content}\n```", 4, extra=25),
        continue_ours,
    ),
    Style(
        "cut, then the continuation repeats",
        "a continuation that writes the kept findings again (OpenAI community: prompt again to continue)",
        lambda ps: cut_after(exact(ps).content, 2),
        lambda ps, prompt: exact(ps),
    ),
    Style(
        "cut after <think>, in the findings",
        "DeepSeek-R1 on llama.cpp --reasoning-format none: thinking in content, then cut (llama.cpp#25292)",
        lambda ps: cut_after(f"<think>\nfive defects\n</think>\n{exact(ps).content}", 1, extra=10),
        continue_ours,
    ),
    Style(
        "lines off by up to 3, each repeated",
        "issue 17 row 6: drifting line numbers, every finding twice",
        lambda ps: Turn(
            answer([ours(p, line=p.line + OFFSETS[PLANTED.index(p)]) for p in ps for _ in (0, 1)])
        ),
    ),
    Style(
        "issues shape, lines off, repeated",
        "issue 17 row 6 as reported: {issues:[{file,lineNumber,severity,message}]}, lines off by up to 3, "
        "each twice, no quote",
        lambda ps: Turn(
            json.dumps({"issues": [issues_shape(p, OFFSETS[PLANTED.index(p)]) for p in ps for _ in (0, 1)]})
        ),
    ),
    Style(
        "issues shape with code, lines off, repeated",
        "row 6 with the code line the model quotes (`code`), so the drift can be corrected",
        lambda ps: Turn(
            json.dumps(
                {
                    "issues": [
                        {**issues_shape(p, OFFSETS[PLANTED.index(p)]), "code": p.quote}
                        for p in ps
                        for _ in (0, 1)
                    ]
                }
            )
        ),
    ),
    Style(
        "quote with + and line number",
        "quotes copied with the diff's + marker and line prefix (models echoing numbered diffs)",
        with_findings(lambda p: ours(p, quote=f"+{p.quote}", line=p.line + 1)),
    ),
    Style(
        "pretty-printed with tabs and CRLF",
        "Windows-hosted servers and LM Studio returning CRLF-indented JSON",
        lambda ps: Turn(json.dumps(json.loads(exact(ps).content), indent="\t").replace("\n", "\r\n")),
    ),
    Style(
        "answer inside reasoning_content, no content",
        "DeepSeek-R1 / Qwen3 on vLLM --reasoning-parser that never closed </think>: the parser makes "
        "everything reasoning_content, content null (vllm/reasoning, docs.vllm.ai reasoning_outputs)",
        lambda ps: Turn(
            "",
            reasoning=f"Check {ps[0].path}: rows[0] and {{id}} are built from input; [a, b] pairs. " * 8
            + f"\nFinal answer:\n{exact(ps).content}",
        ),
    ),
)
"""Every answer style; the six rows of issue 17's table are `exact schema`, `<think> first`, the
severity rows, `fields dropped`, `cut after the third finding`, `trailing comma` and the two
`issues`/repeated rows."""

ISSUE_ROWS = (
    "exact schema",
    "<think> first",
    "prose + fenced block",
    "string line numbers",
    "./ paths",
    "severity high/medium/low",
    "fields dropped",
    "cut after the third finding",
    "trailing comma",
    "issues shape, lines off, repeated",
)


# --- running one style ----------------------------------------------------------------------------


class ZooModel:
    """The loopback model's handler for one style: review calls get the style's answer for the
    planted defects the prompt shows; a continuation gets `rest`; a repair the exact schema;
    verification calls hold every finding."""

    def __init__(self, style: Style) -> None:
        self.style = style
        self.kinds: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        prompt = str(messages[-1].get("content") or "") if messages else ""
        shown = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        planted = [p for p in PLANTED if p.quote in shown]
        if '"verdicts"' in prompt:
            self.kinds.append("verify")
            ids = [line[4:] for line in prompt.splitlines() if line.startswith("id: ")]
            return self._reply(
                Turn(json.dumps({"verdicts": [{"id": i, "holds": True, "reason": "seen"} for i in ids]}))
            )
        if CONTINUE_MARK in prompt:
            self.kinds.append("continue")
            rest = self.style.rest or continue_ours
            return self._reply(rest(planted, prompt))
        if any(m.get("role") == "assistant" for m in messages):
            self.kinds.append("repair")
            return self._reply(exact(planted))
        self.kinds.append("review")
        return self._reply(self.style.first(planted))

    @staticmethod
    def _reply(turn: Turn) -> Reply:
        body = chat_completion(
            turn.content,
            prompt_tokens=0,  # no count: the client charges its own, as for a server that gives none
            completion_tokens=max(1, (len(turn.content) + len(turn.reasoning or "")) // 4),
            finish_reason=turn.finish_reason,
        )
        if turn.reasoning is not None:
            body["choices"][0]["message"]["reasoning_content"] = turn.reasoning
        return Reply(200, json.dumps(body).encode(), (("Content-Type", "application/json"),))


@dataclass(frozen=True)
class Result:
    style: str
    source: str
    kept: int
    exact_line: int
    fabricated: int
    units: int
    review_calls: int
    verify_calls: int
    tokens: int
    truncated_gaps: int
    verdict: str

    @property
    def calls_per_unit(self) -> float:
        return self.review_calls / max(self.units, 1)


def run_style(style: Style, workdir: Path, repo: Path | None = None, *extra: str) -> Result:
    """`imreview review` of the planted repo (`repo`, or a fresh one in `workdir`) with the style's
    loopback model, in-process; `extra` arguments go to the command line."""
    return measure(style, review(style, workdir, repo, *extra))


def review(style: Style, workdir: Path, repo: Path | None = None, *extra: str) -> dict[str, Any]:
    """The report of one `imreview review` run with the style's loopback model."""
    from reviewer.cli import main

    repo = repo or planted_repo(workdir)
    report_path = workdir / "report.json"
    model = ZooModel(style)
    with FakeModelServer(handler=model) as server:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(
                [
                    "review",
                    str(repo),
                    "--base",
                    "main",
                    "--json",
                    str(report_path),
                    "--model",
                    MODEL,
                    "--api-base",
                    server.api_base,
                    "--max-calls",
                    "12",
                    *extra,
                ]
            )
    if code != 0 or not report_path.exists():
        raise RuntimeError(f"{style.name}: imreview exited {code}: {err.getvalue()[-2000:]}")
    report: dict[str, Any] = json.loads(report_path.read_text())
    return report


def near(finding: dict[str, Any], p: Planted) -> bool:
    """The finding reports planted defect `p`: same file, within 3 lines (or no line, same title)."""
    if finding["path"] != p.path:
        return False
    if finding["line"] is None:
        return finding["title"] == p.title
    return abs(finding["line"] - p.line) <= 3


def measure(style: Style, report: dict[str, Any]) -> Result:
    llm = [f for f in report["findings"] if f["source"] == "llm"]
    kept = sum(1 for p in PLANTED if any(near(f, p) for f in llm))
    exact_line = sum(
        1 for p in PLANTED if any((f["path"], f["line"]) == (p.path, p.line) and f["anchored"] for f in llm)
    )
    fabricated = sum(1 for f in llm if not any(near(f, p) for p in PLANTED))
    phases = report["budget"]["by_phase"]
    review_calls = phases["review"]["calls"] + phases["repair"]["calls"]
    tokens = sum(phases[k]["input_tokens"] + phases[k]["output_tokens"] for k in ("review", "repair"))
    return Result(
        style=style.name,
        source=style.source,
        kept=kept,
        exact_line=exact_line,
        fabricated=fabricated,
        units=report["plan"]["units"],
        review_calls=review_calls,
        verify_calls=phases["verify"]["calls"],
        tokens=tokens,
        truncated_gaps=sum(1 for g in report["gaps"] if g["why"] == "truncated"),
        verdict=report["verdict"],
    )


def cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, tags and fences shown as text."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("```", "`` ` ``")


def table(results: Sequence[Result]) -> str:
    rows = [
        "| # | answer style | source | kept | on exact line | fabricated | units | calls (review+repair) "
        "| tokens | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(results, 1):
        rows.append(
            f"| {n} | {cell(r.style)} | {cell(r.source)} | {r.kept}/{len(PLANTED)} | "
            f"{r.exact_line}/{len(PLANTED)} | "
            f"{r.fabricated} | {r.units} | {r.review_calls} | {r.tokens:,} | {r.verdict} |"
        )
    planted = len(PLANTED) * len(results)
    exact_total = sum(r.exact_line for r in results)
    units = sum(r.units for r in results)
    calls = sum(r.review_calls for r in results)
    rows.append(
        f"| | **total** ({len(results)} styles) | | {sum(r.kept for r in results)}/{planted} | "
        f"{exact_total}/{planted} ({100 * exact_total / planted:.1f} %) | "
        f"{sum(r.fabricated for r in results)} | "
        f"{units} | {calls} ({calls / max(units, 1):.2f} per unit) | {sum(r.tokens for r in results):,} | |"
    )
    return "\n".join(rows)


def run_all(styles: Sequence[Style] = STYLES) -> list[Result]:
    results = []
    for style in styles:
        with tempfile.TemporaryDirectory(prefix="imreview-zoo-") as tmp:
            results.append(run_style(style, Path(tmp)))
    return results


HEADER = """# The model-answer zoo

`benchmarks/answer_zoo.py` runs `imreview review` (the real CLI path, in-process) against the
loopback model on a planted PR: a real git repository with 5 planted defects over 4 files
(`app/db.py` SQL injection P1, `app/auth.py` timing-unsafe compare and an off-by-one page, `app/fetch.py`
a request without timeout, `app/cache.py` a swallowed exception). In every style the model names all
5 defects, written the way that style writes them; the source column says where the style comes from.
`tests/test_answer_zoo.py` runs every row as a test.

- **kept**: planted defects in the report (within 3 lines); **on exact line**: anchored on the
  planted line; **fabricated**: model findings on no planted line.
- **calls**: review and repair/continuation calls (verification calls come on top: one per run
  here); **tokens**: input + output tokens of those calls, counted by the client (the loopback
  server reports no prompt tokens).

Regenerate: `python benchmarks/answer_zoo.py`.

"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="print the table, write nothing")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in ("OPENAI_API_KEY", "IMREVIEW_MODEL", "IMREVIEW_API_BASE", "GITHUB_TOKEN"):
        os.environ.pop(name, None)
    text = table(run_all())
    print(text)
    if not args.quick:
        (ROOT / "benchmarks" / "ANSWER_ZOO.md").write_text(HEADER + text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
