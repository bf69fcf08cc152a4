"""Test scaffolding the test files share: the one finding builder (typed, or as a model writes it),
the model's answer around such findings, the arguments of a local review against the model server,
the loopback GitHub set up with its tokens and repository, the two-file pull request the
publishing tests write to, and a client for it; for the planning tests, a plan counted in quarters
of the text and the check that it places every line."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reviewer.diff import DiffFile, LineIndex, parse_github_file, parse_patch
from reviewer.plan import WHOLE_HUNK, Plan, PlanOptions, make_plan
from reviewer.report import Finding, finding_id
from reviewer.source.github import GitHubClient
from tests.conftest import Repo, cli_env, run_cli
from tests.fakes.github_server import FakeGitHub, diff_entry

REPO = "o/r"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
BASE = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
PATCH = (
    "@@ -10,4 +10,5 @@ def handler():\n"
    "     a = 1\n"
    "-    b = 2\n"
    "+    b = 3\n"
    "+    c = b * 2\n"
    "     return a\n"
    "     # end\n"
    "@@ -40,2 +41,3 @@\n"
    " x = 1\n"
    "+y = 2\n"
    " z = 3"
)
WIDE_PATCH = "@@ -0,0 +1,40 @@\n" + "\n".join(f"+line {i}" for i in range(1, 41))

# --------------------------------------------------------------------------- findings

#: What a finding says unless a test says otherwise: the division the e2e diffs add.
FINDING_DEFAULTS: dict[str, Any] = {
    "path": "app.py",
    "line": 2,
    "priority": "P2",
    "title": "Division by zero when b is 0",
    "trigger": "div(1, 0)",
    "observation": "raises ZeroDivisionError",
    "suggestion": "check b before dividing",
    "quote": "total = a / b",
    "confidence": 0.8,
}


def finding(**fields: Any) -> Finding:
    """The one finding builder: a typed `Finding` from FINDING_DEFAULTS and `fields` (any Finding
    field); `id` follows path, quote and title unless given. Files that need other defaults bind
    them once: `_finding = functools.partial(finding, path="src/app.py", priority="P1")`."""
    values: dict[str, Any] = {"end_line": None, "side": "RIGHT", "source": "llm", **FINDING_DEFAULTS}
    values.update(fields)
    values.setdefault("id", finding_id(values["path"], values["quote"], values["title"]))
    return Finding(**values)


def model_finding(**fields: Any) -> dict[str, Any]:
    """The same finding as a model writes it in its answer: FINDING_DEFAULTS and `fields`, which
    may add keys the answer schema does not know or give values of the wrong type on purpose."""
    return {**FINDING_DEFAULTS, **fields}


#: The finding the parsing and verification tests anchor to their `src/app.py` handler patch: a
#: debug flag that grants admin rights, on line 11.
FLAG_FINDING: dict[str, Any] = {
    "path": "src/app.py",
    "line": 11,
    "priority": "P1",
    "title": "Debug flag grants admin",
    "trigger": "request.debug is true",
    "observation": "any user with ?debug=1 gets all rights",
    "suggestion": "drop `or request.debug`",
    "quote": "if user.is_admin or request.debug:",
    "confidence": 0.9,
}


def model_answer(*findings: Mapping[str, Any], **fields: Any) -> str:
    """A review answer as the model sends it (JSON text): `findings` (see `model_finding`), no
    exclusions or signals, and any other top-level `fields` (`unverified`, or keys the schema does
    not know). `model_answer()` is the answer that finds nothing."""
    return json.dumps({"findings": list(findings), "exclusions": [], "signals": [], **fields})


def review_args(repo: Path, api_base: str, *args: str, model: str = "openai/fake-model") -> list[str]:
    """`imreview review REPO --base main` against the model server at `api_base`, then `args`."""
    return ["review", str(repo), "--base", "main", "--model", model, "--api-base", api_base, *args]


def review_with_outputs(
    repo: Repo, tmp_path: Path, *args: str, env: Mapping[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None, str]:
    """`imreview review REPO --base main` writing report.json and comment.md under `tmp_path/out`,
    then `args`: the process, the report (None when it wrote none) and the comment ("" likewise)."""
    out = tmp_path / "out"
    proc = run_cli(
        [
            *("review", str(repo.path), "--base", "main"),
            *("--json", str(out / "report.json"), "--comment", str(out / "comment.md")),
            *args,
        ],
        cwd=tmp_path,
        env=cli_env(tmp_path, env),
    )
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    comment = (out / "comment.md").read_text() if (out / "comment.md").exists() else ""
    return proc, report, comment


def closed_port() -> int:
    """A loopback port nothing listens on: a model endpoint that cannot be reached."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def fake_github(
    tokens: Mapping[str, Mapping[str, Any]], *, repo: str | None = None, strict: bool = False
) -> Iterator[FakeGitHub]:
    """A running fake GitHub knowing `tokens` (each token → `add_token` keywords: `login`, `write`,
    `bot`) and `repo`; `strict` fails the test when a request or response broke GitHub's contract."""
    with FakeGitHub() as server:
        for token, options in tokens.items():
            server.add_token(token, **options)
        if repo is not None:
            server.add_repo(repo)
        yield server
        if strict:
            assert server.violations == []


