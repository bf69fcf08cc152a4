"""The sticky comment's state: parsed, written, signed, bound and marked pending here only.

Our sticky comment ends with one hidden line, `<!-- imreview:state v1 {json} -->` (DESIGN 6): what
the last review covered and what the PR has cost. `StickyState` is that line, typed; the functions
below are the only code that reads or edits the line's JSON:

- `parse_state` / `StickyState.parse`: the last line only (a marker quoted mid-body never counts);
- `state_marker` / `StickyState.marker` / `StickyState.body`: keys in DESIGN's order;
- `sign_sticky` / `proven_ours`: an HMAC under `state_key()` over where the comment lives, the
  state and the visible text above it;
- `bind_sticky` / `bound_to_itself`: without a key, the comment's own id in the state;
- `mark_pending`: sinks a run could not reach, so a rerun at the same head publishes them.

The per-PR cost cap's reservation and settlement (reviewer/pull.py) go through `StickyState`
(`with_total`, `body`). docs/state-and-caps.md says what is trusted and what the cap guarantees.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from reviewer.dismissals import Dismissal, merged
from reviewer.errors import UsageError
from reviewer.incremental import CarriedFinding, Prior, pack, unpack


class CommentInfo(Protocol):
    """What the state needs of a posted comment (`source.github.CommentInfo` has it)."""

    @property
    def id(self) -> int: ...
    @property
    def user(self) -> str: ...
    @property
    def body(self) -> str: ...


MARKER_PREFIX = "<!-- imreview:state v1 "


_MARKER_END = " -->"


STATE_KEYS: tuple[str, ...] = (
    "head",
    "base",
    "config",
    "model",
    "cost_usd",
    "total_cost_usd",
    "reviewed_heads",
    "verdict",
    "findings",
    "p1",
    "max_priority",
    "merge_base",
    "complete",
    "carried",
)


_SHA = re.compile(r"^[0-9a-f]{40}$")


def _marker_json(value: Mapping[str, Any]) -> str:
    """Compact, one-line, ASCII JSON in which `<`, `>` and `&` are escapes: `-->` cannot appear."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def state_marker(state: Mapping[str, Any]) -> str:
    """The sticky comment's last line: `<!-- imreview:state v1 {json} -->` (DESIGN 6).

    Keys are written in DESIGN's order (any extra keys after them, sorted). `head` and `base` must
    be full 40-character shas, since reruns compare them; `reviewed_heads` usually comes from an
    earlier marker, so entries that are not full shas are dropped rather than failing the run.
    """
    for key in ("head", "base"):
        if state.get(key) is not None and not _is_sha(state[key]):
            raise ValueError(f"state marker: {key!r} must be a full 40-character sha, got {state[key]!r}")
    ordered = {key: state[key] for key in STATE_KEYS if key in state}
    ordered.update({key: state[key] for key in sorted(state) if key not in STATE_KEYS})
    if "reviewed_heads" in ordered:
        heads = ordered["reviewed_heads"]
        ordered["reviewed_heads"] = [h for h in heads if _is_sha(h)] if isinstance(heads, list) else []
    return f"{MARKER_PREFIX}{_marker_json(ordered)}{_MARKER_END}"


def _is_sha(value: Any) -> bool:
    return isinstance(value, str) and bool(_SHA.match(value))


def _last_line(body: str | None) -> str:
    return (body or "").rstrip().rpartition("\n")[2].strip()


def _parse_marker(body: str | None, prefix: str) -> dict[str, Any] | None:
    line = _last_line(body)
    if not line.startswith(prefix) or not line.endswith("-->"):
        return None
    try:
        value = json.loads(line[len(prefix) : -len("-->")])
    except (ValueError, RecursionError):  # anyone can post a marker nested deeper than the parser's stack
        return None
    return value if isinstance(value, dict) else None


