"""The local git source against real repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewer.errors import UsageError
from reviewer.source.local import LocalSource
from tests.conftest import Repo


def test_reviews_merge_base_to_head_not_base_tip(feature_repo: Repo) -> None:
    feature_repo.git("checkout", "-q", "main")
    feature_repo.commit({"other.py": "x = 1\n"}, "main moves on")
    feature_repo.git("checkout", "-q", "feature")
    change = LocalSource(feature_repo.path, base="main").change()
    paths = {f.path for f in change.files}
    assert paths == {"app.py", "lib/util.py"}, "a commit on main after the fork point is not part of the PR"
    snap = change.snapshot
    assert snap.source == "local" and snap.commits == 1
    assert snap.head.sha == feature_repo.head() and len(snap.merge_base) == 40
    assert snap.base.sha != snap.merge_base
    assert snap.additions == 3 and snap.deletions == 1


def test_default_base_falls_back_to_main(feature_repo: Repo) -> None:
    source = LocalSource(feature_repo.path)
    assert source.base_ref == "main"


def test_upstream_naming_another_branch_wins(feature_repo: Repo, tmp_path: Path) -> None:
    feature_repo.git("branch", "trunk", "main")
    feature_repo.git("branch", "--set-upstream-to=trunk")
    assert LocalSource(feature_repo.path).base_ref == "trunk"


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a git repository"):
        LocalSource(tmp_path)


def test_unknown_ref_is_named(feature_repo: Repo) -> None:
    with pytest.raises(UsageError, match="--base 'nope'"):
        LocalSource(feature_repo.path, base="nope")
    with pytest.raises(UsageError, match="--head 'missing'"):
        LocalSource(feature_repo.path, base="main", head="missing")


def test_empty_range(repo: Repo) -> None:
    repo.commit({"a.txt": "a\n"}, "only")
    with pytest.raises(UsageError, match="nothing to review"):
        LocalSource(repo.path, base="main").change()


def test_unrelated_history_says_fetch_more(repo: Repo) -> None:
    repo.commit({"a.txt": "a\n"}, "base")
    repo.git("checkout", "-q", "--orphan", "lonely")
    repo.commit({"b.txt": "b\n"}, "unrelated")
    with pytest.raises(UsageError, match="fetch more history"):
        LocalSource(repo.path, base="main")


def test_uncommitted_work_is_not_reviewed_and_files_come_from_git(feature_repo: Repo) -> None:
    (feature_repo.path / "lib" / "util.py").write_text("worktree only\n")
    (feature_repo.path / "scratch.py").write_text("print('x')\n")
    source = LocalSource(feature_repo.path, base="main")
    change = source.change()
    assert {f.path for f in change.files} == {"app.py", "lib/util.py"}
    assert source.read_file("lib/util.py", change.snapshot.head.sha) == "def div(a, b):\n    return a / b\n"
    assert source.read_file("absent.py", change.snapshot.head.sha) is None


def test_edge_case_files(repo: Repo) -> None:
    repo.commit(
        {"old name.txt": "1\n2\n3\n4\n5\n", "crlf.txt": "a\r\nb\r\n", "mode.sh": "echo\n", "gone.txt": "z\n"},
        "base",
    )
    repo.branch("feature")
    repo.git("mv", "old name.txt", "ñew name.txt")
    (repo.path / "mode.sh").chmod(0o755)
    repo.commit(
        {
            "crlf.txt": "a\r\nB\r\n",
            "gone.txt": None,
            "blob.bin": b"\x00\x01\x02binary",
            "latin1.txt": b"caf\xe9\n",
            "empty.txt": "",
        },
        "edge cases",
    )
    files = {f.path: f for f in LocalSource(repo.path, base="main").change().files}
    assert files["ñew name.txt"].status == "renamed" and files["ñew name.txt"].old_path == "old name.txt"
    assert files["mode.sh"].mode_changed and not files["mode.sh"].hunks
    assert files["gone.txt"].status == "removed"
    assert files["blob.bin"].binary
    assert "\ufffd" in files["latin1.txt"].hunks[0].lines[0].text
    assert files["crlf.txt"].hunks[0].lines[-1].text == "B"
    assert files["empty.txt"].status == "added" and not files["empty.txt"].hunks


def test_git_dubious_ownership_env_does_not_leak(feature_repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    assert LocalSource(feature_repo.path, base="main").change().files
