"""The JSON Schema of `report.json` (imreview.report/v1), shipped as package data."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

REPORT_SCHEMA_FILE = "report.v1.json"


def load_report_schema() -> dict[str, Any]:
    """The draft 2020-12 schema that every `Report.to_dict()` must validate against."""
    text = resources.files(__name__).joinpath(REPORT_SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
