"""A local git range as a review source: `merge-base(base, head)..head`, committed changes only."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import weakref
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import IO

from reviewer.context import MAX_NAMES, Occurrence
from reviewer.diff import parse_patch
from reviewer.errors import GitError, UsageError
from reviewer.report import CiState, Ref, Snapshot
from reviewer.source import Change

DEFAULT_BASES = ("origin/HEAD", "origin/main", "main", "origin/master", "master")
CONFIG_PATH = ".github/imreview.yml"
_REMOTE_REPO = re.compile(r"[:/]([^/:]+/[^/]+?)(?:\.git)?/?$")
_MAX_BODY = 20_000
_DIFF = ("diff", "--no-color", "--no-ext-diff", "-M", "--full-index", "--src-prefix=a/", "--dst-prefix=b/")
GREP_PER_FILE = 400
"""Matching lines `git grep` reports per file, for all names together (`-m` cannot count per name):
high enough that a definition far down a file that uses many of the names is still reported."""
_ERE_SPECIAL = re.compile(r"[.\[\]()*+?{}|^$\\]")
"""What a POSIX extended regex would read as an operator in a name."""


def _git_env() -> dict[str, str]:
    """The caller's environment minus GIT_* variables that would point git elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    return env


class Git:
    """One runner for every git call: safe.directory set, errors carry the exact command."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        cmd = ["git", "-c", f"safe.directory={self.cwd}", "-c", "core.quotePath=false", *args]
        try:
            proc = subprocess.run(cmd, cwd=self.cwd, env=_git_env(), capture_output=True, check=False)
        except FileNotFoundError as exc:
            raise UsageError("git is not installed or not on PATH") from exc
        if check and proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise GitError(f"`git {' '.join(args)}` failed ({proc.returncode}): {err}")
        return proc

    def text(self, *args: str) -> str:
        return self.run(*args).stdout.decode("utf-8", "replace").strip()

    def verify(self, ref: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


class BlobReader:
    """One `git cat-file --batch` process for every file read (a process per file costs 2 ms each,
    seconds on a large change). Thread-safe; the process ends with `close()` or with this object."""

    def __init__(self, git: Git) -> None:
        self.git = git
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., BlobReader] | None = None

    def read(self, path: str, sha: str) -> bytes | None:
        """The blob at `sha:path`; None when absent or not a file, and for a path that is not a plain
        path inside the tree: git reads `sha:../x` relative to the working directory, and its
        "outside repository" error ends the batch process (the review with it)."""
        if not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            return None
        if "\n" in path or "\r" in path:
            proc = self.git.run("cat-file", "blob", f"{sha}:{path}", check=False)
            return proc.stdout if proc.returncode == 0 else None
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                cmd = ["git", "-c", f"safe.directory={self.git.cwd}", "cat-file", "--batch"]
                pipe = subprocess.PIPE
                try:
                    self._proc = subprocess.Popen(
                        cmd,
                        cwd=self.git.cwd,
                        env=_git_env(),
                        stdin=pipe,
                        stdout=pipe,
                        stderr=subprocess.DEVNULL,
                    )
                except FileNotFoundError as exc:
                    raise UsageError("git is not installed or not on PATH") from exc
                self._finalizer = weakref.finalize(self, _stop, self._proc)
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(f"{sha}:{path}\n".encode())
                stdin.flush()
                return _answer(stdout, f"{sha}:{path}")
            except (BrokenPipeError, OSError, ValueError) as exc:
                self._close()
                raise GitError(f"`git cat-file --batch` failed reading {sha[:12]}:{path}: {exc}") from exc

    def _close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._proc = None

    def close(self) -> None:
        with self._lock:
            self._close()


def _answer(stdout: IO[bytes], name: str) -> bytes | None:
    """One reply of `git cat-file --batch`: `<oid> <type> <size>\\n<content>\\n` or `<name> missing`."""
    header = stdout.readline()
    if not header.endswith(b"\n"):
        raise ValueError("the process ended")
    fields = header.split()
    if len(fields) != 3 or not fields[2].isdigit():
        return None
    size = int(fields[2])
    content = stdout.read(size + 1)
    if len(content) != size + 1:
        raise ValueError(f"short read for {name}")
    return content[:-1] if fields[1] == b"blob" else None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


class GitCorpus:
    """The head commit as a context corpus (reviewer.context): one `git grep` over the commit's
    tree for every name, file text through the shared `git cat-file --batch` process."""

    def __init__(self, git: Git, blobs: BlobReader, sha: str) -> None:
        self.git = git
        self.blobs = blobs
        self.sha = sha

    def grep(self, names: Collection[str]) -> Sequence[Occurrence]:
        wanted = sorted(names)[:MAX_NAMES]
        if not wanted:
            return []
        # one extended regex of all the names: `-F` with one `-e` per name took 39 s for 150 names
        # over axios's tree, this takes 0.1 s and reports the same lines (benchmarks/DEFECTS.md)
        pattern = "(" + "|".join(_ERE_SPECIAL.sub(r"\\\g<0>", name) for name in wanted) + ")"
        proc = self.git.run(
            "grep", "-n", "-I", "-w", "-E", "-z", "--full-name", "-m", str(GREP_PER_FILE),
            "-e", pattern, self.sha, "--", check=False,
        )  # fmt: skip
        if proc.returncode not in (0, 1):
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise GitError(f"`git grep` at {self.sha[:12]} failed ({proc.returncode}): {err}")
        prefix = f"{self.sha}:".encode()
        out: list[Occurrence] = []
        for record in proc.stdout.split(b"\n"):
            fields = record.split(b"\0", 2)
            if len(fields) != 3 or not fields[0].startswith(prefix) or not fields[1].isdigit():
                continue
            path = fields[0][len(prefix) :].decode("utf-8", "replace")
            out.append(Occurrence(path, int(fields[1]), fields[2].decode("utf-8", "replace")))
        return out

    def read(self, path: str) -> str | None:
        blob = self.blobs.read(path, self.sha)
        return None if blob is None else blob.decode("utf-8", "replace")


def _repository(path: str | os.PathLike[str]) -> Git:
    """The top level of the repository at PATH, or exit 2 saying PATH is not one."""
    where = Path(path).resolve()
    if not where.is_dir():
        raise UsageError(f"PATH {str(path)!r} is not a directory")
    proc = Git(where).run("rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise UsageError(f"PATH {str(path)!r} is not a git repository (git rev-parse failed)")
    return Git(Path(proc.stdout.decode().strip()))


def _default_base(git: Git) -> str:
    """The upstream when it names another branch, else the first of DEFAULT_BASES that exists."""
    upstream = git.run("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}", check=False)
    current = git.run("rev-parse", "--abbrev-ref", "HEAD", check=False).stdout.decode().strip()
    name = upstream.stdout.decode().strip()
    if upstream.returncode == 0 and name and name.split("/", 1)[-1] != current:
        return name
    found = next((candidate for candidate in DEFAULT_BASES if git.verify(candidate)), None)
    if found is None:
        raise UsageError(
            f"no base branch found: tried the upstream, {', '.join(DEFAULT_BASES)}; pass --base REF"
        )
    return found


class LocalSource:
    """Reviews what `head` adds on top of `merge-base(base, head)`; file text comes from git objects."""

    def __init__(self, path: str | os.PathLike[str] = ".", *, base: str | None = None, head: str = "HEAD"):
        self.git = _repository(path)
        self.base_ref = base or _default_base(self.git)
        self.head_ref = head
        self.base_sha = self._resolve(self.base_ref, "--base")
        self.head_sha_pinned = self._resolve(head, "--head")
        proc = self.git.run("merge-base", self.base_sha, self.head_sha_pinned, check=False)
        if proc.returncode != 0:
            raise UsageError(
                f"no merge base between {self.base_ref} and {head}: the history is shallow or unrelated;"
                " fetch more history (git fetch --unshallow, or actions/checkout with fetch-depth: 0)"
            )
        self.merge_base = proc.stdout.decode().strip()
        self.blobs = BlobReader(self.git)

    def _resolve(self, ref: str, flag: str) -> str:
        sha = self.git.verify(ref)
        if not sha:
            raise UsageError(f"{flag} {ref!r} is not a commit in {self.git.cwd}")
        return sha

    def change(self) -> Change:
        head, commits = self.head_sha_pinned, f"{self.merge_base}..{self.head_sha_pinned}"
        files = parse_patch(self.git.run(*_DIFF, self.merge_base, head).stdout)
        if not files:
            raise UsageError(
                f"nothing to review: {self.base_ref}...{self.head_ref} is empty"
                f" (merge base {self.merge_base[:12]} = head, or no committed changes)"
            )
        origin = self.git.run("remote", "get-url", "origin", check=False)
        found = _REMOTE_REPO.search(origin.stdout.decode().strip()) if origin.returncode == 0 else None
        snapshot = Snapshot(
            source="local",
            repo=found.group(1) if found else self.git.cwd.name,
            number=None,
            title=self.git.text("log", "-1", "--format=%s", head),
            author=self.git.text("log", "-1", "--format=%an", head),
            url="",
            base=Ref(ref=self.base_ref, sha=self.base_sha),
            head=Ref(ref=self.head_ref, sha=head),
            merge_base=self.merge_base,
            files=len(files),
            additions=sum(f.additions for f in files),
            deletions=sum(f.deletions for f in files),
            commits=int(self.git.text("rev-list", "--count", commits)),
            ci=CiState(state="unknown"),
        )
        return Change(
            snapshot=snapshot, files=files, body=self.git.text("log", "--format=%B", commits)[:_MAX_BODY]
        )

    def base_config_text(self, notice: Callable[[str], None]) -> str | None:
        """`.github/imreview.yml` as the base commit has it (as the Action reads it): the branch under
        review cannot choose its own `api_base`, model or budget. A work-tree copy that differs is
        named, not used."""
        text = self.read_file(CONFIG_PATH, self.base_sha)
        text = text.removeprefix("\ufeff") if text is not None else None
        local = self.git.cwd / CONFIG_PATH
        try:
            work_tree = local.read_text(encoding="utf-8-sig") if local.is_file() else None
        except (OSError, UnicodeDecodeError):
            work_tree = ""
        if work_tree is not None and work_tree != text:
            notice(
                f"imreview: {CONFIG_PATH} in the work tree differs from {self.base_ref}'s and is not used"
                " (config comes from the base ref; pass --config to use another file)"
            )
        return text

    def head_sha(self) -> str:
        return self.git.verify(self.head_ref) or ""

    def read_file(self, path: str, sha: str) -> str | None:
        blob = self.blobs.read(path, sha)
        return None if blob is None else blob.decode("utf-8", "replace")

    def context_corpus(self) -> GitCorpus:
        return GitCorpus(self.git, self.blobs, self.head_sha_pinned)

    def close(self) -> None:
        self.blobs.close()


def make_local_source(path: str, base: str | None, head: str, notice: Callable[[str], None]) -> LocalSource:
    source = LocalSource(path, base=base, head=head)
    notice(f"imreview: reviewing {source.base_ref}...{head} (merge base {source.merge_base[:12]})")
    return source
