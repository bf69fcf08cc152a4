"""Limits, estimates and the ledger that every model call asks before it is sent (DESIGN section 5)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """A run's hard budget; `0` for any limit means no model calls."""

    input_tokens: int = 200_000
    output_tokens: int = 24_000
    cost_usd: float = 1.00
    seconds: float = 600.0
    calls: int = 24


DEFAULT_LIMITS = Limits()
