"""The Docker Action's entry point: the same code path as `imreview action` (DESIGN section 3)."""

from __future__ import annotations

from reviewer.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["action"]))
