"""`imreview eval`: review each item of a labelled dataset and score the findings. The dataset
format and the matching rules are in docs/review-quality.md: a finding matches an expected item
within MATCH_LINES on the same path, each item at most once (a duplicate costs precision), and a
finding on a `rejected` item (a near miss) is a false positive counted on its own."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reviewer.config import Config
from reviewer.context import Corpus
from reviewer.diff import parse_patch
from reviewer.errors import PatchError, UsageError
from reviewer.render import Renderer, new_nonce
from reviewer.report import PRIORITIES, Finding, Ref, Report, Snapshot
from reviewer.source import Change, Source

MATCH_LINES = 5
Warn = Callable[[str], None]
Judge = Callable[[Finding, "Label"], bool]


@dataclass(frozen=True)
class Label:
    """A labelled place: a planted defect (`expected`) or a near miss that is not one (`rejected`)."""

    path: str
    line: int
    description: str
    severity: str


@dataclass(frozen=True)
class Item:
    id: str
    repo: Path | None
    diff: Path | None
    base: str
    head: str
    expected: tuple[Label, ...]
    rejected: tuple[Label, ...]


@dataclass(frozen=True)
class Tally:
    """What one item, or the whole dataset, counts: the rates follow from the counts (micro-averaged
    for the dataset, as `total` sums the counts)."""

    found: int
    true_positives: int
    false_positives: int
    false_negatives: int
    rejected_hits: int
    precision: float | None = field(init=False)
    recall: float | None = field(init=False)
    f1: float | None = field(init=False)
    cost_usd: float | None
    seconds: float
    calls: int

    def __post_init__(self) -> None:
        tp, fp, fn = self.true_positives, self.false_positives, self.false_negatives
        p, r = (tp / (tp + fp) if tp + fp else None), (tp / (tp + fn) if tp + fn else None)
        object.__setattr__(self, "precision", p)
        object.__setattr__(self, "recall", r)
        f1 = None if p is None or r is None else 0.0 if p + r == 0 else 2 * p * r / (p + r)
        object.__setattr__(self, "f1", f1)


@dataclass(frozen=True)
class ItemScore:
    id: str
    verdict: str
    tally: Tally
    missed: tuple[str, ...]
    unexpected: tuple[str, ...]


@dataclass(frozen=True)
class Scorecard:
    dataset: str
    model: str | None
    judge_model: str | None
    items: tuple[ItemScore, ...]
    tally: Tally

    def to_dict(self) -> dict[str, Any]:
        """The card as the JSON file and `eval.md.j2` have it: each tally's fields in its place."""
        return _flat(self)


def _flat(score: Scorecard | ItemScore) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for f in dataclasses.fields(score):
        name, value = f.name, getattr(score, f.name)
        if isinstance(value, Tally):
            flat.update(dataclasses.asdict(value))
        else:
            flat[name] = [_flat(item) for item in value] if name == "items" else value
    return flat


# --- the dataset ------------------------------------------------------------------------------


def _label(raw: Any, where: str) -> Label:
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must be an object with path, line, description, severity")
    path, line = raw.get("path"), raw.get("line")
    if not isinstance(path, str) or not path:
        raise UsageError(f"{where}.path must be a non-empty string")
    if isinstance(line, bool) or not isinstance(line, int) or line < 1:
        raise UsageError(f"{where}.line must be a positive integer")
    severity = str(raw.get("severity", "P2")).upper()
    if severity not in PRIORITIES:
        raise UsageError(f"{where}.severity must be one of {', '.join(PRIORITIES)}")
    return Label(path=path, line=line, description=str(raw.get("description", "")), severity=severity)


