"""The sticky comment's state: its last line, `<!-- imreview:state v1 {json} -->` (DESIGN 6), is
parsed, written, signed (`sign_sticky`, `proven_ours`), bound to its comment when there is no key
(`bind_sticky`) and marked pending here only. docs/state-and-caps.md says what is trusted."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
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
_SHA = re.compile(r"^[0-9a-f]{40}$")
PENDING_KEY = "pending"
PENDING_REVIEW = "review"
DISMISSED_KEY = "dismissed"
BOUND_KEY = "comment"
STATE_KEY_ENV = "IMREVIEW_STATE_KEY"
_KEY_SUFFIXES = ("_API_KEY",)
MIN_SECRET_CHARS = 12
MIN_STATE_KEY_CHARS = 32
"""Every MAC is public beside the state it signs, so a short key can be found offline; 32 random
characters (`openssl rand -hex 16` or longer) cannot."""
MIN_STATE_KEY_DISTINCT = 8


def _marker_json(value: Mapping[str, Any]) -> str:
    """Compact, one-line, ASCII JSON in which `<`, `>` and `&` are escapes: `-->` cannot appear."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def state_marker(state: Mapping[str, Any]) -> str:
    """Keys in DESIGN's order, extras after them sorted. `head` and `base` must be full shas (reruns
    compare them); `reviewed_heads` comes from earlier markers, so bad entries are dropped."""
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
    """The LAST line only (a marker quoted mid-body never counts); None: review afresh."""
    return _parse_marker(body, MARKER_PREFIX)


@dataclass(frozen=True)
class StickyState:
    """The marker, typed; a key missing or of the wrong type reads as empty, so a hand-edited
    marker cannot crash a run."""

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
    """Sinks this review did not reach: a rerun at the same head publishes them."""
    dismissed: tuple[Dismissal, ...] = ()

    @classmethod
    def parse(cls, body: str | None) -> StickyState | None:
        data = parse_state(body)
        if data is None:
            return None
        read: dict[str, Callable[[Any], Any]] = {"str": _text, "float | None": _number, "int": _count}
        values = {f.name: read[str(f.type)](data.get(f.name)) for f in _FIELDS if str(f.type) in read}
        heads, pending = data.get("reviewed_heads"), data.get(PENDING_KEY)
        carried, intact = unpack(data.get("carried", ""))
        return cls(
            **values,
            reviewed_heads=tuple(h for h in heads if _is_sha(h)) if isinstance(heads, list) else (),
            complete=data.get("complete") is True and intact,
            carried=carried,
            pending=tuple(str(v) for v in pending if isinstance(v, str)) if isinstance(pending, list) else (),
            dismissed=_unpack_dismissed(data.get(DISMISSED_KEY)),
        )

    def prior(self) -> Prior:
        """What an incremental review needs of this state (trusted only once `proven_ours`)."""
        return Prior(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Prior)})

    def spent(self) -> float:
        return self.total_cost_usd or 0.0

    def with_total(self, total_usd: float) -> StickyState:
        return dataclasses.replace(self, total_cost_usd=total_usd)

    def with_dismissed(self, new: Sequence[Dismissal]) -> StickyState:
        return dataclasses.replace(self, dismissed=merged(self.dismissed, new))

    def body(self, visible: str) -> str:
        return f"{visible.rstrip()}\n\n{self.marker()}"

    def marker(self) -> str:
        """No `head` or `base` in a state that records no review yet (a reservation's)."""
        state = {f.name: getattr(self, f.name) for f in _FIELDS}
        state.update(reviewed_heads=list(self.reviewed_heads), carried=pack(self.carried))
        state.update(pending=list(self.pending), dismissed=_pack_dismissed(self.dismissed))
        return state_marker({k: v for k, v in state.items() if getattr(self, k) or k not in _OPTIONAL})


_FIELDS = dataclasses.fields(StickyState)
_OPTIONAL = ("head", "base", PENDING_KEY, DISMISSED_KEY)
STATE_KEYS = tuple(f.name for f in _FIELDS if f.name not in (PENDING_KEY, DISMISSED_KEY))
"""DESIGN's order; the later keys are sorted with any others after these."""


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


def visible_text(body: str | None) -> str:
    """A sticky comment's text above its state marker (the marker line itself removed)."""
    above, last = _split_marker(body or "")
    return above if parse_state(last) is not None else (body or "").rstrip()


def _restated(body: str, extra: Callable[[dict[str, Any], str], Mapping[str, Any]]) -> str:
    """The body with `extra(state, text above)` added to its state marker; unchanged without one."""
    above, last = _split_marker(body)
    state = parse_state(last)
    return body if state is None else f"{above}\n\n{state_marker({**state, **extra(state, above)})}"


def mark_pending(body: str, sinks: Sequence[str]) -> str:
    """What this run could not publish, so a rerun at the same head publishes it rather than skip
    as "already reviewed" (signed with the rest by `upsert_sticky`)."""
    return _restated(body, lambda _, __: {PENDING_KEY: sorted(set(sinks))}) if sinks else body


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def state_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The secret that proves a marker is ours: `IMREVIEW_STATE_KEY` alone when set (so jobs holding
    different model keys agree), else the model API keys (names and values, hashed); None: no state
    is trusted. A login proves nothing, but a workflow that echoes PR text has none of our secrets."""
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


def check_state_key(environ: Mapping[str, str] | None = None) -> None:
    """Exit 2 before any work when `IMREVIEW_STATE_KEY` is set but too weak to keep its MACs
    unforgeable; unset or empty is fine."""
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
    {
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
    }
)


def _secret_enough(value: str) -> bool:
    """A keyless server's `OPENAI_API_KEY: none` (or another placeholder) sits in the public
    workflow file: a MAC under it proves nothing."""
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
    if key is None:
        return body
    return _restated(body, lambda state, above: {"mac": _state_mac(key, repo, number, state, above)})


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


def bind_sticky(body: str, comment_id: int) -> str:
    """Keyless runs: the comment's own id in its marker. GitHub assigns the id at creation, so text
    another workflow posts (an echo of the PR body) cannot name its own id; only a writer that edits
    its comment after creating it, as we do, can."""
    return _restated(body, lambda _, __: {BOUND_KEY: int(comment_id)})


def bound_to_itself(comment: CommentInfo) -> bool:
    state = parse_state(comment.body)
    value = state.get(BOUND_KEY) if state else None
    return isinstance(value, int) and not isinstance(value, bool) and value == comment.id
