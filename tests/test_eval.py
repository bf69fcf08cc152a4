"""`imreview eval`: the shipped dataset, scoring rules, and pipeline fidelity with an oracle model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reviewer.errors import UsageError
from reviewer.evaluate import Label, load_dataset, match
from reviewer.report import Finding
from tests.conftest import ROOT, cli_env, git, run_cli
from tests.factories import finding
from tests.fakes.model_server import FakeModelServer
from tests.fakes.oracle_model import Oracle, Planted

BUILDER = ROOT / "benchmarks" / "eval" / "build_dataset.py"
DATASET = ROOT / "benchmarks" / "eval" / "dataset.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("evalset")
    subprocess.run([sys.executable, str(BUILDER), str(out)], check=True, capture_output=True)
    return out / "dataset.json"


def test_the_committed_dataset_is_what_the_builder_generates(built: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BUILDER), "--check", str(DATASET)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(built.read_text()) == json.loads(DATASET.read_text())


def test_the_shipped_set_covers_every_priority_near_misses_context_and_patches(built: Path) -> None:
    items = load_dataset(built)
    expected = [e for i in items for e in i.expected]
    assert {e.severity for e in expected} == {"P1", "P2", "P3"}
    assert sum(len(i.rejected) for i in items) >= 4
    assert any(i.diff is not None for i in items) and any(i.repo is not None for i in items)
    raw = json.loads(built.read_text())
    assert sum("repository context" in item.get("notes", "") for item in raw) >= 3
    for item in items:  # every label points at a real line of the head
        for label in (*item.expected, *item.rejected):
            repo = item.repo or built.parent / "repos" / item.id
            head = git(repo, "show", f"feature:{label.path}").splitlines()
            assert 1 <= label.line <= len(head)


def _finding(path: str, line: int | None, end: int | None = None, title: str = "t") -> Finding:
    blank = {"trigger": "", "observation": "", "suggestion": "", "quote": ""}
    return finding(
        id=f"{path}{line}{title}"[:12],
        title=title,
        path=path,
        line=line,
        end_line=end,
        confidence=0.5,
        **blank,
    )


def test_matching_is_by_path_and_five_lines_one_to_one() -> None:
    labels = [Label("a.py", 10, "d", "P1"), Label("a.py", 40, "d", "P2")]
    found = [_finding("a.py", 15), _finding("a.py", 12), _finding("b.py", 10), _finding("a.py", 30, 36)]
    pairs, extra, missed = match(found, labels)
    assert sorted(pairs) == [(1, 0), (3, 1)], "nearest first; a range counts from its closest end"
    assert extra == [0, 2], "the second finding on one label is a false positive"
    assert missed == []
    assert match([_finding("a.py", 16)], labels[:1])[0] == [], "six lines away is no match"
    assert match([_finding("a.py", None)], labels[:1])[0] == []
    no = match(found[:1], labels[:1], judge=lambda f, label: False)
    assert no[0] == [] and no[1] == [0]


def test_bad_datasets_say_which_item_and_key(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text(json.dumps([{"id": "x", "diff": "missing.patch"}]))
    with pytest.raises(UsageError, match=r"d.json\[0\] \(x\).diff"):
        load_dataset(data)
    (tmp_path / "p.patch").write_text("")
    data.write_text(json.dumps([{"id": "x", "diff": "p.patch", "expected": [{"path": "a", "line": -1}]}]))
    with pytest.raises(UsageError, match=r"expected\[0\].line must be a positive integer"):
        load_dataset(data)


def _planted(dataset: Path) -> list[Planted]:
    out = []
    for item in json.loads(dataset.read_text()):
        repo = dataset.parent / "repos" / item["id"]
        changed = git(repo, "diff", "--name-only", "main", "feature").splitlines()
        for e in item["expected"]:
            line = git(repo, "show", f"feature:{e['path']}").splitlines()[e["line"] - 1]
            siblings = tuple(p for p in changed if p != e["path"])
            out.append(
                Planted(item["id"], e["path"], e["line"], line, e["severity"], e["description"], siblings)
            )
    return out


def test_pipeline_fidelity_an_oracle_model_scores_precision_and_recall_one(
    built: Path, tmp_path: Path
) -> None:
    planted = _planted(built)
    oracle = Oracle(planted, wrong_schema_item="user-search-injection")
    out = tmp_path / "scores.json"
    with FakeModelServer(handler=oracle) as server:
        proc = run_cli(
            [
                "eval",
                str(built),
                "--model",
                "openai/fake-model",
                "--api-base",
                server.api_base,
                "--json",
                str(out),
            ],
            cwd=tmp_path,
            env=cli_env(tmp_path),
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr
    card = json.loads(out.read_text())
    assert {"wrong_schema", "repair", "verify"} <= set(oracle.kinds), oracle.kinds
    assert oracle.findings_sent > len(planted), "the oracle sent duplicates"
    assert (card["true_positives"], card["false_positives"], card["false_negatives"]) == (
        len(planted),
        0,
        0,
    ), card
    assert card["precision"] == 1.0 and card["recall"] == 1.0 and card["f1"] == 1.0
    assert card["rejected_hits"] == 0 and card["calls"] == len(server.requests)
    assert "| **total** |" in proc.stdout and "**1.00**" in proc.stdout


def test_fidelity_the_same_defect_from_two_units_is_reported_once(built: Path, tmp_path: Path) -> None:
    item = next(i for i in json.loads(built.read_text()) if i["id"] == "pagination-offset")
    one = built.parent / "pagination-only.json"
    one.write_text(json.dumps([item]))
    planted = [p for p in _planted(built) if p.item == "pagination-offset"]
    assert planted[0].siblings == ("shop/catalog.py",)
    # a window this small puts each of the item's two changed files in its own unit
    small = tmp_path / "small-window.yml"
    small.write_text("context_window: 2850\nmax_output_tokens_per_call: 512\n")
    oracle = Oracle(planted)
    out = tmp_path / "scores.json"
    with FakeModelServer(handler=oracle) as server:
        proc = run_cli(
            [
                "eval",
                str(one),
                "--model",
                "openai/fake-model",
                "--api-base",
                server.api_base,
                "--config",
                str(small),
                "--json",
                str(out),
            ],
            cwd=tmp_path,
            env=cli_env(tmp_path),
            timeout=600,
        )
        units = [r for r in server.requests if '"verdicts"' not in r["messages"][-1]["content"]]
    assert proc.returncode == 0, proc.stderr
    # The planner on main may now pack both files into one call; the defect is still reported twice
    # (once as seen from its caller), which is what must collapse to one finding.
    assert units and oracle.findings_sent == 2, "the defect was reported twice"
    card = json.loads(out.read_text())
    assert (card["found"], card["true_positives"], card["false_positives"]) == (1, 1, 0)


def test_the_judge_model_decides_whether_texts_describe_one_defect() -> None:
    from reviewer.config import build_config
    from reviewer.evaluate import model_judge
    from tests.fakes.model_server import text

    seen: list[str] = []

    def handler(body):
        prompt = body["messages"][-1]["content"]
        seen.append(prompt)
        return text('{"same": true}' if "offset" in prompt.split("finding")[-1] else '{"same": false}')

    label = Label("a.py", 3, "page() skips the first page: wrong offset", "P1")
    with FakeModelServer(handler=handler) as server:
        config = build_config(overrides={"model": "openai/fake-model", "api_base": server.api_base})
        judge = model_judge(config, "openai/judge-model", warn=lambda m: None)
        assert judge(_finding("a.py", 3, title="Wrong offset for page 1"), label) is True
        assert judge(_finding("a.py", 3, title="Unused import <<<UNTRUSTED x"), label) is False
        assert server.requests[0]["model"] == "judge-model"
    assert "known_defect" in seen[0] and "[delimiter removed]" in seen[1]
