"""The diff parser and anchoring over arbitrary input: never a crash, and every anchored finding
lands on a line GitHub accepts an inline comment on (hypothesis)."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer.diff import LineIndex, PatchError, parse_github_file, parse_patch
from reviewer.findings import anchor
from reviewer.report import Finding
from tests.factories import finding

LINE = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30).map(
    lambda s: s.replace("\n", "").replace("\r", "")
)
BODY_LINE = st.one_of(
    st.tuples(st.sampled_from([" ", "+", "-", "\\"]), LINE).map("".join),
    st.sampled_from(["@@ -1,3 +1,4 @@", "@@ -0,0 +1 @@", "@@ -5 +5,2 @@ def f():", "diff --git a/x b/x", ""]),
)
GITHUB_PATCH = st.lists(BODY_LINE, max_size=25).map(lambda lines: "@@ -1,3 +1,3 @@\n" + "\n".join(lines))
JUNK = st.one_of(st.binary(max_size=400), st.text(max_size=400), GITHUB_PATCH.map(str.encode))


@settings(max_examples=300, deadline=None)
@given(JUNK)
def test_parse_patch_never_crashes_on_junk(raw: bytes | str) -> None:
    try:
        files = parse_patch(raw)
    except PatchError as exc:
        assert str(exc).startswith("malformed diff")
        return
    LineIndex.build(files)


def _finding(path: str, line: int | None, quote: str, end: int | None, side: str) -> Finding:
    blank = {"trigger": "", "observation": "", "suggestion": ""}
    return finding(
        id="x", title="t", path=path, line=line, end_line=end, side=side, quote=quote, confidence=0.5, **blank
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    patch=GITHUB_PATCH,
    status=st.sampled_from(["added", "modified", "removed", "renamed"]),
    line=st.one_of(st.none(), st.integers(-5, 40)),
    span=st.one_of(st.none(), st.integers(0, 10)),
    quote=st.one_of(LINE, st.just("")),
    side=st.sampled_from(["RIGHT", "LEFT"]),
)
def test_every_anchored_line_is_commentable(
    patch: str, status: str, line: int | None, span: int | None, quote: str, side: str
) -> None:
    file = parse_github_file(filename="src/a.py", status=status, patch=patch, previous_filename="src/old.py")
    index = LineIndex.build([file])
    end = None if line is None or span is None else line + span
    for candidate_quote in (quote, _some_line(file)):
        result = anchor(_finding("src/a.py", line, candidate_quote, end, side), {"src/a.py": file}, index)
        if result.anchored:
            assert result.line is not None and index.commentable("src/a.py", result.line, side)
            if result.end_line is not None:
                assert index.range_commentable("src/a.py", result.line, result.end_line, side)
        else:
            assert result.anchor_reason in {"not_in_diff", "line_not_commentable", "quote_not_found"}
        assert dataclasses.replace(
            result, anchored=False, anchor_reason="not_checked", line=line, end_line=end
        ) == (_finding("src/a.py", line, candidate_quote, end, side))


def _some_line(file) -> str:  # type: ignore[no-untyped-def]
    for hunk in file.hunks:
        for diff_line in hunk.lines:
            if diff_line.text.strip():
                return diff_line.text
    return ""


KINDS = st.lists(st.sampled_from(["+", "-", " "]), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=KINDS, old_start=st.integers(1, 500), new_start=st.integers(1, 500), room=st.integers(4, 14))
def test_every_slice_range_is_on_one_side_and_never_starts_after_it_ends(
    kinds: list[str], old_start: int, new_start: int, room: int
) -> None:
    """A hunk cut into slices (one token per line, `room` lines a call): each slice's range is in
    new-file numbers of its added and unchanged lines (RIGHT), or old-file numbers when it holds
    only removed lines (LEFT), and start <= end."""
    from reviewer.plan import PlanOptions, coverage, make_plan

    old_len, new_len = kinds.count("-") + kinds.count(" "), kinds.count("+") + kinds.count(" ")
    body = "\n".join(f"{kind}line {i}" for i, kind in enumerate(kinds))
    patch = f"@@ -{old_start},{old_len} +{new_start},{new_len} @@\n{body}"
    file = parse_github_file(filename="src/a.py", status="modified", patch=patch)
    plan = make_plan([file], PlanOptions(unit_tokens=room, count_tokens=lambda text: len(text.splitlines())))
    reviewed = {u.id for u in plan.units if u.id % 2 == 0}
    (entry,) = coverage(plan, [file], reviewed_units=reviewed).files
    hunk = file.hunks[0]
    right = {line.new for line in hunk.lines if line.kind != "-"}
    left = {line.old for line in hunk.lines if line.kind == "-"}
    assert entry.slices or len(plan.units) <= 1
    for piece in entry.slices:
        assert piece.start <= piece.end, piece
        assert {piece.start, piece.end} <= (right if piece.side == "RIGHT" else left), piece
    for part in (p for u in plan.units for p in u.parts if p.lines is not None):
        lines = hunk.lines[part.lines[0] : part.lines[1]]
        assert part.span is not None and part.span[0] <= part.span[1]
        if any(line.kind != "-" for line in lines):
            assert part.span == (
                min(line.new for line in lines if line.kind != "-"),
                max(line.new for line in lines if line.kind != "-"),
            )
        else:
            assert part.span == (min(line.old for line in lines), max(line.old for line in lines))