def parse_state(body: str | None) -> dict[str, Any] | None:
    """The state from a comment's LAST line only (a marker quoted mid-body never counts).

    None when the marker is absent or its JSON is corrupt: the caller then reviews afresh.
    """
    return _parse_marker(body, MARKER_PREFIX)


@dataclass(frozen=True)
class StickyState:
    """What our sticky comment records about the last review of a PR (DESIGN 6), typed.

    Parsed from, and written to, the marker line only here (`parse`, `marker`); a key that is
    missing or of the wrong type reads as empty, so a hand-edited marker cannot crash a run.
    """

    head: str
    base: str
    config: str
    model: str = ""
    cost_usd: float | None = None
    total_cost_usd: float | None = None
    reviewed_heads: tuple[str, ...] = ()
    verdict: str = ""
    findings: int = 0
    p1: int = 0
    max_priority: str = ""
    merge_base: str = ""
    complete: bool = False
    carried: tuple[CarriedFinding, ...] = ()
    pending: tuple[str, ...] = ()
    """Sinks this review did not reach (`review`: the inline review failed after the comment was
    due): a rerun at the same head is then not "already reviewed", and publishes them."""
    dismissed: tuple[Dismissal, ...] = ()
    """Findings a maintainer dismissed on this PR (reviewer/dismissals.py): never raised again."""

    @classmethod
    def parse(cls, body: str | None) -> StickyState | None:
        data = parse_state(body)
        if data is None:
            return None
        heads = data.get("reviewed_heads")
        carried, intact = unpack(data.get("carried", ""))
        return cls(
            head=_text(data.get("head")),
            base=_text(data.get("base")),
            config=_text(data.get("config")),
            model=_text(data.get("model")),
            cost_usd=_number(data.get("cost_usd")),
            total_cost_usd=_number(data.get("total_cost_usd")),
            reviewed_heads=tuple(h for h in heads if _is_sha(h)) if isinstance(heads, list) else (),
            verdict=_text(data.get("verdict")),
            findings=_count(data.get("findings")),
            p1=_count(data.get("p1")),
            max_priority=_text(data.get("max_priority")),
            merge_base=_text(data.get("merge_base")),
            complete=data.get("complete") is True and intact,
            carried=carried,
            pending=_pending(data.get(PENDING_KEY)),
            dismissed=_unpack_dismissed(data.get(DISMISSED_KEY)),
        )

    def prior(self) -> Prior:
        """What an incremental review needs of this state (trusted only once `proven_ours`)."""
        return Prior(
            head=self.head,
            merge_base=self.merge_base,
            config=self.config,
            model=self.model,
            complete=self.complete,
            carried=self.carried,
        )

    def spent(self) -> float:
        """What the PR has cost over its runs, as far as this state records it (0 when unknown)."""
        return self.total_cost_usd or 0.0

    def with_total(self, total_usd: float) -> StickyState:
        """The same review, with the PR's cumulative cost `total_usd` (a reservation, or what a run
        that published nothing spent)."""
        return dataclasses.replace(self, total_cost_usd=total_usd)

    def with_dismissed(self, new: Sequence[Dismissal]) -> StickyState:
        """The same state, remembering `new` dismissals too (one per key)."""
        return dataclasses.replace(self, dismissed=merged(self.dismissed, new))

    def body(self, visible: str) -> str:
        """A sticky comment body: `visible` Markdown, then this state's marker as the last line."""
        return f"{visible.rstrip()}\n\n{self.marker()}"

    def marker(self) -> str:
        """No `head` or `base` in a state that records no review yet (a reservation's)."""
        return state_marker(
            {
                **({"head": self.head} if self.head else {}),
                **({"base": self.base} if self.base else {}),
                "config": self.config,
                "model": self.model,
                "cost_usd": self.cost_usd,
                "total_cost_usd": self.total_cost_usd,
                "reviewed_heads": list(self.reviewed_heads),
                "verdict": self.verdict,
                "findings": self.findings,
                "p1": self.p1,
                "max_priority": self.max_priority,
                "merge_base": self.merge_base,
                "complete": self.complete,
                "carried": pack(self.carried),
                **({PENDING_KEY: list(self.pending)} if self.pending else {}),
                **({DISMISSED_KEY: _pack_dismissed(self.dismissed)} if self.dismissed else {}),
            }
        )


