"""Untrusted text through GitHub's renderer: whatever the PR or the model writes, what we post is inert.

Every check renders our Markdown with cmark-gfm (tests/gfm.py) and looks at the HTML a reader gets.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reviewer.render import Renderer, code, code_span, untrusted, untrusted_line
from reviewer.report import Exclusion, Gap, Signal
from reviewer.rules import redact
from tests.gfm import parse, pings
from tests.test_render import build, finding

ATOMS = [
    "\\`",
    "`",
    "``",
    "\\",
    "<img src=https://t.example/p.gif>",
    "</details>",
    "<details>",
    "<!--",
    "-->",
    "@octocat",
    "@org/team",
    "日本@bob",
    "`@x",
    "owner/repo#12",
    "#7",
    "GH-3",
    "gh-9",
    "https://evil.example/x",
    "www.evil.example",
    "mailto:a@b.io",
    "a@b.io",
    "[a](https://evil.example)",
    "![i](https://evil.example/i.png)",
    "[r]: https://evil.example",
    "<https://evil.example>",
    "&amp;",
    "&#64;",
    "reviewer/__init__.py",
    "**bold**",
    "~~s~~",
    "$x$",
    "|",
    "---",
    "===",
    "- ",
    "1. ",
    "> ",
    "# ",
    "    ",
    "\n",
    "\r",
    "\u202e",
    "\u200b",
    "imreview:state",
    "::set-output name=x::y",
    "[ ] ",
    "[^1]",
    "\t",
    "*",
    "_",
]
untrusted_text = st.lists(st.one_of(st.sampled_from(ATOMS), st.text(max_size=8)), max_size=12).map("".join)
FIXED_EXAMPLES = [
    "an escaped \\` tick then <img src=x onerror=alert(1)> and @org/team",
    "lone ` then @octocat",
    "中文@octocat 和 #12",
    "see owner/repo#12, GH-4 and [docs](https://evil.example)",
    "reviewer/__init__.py",
]


def _expected_text(value: str) -> str:
    """What a reader should see for a one-line untrusted value: itself, with pings defused and
    secret-shaped parts cut (`https://x.example):00@host` holds a URL password, `00`)."""
    value = redact(value)
    text = re.sub(r"\s+", " ", re.sub(r"\r\n?|[\u2028\u2029\x85]", "\n", value)).strip()
    text = "".join(ch for ch in text if not _invisible(ch))
    text = re.sub(r"#(?=\d)", "\uff03", text).replace("@", "\uff20")
    text = re.sub(r"(gh)-(?=\d)", "\\1\u2011", text, flags=re.I)
    text = re.sub(r"imreview:(state|review)", "imreview\u2236\\1", text, flags=re.I)
    return text.strip(" \t")


def _invisible(ch: str) -> bool:
    import unicodedata

    cat = unicodedata.category(ch)
    return cat == "Cf" or (cat == "Cc" and ch not in "\n\t") or ch in "\u115f\u1160\u3164\uffa0"


CONTEXTS = {
    "paragraph": ("{}", False),
    "list": ("- **Trigger** {}", False),
    "bold title": ("**[P1] {} — `a.py:1`**", False),
    "heading": ("### 1. [P1] {}", False),
    "table cell": ("| a | b |\n|---|---|\n| {} | x |", True),
    "details": ("<details><summary>x</summary>\n\n- {}\n\n</details>", False),
}


def _same_shape(markdown: str, baseline: str) -> None:
    got, base = parse(markdown), parse(baseline)
    assert set(got.tags) <= set(base.tags) | {"code"}, (markdown, got.tags)
    assert got.tags.count("details") == base.tags.count("details"), markdown
    assert set(got.attrs) <= set(base.attrs), (markdown, got.attrs)
    assert not pings(got), (markdown, pings(got))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(untrusted_text)
@example(FIXED_EXAMPLES[0])
@example(FIXED_EXAMPLES[1])
@example(FIXED_EXAMPLES[2])
@example(FIXED_EXAMPLES[3])
def test_untrusted_line_adds_no_markup_link_or_ping_in_any_context(value: str) -> None:
    for template, cell in CONTEXTS.values():
        _same_shape(template.format(untrusted_line(value, cell=cell)), template.format("plain"))


@settings(max_examples=300, deadline=None)
@given(untrusted_text)
@example(FIXED_EXAMPLES[0])
@example("x\n    indented\n\n<div>\n1. item\n===\n")
def test_untrusted_block_adds_no_markup_link_or_ping(value: str) -> None:
    _same_shape("- item\n\n" + untrusted(value), "- item\n\nplain")


@settings(max_examples=300, deadline=None)
@given(untrusted_text.filter(lambda s: "`" not in s and "<!--" not in s))
@example("reviewer/__init__.py and __main__ *star* [x](y) a\\b <b>")
@example("日本@bob GH-12 owner/repo#3 https://x.example www.x.example")
def test_untrusted_line_without_backticks_renders_as_itself(value: str) -> None:
    for template, cell in CONTEXTS.values():
        if template != "{}":
            continue
        rendered = parse(template.format(untrusted_line(value, cell=cell)))
        assert rendered.text().strip(" \n") == _expected_text(value)
        assert not rendered.code_text


@settings(max_examples=200, deadline=None)
@given(untrusted_text)
def test_code_span_and_code_block_show_the_text_as_code_only(value: str) -> None:
    span = code_span(value, cell=True)
    table = f"| a |\n|---|\n| {span} |"
    rendered = parse(table)
    assert set(rendered.tags) <= {"table", "thead", "tbody", "tr", "th", "td", "code"}, table
    assert not rendered.attrs and not pings(rendered)
    block = parse("- x\n\n" + code(value, "py") + "\n\nafter")
    assert set(block.tags) <= {"ul", "li", "p", "pre", "code"}, block.tags
    assert [a for a in block.attrs if a != ("code", "class", "language-py")] == []
    assert "after" in block.text() and not pings(block)


@pytest.mark.parametrize("path", ["reviewer/__init__.py", "a/__b__/c_d.py", "x*y*.md", "docs/[id].md"])
def test_a_path_renders_as_itself(path: str) -> None:
    assert parse(untrusted_line(path)).text().strip() == path
    assert "".join(parse(code_span(path)).code_text) == path


def test_known_bypasses_are_closed() -> None:
    """The concrete strings from issue 10, each once: the property tests cover their classes."""
    cases = {
        "escaped backtick": "\\`x <img src=https://t.example/p.gif> </details> @org/team",
        "lone backtick": "` @octocat",
        "cjk before @": "中文@octocat",
        "cross-repo ref": "owner/repo#12",
        "GH ref": "GH-12",
        "external link": "[docs](https://evil.example/)",
        "bare url": "https://evil.example/",
    }
    for name, value in cases.items():
        rendered = parse(untrusted_line(value))
        assert set(rendered.tags) <= {"p", "code"}, name
        assert not rendered.attrs and not pings(rendered), name


_REPORT_FIELDS = ("title", "trigger", "observation", "suggestion", "quote", "path")


def _hostile_report(value: str) -> dict[str, Any]:
    bad = finding(1, "P1", **{name: value for name in _REPORT_FIELDS})
    report = build(
        findings=(bad, finding(2, "P2", title=value)),
        title=value,
        exclusions=(Exclusion(value, value, value, 1),),
        signals=(Signal("DELETE", value, value, value),),
        gaps=(Gap(value, "budget", value), Gap(value, "other", None)),
        files=(),
    )
    return {**report, "unverified": [{"what": value, "how": value}, {"what": value, "how": ""}]}


@pytest.fixture(scope="module")
def en() -> Renderer:
    return Renderer()


def _bodies(renderer: Renderer, report: dict[str, Any]) -> dict[str, str]:
    return {
        "summary": renderer.summary(report),
        "comment": renderer.comment(
            report, max_findings=1, summary_url="https://github.com/o/r/actions/runs/1"
        ),
        "inline": renderer.inline(report["findings"][0]),
        "review": renderer.review_body(report, folded=report["findings"]),
    }


OWN_LINK = re.compile(
    r"https://github\.com/octo-org/widgets/(blob/[0-9a-f]{40}|pull/\d+/files)/?[A-Za-z0-9%._~/-]*(#[A-Za-z0-9-]+)?"
)


def _own(attrs: list[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Links we build to the PR's own files (path percent-encoded) count as one kind of link: the
    untrusted text may only change the path inside them, never where they point."""
    return {
        ("a", "href", "<own file link>") if a[:2] == ("a", "href") and OWN_LINK.fullmatch(a[2]) else a
        for a in attrs
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(untrusted_text.filter(lambda s: s.strip()))
@example(FIXED_EXAMPLES[0])
@example(FIXED_EXAMPLES[3])
def test_summary_comment_and_inline_bodies_stay_inert(en: Renderer, value: str) -> None:
    baseline = _bodies(en, _hostile_report("plain words"))
    for name, body in _bodies(en, _hostile_report(value)).items():
        got, base = parse(body), parse(baseline[name])
        assert set(got.tags) <= set(base.tags) | {"code"}, (name, set(got.tags) - set(base.tags))
        assert got.tags.count("details") == base.tags.count("details"), name
        assert got.tags.count("a") == base.tags.count("a"), name
        assert _own(got.attrs) <= _own(base.attrs), (name, _own(got.attrs) - _own(base.attrs))
        assert not pings(got), (name, pings(got))


@pytest.mark.parametrize(
    "path", ["]", "a]:b", "src/[id].md", "[x]", "a\\]", "x]y`z", "a`b]`c", "`]`", "<b>]x", "- ]"]
)
def test_a_path_with_brackets_keeps_its_finding_link(en: Renderer, path: str) -> None:
    """`[`]:11`](url)` at a line's start is a link reference definition: the finding's location line
    vanished from the summary for a file named `]` (found by the property test below)."""
    report = build(findings=(finding(1, "P1", path=path),), files=())
    line = next(x for x in en.summary(report).splitlines() if "octo-org/widgets/blob" in x)
    rendered = parse(line)
    assert rendered.tags.count("a") == 1, line
    assert "".join(rendered.code_text) == f"{path}:11" and not rendered.text().strip()
