"""Configuration: defaults < .github/imreview.yml < environment < inputs/flags (DESIGN 10.6)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reviewer.budget import DEFAULT_LIMITS, Limits


@dataclass(frozen=True)
class Prices:
    input_usd_per_mtok: float
    output_usd_per_mtok: float


@dataclass(frozen=True)
class Config:
    model: str | None = None
    fallback_models: tuple[str, ...] = ()
    api_base: str | None = None
    language: str = "en"
    instructions: str = ""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    limits: Limits = DEFAULT_LIMITS
    max_output_tokens_per_call: int = 4096
    max_concurrency: int = 4
    max_findings: int = 6
    context_window: int | None = None
    fail_on: str = "never"
    on_error: str = "warn"
    prices: Mapping[str, Prices] = field(default_factory=dict)
    template_dir: str | None = None