def load_dataset(path: str | Path) -> tuple[Item, ...]:
    """Read and check a dataset; every error names the item and the key."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"DATASET {str(file)!r} is not readable JSON: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise UsageError(f"DATASET {str(file)!r} must be a non-empty JSON list of items")
    items: list[Item] = []
    for n, raw in enumerate(data):
        items.append(_item(file, n, raw, {item.id for item in items}))
    return tuple(items)


def _item(file: Path, n: int, raw: object, seen: set[str]) -> Item:
    """Item `n` of the dataset in `file`, checked; `seen`: the ids of the items before it."""
    where = f"{file.name}[{n}]"
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must be an object")
    item_id = raw.get("id")
    if not isinstance(item_id, str) or not item_id or item_id in seen:
        raise UsageError(f"{where}.id must be a unique non-empty string")
    where = f"{file.name}[{n}] ({item_id})"
    repo, diff = _where_to_read(file, raw, where)
    for key in ("expected", "rejected"):
        if not isinstance(raw.get(key, []), list):
            raise UsageError(f"{where}.{key} must be a list")
    return Item(
        id=item_id,
        repo=repo,
        diff=diff,
        base=str(raw.get("base") or "main"),
        head=str(raw.get("head") or "HEAD"),
        expected=tuple(_label(e, f"{where}.expected[{i}]") for i, e in enumerate(raw.get("expected", []))),
        rejected=tuple(_label(e, f"{where}.rejected[{i}]") for i, e in enumerate(raw.get("rejected", []))),
    )


def _where_to_read(file: Path, raw: Mapping[str, Any], where: str) -> tuple[Path | None, Path | None]:
    """(repo, diff), exactly one of them set, each relative to the dataset file and checked to exist."""
    repo, diff = raw.get("repo"), raw.get("diff")
    if (repo is None) == (diff is None):
        raise UsageError(f"{where}: give exactly one of 'repo' (a git repository) or 'diff' (a patch file)")
    location = file.parent / str(repo if repo is not None else diff)
    if repo is not None and not (location / ".git").exists():
        raise UsageError(f"{where}.repo: {str(location)!r} is not a git repository")
    if diff is not None and not location.is_file():
        raise UsageError(f"{where}.diff: {str(location)!r} is not a file")
    return (location, None) if repo is not None else (None, location)


class PatchSource:
    """A patch file as a Source: the diff only, no repository (so no context beyond the hunks)."""

    def __init__(self, patch: Path, *, base: str, head: str) -> None:
        self.patch = patch
        raw = patch.read_bytes()
        self._sha = hashlib.sha1(raw).hexdigest()
        try:
            self._files = parse_patch(raw)
        except PatchError as exc:
            raise UsageError(f"{str(patch)!r} is not a unified diff: {exc}") from exc
        if not self._files:
            raise UsageError(f"{str(patch)!r} has no file changes")
        self._base, self._head = base, head

    def change(self) -> Change:
        files = self._files
        snapshot = Snapshot(
            source="local",
            repo=self.patch.stem,
            number=None,
            title=self.patch.name,
            author="",
            url="",
            base=Ref(ref=self._base, sha="0" * 40),
            head=Ref(ref=self._head, sha=self._sha),
            merge_base="0" * 40,
            files=len(files),
            additions=sum(f.additions for f in files),
            deletions=sum(f.deletions for f in files),
            commits=1,
        )
        return Change(snapshot=snapshot, files=files)

    def head_sha(self) -> str:
        return self._sha

    def read_file(self, path: str, sha: str) -> str | None:
        return None

    def context_corpus(self) -> Corpus | None:
        return None


# --- scoring ----------------------------------------------------------------------------------


def _distance(finding: Finding, label: Label) -> int | None:
    """Lines between the finding's range and the label, or None when they cannot match."""
    if finding.path != label.path or finding.line is None:
        return None
    end = finding.end_line or finding.line
    if finding.line <= label.line <= end:
        return 0
    gap = min(abs(label.line - finding.line), abs(label.line - end))
    return gap if gap <= MATCH_LINES else None


