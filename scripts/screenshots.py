"""Screenshots of the sticky comment and the job summary for the README, from a real report.

docs/sample-report.json (made by scripts/make_sample_report.py) is rendered with our templates,
turned into HTML by GitHub's own Markdown library (cmarkgfm) with GitHub-like CSS, and shot with
headless Chromium from the distribution (`apt-get install chromium`). Run from the repository root:

    python scripts/screenshots.py     # writes docs/comment.png and docs/summary.png
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reviewer.render import Renderer  # noqa: E402

CSS = """
body { margin: 0; background: #ffffff; font-family: -apple-system, BlinkMacSystemFont, "Segoe UI",
  "Noto Sans", Helvetica, Arial, sans-serif, "Noto Sans CJK SC"; font-size: 14px; line-height: 1.5;
  color: #1f2328; }
.frame { margin: 16px; border: 1px solid #d1d9e0; border-radius: 6px; }
.head { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; color: #59636e;
  border-radius: 6px 6px 0 0; }
.head b { color: #1f2328; }
.markdown-body { padding: 16px; }
h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; font-weight: 600; }
h1 { font-size: 2em; margin: 0 0 16px; } h2 { font-size: 1.5em; margin: 24px 0 16px; }
h3 { font-size: 1.25em; margin: 24px 0 16px; font-weight: 600; }
p, ul, table, details { margin: 0 0 16px; }
ul { padding-left: 2em; }
a { color: #0969da; text-decoration: none; }
code { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, monospace; font-size: 85%;
  padding: .2em .4em; background: rgba(129,139,152,.12); border-radius: 6px; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; overflow: auto; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; display: block; width: max-content; max-width: 100%; overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { font-weight: 600; } tr:nth-child(2n) { background: #f6f8fa; }
summary { cursor: pointer; }
hr { height: .25em; background: #d1d9e0; border: 0; margin: 24px 0; }
sub { color: #59636e; }
"""


def page(markdown: str, header: str) -> str:
    body = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    return (
        f"<!doctype html><meta charset='utf-8'><style>{CSS}</style>"
        f"<div class='frame'><div class='head'>{header}</div><div class='markdown-body'>{body}</div></div>"
    )


def shoot(html: str, out: Path, width: int, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium not found: apt-get update && apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "page.html"
        source.write_text(html, encoding="utf-8")
        profile = Path(tmp) / "profile"
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--screenshot={out}",
                f"--window-size={width},{height}",
                source.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main() -> int:
    report = json.loads((ROOT / "docs" / "sample-report.json").read_text(encoding="utf-8"))
    renderer = Renderer(language=report["settings"]["language"])
    comment = renderer.comment(report, max_findings=report["settings"]["max_findings"])
    summary = renderer.summary(report)
    shoot(page(comment, "<b>github-actions</b> bot commented"), ROOT / "docs" / "comment.png", 900, 500)
    shoot(page(summary, "<b>review</b> summary"), ROOT / "docs" / "summary.png", 900, 2300)
    print("wrote docs/comment.png and docs/summary.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
