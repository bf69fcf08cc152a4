"""One error tree; `cli.py` maps it to exit codes (DESIGN section 2)."""

from __future__ import annotations


class ImreviewError(Exception):
    """Base of every error this package raises on purpose."""


class UsageError(ImreviewError):
    """Bad flag, input, ref or path: exit 2. The message names what was wrong and where."""


class ConfigError(UsageError):
    """Bad configuration: exit 2. `location` is `file:line` when known."""

    def __init__(self, message: str, location: str | None = None) -> None:
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class GitError(UsageError):
    """A git command failed on the user's repository (not a ref, no merge base, ...)."""


class GitHubError(ImreviewError):
    """A GitHub API call failed; subclasses say how callers should react."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class NoWriteAccess(GitHubError):
    """403/404 on a write: the token is read-only (fork PR) or lacks permission."""


class Unprocessable(GitHubError):
    """422: GitHub rejected the body (a line outside the diff, a body too long)."""


class Retryable(GitHubError):
    """5xx, 429 or a timeout: the same request may succeed later."""


class ModelError(ImreviewError):
    """A model call failed for good (after retries and fallbacks)."""


class ModelConfigError(ModelError):
    """Auth, unknown model, bad request: retrying the same model cannot help."""
