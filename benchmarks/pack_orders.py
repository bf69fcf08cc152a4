"""The packing orders `bench_defects.py` measures against the planner's own (`reviewer.plan.pack_keys`,
`lines_per_token`): each is a `pack_keys` the benchmark puts in the planner's place for one run.

- `risk_per_token`: security-sensitive source that adds code first, then by category (deletion-only
  hunks last), then by risk per token (the order before `lines_per_token`);
- `whole_files`: PR-Agent's order, whole files by category, the largest first, hunks in file order;
- `coherence`: whole files by category, then by the file's summed risk per token;
- `new_first_slice`: `risk_per_token`, a new file's hunk priced at most NEW_FILE_SLICE_TOKENS, so
  its first lines go early (the rest is cut to what is left);
- `docs_fair`: `risk_per_token` without the category tiers (docs compete on risk per token);
- `lines_per_token`: by category, then added lines per token (the planner's own);
- `file_lines_per_token`: security-sensitive source first, then whole files by category, then by
  the file's added lines per token;
- `files_by_size`: security-sensitive source first, then `whole_files`;
- `files_by_added`: security-sensitive source first, then whole files by category, the most added
  lines first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reviewer.diff import DiffFile, Hunk
from reviewer.plan import _CATEGORY_WEIGHT, tier
from reviewer.policy import category

PACK_ORDERS = (
    "risk_per_token",
    "whole_files",
    "coherence",
    "new_first_slice",
    "docs_fair",
    "lines_per_token",
    "file_lines_per_token",
    "files_by_size",
    "files_by_added",
)
DEFAULT = "lines_per_token"
NEW_FILE_SLICE_TOKENS = 600

Item = tuple[float, DiffFile, Hunk, int]
Key = tuple[bool, float, float]


def risk_per_token(risk: float, path: str, tokens: int) -> Key:
    return (*tier(risk, path), -risk / max(tokens, 1))


def order_keys(order: str, items: Sequence[Item]) -> dict[tuple[str, int], Key]:
    """Each hunk's pack-order key (ascending) under `order` (PACK_ORDERS)."""
    if order not in PACK_ORDERS:
        raise ValueError(f"unknown pack order {order!r}: expected one of {', '.join(PACK_ORDERS)}")
    file_tokens: dict[str, int] = {}
    file_risk: dict[str, float] = {}
    file_added: dict[str, int] = {}
    for risk, f, h, tokens in items:
        file_tokens[f.path] = file_tokens.get(f.path, 0) + tokens
        file_risk[f.path] = file_risk.get(f.path, 0.0) + risk
        file_added[f.path] = file_added.get(f.path, 0) + h.added
    keys: dict[tuple[str, int], Key] = {}
    for risk, f, h, tokens in items:
        first, tier_key, per_token = risk_per_token(risk, f.path, tokens)
        file_tier = -_CATEGORY_WEIGHT[category(f.path)]
        if order == "whole_files":
            key = (False, file_tier, -float(file_tokens[f.path]))
        elif order == "file_lines_per_token":
            key = (first, file_tier, -file_added[f.path] / max(file_tokens[f.path], 1))
        elif order == "files_by_added":
            key = (first, file_tier, -float(file_added[f.path]))
        elif order == "files_by_size":
            key = (first, file_tier, -float(file_tokens[f.path]))
        elif order == "coherence":
            key = (False, file_tier, -file_risk[f.path] / max(file_tokens[f.path], 1))
        elif order == "new_first_slice" and f.status == "added":
            key = risk_per_token(risk, f.path, min(tokens, NEW_FILE_SLICE_TOKENS))
        elif order == "docs_fair":
            key = (first, -1.0 if tier_key else 0.0, per_token)
        elif order == "lines_per_token":
            key = (first, tier_key, -h.added / max(tokens, 1))
        else:
            key = (first, tier_key, per_token)
        keys[(f.path, h.index)] = key
    return keys


def pack_keys(order: str) -> Callable[[Sequence[Item]], dict[tuple[str, int], Key]]:
    """A `reviewer.plan.pack_keys` that packs in `order`."""
    order_keys(order, [])  # an unknown order fails here, before any review
    return lambda items: order_keys(order, items)
