"""scripts/mutation_audit.py's table still fits the code: every mutation's old text occurs exactly
once in its file and every test it names exists (fast: no mutation is run here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.mutation_audit import MUTATIONS, Mutation, TableError, check, problems

ROOT = Path(__file__).resolve().parents[1]


def test_every_mutation_applies_to_the_code_exactly_once() -> None:
    assert problems() == []
    assert len(MUTATIONS) >= 40
    modules = {m.file for m in MUTATIONS}
    for guarded in ("budget.py", "scan.py", "llm.py", "policy.py", "rules.py", "verify.py", "state.py"):
        assert f"reviewer/{guarded}" in modules, guarded
    for guarded in ("gate.py", "incremental.py", "publish.py", "plan.py", "pull.py", "findings.py"):
        assert f"reviewer/{guarded}" in modules, guarded


def test_a_row_that_no_longer_fits_stops_the_audit_naming_it(tmp_path: Path) -> None:
    (tmp_path / "reviewer").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "reviewer" / "x.py").write_text("a = 1\nb = 1\n")
    gone = Mutation("gone", "reviewer/x.py", "c = 1", "c = 2", "nothing", ("tests/test_x.py",))
    twice = Mutation("twice", "reviewer/x.py", " = 1", " = 2", "nothing", ("tests/test_x.py",))
    no_test = Mutation("no-test", "reviewer/x.py", "a = 1", "a = 2", "nothing", ("tests/test_x.py::test_y",))
    found = problems(tmp_path, [gone, twice, no_test])
    assert found == [
        "mutation 'gone' (reviewer/x.py): old text 'c = 1' occurs 0 times, not exactly once",
        "mutation 'twice' (reviewer/x.py): old text ' = 1' occurs 2 times, not exactly once",
        "mutation 'no-test' (reviewer/x.py): no test test_y in tests/test_x.py",
    ]
    with pytest.raises(TableError, match="'gone'"):
        check(tmp_path, [gone])
