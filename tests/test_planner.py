"""Issue 6: the planner spends the budget well, and what the loopback model server received shows it.

Every review here runs the real CLI code path in-process (`reviewer.cli.main`) against real git
repositories and the loopback model server; litellm sends real HTTP. The server counts prompts
the way the provider would: for `openai/gpt-4o-mini` with tiktoken's o200k (what litellm counts
with, so the estimate is exact), for an unknown model with cl100k.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reviewer.cli import main
from reviewer.schema import load_report_schema
from tests.conftest import Repo, git
from tests.factories import model_answer
from tests.fakes import pr_shapes
from tests.fakes.model_server import FakeModelServer, Reply, text

KNOWN = "openai/gpt-4o-mini"
UNKNOWN = "openai/fake-model"


def openai_count(body: dict[str, Any]) -> int:
    """Prompt tokens as OpenAI counts them for gpt-4o-mini (messages, plus the schema sent)."""
    import litellm

    tokens = int(litellm.token_counter(model="gpt-4o-mini", messages=body["messages"]))
    fmt = body.get("response_format")
    if fmt:
        tokens += int(
            litellm.token_counter(model="gpt-4o-mini", text=json.dumps(fmt["json_schema"]["schema"]))
        )
    return tokens


def cl100k_count(body: dict[str, Any]) -> int:
    import litellm

    return int(litellm.token_counter(model="fake-model", messages=body["messages"]))


def answering(server: FakeModelServer) -> Callable[[dict[str, Any]], Reply]:
    """An empty findings answer that reports the server's own prompt count as usage."""
    return lambda body: text(model_answer(), prompt_tokens=server.count_prompt(body), completion_tokens=20)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "IMREVIEW_MODEL", "IMREVIEW_API_BASE", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def build(tmp_path: Path, shape: pr_shapes.Shape, name: str = "repo") -> Repo:
    path = tmp_path / name
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    repo = Repo(path)
    repo.commit({p: base for p, (base, _) in shape.items() if base is not None} | {"README": "x\n"}, "base")
    repo.branch("feature")
    repo.commit({p: head for p, (_, head) in shape.items()}, "change")
    return repo


def review(
    repo: Repo, server: FakeModelServer, tmp_path: Path, *args: str, model: str = KNOWN
) -> dict[str, Any]:
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
    code = main(
        [
            "review",
            str(repo.path),
            "--base",
            "main",
            "--json",
            str(out),
            "--summary",
            str(tmp_path / "summary.md"),
            "--model",
            model,
            "--api-base",
            server.api_base,
            "--max-cost-usd",
            "100",
            "--max-output-tokens",
            "200000",
            "--max-calls",
            "200",
            *args,
        ]
    )
    assert code == 0
    report: dict[str, Any] = json.loads(out.read_text())
    jsonschema.Draft202012Validator(load_report_schema()).validate(report)
    return report


def served(server: FakeModelServer) -> int:
    """Prompt tokens of every request the server answered, as it counted them."""
    return sum(server.count_prompt(body) for body in server.requests if body not in server.refused)


def all_reviewed(report: dict[str, Any]) -> bool:
    return all(f["status"] == "reviewed" for f in report["coverage"]["files"] if f["status"] != "skipped")


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer(count_prompt=openai_count) as s:
        s.handler = answering(s)
        yield s


def test_a_pr_that_fits_within_5_percent_of_the_limit_is_reviewed_completely(
    tmp_path: Path, server: FakeModelServer
) -> None:
    repo = build(tmp_path, pr_shapes.medium())
    unlimited = review(repo, server, tmp_path, "--max-input-tokens", "1000000")
    need = served(server)
    assert all_reviewed(unlimited) and len(server.requests) == 1
    server.requests.clear()
    limit = int(need / 0.95) + 1
    report = review(repo, server, tmp_path, "--max-input-tokens", str(limit))
    assert all_reviewed(report), report["coverage"]
    assert report["coverage"]["lines_reviewed"] == report["coverage"]["lines_changed"]
    assert served(server) <= limit
    (call,) = report["budget"]["calls"]
    assert call["estimated_input_tokens"] == call["input_tokens"] == served(server)


