"""imreview: a bounded, honest pull-request reviewer."""

from __future__ import annotations

__version__ = "0.1.0"
TOOL_NAME = "imreview"
