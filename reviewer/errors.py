"""One error tree; `cli.py` maps it to exit codes (DESIGN section 2): a `UsageError` exits 2, any other 3."""

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
    """git refused a command on the user's repository (not a ref, no merge base, ...)."""


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


class RateLimited(Retryable):
    """A rate limit (primary or secondary); `retry_after`: GitHub's wait, if it said. A write is
    never retried blindly: the caller re-lists by marker first."""

    def __init__(self, message: str, status: int | None = None, *, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, status)


class ModelError(ImreviewError):
    """A model call failed for good (after retries and fallbacks)."""


class ModelConfigError(ModelError):
    """Auth, unknown model, bad request: retrying the same model cannot help."""


class CallTimedOut(ModelError):
    """No answer within the per-call timeout; the message says how to allow longer calls."""

    def __init__(self, seconds: float, *, capped: bool) -> None:
        self.seconds = seconds
        why = " (all the time the `max_seconds` budget had left)" if capped else ""
        super().__init__(
            f"no answer within {seconds:.0f} s{why}; allow longer calls with `request_timeout` "
            "(config key, --request-timeout, or the `request-timeout` input) and `max_seconds`"
        )


class AnswerUnparsed(ModelError):
    """The model answered twice (answer and repair) and neither parsed; `raw_text` is the last answer."""

    def __init__(self, raw_text: str, message: str) -> None:
        self.raw_text = raw_text
        super().__init__(message)


class TemplateError(ConfigError):
    """A template or i18n file is broken, or the data it was given lacks a key it reads."""


class BudgetExhausted(ImreviewError):
    """A call was refused because it could overrun `limit`; the caller records a gap `budget`."""

    def __init__(self, limit: str, detail: str = "") -> None:
        self.limit = limit
        super().__init__(f"budget exhausted: {limit}" + (f" ({detail})" if detail else ""))


class PatchError(ImreviewError, ValueError):
    """The diff text is not a unified diff we can trust."""


class ContextExceeded(ModelError):
    """The server refused a request as longer than its context `window` (told, or probed): re-split."""

    def __init__(self, message: str, window: int, assumed: int) -> None:
        self.window = window
        self.assumed = assumed
        super().__init__(message)