def test_a_third_of_what_a_large_pr_needs_is_spent_to_85_percent_riskiest_first(
    tmp_path: Path, server: FakeModelServer
) -> None:
    repo = build(tmp_path, pr_shapes.large())
    review(repo, server, tmp_path, "--max-input-tokens", "10000000")
    need = served(server)
    server.requests.clear()
    limit = need // 3
    report = review(repo, server, tmp_path, "--max-input-tokens", str(limit))
    spent = served(server)
    assert 0.85 * limit <= spent <= limit, (spent, limit)
    assert report["budget"]["used"]["input_tokens"] == spent
    cov = report["coverage"]
    share = cov["lines_reviewed"] / cov["lines_changed"]
    assert 0.22 <= share <= 0.40, share
    status = {f["path"]: f for f in cov["files"]}
    assert status["src/auth/tokens.py"]["status"] == "reviewed"
    assert status["docs/architecture.md"]["status"] == "listed"
    assert status["docs/architecture.md"]["reason"] == "budget"
    assert report["budget"]["exhausted"] is True
    assert f"{spent:,} of {limit:,} input tokens" in (tmp_path / "summary.md").read_text()


def test_an_8k_model_on_12_files_costs_at_most_1_6_times_a_32k_model_and_reviews_every_hunk(
    tmp_path: Path,
) -> None:
    repo = build(tmp_path, pr_shapes.twelve_files())
    spent = {}
    for window in (8192, 32768):
        with FakeModelServer(count_prompt=cl100k_count, models_max_len=window, window=window) as s:
            s.handler = answering(s)
            report = review(repo, s, tmp_path, model=UNKNOWN)
            assert report["plan"]["window"] == window and report["plan"]["window_source"] == "server"
            assert all_reviewed(report) and not s.refused
            spent[window] = served(s)
    assert spent[8192] <= 1.6 * spent[32768], spent


def test_a_400_line_new_file_with_an_8k_window_is_reviewed_in_slices(tmp_path: Path) -> None:
    lines = pr_shapes.new_file("py", 400, 7).splitlines()
    repo = build(tmp_path, {"src/ingest/big.py": (None, "\n".join(lines) + "\n")})
    with FakeModelServer(
        count_prompt=cl100k_count, props_n_ctx=8192, window=8192, window_style="llamacpp"
    ) as s:
        s.handler = answering(s)
        report = review(repo, s, tmp_path, model=UNKNOWN)
    assert len(s.requests) >= 2 and not s.refused
    sent = [body["messages"][-1]["content"] for body in s.requests]
    assert all("[slice: diff lines" in content for content in sent)
    numbered = set()
    for content in sent:
        numbered |= {int(n) for n in re.findall(r"^\s*(\d+) \+ ", content, re.MULTILINE)}
    assert numbered == set(range(1, 401)), "every added line reached the model"
    (entry,) = report["coverage"]["files"]
    assert (entry["status"], entry["hunks_reviewed"]) == ("reviewed", 1)
    assert len(entry["slices"]) == len(s.requests) and all(sl["reviewed"] for sl in entry["slices"])
    assert entry["slices"][0]["start"] == 1 and entry["slices"][-1]["end"] == 400
    assert report["coverage"]["lines_reviewed"] == 400


def test_concurrency_1_and_4_cover_the_same_hunks(tmp_path: Path, server: FakeModelServer) -> None:
    repo = build(tmp_path, pr_shapes.large())
    seen = []
    for concurrency in ("1", "4"):
        server.requests.clear()
        report = review(
            repo, server, tmp_path, "--max-input-tokens", "15000", "--max-concurrency", concurrency
        )
        units = sorted(
            tuple(re.findall(r"^## File: (\S+)", body["messages"][-1]["content"], re.MULTILINE))
            for body in server.requests
        )
        seen.append((units, report["coverage"]))
    assert seen[0] == seen[1]
    assert seen[0][1]["lines_reviewed"] > 0


@pytest.mark.parametrize("style", ["vllm", "llamacpp"])
def test_a_server_window_smaller_than_assumed_is_learned_and_every_hunk_still_reviewed(
    tmp_path: Path, style: str
) -> None:
    repo = build(tmp_path, pr_shapes.medium())
    (repo.path / ".github").mkdir(exist_ok=True)
    repo.git("checkout", "-q", "main")
    repo.commit({".github/imreview.yml": "context_window: 32768\n"}, "config")
    repo.git("checkout", "-q", "feature")
    repo.git("merge", "-q", "--no-edit", "main")
    with FakeModelServer(count_prompt=cl100k_count, window=6000, window_style=style) as s:
        s.handler = answering(s)
        report = review(repo, s, tmp_path, model=UNKNOWN)
    assert len(s.refused) == 1, "one refusal teaches the window; nothing else is sent too long"
    assert all_reviewed(report), report["coverage"]
    assert report["plan"]["window"] <= 6000 and report["plan"]["window_assumed"] == 32768
    assert any("`context_window: 6000`" in w and "32,768" in w for w in report["warnings"])
    assert all(cl100k_count(body) <= 6000 for body in s.requests if body not in s.refused)