def match(
    findings: Sequence[Finding], labels: Sequence[Label], *, judge: Judge | None = None
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Pair findings with labels one to one, nearest first: (pairs, unmatched findings, unmatched labels)."""
    candidates = sorted(
        (d, fi, li)
        for fi, f in enumerate(findings)
        for li, label in enumerate(labels)
        if (d := _distance(f, label)) is not None
    )
    pairs: list[tuple[int, int]] = []
    used_f: set[int] = set()
    used_l: set[int] = set()
    for _, fi, li in candidates:
        if fi in used_f or li in used_l:
            continue
        if judge is not None and not judge(findings[fi], labels[li]):
            continue
        pairs.append((fi, li))
        used_f.add(fi)
        used_l.add(li)
    return (
        pairs,
        [i for i in range(len(findings)) if i not in used_f],
        [i for i in range(len(labels)) if i not in used_l],
    )


def score_item(item: Item, report: Report, *, seconds: float, judge: Judge | None = None) -> ItemScore:
    findings = list(report.findings)
    pairs, extra, missed = match(findings, item.expected, judge=judge)
    rejected_pairs, _, _ = match([findings[i] for i in extra], item.rejected)
    used = report.budget.used
    return ItemScore(
        id=item.id,
        verdict=report.verdict,
        tally=Tally(
            found=len(findings),
            true_positives=len(pairs),
            false_positives=len(extra),
            false_negatives=len(missed),
            rejected_hits=len(rejected_pairs),
            cost_usd=used.cost_usd,
            seconds=round(seconds, 3),
            calls=used.calls,
        ),
        missed=tuple(f"{item.expected[i].path}:{item.expected[i].line}" for i in missed),
        unexpected=tuple(f"{findings[i].path}:{findings[i].line} {findings[i].title[:80]}" for i in extra),
    )


def total(dataset: str, model: str | None, judge_model: str | None, items: Sequence[ItemScore]) -> Scorecard:
    """Micro-averaged: precision over every finding, recall over every expected item."""
    tallies = [i.tally for i in items]
    costs = [t.cost_usd for t in tallies]
    counts = ("found", "true_positives", "false_positives", "false_negatives", "rejected_hits", "calls")
    return Scorecard(
        dataset=dataset,
        model=model,
        judge_model=judge_model,
        items=tuple(items),
        tally=Tally(
            **{name: sum(getattr(t, name) for t in tallies) for name in counts},
            cost_usd=None if None in costs else round(sum(c for c in costs if c is not None), 6),
            seconds=round(sum(t.seconds for t in tallies), 3),
        ),
    )


# --- running ----------------------------------------------------------------------------------


def review_item(item: Item, config: Config, *, warn: Warn) -> tuple[Report, float]:
    """The same analysis `imreview review` runs, without publishing anything."""
    from reviewer.review import analyse, conclude
    from reviewer.source.local import LocalSource

    renderer = Renderer(language=config.language, template_dir=config.template_dir)
    started = time.monotonic()
    source: Source
    if item.diff is not None:
        source = PatchSource(item.diff, base=item.base, head=item.head)
    else:
        assert item.repo is not None
        source = LocalSource(item.repo, base=item.base, head=item.head)
    change = source.change()
    analysis = analyse(source, change, config, renderer=renderer, warn=warn)
    report = conclude(analysis, current_head=source.head_sha(), outputs=(), renderer=renderer)
    return report, time.monotonic() - started


def model_judge(config: Config, judge_model: str, *, warn: Warn) -> Judge:
    """A judge through litellm: does the finding describe the labelled defect? Spends its own budget."""
    from reviewer.budget import Budget
    from reviewer.findings import json_object
    from reviewer.llm import ModelClient

    judge_config = dataclasses.replace(config, model=judge_model, fallback_models=())
    renderer = Renderer(language="en", template_dir=config.template_dir)
    client = ModelClient(judge_config, Budget(judge_config.limits), warn=warn)

    def parse(text: str) -> bool:
        data = json_object(text)
        if not isinstance(data, dict) or not isinstance(data.get("same"), bool):
            raise ValueError('the answer must be {"same": true} or {"same": false}')
        return bool(data["same"])

    def judge(finding: Finding, label: Label) -> bool:
        nonce = new_nonce()
        prompt = renderer.prompt(
            "judge",
            nonce=nonce,
            expected=label.description,
            finding=f"{finding.title}\n{finding.trigger}\n{finding.observation}",
        )
        try:
            same, _ = client.complete_json([{"role": "user", "content": prompt}], phase="verify", parse=parse)
        except Exception as exc:  # a judge failure is a non-match, reported
            warn(f"judge call failed ({type(exc).__name__}); counted as no match")
            return False
        return same

    return judge


def evaluate(
    dataset: str | Path,
    config: Config,
    *,
    judge_model: str | None = None,
    warn: Warn,
    progress: Callable[[ItemScore], None] | None = None,
) -> Scorecard:
    items = load_dataset(dataset)
    judge = model_judge(config, judge_model, warn=warn) if judge_model else None
    scores: list[ItemScore] = []
    for item in items:
        report, seconds = review_item(item, config, warn=warn)
        scored = score_item(item, report, seconds=seconds, judge=judge)
        scores.append(scored)
        if progress is not None:
            progress(scored)
    return total(str(dataset), config.model, judge_model, scores)
