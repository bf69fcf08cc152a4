"""The fast paths of a large review give the same answers as the plain ones they replace.

Each fast path (one `git cat-file --batch` process, the hunk reader beside unidiff, the regex
gates before the secret patterns, the compiled-template cache) is checked
against the straightforward version on real data; the timings live in benchmarks/, not here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import unidiff
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer import diff, plan, rules
from reviewer.render import Renderer, template_cache_dir
from reviewer.source.local import LocalSource
from tests.conftest import Repo

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"


# --- head contents through one `git cat-file --batch` ---------------------------------------


def test_file_reads_share_one_git_process_and_answer_like_git(feature_repo: Repo) -> None:
    feature_repo.commit(
        {
            "docs/a b.md": "spaces in the name\n",
            "bin.dat": b"\x00\x01\xff",
            "lines\nin name.txt": "a newline in the path\n",
        },
        "odd names",
    )
    source = LocalSource(feature_repo.path, base="main")
    head = feature_repo.head()
    assert source.read_file("lib/util.py", head) == "def div(a, b):\n    return a / b\n"
    pid = source.blobs._proc.pid if source.blobs._proc else None
    assert source.read_file("docs/a b.md", head) == "spaces in the name\n"
    assert source.read_file("bin.dat", head) == "\x00\x01\ufffd"
    assert source.read_file("lines\nin name.txt", head) == "a newline in the path\n"
    assert source.read_file("missing.py", head) is None
    assert source.read_file("lib", head) is None, "a directory is not a file"
    assert source.read_file("app.py", "0" * 40) is None
    assert source.blobs._proc is not None and source.blobs._proc.pid == pid, "one process for every read"
    source.close()
    assert source.read_file("app.py", head) is not None, "a closed reader starts again when asked"
    source.close()


# --- the hunk reader gives what unidiff's full parse gives --------------------------------------


def _unidiff_full(raw: bytes | str) -> tuple[diff.DiffFile, ...]:
    text = diff.decode(raw)
    return tuple(diff._file_from_unidiff(f) for f in unidiff.PatchSet(diff._lines(text)))


def test_fast_parse_equals_unidiff_on_the_golden_edge_cases() -> None:
    raw = (DATA / "patches" / "git-edge-cases.patch").read_bytes()
    assert diff.parse_patch(raw) == _unidiff_full(raw)
    assert diff._parse_fast(diff.decode(raw)) == _unidiff_full(raw), "no fallback taken"


def test_fast_parse_equals_unidiff_on_a_real_git_diff(feature_repo: Repo) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(40))
    feature_repo.commit({"big.py": body, "gone.txt": "bye\n"}, "more")
    feature_repo.commit(
        {
            "big.py": body.replace("return 7\n", "return 70\n").replace("return 30\n", "return 3\n")
            + "x = 1",
            "gone.txt": None,
            "moved.py": "def div(a, b):\n    return a / b\n",
            "lib/util.py": None,
            "pkg/app.py": (feature_repo.path / "app.py").read_text(encoding="utf-8"),
            "app.py": None,
        },
        "edit, delete, rename, no newline at end",
    )
    raw = feature_repo.git("diff", "-M", "--full-index", "main", "HEAD").encode() + b"\n"
    fast = diff.parse_patch(raw)
    assert fast == _unidiff_full(raw)
    assert {f.path: f.status for f in fast}["pkg/app.py"] == "renamed"


TEXT = st.text(alphabet=st.sampled_from("ab +-\\@\t\r\x0c\u2028é"), max_size=8)


@st.composite
def _hunk_text(draw: st.DrawFn, old_start: int, new_start: int) -> tuple[str, int, int]:
    kinds = draw(st.lists(st.sampled_from("+- "), min_size=1, max_size=8))
    body: list[str] = []
    for kind in kinds:
        text = draw(TEXT)
        if kind == " " and not text and draw(st.booleans()):
            body.append(draw(st.sampled_from(["", "\r"])))  # a blank context line, as some tools write it
        else:
            body.append(kind + text + draw(st.sampled_from(["", "", "\r"])))
        if draw(st.integers(0, 9)) == 0:
            body.append("\\ No newline at end of file")
    old = sum(k != "+" for k in kinds)
    new = sum(k != "-" for k in kinds)
    old_part = f"{old_start}" if old == 1 and draw(st.booleans()) else f"{old_start},{old}"
    section = draw(st.sampled_from(["", " def f():", " class A:\r"]))
    head = f"@@ -{old_part} +{new_start},{new} @@{section}"
    return "\n".join([head, *body]), old, new


@st.composite
def _file_text(draw: st.DrawFn, index: int) -> str:
    name = draw(st.sampled_from([f"f{index}.py", f"dir {index}/x.txt", f"p/{index}.md"]))
    shape = draw(st.sampled_from(["modified", "added", "removed", "renamed", "mode", "binary"]))
    old_name = f"old/{name}" if shape == "renamed" else name
    head = [f"diff --git a/{old_name} b/{name}"]
    source, target = f"a/{old_name}", f"b/{name}"
    if shape == "added":
        head.append("new file mode 100644")
        source = "/dev/null"
    elif shape == "removed":
        head.append("deleted file mode 100755")
        target = "/dev/null"
    elif shape == "renamed":
        head += ["similarity index 90%", f"rename from {old_name}", f"rename to {name}"]
    elif shape == "mode":
        head += ["old mode 100644", "new mode 100755"]
    if shape == "binary":
        return "\n".join([*head, "index 1111111..2222222", f"Binary files {source} and {target} differ"])
    head.append("index 1111111..2222222" + ("" if shape in ("added", "removed") else " 100644"))
    if shape == "mode" and draw(st.booleans()):
        return "\n".join(head)
    old_at, new_at = (0, 1) if shape == "added" else (1, 0) if shape == "removed" else (1, 1)
    hunks = []
    for _ in range(1 if shape in ("added", "removed") else draw(st.integers(1, 3))):
        text, old, new = draw(_hunk_text(old_at, new_at))
        hunks.append(text)
        old_at, new_at = old_at + old + 2, new_at + new + 2
    return "\n".join([*head, f"--- {source}", f"+++ {target}", *hunks])


@st.composite
def _git_diff(draw: st.DrawFn) -> tuple[str, bool]:
    """A diff as git writes it (names, modes, renames, binaries, hunks, markers, CRLF, blank context
    lines); sometimes one line dropped, doubled or replaced, which unidiff may or may not accept."""
    files = [draw(_file_text(i)) for i in range(draw(st.integers(1, 4)))]
    lines = "\n".join(files).split("\n")
    damaged = draw(st.integers(0, 3)) == 0
    if damaged:
        at = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["drop", "double", "junk", "blank"]))
        if how == "drop":
            del lines[at]
        elif how == "double":
            lines.insert(at, lines[at])
        else:
            lines[at] = "junk here" if how == "junk" else ""
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"])), damaged


@settings(max_examples=400, deadline=None)
@given(_git_diff())
def test_the_hunk_reader_reads_git_diffs_as_unidiff_does(case: tuple[str, bool]) -> None:
    text, damaged = case
    try:
        expected = _unidiff_full(text)
    except unidiff.UnidiffParseError:
        with pytest.raises(diff.PatchError, match="malformed diff"):
            diff.parse_patch(text)
        return
    assert diff.parse_patch(text) == expected
    if not damaged and not text.endswith("\n\n"):
        fast = diff._parse_fast(text)
        assert fast == expected, "a diff git writes never needs unidiff"
        chunk, diff._CHUNK = diff._CHUNK, 7
        try:
            assert diff._parse_fast(text) == expected, "lines split a few characters at a time read the same"
        finally:
            diff._CHUNK = chunk
        counted = [(f.additions, f.deletions) for f in fast]
        assert counted == [
            (sum(line.kind == "+" for line in f.added_lines()), sum(h.removed for h in f.hunks))
            for f in expected
        ]
        assert [h.removed for f in fast for h in f.hunks] == [
            sum(line.kind == "-" for line in h.lines) for f in expected for h in f.hunks
        ]


def test_a_form_feed_or_line_separator_stays_inside_its_line() -> None:
    patch = (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\x0cb\n-old\u2028x\n+new\x1cy\n"
    )
    (file,) = diff.parse_patch(patch)
    assert [(line.kind, line.text) for line in file.hunks[0].lines] == [
        (" ", "a\x0cb"),
        ("-", "old\u2028x"),
        ("+", "new\x1cy"),
    ]


def test_a_blank_context_line_takes_unidiffs_path() -> None:
    patch = "diff --git a/m b/m\n--- a/m\n+++ b/m\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n"
    (file,) = diff.parse_patch(patch)
    assert [line.kind for line in file.hunks[0].lines] == [" ", " ", "-", "+"]


# --- slicing a long hunk writes each slice's lines a bounded number of times ---------------------


def _approx(text: str) -> int:
    return max(1, len(text) // 3)


def _slices_by_scan(f: diff.DiffFile, hunk: diff.Hunk, cap: int) -> list[tuple[tuple[int, int] | None, str]]:
    """Each slice the longest that fits, found by trying every end: the plain rule the planner's
    doubling-then-halving search must reproduce."""
    body = plan._numbered(hunk, ())
    n = len(hunk.lines)

    def text(start: int, end: int) -> str:
        head = body[0] + f"  [slice: diff lines {start + 1}-{end} of {n} in this hunk]"
        return rules.redact("\n".join([plan._file_header(f), head, *body[1 + start : 1 + end]]))

    out: list[tuple[tuple[int, int] | None, str]] = []
    start = 0
    while start < n:
        fits = [end for end in range(start + 1, n + 1) if _approx(text(start, end)) <= cap]
        if not fits:
            start += 1
            continue
        end = max(fits)
        out.append((None if start == 0 and end == n else (start, end), text(start, end)))
        if end >= n:
            break
        start = max(end - plan.SLICE_OVERLAP_LINES, start + 1)
    return out


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 120), min_size=1, max_size=60),
    cap=st.integers(10, 400),
    secret_at=st.one_of(st.none(), st.integers(0, 59)),
)
def test_slices_are_the_longest_that_fit(lengths: list[int], cap: int, secret_at: int | None) -> None:
    texts = ["x" * k for k in lengths]
    if secret_at is not None and secret_at < len(texts):
        texts[secret_at] = "token = ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    patch = "diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n"
    patch += f"@@ -1,0 +1,{len(texts)} @@\n" + "".join(f"+{t}\n" for t in texts)
    (f,) = diff.parse_patch(patch)
    hunk = f.hunks[0]
    unplaced: list[plan.Unplaced] = []
    got = plan._slices(f, hunk, cap, _approx, rules.redact, unplaced)
    assert [(p.lines, p.text) for p, _ in got] == _slices_by_scan(f, hunk, cap)
    assert all(tokens == _approx(p.text) <= cap for p, tokens in got)


# --- the regex gates never hide a secret --------------------------------------------------------


def _redact_ungated(text: str) -> str:
    text = rules._mask_key_bodies(text)
    for _, pattern in rules._TOKENS:
        text = pattern.sub(rules._mask_token, text)
    return rules._GENERIC.sub(rules._mask_generic, text)


def test_every_lookbehind_pattern_gets_a_faster_gate() -> None:
    for _, pattern, quick in rules._TOKEN_GATES:
        assert (quick is not pattern) == pattern.pattern.startswith("(?<"), pattern.pattern


FRAGMENTS = [
    "ghp_",
    "AKIA",
    "xoxb-",
    "sk-",
    "sk-ant-",
    "AIza",
    "npm_",
    "SG.",
    "glpat-",
    "github_pat_",
    "sk_live_",
    "password",
    "PassWord",
    "api_key",
    "API-KEY",
    "Secret",
    "token",
    "credentials",
    " = ",
    ": ",
    '"',
    "'",
    "\n",
    " ",
    "_",
    "-",
    ".",
    "ſ",
    "K",
    "ı",
    "é",
    "Zq8v3LmT9xw2Rk7p",
    "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",
    "0123456789ABCDEF",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30))
def test_gated_redact_equals_the_ungated_one(parts: list[str]) -> None:
    text = "".join(parts)
    assert rules.redact(text) == _redact_ungated(text)


@pytest.mark.parametrize(
    "line",
    [
        'password = "Zq8v3LmT9xw2Rk7p"',
        'PASSWORD="Zq8v3LmT9xw2Rk7p"',
        'paſsword = "Zq8v3LmT9xw2Rk7p"',
        "token: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "key=AKIA" + "Q3ZT7R2X9W4V6U8Y",
    ],
)
def test_gated_redact_on_known_secrets(line: str) -> None:
    assert rules.redact(line) == _redact_ungated(line)
    assert rules.redact(line) != line or line.startswith("paſ")


# --- templates compiled once ---------------------------------------------------------------------


def test_the_template_cache_dir_follows_the_environment(tmp_path: Path) -> None:
    env = {"IMREVIEW_CACHE_DIR": str(tmp_path / "c")}
    assert template_cache_dir(env) == tmp_path / "c" / "jinja"
    assert template_cache_dir({"RUNNER_TEMP": "/rt", "HOME": "/h"}) == Path("/rt/imreview-cache/jinja")
    assert template_cache_dir({"HOME": "/h"}) == Path("/h/.cache/imreview/jinja")
    assert template_cache_dir({}) is None


def test_a_cached_template_renders_what_a_fresh_compile_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_render import build

    report = build()
    monkeypatch.setenv("IMREVIEW_CACHE_DIR", str(tmp_path))
    import reviewer.render as render

    monkeypatch.setattr(render, "_SHARED_CACHE", {})
    first = {lang: Renderer(language=lang).summary(report) for lang in ("en", "zh-CN")}
    files = sorted((tmp_path / "jinja").rglob("*.cache"))
    assert files, "compiled templates were written"
    assert len({f.parent for f in files}) == 2, "English and Chinese keep separate caches"
    monkeypatch.setattr(render, "_SHARED_CACHE", {})
    again = {lang: Renderer(language=lang).summary(report) for lang in ("en", "zh-CN")}
    assert again == first
    assert "## 发现 (2)" in again["zh-CN"] and "## Findings (2)" in again["en"]
    for f in files:
        f.write_bytes(b"not a cache")
    monkeypatch.setattr(render, "_SHARED_CACHE", {})
    assert Renderer(language="en").summary(report) == first["en"], "a broken cache file is ignored"


def test_a_cache_dir_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import reviewer.render as render

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(render, "_SHARED_CACHE", {})
    cache = render._bytecode_cache(shared)
    assert not isinstance(cache, render._TemplateCache)
    assert re.search("Memory", type(cache).__name__)


def test_warming_compiles_every_template_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import reviewer.render as render

    monkeypatch.setenv("IMREVIEW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(render, "_SHARED_CACHE", {})
    compiled = Renderer(language="en").warm()
    assert compiled >= 5
    assert len(list((tmp_path / "jinja").rglob("*.cache"))) == compiled
