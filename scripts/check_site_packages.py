"""Fail on an unknown `.pth` in site-packages (litellm 1.82.8 shipped one that stole secrets)."""

from __future__ import annotations

import re
import site
import sys
from pathlib import Path

KNOWN = (
    re.compile(r"distutils-precedence\.pth"),
    re.compile(r"_?__editable__.*\.pth"),
    re.compile(r"_editable_impl_[A-Za-z0-9_]+\.pth"),
    re.compile(r"_virtualenv\.pth"),
)
BANNED_VERSIONS = {"litellm": ("1.82.7", "1.82.8")}


def main() -> int:
    problems: list[str] = []
    for root in {Path(p) for p in site.getsitepackages()}:
        for pth in sorted(root.glob("*.pth")):
            if not any(pattern.fullmatch(pth.name) for pattern in KNOWN):
                problems.append(f"unknown .pth file in site-packages: {pth}")
        for name, versions in BANNED_VERSIONS.items():
            for version in versions:
                if list(root.glob(f"{name}-{version}.dist-info")):
                    problems.append(f"{name} {version} is a known-malicious release")
    for problem in problems:
        print(f"check_site_packages: {problem}", file=sys.stderr)
    if not problems:
        print("check_site_packages: ok (no unknown .pth files, no banned releases)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
