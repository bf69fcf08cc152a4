"""Where the Action writes report JSON, and the path a later step is told.

A Docker action's RUNNER_TEMP (`/github/runner_temp`) means nothing on the host, but the workspace
is mounted at GITHUB_WORKSPACE and is every later step's working directory: reports go to
`<workspace>/.imreview/` and outputs name them relative to the workspace, a path that resolves on
the host, in `actions/upload-artifact` and in other containers alike. Without a workspace
(outside Actions) they stay in the scratch directory, named absolutely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

WORKSPACE_DIR = ".imreview"


@dataclass(frozen=True)
class ReportDir:
    directory: Path
    workspace: Path | None = None

    def save(self, name: str, text: str) -> str:
        """Write `name` so the runner user can read and remove it (we run as root); return the output path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / name
        path.write_text(text, encoding="utf-8")
        if self.workspace is None:
            return str(path)
        self.directory.chmod(0o777)
        path.chmod(0o666)
        return path.relative_to(self.workspace).as_posix()


def report_dir(env: Mapping[str, str], scratch: Path) -> ReportDir:
    workspace = env.get("GITHUB_WORKSPACE", "").strip()
    if workspace and Path(workspace).is_dir():
        return ReportDir(Path(workspace) / WORKSPACE_DIR, Path(workspace))
    return ReportDir(scratch)
