"""`python -m reviewer` is the `imreview` command."""

from __future__ import annotations

from reviewer.cli import main

raise SystemExit(main())
