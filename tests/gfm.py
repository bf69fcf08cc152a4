"""What GitHub would make of our Markdown: cmark-gfm (GitHub's renderer) plus GitHub's own text filters.

cmark-gfm turns Markdown into HTML with the extensions GitHub enables; GitHub then turns some text
outside `code`, `pre` and `a` into live references: `@user` and `@org/team` mentions, `#N`,
`owner/repo#N` and `GH-N` issue references. `live_effects` lists everything in a rendered body that
a reader would see as markup, link, image, ping or reference rather than text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import cmarkgfm
from cmarkgfm.cmark import Options

EXTENSIONS = ["table", "strikethrough", "autolink", "tagfilter", "tasklist"]

# GitHub's mention filter: `@name` after the start or a non-ASCII-word character (Ruby's \W).
MENTION = re.compile(r"(?:^|[^A-Za-z0-9_])@[A-Za-z0-9]", re.M)
XREF = re.compile(r"#\d|\bgh-\d", re.I)
INERT = frozenset({"code", "pre", "a"})


def to_html(markdown: str) -> str:
    """GFM → HTML with raw HTML kept (GitHub keeps a sanitized subset of it; we want to see it all)."""
    return cmarkgfm.markdown_to_html_with_extensions(
        markdown, options=Options.CMARK_OPT_UNSAFE, extensions=EXTENSIONS
    )


@dataclass
class Rendered:
    tags: list[str] = field(default_factory=list)
    attrs: list[tuple[str, str, str]] = field(default_factory=list)
    live_text: list[str] = field(default_factory=list)
    code_text: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(self.live_text)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Rendered()
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.out.tags.append(tag)
        self.out.attrs.extend((tag, k, v or "") for k, v in attrs)
        if tag not in ("br", "hr", "img", "input"):
            self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if INERT & set(self._stack):
            self.out.code_text.append(data)
        else:
            self.out.live_text.append(data)

    def handle_comment(self, data: str) -> None:
        self.out.tags.append("!--")


def parse(markdown: str) -> Rendered:
    parser = _Parser()
    parser.feed(to_html(markdown))
    parser.close()
    return parser.out


def pings(rendered: Rendered) -> list[str]:
    """Mentions and issue references GitHub would make live in this body."""
    found: list[str] = []
    for chunk in rendered.live_text:
        found += MENTION.findall(chunk) + XREF.findall(chunk)
    return found
