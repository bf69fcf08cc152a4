"""Cut GitHub's REST OpenAPI description down to the operations imreview calls.

The fake GitHub server in tests/fakes/github_server.py validates its responses and our request
bodies against the result, so the tests never read the 13 MB original (or /work/shared) at run
time. Regenerate after changing which endpoints reviewer/source/github.py uses:

    python scripts/trim_openapi.py [SOURCE_JSON] [--out tests/data/github-openapi/subset.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_SOURCE = Path("/work/shared/vendor-data/octokit-openapi-23.0.2/api.github.com.json")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "github-openapi" / "subset.json"

OPERATIONS: dict[str, tuple[str, ...]] = {
    "/repos/{owner}/{repo}": ("get",),
    "/repos/{owner}/{repo}/pulls": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/files": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews": ("get", "post"),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}": ("put",),
    "/repos/{owner}/{repo}/issues/comments": ("get",),
    "/repos/{owner}/{repo}/issues/{issue_number}/comments": ("get", "post"),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}": ("get", "patch", "delete"),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions": ("post",),
    "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions": ("post",),
    "/repos/{owner}/{repo}/collaborators/{username}/permission": ("get",),
    "/repos/{owner}/{repo}/commits/{ref}/status": ("get",),
    "/repos/{owner}/{repo}/commits/{ref}/check-runs": ("get",),
    "/repos/{owner}/{repo}/contents/{path}": ("get",),
    "/repos/{owner}/{repo}/compare/{basehead}": ("get",),
    "/repos/{owner}/{repo}/git/trees/{tree_sha}": ("get",),
    "/user": ("get",),
    "/rate_limit": ("get",),
}

_DROP_KEYS = frozenset({"examples", "example", "x-github", "externalDocs", "x-octokit"})


def _strip(node: Any) -> Any:
    """Drop examples and documentation-only extensions; they are most of the bytes."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in _DROP_KEYS}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def trim(spec: dict[str, Any]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, methods in OPERATIONS.items():
        item = spec["paths"].get(path)
        if item is None:
            raise SystemExit(f"trim_openapi: path {path!r} is not in the source description")
        kept = {m: _strip(item[m]) for m in methods if m in item}
        missing = [m for m in methods if m not in item]
        if missing:
            raise SystemExit(f"trim_openapi: {path!r} has no operation {', '.join(missing)}")
        if "parameters" in item:
            kept["parameters"] = _strip(item["parameters"])
        paths[path] = kept

    components: dict[str, dict[str, Any]] = {}
    pending = list(_refs(paths))
    while pending:
        ref = pending.pop()
        parts = ref.removeprefix("#/").split("/")
        if len(parts) != 3 or parts[0] != "components":
            raise SystemExit(f"trim_openapi: unexpected $ref {ref!r}")
        _, kind, name = parts
        bucket = components.setdefault(kind, {})
        if name in bucket:
            continue
        node = _strip(spec["components"][kind][name])
        bucket[name] = node
        pending.extend(_refs(node))

    return {
        "openapi": spec["openapi"],
        "info": {
            **{k: spec["info"][k] for k in ("title", "version", "license")},
            "x-imreview-subset": "operations used by imreview; see scripts/trim_openapi.py",
        },
        "paths": paths,
        "components": {kind: dict(sorted(items.items())) for kind, items in sorted(components.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"trim_openapi: {args.source}: no such file", file=sys.stderr)
        return 2
    spec = json.loads(args.source.read_text(encoding="utf-8"))
    subset = trim(spec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(subset, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    licence = args.source.parent / "LICENSE"
    if licence.is_file():
        shutil.copyfile(licence, args.out.parent / "LICENSE")
    counts = ", ".join(f"{len(v)} {k}" for k, v in subset["components"].items())
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes; {len(subset['paths'])} paths; {counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
