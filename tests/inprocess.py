"""The `imreview` command and the Action's entrypoint run inside the test process.

A subprocess per end-to-end test paid for a fresh interpreter and a fresh litellm import (20 s and
more on a loaded 2-core machine) and added nothing the test looked at: `run_main` gives the command
the same process-wide inputs a subprocess would get (the whole environment replaced, the working
directory, empty stdin, stdout and stderr captured as text) through `reviewer.cli.main`, the
function `python -m reviewer` and `entrypoint.py` both call, and puts everything back after.
litellm is then imported once per test worker. The few tests that are about the process itself
(start-up time, what gets imported, the console script) keep a real subprocess on purpose.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# IMREVIEW_TESTS_SUBPROCESS=1 runs every converted test through a real subprocess again, the way they
# ran before: a check that both agree (tests/test_golden.py is the exception: it fixes the prompts'
# nonces in-process, which a subprocess does not see, so its token estimates differ there).
SUBPROCESS = os.environ.get("IMREVIEW_TESTS_SUBPROCESS") == "1"


class _Captured(io.TextIOWrapper):
    """A text stream over bytes, as a pipe's: UTF-8, `buffer` available, never a terminal."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)

    def close(self) -> None:  # a stream the code under test closes stays readable for the test
        self.flush()

    def text(self) -> str:
        self.flush()
        raw = self.buffer.getvalue().decode("utf-8", errors="replace")  # type: ignore[attr-defined]
        return raw.replace("\r\n", "\n").replace("\r", "\n")  # as subprocess's text=True reads a pipe


SET_BY_IMPORTS = ("TIKTOKEN_CACHE_DIR",)
"""Variables that importing litellm sets in the process (its bundled tiktoken files): a subprocess
gets them from its own import, so an in-process run keeps them."""


@contextmanager
def process_state(env: Mapping[str, str], cwd: Path) -> Iterator[tuple[_Captured, _Captured]]:
    """os.environ, the working directory and the standard streams as a subprocess would have them,
    restored afterwards whatever happens."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    out, err = _Captured(), _Captured()
    os.environ.clear()
    os.environ.update(env)
    for key in SET_BY_IMPORTS:  # a process's own import of litellm sets these; ours happened earlier
        if key in saved_env and key not in env:
            os.environ[key] = saved_env[key]
    os.chdir(cwd)
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _litellm_loaded() -> None:
    """Import litellm before any stream is swapped, so nothing it sets up at import (loggers'
    handlers) keeps a test's captured stream; later runs find it imported (once per worker)."""
    from reviewer.llm import litellm_ready

    litellm_ready()


def run_main(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`imreview ARGV` in this process: the exit code, stdout and stderr as a subprocess's."""
    from reviewer.cli import main

    _litellm_loaded()
    if os.environ.get("IMREVIEW_TESTS_LAUNCH_LOG"):  # a measuring aid: one line per run that was a process
        with open(os.environ["IMREVIEW_TESTS_LAUNCH_LOG"], "a", encoding="utf-8") as log:
            log.write(" ".join(["imreview", *argv][:2]) + "\n")
    before = set(threading.enumerate())
    with process_state(env, cwd) as (out, err):
        code = main(list(argv))
        sys.stdout.flush()
        sys.stderr.flush()
    ours = [t for t in threading.enumerate() if t not in before and t.name.startswith("imreview")]
    assert not [t for t in ours if t.is_alive()], f"imreview left threads running: {ours}"
    return subprocess.CompletedProcess(["imreview", *argv], code, out.text(), err.text())


def run_entrypoint(*, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The Docker Action's `entrypoint.py` (which is `imreview action`), in this process unless
    IMREVIEW_TESTS_SUBPROCESS=1."""
    if SUBPROCESS:
        return run_entrypoint_subprocess(cwd=cwd, env=env)
    return run_main(["action"], cwd=cwd, env=env)


def run_entrypoint_subprocess(*, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`python entrypoint.py` as the container runs it: for tests about the process itself."""
    return subprocess.run(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
