"""Where the Action writes report JSON, and the path a later step is told.

A Docker action's RUNNER_TEMP (`/github/runner_temp`) means nothing on the host, but the workspace
is mounted at GITHUB_WORKSPACE and is every later step's working directory: reports go to
`<workspace>/.imreview/` and outputs name them relative to the workspace, a path that resolves on
the host, in `actions/upload-artifact` and in other containers alike. Without a workspace
(outside Actions) they stay in the scratch directory, named absolutely.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

WORKSPACE_DIR = ".imreview"


@dataclass(frozen=True)
class ReportDir:
    directory: Path
    workspace: Path | None = None

    def save(self, name: str, text: str) -> str:
        """Write `name` so the runner user can read and remove it (we run as root); return the output path.

        The workspace may hold the PR's checkout, so `.imreview` or the report's own name may be a
        symlink the PR committed: neither is followed (root would write, and open up, whatever
        it points to). The directory symlink is replaced by a directory; the file is written
        beside its name and renamed over it, which replaces a symlink rather than its target."""
        if self.workspace is not None and self.directory.is_symlink():
            self.directory.unlink()
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.workspace is not None and not self.directory.resolve().is_relative_to(
            self.workspace.resolve()
        ):
            raise OSError(
                f"{self.directory} resolves outside the workspace; the report was not written there"
            )
        path = self.directory / name
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=f".{name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(temporary, 0o666 if self.workspace is not None else 0o644)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        if self.workspace is None:
            return str(path)
        self.directory.chmod(0o777)
        return path.relative_to(self.workspace).as_posix()


def report_dir(env: Mapping[str, str], scratch: Path) -> ReportDir:
    workspace = env.get("GITHUB_WORKSPACE", "").strip()
    if workspace and Path(workspace).is_dir():
        return ReportDir(Path(workspace) / WORKSPACE_DIR, Path(workspace))
    return ReportDir(scratch)