def add_two_file_pull(server: FakeGitHub, number: int = 7) -> None:
    """PR `number` of REPO at HEAD: `src/app.py` (two hunks) modified and `src/wide.py` (40 lines) added."""
    server.add_pull(
        REPO,
        number,
        head_sha=HEAD,
        base_sha=BASE,
        files=[diff_entry("src/app.py", PATCH), diff_entry("src/wide.py", WIDE_PATCH, status="added")],
    )


def added_file(path: str, lines: list[str]) -> str:
    """The git patch that adds `path` holding `lines`."""
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def files_of(*patches: str) -> tuple[DiffFile, ...]:
    """The changed files of `patches`, as one diff."""
    return parse_patch("".join(patches))


def line_index() -> LineIndex:
    """The commentable lines of the two-file pull request."""
    return LineIndex.build(
        [
            parse_github_file(filename="src/app.py", status="modified", patch=PATCH),
            parse_github_file(filename="src/wide.py", status="added", patch=WIDE_PATCH),
        ]
    )


def github_client(server: FakeGitHub, token: str = "ours", **options: Any) -> GitHubClient:
    """Our GitHub client on the fake, without the pause GitHub asks for between writes; `options`
    are GitHubClient's others (retries, timeout)."""
    return GitHubClient(token, server.url, seconds_between_writes=0.0, **options)


# --------------------------------------------------------------------------- planning


def quarter(text: str) -> int:
    """The planning tests' token count: a quarter of the characters, at least 1."""
    return max(1, len(text) // 4)


def quarter_plan(files: Sequence[DiffFile], *, overhead: int, **options: Any) -> Plan:
    """`make_plan` counting tokens as `quarter`, with `overhead` tokens of prompt around every call;
    `options` are its other arguments (unit_tokens, allowance, context, context_share...)."""
    return make_plan(
        files,
        PlanOptions(
            count_tokens=quarter,
            overhead=lambda nonce: overhead,
            measure=lambda nonce, text, context: overhead + quarter(text) + quarter(context),
            **options,
        ),
    )


def assert_every_line_placed(plan: Plan, files: Sequence[DiffFile]) -> None:
    """Every line of every hunk is in a unit's parts or in `plan.unplaced`."""
    for f in files:
        for hunk in f.hunks:
            seen: set[int] = set()
            for u in plan.units:
                for p in u.parts:
                    if (p.path, p.hunk_index) == (f.path, hunk.index):
                        seen.update(range(*(p.lines or (0, len(hunk.lines)))))
            for x in plan.unplaced:
                if (x.path, x.hunk_index) == (f.path, hunk.index):
                    start, stop = x.lines if x.lines != WHOLE_HUNK else (0, len(hunk.lines))
                    seen.update(range(start, min(stop, len(hunk.lines))))
            assert seen == set(range(len(hunk.lines)))
