"""Links from a report to GitHub: a finding's line at the reviewed sha, a file in the PR's files view.

Computed from the report's snapshot alone (its PR `url` and shas), so `imreview render` of a saved
report links the same way as the run that made it. Local reviews have no web URL and get no links.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

_PR_URL = re.compile(r"(https?://[^\s<>()\[\]\"'`\\]+)/pull/(\d+)")
_SHA = re.compile(r"[0-9a-f]{40}")


def _pr_url(snapshot: Mapping[str, Any]) -> tuple[str, str] | None:
    """(repository web URL, PR web URL) when the snapshot is a GitHub PR with a plain URL."""
    if snapshot.get("source") != "github":
        return None
    m = _PR_URL.fullmatch(str(snapshot.get("url") or ""))
    return (m.group(1), m.group(0)) if m else None


def blob_url(item: Mapping[str, Any], snapshot: Mapping[str, Any]) -> str:
    """`<server>/<repo>/blob/<sha>/<path>#L<line>` for a finding or exclusion; the base sha for a
    removed line (side LEFT), the head sha otherwise; '' when there is nothing to link to."""
    urls = _pr_url(snapshot)
    path = str(item.get("path") or "")
    if urls is None or not path:
        return ""
    side = item.get("side") or "RIGHT"
    sha = str(((snapshot.get("base") if side == "LEFT" else snapshot.get("head")) or {}).get("sha") or "")
    if not _SHA.fullmatch(sha):
        return ""
    url = f"{urls[0]}/blob/{sha}/{quote(path, safe='/')}"
    line, end = item.get("line"), item.get("end_line")
    if isinstance(line, int) and line > 0:
        url += f"#L{line}"
        if isinstance(end, int) and end > line:
            url += f"-L{end}"
    return url


def files_url(path: Any, snapshot: Mapping[str, Any]) -> str:
    """The file in the PR's "Files changed" view (GitHub anchors a file as `diff-<sha256(path)>`)."""
    urls = _pr_url(snapshot)
    if urls is None or not path:
        return ""
    return f"{urls[1]}/files#diff-{hashlib.sha256(str(path).encode('utf-8')).hexdigest()}"