PENDING_KEY = "pending"


PENDING_REVIEW = "review"


DISMISSED_KEY = "dismissed"


def _pack_dismissed(items: Sequence[Dismissal]) -> str:
    """Base64 of the JSON, as `carried`: titles and paths are model and PR text, the marker stays inert."""
    text = json.dumps([d.to_json() for d in items], separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def _unpack_dismissed(value: Any) -> tuple[Dismissal, ...]:
    if not isinstance(value, str):
        return ()
    try:
        items = json.loads(base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError, binascii.Error, RecursionError):
        return ()
    parsed = [Dismissal.from_json(item) for item in items] if isinstance(items, list) else []
    return tuple(d for d in parsed if d is not None)


def _pending(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def visible_text(body: str | None) -> str:
    """A sticky comment's text above its state marker (the marker line itself removed)."""
    above, last = _split_marker(body or "")
    return above if parse_state(last) is not None else (body or "").rstrip()


def mark_pending(body: str, sinks: Sequence[str]) -> str:
    """The comment body with `pending` in its state marker: what this run could not publish, so a
    rerun at the same head does not skip as "already reviewed" and publishes it then (signed with
    the rest of the state by `upsert_sticky`). Unchanged when there is no marker or nothing pending."""
    above, last = _split_marker(body)
    state = parse_state(last)
    if state is None or not sinks:
        return body
    state[PENDING_KEY] = sorted(set(sinks))
    return f"{above}\n\n{state_marker(state)}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


STATE_KEY_ENV = "IMREVIEW_STATE_KEY"


_KEY_SUFFIXES = ("_API_KEY",)


def state_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The secret that proves a marker is ours: `IMREVIEW_STATE_KEY` alone when it is set (so jobs
    that hold different model keys, such as a fan-out's plan job that holds none, agree on it),
    else the model API keys in the environment (names and values, hashed). None when there is no
    secret at all: then no comment can be proven ours, and no state is trusted.

    A login proves nothing (every workflow in the repository posts as `github-actions[bot]`, and a
    forger can copy any visible text), but a workflow or bot that echoes PR text has none of our
    secrets, so it cannot compute the MAC that `sign_sticky` puts in the state."""
    env = os.environ if environ is None else environ
    if (env.get(STATE_KEY_ENV) or "").strip():
        check_state_key(env)
        parts = [(STATE_KEY_ENV, env[STATE_KEY_ENV])]
    else:
        parts = sorted(
            (name, value)
            for name, value in env.items()
            if name.endswith(_KEY_SUFFIXES) and _secret_enough(value)
        )
    if not parts:
        return None
    digest = hashlib.sha256(b"imreview state key v1")
    for name, value in parts:
        digest.update(f"\0{name}\0{value}".encode())
    return digest.digest()


MIN_SECRET_CHARS = 12


MIN_STATE_KEY_CHARS = 32
"""`IMREVIEW_STATE_KEY`'s shortest accepted length. Every MAC it makes is public (the marker sits in
the comment beside the state it signs), so a short or human-chosen key can be found offline at
billions of guesses a second; 32 random characters (`openssl rand -hex 16` or longer) cannot."""
MIN_STATE_KEY_DISTINCT = 8


def check_state_key(environ: Mapping[str, str] | None = None) -> None:
    """Exit 2 (UsageError) before any work when `IMREVIEW_STATE_KEY` is set but too weak to keep its
    MACs unforgeable; unset or empty is fine (the model keys, or no trusted state)."""
    env = os.environ if environ is None else environ
    value = (env.get(STATE_KEY_ENV) or "").strip()
    if not value:
        return
    if len(value) < MIN_STATE_KEY_CHARS or len(set(value)) < MIN_STATE_KEY_DISTINCT:
        raise UsageError(
            f"{STATE_KEY_ENV} is too weak to sign the sticky state ({len(value)} characters, "
            f"{len(set(value))} different): use at least {MIN_STATE_KEY_CHARS} random characters, "
            "e.g. the output of `openssl rand -hex 32`, stored as a secret"
        )


_PLACEHOLDERS = frozenset(
    v.casefold()
    for v in (
        "sk-no-key-required",
        "no-key-required",
        "not-needed",
        "not-required",
        "placeholder",
        "sk-placeholder",
        "sk-1234567890",
        "your-api-key",
        "your_api_key",
        "changeme-changeme",
    )
)


def _secret_enough(value: str) -> bool:
    """A model key a forger cannot guess: a keyless server's `OPENAI_API_KEY: none` (or another
    well-known placeholder) is written in the public workflow file, so a MAC under it proves nothing.
    `IMREVIEW_STATE_KEY` is checked by `check_state_key` instead: too weak a one stops the run."""
    text = value.strip()
    return len(text) >= MIN_SECRET_CHARS and text.casefold() not in _PLACEHOLDERS


def _split_marker(body: str) -> tuple[str, str]:
    text = body.replace("\r\n", "\n").rstrip()
    above, _, last = text.rpartition("\n")
    return above.rstrip(), last.strip()


def _state_mac(key: bytes, repo: str, number: int, state: Mapping[str, Any], above: str) -> str:
    """HMAC over where the comment lives, the state (without its MAC) and the visible text above it."""
    unsigned = {k: v for k, v in state.items() if k != "mac"}
    message = "\0".join(
        (
            "imreview-state-v1",
            repo.casefold(),
            str(number),
            json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=True),
            hashlib.sha256(above.encode("utf-8")).hexdigest(),
        )
    )
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def sign_sticky(body: str, *, repo: str, number: int, key: bytes | None) -> str:
    """The body with a `mac` in its state marker; unchanged when there is no key or no marker."""
    above, last = _split_marker(body)
    state = parse_state(last)
    if key is None or state is None:
        return body
    state["mac"] = _state_mac(key, repo, number, state, above)
    return f"{above}\n\n{state_marker(state)}"


def proven_ours(comment: CommentInfo, *, repo: str, number: int, key: bytes | None) -> bool:
    """True only when the marker's MAC checks with our key, for this PR and this visible text."""
    if key is None:
        return False
    above, last = _split_marker(comment.body or "")
    state = parse_state(last)
    mac = state.get("mac") if state else None
    if state is None or not isinstance(mac, str):
        return False
    return hmac.compare_digest(mac, _state_mac(key, repo, number, state, above))


BOUND_KEY = "comment"


def bind_sticky(body: str, comment_id: int) -> str:
    """The body with its own comment id in the state marker (keyless runs only).

    With no secret, a login proves nothing (every workflow posts as `github-actions[bot]`), and a
    copy of our marker names whichever comment it was copied from. A comment's id is assigned by
    GitHub when it is created, so text that another workflow or bot posts (an echo of the PR body,
    say) cannot name its own id: only the writer that edits the comment after creating it, as we
    do, can. A marker whose `comment` is not the id of the comment carrying it is not ours."""
    above, last = _split_marker(body)
    state = parse_state(last)
    if state is None:
        return body
    state[BOUND_KEY] = int(comment_id)
    return f"{above}\n\n{state_marker(state)}"


def bound_to_itself(comment: CommentInfo) -> bool:
    """True when the comment's state marker names the comment's own id (`bind_sticky`)."""
    state = parse_state(comment.body)
    value = state.get(BOUND_KEY) if state else None
    return isinstance(value, int) and not isinstance(value, bool) and value == comment.id
