"""The installed package carries its templates and schema, and the console script works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROBE = """
import reviewer, reviewer.render as r
from reviewer.schema import load_report_schema
print(reviewer.__file__)
print(r.packaged_templates_dir())
print(load_report_schema()["$id"] if "$id" in load_report_schema() else "schema-ok")
"""


def test_templates_and_schema_load_from_the_installed_package(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    package_file, templates, _ = proc.stdout.splitlines()
    templates_dir = Path(templates)
    for name in ("summary.md.j2", "comment.md.j2", "prompts/review.j2", "i18n/en.yml", "i18n/zh-CN.yml"):
        assert (templates_dir / name).is_file(), name
    if not Path(package_file).resolve().is_relative_to(ROOT):
        # a real (non-editable) install, as in CI: templates are package data, not the checkout's
        assert templates_dir == Path(package_file).parent / "templates"