# the window probe (issue 6 item 5), at the client


def client_for(server: FakeModelServer, **config: Any) -> tuple[Any, list[str]]:
    from reviewer.budget import Budget, Limits
    from reviewer.config import Config
    from reviewer.llm import ModelClient

    warnings: list[str] = []
    cfg = Config(model=config.pop("model", UNKNOWN), api_base=server.api_base, **config)
    return ModelClient(cfg, Budget(Limits()), warn=warnings.append), warnings


def test_the_window_of_a_vllm_like_server_comes_from_v1_models() -> None:
    with FakeModelServer(models_max_len=16384) as s:
        client, warnings = client_for(s, model=KNOWN)
        assert client.window() == (16384, "server"), "the server's window beats litellm's 128k for the name"
    assert s.gets == ["/v1/models"] and warnings == []


def test_the_window_of_a_llamacpp_like_server_comes_from_props_not_n_ctx_train() -> None:
    with FakeModelServer(props_n_ctx=4096) as s:
        client, warnings = client_for(s)
        assert client.window() == (4096, "server")
    assert s.gets == ["/v1/models", "/props"] and warnings == []


def test_a_window_of_true_is_no_window() -> None:
    """JSON `true` is an int to Python: `"n_ctx": true` was believed as a window of one token."""
    from reviewer.model_facts import probe_window

    with FakeModelServer(props_n_ctx=True) as s:
        assert probe_window(s.api_base, "openai/m") is None
        client, _ = client_for(s)
        assert client.window() == (8192, "assumed")


def test_a_configured_smaller_window_wins_over_the_server_and_silence_means_8192_with_a_warning() -> None:
    with FakeModelServer(models_max_len=32768) as s:
        client, _ = client_for(s, context_window=8000)
        assert client.window() == (8000, "config")
    with FakeModelServer() as s:
        client, warnings = client_for(s)
        assert client.window() == (8192, "assumed")
        assert len(warnings) == 1 and "GET /v1/models" in warnings[0] and "context_window" in warnings[0]


def _helpers(n: int) -> str:
    return "".join(
        f'def helper_{i}(value, scale):\n    """Step {i} of the pipeline."""\n'
        f"    adjusted = value * scale + {i}\n    return round(adjusted, 2)\n\n\n"
        for i in range(n)
    )


def test_scans_price_of_a_pr_covers_a_review_that_shows_repository_context(
    tmp_path: Path, server: FakeModelServer
) -> None:
    """`planned_cost` reads no context, yet context is part of what the review sends: the price must
    not come in below what the review then spends (answers here use all of their `max_tokens`)."""
    from reviewer.config import build_config
    from reviewer.render import Renderer
    from reviewer.review import planned_cost
    from reviewer.source.local import LocalSource

    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    repo = Repo(path)
    base = "from lib.helpers import *\n\n\ndef run(items):\n    return items\n"
    repo.commit({"lib/helpers.py": _helpers(40), "app/pipeline.py": base}, "base")
    repo.branch("feature")
    calls = "".join(f"    items = [helper_{i}(x, {i}) for x in items]\n" for i in range(40))
    repo.commit({"app/pipeline.py": base.replace("    return items\n", calls + "    return items\n")}, "use")
    server.handler = lambda body: text(
        model_answer(), prompt_tokens=server.count_prompt(body), completion_tokens=int(body["max_tokens"])
    )
    report = review(repo, server, tmp_path)
    assert report["plan"]["context_files"] == ["lib/helpers.py"], "the review showed context"
    assert all_reviewed(report)
    spent = report["budget"]["used"]["cost_usd"]

    def price(share: float) -> float:
        overrides = {"model": KNOWN, "api_base": server.api_base, "max_cost_usd": 100.0}
        overrides |= {"max_output_tokens": 200_000, "max_calls": 200}
        config = build_config(file_layer={"context_share": share}, env={}, overrides=overrides)
        change = LocalSource(repo.path, base="main").change()
        needed = planned_cost(change, config, renderer=Renderer())
        assert needed is not None
        return needed

    assert price(0.0) < spent, "without context the price is below what the review spent"
    assert spent <= price(0.3) < 3 * spent


