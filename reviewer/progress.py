"""Progress while a review runs: `::group::` per stage in Actions, a line per unit on a terminal.

The pipeline calls the reporter in use (`current()`), which the entry points choose (`use`); the
default says nothing, so library callers and tests stay quiet. Progress never goes into the report.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TextIO


class Progress:
    """Says nothing; the base of every reporter, and the default."""

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """A named stage of one review (`plan`, `model review`, ...), timed."""
        yield

    def unit(self, done: int, total: int, what: str, outcome: str, seconds: float) -> None:
        """One review unit (one model call's worth of hunks) finished."""


class _Writer(Progress):
    """A reporter that writes to one stream, one whole write at a time (units finish on workers)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        with self._lock:
            self._stream.write(text)
            self._stream.flush()


class ActionsProgress(_Writer):
    """A collapsible log group per stage, its time as the group's last line."""

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        self._write(f"::group::imreview: {name}\n")
        try:
            yield
        finally:
            self._write(f"imreview: {name} took {time.monotonic() - start:.1f} s\n::endgroup::\n")

    def unit(self, done: int, total: int, what: str, outcome: str, seconds: float) -> None:
        self._write(f"imreview: unit {done}/{total} {outcome} in {seconds:.1f} s ({_plain(what)})\n")


class TerminalProgress(_Writer):
    """A line per finished unit on stderr; with `verbose`, stage timings too."""

    def __init__(self, err: TextIO, *, verbose: bool = False) -> None:
        super().__init__(err)
        self._verbose = verbose

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            if self._verbose:
                self._write(f"imreview: {name}: {time.monotonic() - start:.1f} s\n")

    def unit(self, done: int, total: int, what: str, outcome: str, seconds: float) -> None:
        self._write(f"imreview: [{done}/{total}] {outcome} {_plain(what)} ({seconds:.1f} s)\n")


def for_environment(
    env: Mapping[str, str] | None = None,
    *,
    quiet: bool = False,
    verbose: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> Progress:
    """The reporter for where we run: nothing when quiet; log groups in Actions; unit lines when
    stderr is a terminal (or always with `verbose`)."""
    env = os.environ if env is None else env
    if quiet:
        return Progress()
    if env.get("GITHUB_ACTIONS") == "true":
        return ActionsProgress(out or sys.stdout)
    stream = err or sys.stderr
    if verbose or stream.isatty():
        return TerminalProgress(stream, verbose=verbose)
    return Progress()


_SILENT = Progress()
_CURRENT: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("imreview_progress", default=None)


def current() -> Progress:
    """The reporter in use (read it on the calling thread; worker threads get it passed in)."""
    return _CURRENT.get() or _SILENT


@contextlib.contextmanager
def use(reporter: Progress) -> Iterator[Progress]:
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)


def _plain(text: str, limit: int = 160) -> str:
    """File names come from the PR: one line, no workflow-command prefix, capped."""
    line = " ".join(text.split()).replace("::", ": :")
    return line if len(line) <= limit else line[: limit - 1] + "…"
