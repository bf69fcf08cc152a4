"""Diff parsing against golden files made by real git, and GitHub's per-file patches."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from reviewer.diff import LineIndex, parse_github_file, parse_patch

DATA = Path(__file__).parent / "data" / "patches"


def _plain(files: object) -> object:
    return json.loads(json.dumps([dataclasses.asdict(f) for f in files]))  # type: ignore[call-overload]


def test_git_edge_cases_match_the_golden_file() -> None:
    """Every kind of file change git produces; regenerate with IMREVIEW_UPDATE_GOLDEN=1."""
    files = parse_patch((DATA / "git-edge-cases.patch").read_bytes())
    golden = DATA / "git-edge-cases.json"
    if os.environ.get("IMREVIEW_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(_plain(files), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _plain(files) == json.loads(golden.read_text(encoding="utf-8"))


def test_git_edge_cases_in_words() -> None:
    files = {f.path: f for f in parse_patch((DATA / "git-edge-cases.patch").read_bytes())}
    assert files["added.txt"].status == "added" and files["added.txt"].additions == 1
    assert files["deleted.txt"].status == "removed" and files["deleted.txt"].deletions == 1
    pure, edited = files["renamed_pure.txt"], files["renamed_edit.txt"]
    assert (pure.status, pure.old_path, pure.hunks) == ("renamed", "rename_pure.txt", ())
    assert (edited.old_path, edited.additions) == ("rename_edit.txt", 1)
    assert (files["copied.py"].status, files["copied.py"].old_path) == ("copied", "source.py")
    assert files["mode.sh"].mode_changed and not files["mode.sh"].hunks
    assert files["image.png"].binary
    assert files["sub"].submodule
    assert files["empty.txt"].status == "added" and not files["empty.txt"].hunks
    assert [line.text for line in files["crlf.txt"].hunks[0].lines] == ["keep", "old", "new"]
    assert files["latin1.txt"].hunks[0].lines[0].text == "caf\ufffd"
    assert "with space.txt" in files and "naïve.txt" in files
    noeol = files["noeol.txt"].hunks[0].lines
    assert [(line.kind, line.text) for line in noeol] == [("-", "no eol"), ("+", "no eol 2")]


def test_line_numbers_and_commentable_sides() -> None:
    files = parse_patch((DATA / "git-edge-cases.patch").read_bytes())
    index = LineIndex.build(files)
    assert sorted(index.right["modified.txt"]) == [1, 2, 3, 4]
    assert sorted(index.left["modified.txt"]) == [2]
    assert index.commentable("renamed_edit.txt", 10) and not index.commentable("renamed_edit.txt", 3)
    assert index.commentable("deleted.txt", 1, "LEFT") and not index.commentable("deleted.txt", 1)
    assert not index.commentable("image.png", 1)


def test_a_range_must_stay_inside_one_hunk() -> None:
    patch = (
        "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n"
        "@@ -1,2 +1,3 @@\n a\n+b\n c\n@@ -20,2 +21,3 @@\n x\n+y\n z\n"
    )
    index = LineIndex.build(parse_patch(patch))
    assert index.range_commentable("f.py", 1, 3)
    assert not index.range_commentable("f.py", 3, 22), "start and end in different hunks: GitHub answers 422"


def test_hunk_text_round_trips() -> None:
    files = parse_patch((DATA / "git-edge-cases.patch").read_bytes())
    hunk = next(f for f in files if f.path == "modified.txt").hunks[0]
    again = parse_patch(f"diff --git a/m b/m\n--- a/m\n+++ b/m\n{hunk.text()}\n")
    assert again[0].hunks[0].lines == hunk.lines


def test_github_renamed_file_with_edits_gets_synthesized_headers() -> None:
    patch = "@@ -1,2 +1,2 @@\n a\n-b\n+c"
    f = parse_github_file(filename="src/new.py", status="renamed", previous_filename="src/o.py", patch=patch)
    assert (f.path, f.old_path, f.status, f.has_patch) == ("src/new.py", "src/o.py", "renamed", True)
    assert [(line.kind, line.old, line.new) for line in f.hunks[0].lines] == [
        (" ", 1, 1),
        ("-", 2, None),
        ("+", None, 2),
    ]


@pytest.mark.parametrize(
    ("status", "patch", "expected"),
    [
        ("added", "@@ -0,0 +1,2 @@\n+one\n+two", ("added", True, 2)),
        ("removed", "@@ -1 +0,0 @@\n-gone", ("removed", True, 0)),
        ("changed", "@@ -1 +1 @@\n-a\n+b", ("modified", True, 1)),
        ("modified", None, ("modified", False, 0)),
        ("modified", "@@ -1,5 +1,5 @@\n a\n", ("modified", False, 0)),
    ],
)
def test_github_file_statuses(status: str, patch: str | None, expected: tuple[str, bool, int]) -> None:
    f = parse_github_file(filename="x.py", status=status, patch=patch)
    assert (f.status, f.has_patch, f.additions) == expected


def test_garbage_is_not_a_diff() -> None:
    assert parse_patch("") == ()
    assert parse_patch(b"\xff\xfe not a diff at all\n") == ()


def test_github_pure_rename_without_patch_is_complete_but_a_binary_is_not() -> None:
    moved = parse_github_file(
        filename="b.py", status="renamed", patch=None, previous_filename="a.py", changes=0
    )
    assert (moved.has_patch, moved.hunks, moved.old_path) == (True, (), "a.py")
    binary = parse_github_file(filename="logo.png", status="modified", patch=None, changes=0)
    assert not binary.has_patch