def test_a_model_given_the_response_schema_gets_the_short_answer_format(
    tmp_path: Path, server: FakeModelServer
) -> None:
    """The schema already says the answer's shape: the prompt keeps what the fields mean (line and
    side, quote, priorities in the method) and drops the example object, which a model without
    structured output still gets."""
    repo = build(tmp_path, pr_shapes.small())
    prompts = {}
    for model in (KNOWN, UNKNOWN):
        server.requests.clear()
        review(repo, server, tmp_path, model=model)
        (request,) = server.requests
        prompts[model] = (request["messages"][0]["content"], request["messages"][1]["content"], request)
    system, short, sent = prompts[KNOWN]
    _, long, plain = prompts[UNKNOWN]
    assert "response_format" in sent and "response_format" not in plain
    for rule in ('"side": "LEFT"', '"quote"', '"" for DELETE', '"findings": []', '"confidence"'):
        assert rule in short and rule in long, rule
    assert '{"findings": [{"path"' in long and '{"findings": [{"path"' not in short
    assert "P1 must fix before merge" in system and "trigger" in system and "exclusion" in system
    assert len(long) - len(short) > 1500


SIX_FINDINGS = {
    "findings": [
        {
            "path": "src/billing/invoice.py",
            "line": 40 + i,
            "end_line": None,
            "side": "RIGHT",
            "priority": "P2",
            "title": "The discount is applied after tax, so every discounted invoice overcharges "
            "the customer.",
            "trigger": "An invoice with a 10% discount code and a taxable line item, created through "
            "create_invoice(order, code='SAVE10').",
            "observation": "Tax is computed on the undiscounted subtotal: the total is 0.1 x tax too high, "
            "and the refund job later reports the difference as a mismatch.",
            "suggestion": "Apply `discount(subtotal)` before `tax(subtotal)` and keep the rounding "
            "after both.",
            "quote": "    total = tax(subtotal) - discount(subtotal)",
            "confidence": 0.8,
        }
        for i in range(6)
    ],
    "exclusions": [],
    "signals": [],
}
"""Six findings written the way the prompt asks (the default `max-findings` is 6)."""


def test_a_small_unit_gets_room_for_max_findings_whole_findings(tmp_path: Path) -> None:
    import litellm

    repo = build(tmp_path, pr_shapes.small())
    with FakeModelServer(count_prompt=cl100k_count, models_max_len=32768, window=32768) as s:
        s.handler = answering(s)
        review(repo, s, tmp_path, model=UNKNOWN)
        few = review(repo, s, tmp_path, "--max-findings", "2", model=UNKNOWN)
    first, second = s.requests
    six = int(litellm.token_counter(model="fake-model", text=json.dumps(SIX_FINDINGS, indent=2)))
    assert cl100k_count(first) < 3000, "a small unit"
    assert first["max_tokens"] >= six, (first["max_tokens"], six)
    two = int(
        litellm.token_counter(model="fake-model", text=json.dumps(SIX_FINDINGS["findings"][:2], indent=2))
    )
    assert two <= second["max_tokens"] < first["max_tokens"], "max-findings decides the room, not the unit"
    assert all_reviewed(few)


def test_a_tight_output_budget_plans_fewer_units_each_with_a_whole_answer(tmp_path: Path) -> None:
    repo = build(tmp_path, pr_shapes.twelve_files())
    with FakeModelServer(count_prompt=cl100k_count, models_max_len=7168, window=7168) as s:
        s.handler = answering(s)
        report = review(repo, s, tmp_path, model=UNKNOWN)
        whole = {body["max_tokens"] for body in s.requests}
        assert len(s.requests) >= 4 and all_reviewed(report) and len(whole) == 1
        (answer,) = whole
        s.requests.clear()
        limit = answer * 5 // 2
        tight = review(repo, s, tmp_path, "--max-output-tokens", str(limit), model=UNKNOWN)
    assert [body["max_tokens"] for body in s.requests] == [answer, answer, answer], (
        "whole answers, not five starved: two planned; the first answer (20 tokens, its count "
        "calibrating the stand-in) leaves room for two more whole ones in the re-plan"
    )
    assert tight["budget"]["used"]["output_tokens"] <= limit
    cov = tight["coverage"]
    assert 0 < cov["lines_reviewed"] < cov["lines_changed"] and not all_reviewed(tight)
    assert "budget" in {g["why"] for g in tight["gaps"]}, "what the budget could not pay for is disclosed"
