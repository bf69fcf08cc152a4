"""A real git repository in a temp directory, and GitHub's view of it (PR files, compare).

Tests that push, force-push or rebase a PR build the history with real git and let the fake
GitHub answer from it, so the patches and the ancestry the reviewer sees are git's own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


class GitRepo:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.root, env=_ENV, capture_output=True, text=True, check=True
        )
        return done.stdout

    def commit(self, files: dict[str, str | None], message: str = "change") -> str:
        """Write (or delete, for None) the files and commit them; the new sha."""
        for name, text in files.items():
            path = self.root / name
            if text is None:
                self.git("rm", "-q", name)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            self.git("add", name)
        self.git("commit", "-q", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def checkout(self, ref: str, *, new_branch: str | None = None) -> None:
        self.git("checkout", "-q", *(["-b", new_branch] if new_branch else []), ref)

    def status(self, base: str, head: str) -> str:
        """The compare API's `status` for `base...head`."""
        if base == head:
            return "identical"
        if self._is_ancestor(base, head):
            return "ahead"
        if self._is_ancestor(head, base):
            return "behind"
        return "diverged"

    def _is_ancestor(self, a: str, b: str) -> bool:
        done = subprocess.run(
            ["git", "merge-base", "--is-ancestor", a, b], cwd=self.root, env=_ENV, check=False
        )
        return done.returncode == 0

    def entries(self, base: str, head: str) -> list[dict[str, Any]]:
        """GitHub's diff entries for `base...head` (the PR files list, or a compare's files)."""
        text = self.git("diff", "--no-color", "--no-ext-diff", "-M", f"{base}...{head}")
        entries: list[dict[str, Any]] = []
        for chunk in text.split("diff --git ")[1:]:
            lines = chunk.split("\n")
            header, _, rest = chunk.partition("\n@@")
            old = new = None
            status = "modified"
            for line in header.split("\n"):
                if line.startswith("--- a/"):
                    old = line[6:]
                elif line.startswith("+++ b/"):
                    new = line[6:]
                elif line.startswith("rename from "):
                    old, status = line[12:], "renamed"
                elif line.startswith("rename to "):
                    new = line[10:]
                elif line.startswith("new file mode"):
                    status = "added"
                elif line.startswith("deleted file mode"):
                    status = "removed"
            if new is None and old is None:
                new = lines[0].split(" b/", 1)[-1]
            entry: dict[str, Any] = {"filename": new or old, "status": status}
            if rest:
                entry["patch"] = ("@@" + rest).rstrip("\n")
            if status == "renamed":
                entry["previous_filename"] = old
            entries.append(entry)
        return entries
