"""Shared fixtures: real git repositories in temp dirs, the CLI (in-process, or a subprocess on
purpose), a network guard."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fakes.github_server import FakeGitHub
    from tests.fakes.model_server import FakeModelServer
    from tests.test_action_e2e import Runner


def _bundled_tiktoken_files() -> None:
    """Importing litellm points TIKTOKEN_CACHE_DIR at the tokenizer files it ships; a test that
    swaps os.environ around that import would lose it and tiktoken would try the network. Set it
    once for the whole worker, as litellm would."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))


_bundled_tiktoken_files()


ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _loopback(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if not isinstance(host, str):
        return True  # AF_UNIX paths and the like
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def unpaced_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback GitHub has no secondary rate limit: writes are not spaced 0.5 s apart (a command
    run made 3 writes; fifty of them waited a minute), and a retried GET does not back off (the
    fault tests waited 1.5 s a retry). Subprocess runs keep the real timing."""
    from reviewer.source import github

    monkeypatch.setattr(github, "WRITE_SPACING_SECONDS", 0.0)
    monkeypatch.setattr(github, "RETRY_BACKOFF_SECONDS", 0.0)  # the retries happen, without the waits


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any in-process connection to a non-loopback address fails the test loudly."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)


def git(cwd: Path, *args: str, extra_env: Mapping[str, str] | None = None) -> str:
    """`git ARGS` in `cwd` as a fixed test author with no user or system config; `extra_env` adds
    to that environment (fixed commit dates, say); git's output, stripped."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Test Author",
        "GIT_COMMITTER_EMAIL": "author@example.com",
        "GIT_TEMPLATE_DIR": "",
        **(extra_env or {}),
    }
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


@dataclass
class Repo:
    """A real git repository: `main` holds the base, `feature` the change under review."""

    path: Path

    def write(self, files: Mapping[str, str | bytes | None]) -> None:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8", newline="")

    def commit(self, files: Mapping[str, str | bytes | None], message: str = "change") -> str:
        self.write(files)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "--no-gpg-sign", "-m", message)
        return self.head()

    def head(self) -> str:
        return git(self.path, "rev-parse", "HEAD")

    def branch(self, name: str) -> None:
        git(self.path, "checkout", "-q", "-b", name)

    def git(self, *args: str) -> str:
        return git(self.path, *args)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return Repo(path)


@pytest.fixture
def feature_repo(repo: Repo) -> Iterator[Repo]:
    """main has `app.py`; `feature` modifies it and adds a module."""
    repo.commit(
        {"app.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"}, "base"
    )
    repo.branch("feature")
    repo.commit(
        {
            "app.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b - 1\n",
            "lib/util.py": "def div(a, b):\n    return a / b\n",
        },
        "feature work",
    )
    yield repo


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    """The loopback model server (tests/fakes/model_server.py), scripted by the test."""
    from tests.fakes.model_server import FakeModelServer

    with FakeModelServer() as server:
        yield server


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    """The loopback GitHub of the Action's tests: their token and repository (tests/test_action_e2e.py)."""
    from tests.factories import fake_github
    from tests.test_action_e2e import REPO, TOKEN

    with fake_github({TOKEN: {}}, repo=REPO) as server:
        yield server


@pytest.fixture
def runner(gh: FakeGitHub, tmp_path: Path) -> Runner:
    """One workflow job in the emulated runner, pointed at `gh`; the Action runs in-process."""
    from tests.test_action_e2e import Runner

    return Runner(tmp_path, gh.url)


def cli_env(tmp_path: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment for the CLI subprocess: no provider keys, no GitHub variables."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }
    env.update(extra or {})
    return env


def run_cli(
    args: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`imreview ARGS` run in this process with `env` as its whole environment and `cwd` as its
    working directory (tests/inprocess.py); `timeout` is kept for callers and unused in-process."""
    from tests.inprocess import SUBPROCESS, run_main

    if SUBPROCESS:
        return run_cli_subprocess(args, cwd=cwd, env=env, timeout=timeout)
    return run_main(args, cwd=cwd, env=env)


def run_cli_subprocess(
    args: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m reviewer ARGS` as a real subprocess: for tests about the process itself."""
    return subprocess.run(
        [sys.executable, "-m", "reviewer", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
