"""Snapshot providers. The pipeline sees sources only through `Source` (github.py, local.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from reviewer.context import Corpus
from reviewer.diff import DiffFile
from reviewer.report import Gap, Snapshot


@dataclass(frozen=True)
class Change:
    """A pinned snapshot plus its diff. `body` is untrusted PR text, for the prompt only."""

    snapshot: Snapshot
    files: tuple[DiffFile, ...]
    body: str = ""
    gaps: tuple[Gap, ...] = ()


class Source(Protocol):
    def change(self) -> Change:
        """Pin the snapshot and read the diff, once."""

    def head_sha(self) -> str:
        """Re-read the head now; the gate compares it with the snapshot's."""

    def read_file(self, path: str, sha: str) -> str | None:
        """File text at a commit (for context and base-branch config); None when absent."""

    def context_corpus(self) -> Corpus | None:
        """The head of the repository, searchable for context (reviewer.context); None without one."""
