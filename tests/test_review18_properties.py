"""Property tests (hypothesis) for the one-header-per-file join, the diff-before-context re-plan and
the numbered layout: files of several hunks, enclosing definitions and repository context."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer import context as ctx
from reviewer.budget import held_tokens
from reviewer.diff import parse_patch
from reviewer.plan import Allowance, PlanOptions, make_plan
from tests.factories import assert_every_line_placed, quarter, quarter_plan

line_text = st.text(alphabet="abcdefgh =()+_.,xyz0123456789", min_size=0, max_size=80)


@st.composite
def patches(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    out, heads = [], {}
    for n in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(["src/auth/", "src/", "tests/"])) + f"f{n}.py"
        head: list[str] = []
        hunks = []
        for h in range(draw(st.integers(1, 4))):
            head += [f"def fn_{h}(x):"] + [f"    y{h}_{i} = {i}" for i in range(draw(st.integers(0, 6)))]
            start = len(head) + 1
            added = draw(st.lists(line_text, min_size=1, max_size=25))
            removed = draw(st.lists(line_text, min_size=0, max_size=5))
            head += ["    " + a for a in added]
            body = "".join(f"-    {r}\n" for r in removed) + "".join(f"+    {a}\n" for a in added)
            header = draw(st.sampled_from(["", f" def fn_{h}(x):"]))
            hunks.append(f"@@ -{start},{len(removed)} +{start},{len(added)} @@{header}\n{body}")
        heads[path] = "\n".join(head) + "\n"
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n" + "".join(hunks))
    return "".join(out), heads


@st.composite
def allowances(draw: st.DrawFn) -> Allowance:
    return Allowance(
        input_tokens=draw(st.one_of(st.none(), st.integers(0, 6_000))),
        output_tokens=None,
        calls=draw(st.one_of(st.none(), st.integers(0, 6))),
        window=draw(st.one_of(st.none(), st.integers(300, 4_000))),
        margin_percent=draw(st.sampled_from([100, 115])),
        max_answer_tokens=draw(st.integers(16, 400)),
    )


def finder(f, hunk):  # type: ignore[no-untyped-def]
    return [
        ctx.Snippet(
            f"lib/{f.path}-{hunk.index}.py",
            1,
            (f"def helper_{i}(x):", "    return x") * 4,
            "definition",
            f"helper_{i}",
        )
        for i in range(3)
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=patches(), allowance=allowances(), overhead=st.integers(0, 200), share=st.sampled_from([0.0, 0.3])
)
def test_every_part_is_in_its_units_text_and_the_plan_fits(
    drawn: tuple[str, dict[str, str]], allowance: Allowance, overhead: int, share: float
) -> None:
    patch, heads = drawn
    files = parse_patch(patch)
    plan = quarter_plan(
        files,
        overhead=overhead,
        unit_tokens=allowance.window or 1_000_000,
        allowance=allowance,
        read_file=heads.get,
        context=finder if share else None,
        context_share=share,
    )
    m = allowance.margin_percent
    held = [held_tokens(u.input_tokens, m) for u in plan.units]
    if allowance.input_tokens is not None:
        assert sum(held) <= allowance.input_tokens
    if allowance.calls is not None:
        assert len(plan.units) <= allowance.calls
    if allowance.window is not None:
        assert all(h + u.answer_tokens <= allowance.window for h, u in zip(held, plan.units, strict=True))
    for u in plan.units:
        assert u.input_tokens == overhead + quarter(u.text) + quarter(u.context_text)
        text = u.text
        for p in u.parts:
            header, _, body = p.text.partition("\n")
            assert header.startswith("## File: ") and header in text and body in text
    assert_every_line_placed(plan, files)


def unsent(plan, files) -> int:  # type: ignore[no-untyped-def]
    carried: dict[tuple[str, int], set[int]] = {}
    for u in plan.units:
        for p in u.parts:
            hunk = next(h for f in files if f.path == p.path for h in f.hunks if h.index == p.hunk_index)
            carried.setdefault((p.path, p.hunk_index), set()).update(
                range(*(p.lines or (0, len(hunk.lines))))
            )
    return sum(
        1
        for f in files
        for h in f.hunks
        for i, line in enumerate(h.lines)
        if line.kind != " " and i not in carried.get((f.path, h.index), set())
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=patches(), allowance=allowances(), overhead=st.integers(0, 200), share=st.sampled_from([0.3, 0.6])
)
def test_context_never_displaces_diff(
    drawn: tuple[str, dict[str, str]], allowance: Allowance, overhead: int, share: float
) -> None:
    patch, heads = drawn
    files = parse_patch(patch)
    common = dict(overhead=overhead, unit_tokens=allowance.window or 1_000_000, allowance=allowance)
    plan = quarter_plan(files, read_file=heads.get, context=finder, context_share=share, **common)
    bare = quarter_plan(files, **common)
    assert unsent(plan, files) <= unsent(bare, files)
    if plan.context_displaced_lines:
        assert unsent(plan, files) == unsent(bare, files)


TYPECHANGE = """diff --git a/x b/x
deleted file mode 100644
--- a/x
+++ /dev/null
@@ -1,2 +0,0 @@
-old one
-old two
diff --git a/x b/x
new file mode 120000
--- /dev/null
+++ b/x
@@ -0,0 +1 @@
+target
"""


def test_a_typechange_reports_reviewed_only_the_lines_it_sent() -> None:
    """A file replaced by a symlink (what the local source's `git diff` gives): every reviewed line
    must have been in a unit's text."""
    from reviewer.plan import coverage

    files = parse_patch(TYPECHANGE)
    plan = make_plan(
        files, PlanOptions(unit_tokens=10_000, count_tokens=quarter, measure=lambda n, t, c: quarter(t))
    )
    sent = "\n".join(u.text for u in plan.units)
    cov = coverage(plan, files, reviewed_units={u.id for u in plan.units})
    assert cov.lines_reviewed <= sum(1 for line in ("old one", "old two", "target") if line in sent)
    assert cov.lines_reviewed == cov.lines_changed == 3


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=patches(), allowance=allowances(), overhead=st.integers(0, 200), data=st.data())
def test_an_increment_keeps_to_its_hunks_and_the_diff_before_the_context(
    drawn: tuple[str, dict[str, str]], allowance: Allowance, overhead: int, data: st.DataObject
) -> None:
    patch, heads = drawn
    files = parse_patch(patch)
    keys = [(f.path, h.index) for f in files for h in f.hunks]
    only = set(data.draw(st.lists(st.sampled_from(keys), min_size=1)))
    first = set(data.draw(st.lists(st.sampled_from(sorted(only)))))
    common = dict(
        overhead=overhead,
        unit_tokens=allowance.window or 1_000_000,
        allowance=allowance,
        only=only,
        first=first,
    )
    plan = quarter_plan(files, read_file=heads.get, context=finder, context_share=0.4, **common)
    bare = quarter_plan(files, **common)
    assert {(p.path, p.hunk_index) for u in plan.units for p in u.parts} <= only
    if allowance.input_tokens is not None:
        assert (
            sum(held_tokens(u.input_tokens, allowance.margin_percent) for u in plan.units)
            <= allowance.input_tokens
        )
    scoped = [f for f in files]

    def unsent_only(p):  # type: ignore[no-untyped-def]
        carried: dict[tuple[str, int], set[int]] = {}
        for u in p.units:
            for part in u.parts:
                n = next(
                    len(h.lines)
                    for f in scoped
                    if f.path == part.path
                    for h in f.hunks
                    if h.index == part.hunk_index
                )
                carried.setdefault((part.path, part.hunk_index), set()).update(range(*(part.lines or (0, n))))
        return sum(
            1
            for f in scoped
            for h in f.hunks
            if (f.path, h.index) in only
            for i, line in enumerate(h.lines)
            if line.kind != " " and i not in carried.get((f.path, h.index), set())
        )

    assert unsent_only(plan) <= unsent_only(bare)
