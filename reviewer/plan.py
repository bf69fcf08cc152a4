"""Stage 2: filter files by policy, rank hunks by risk, pack whole hunks into model-sized units.

Nothing is cut silently: a filtered file is a `Skip` with its reason, a hunk too large for one
unit is recorded in `Plan.oversize`, and `coverage()` turns the plan plus what was actually
sent into the per-file statuses of DESIGN section 4 (`reviewed`, `partial`, `listed`,
`skipped`). File contents for context come through the `read_file` callback; this module does
no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from reviewer.diff import DiffFile, Hunk
from reviewer.report import Coverage, FileCoverage

LEGEND = (
    'Each file starts with "## File: <path> (<status>)", then its hunks. Each hunk has an "@@" header '
    "and one line per diff line: `<n> + text` is an added line and `<n>   text` an unchanged line, both "
    "numbered in the new file (side RIGHT); `(<n>) - text` is a removed line numbered in the old file "
    "(side LEFT); `<n> ~ text` is extra context from the file, outside the diff, that cannot carry a "
    "comment."
)
"""How `UnitPart.text` is laid out; prompt templates can quote it to the model."""

CONTEXT_MAX_LINES = 40
_DEF_MAX_LINE = 300


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_LOCKFILES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "deno.lock",
        "poetry.lock",
        "pdm.lock",
        "uv.lock",
        "pipfile.lock",
        "cargo.lock",
        "go.sum",
        "go.work.sum",
        "gemfile.lock",
        "composer.lock",
        "podfile.lock",
        "pubspec.lock",
        "mix.lock",
        "flake.lock",
        "packages.lock.json",
        "gradle.lockfile",
        "package.resolved",
    }
)
_VENDOR_DIRS = _words(
    "vendor third_party third-party thirdparty node_modules bower_components jspm_packages .yarn"
)
_GENERATED_NAME = re.compile(
    r"(_pb2(_grpc)?\.pyi?|\.pb\.(go|cc|h|swift|dart)|_pb\.(js|d\.ts)|\.pb\.gw\.go|\.generated\.[^/]+"
    r"|\.g\.dart|\.freezed\.dart|\.designer\.cs|\.(js|css)\.map)$|^zz_generated\..*\.go$",
    re.IGNORECASE,
)
_GENERATED_MARK = re.compile(
    r"^\s*(//|#|/\*|\*|--|<!--|;|%|\"\"\"|''').*"
    r"(\bCode generated\b.*\bDO NOT EDIT\b|@generated\b|\b(auto-?generated|automatically generated)\b)",
    re.IGNORECASE,
)
_GENERATED_HEAD_LINES = 10
_MINIFIED_NAME = re.compile(r"\.min\.(js|mjs|cjs|css)$", re.IGNORECASE)
_MINIFIED_AVG_LINE = 400
_MINIFIED_LONGEST = 1000
_SECRET_NAME = re.compile(
    r"^(\.env(\..+)?|\.envrc|\.netrc|_netrc|\.pypirc|\.npmrc|\.git-credentials|\.htpasswd|credentials(\.json)?"
    r"|id_(rsa|dsa|ecdsa|ed25519)(\..*)?|client_secret.*\.json|service[-_]account.*\.json|secrets\.ya?ml"
    r"|.*\.(pem|key|p12|pfx|jks|keystore|kdbx|ppk))$",
    re.IGNORECASE,
)
_BINARY_EXT = _words(
    ".png .jpg .jpeg .gif .bmp .ico .webp .tif .tiff .psd .pdf .zip .gz .tgz .bz2 .xz .7z .rar .jar .war "
    ".class .so .dylib .dll .exe .bin .o .a .lib .pyc .pyd .whl .woff .woff2 .ttf .otf .eot .mp3 .mp4 .mov "
    ".avi .wav .flac .ogg .webm .sqlite .db .parquet .pkl .npy .npz .onnx .pt .h5 .wasm"
)

_DOC_EXT = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".org", ".rdoc"})
_DOC_NAME = re.compile(
    r"^(readme|changelog|changes|history|license|licence|copying|notice|authors|contributing"
    r"|code_of_conduct)\b",
    re.IGNORECASE,
)
_DOC_DIRS = frozenset({"docs", "doc", "documentation"})
_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testing", "e2e", "testdata"})
_TEST_NAME = re.compile(
    r"^(test_.*|.*_test\.\w+|.*\.(test|spec)\.\w+|.*_spec\.rb|.*Tests?\.(java|kt|cs|scala|swift)|conftest\.py)$"
)
_CONFIG_EXT = _words(".json .yaml .yml .toml .ini .cfg .conf .xml .properties .csv .tsv .plist")
_CATEGORY_WEIGHT: Mapping[str, float] = {"source": 3.0, "test": 2.0, "config": 1.5, "docs": 1.0}
_SENSITIVE = re.compile(
    r"(?<![a-z])(auth|login|logout|oauth|sso|session|crypt|cipher|secur|permission|privilege|acl|rbac|"
    r"token|passw|secret|credential|sql|payment|billing|invoice|checkout|sanitiz|csrf|xss|jwt|cookie|"
    r"admin|sudo|signature|cert|tls|ssl)|\.github/workflows/"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

_NOT_A_DEF = (
    r"(?!(?:return|else|elif|if|for|foreach|while|switch|case|do|throw|new|delete|await|yield|goto|sizeof"
    r"|typeof|not|and|or|in|is|print|echo|raise|assert|import|from|with|using|go|defer|except|catch)\b)"
)
_DEF = re.compile(
    r"^\s*(?:"
    r"(?:async\s+)?def\s+\w+"
    r"|(?:export\s+)?(?:default\s+)?(?:async\s+)?function\b"
    r"|(?:export\s+)?(?:const|let|var)\s+\w+\s*=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>|\w+\s*=>)"
    r"|func\b|type\s+\w+\s+(?:struct|interface)\b"
    r"|(?:pub(?:\([\w\s]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"\w+\"\s+)?fn\s+\w+"
    r"|(?:pub(?:\([\w\s]+\))?\s+)?(?:struct|enum|trait|mod)\s+\w+|impl\b"
    r"|(?:(?:export|default|public|private|protected|internal|static|final|abstract|override|virtual|sealed"
    r"|partial|open|data|suspend|inline)\s+)*(?:class|interface|enum|record|object|fun|module|namespace)\s+\w+"
    r"|(?:(?:public|private|protected|internal|static|final|abstract|override|virtual|synchronized|async)\s+)+"
    r"[\w<>\[\],.?]+\s+\w+\s*\("
    rf"|{_NOT_A_DEF}[A-Za-z_][\w\s*&:<>,]*?[\s*&]\**~?[A-Za-z_][\w:~]*\s*\([^;]*\)?\s*(?:const\s*)?\{{?\s*$"
    r")"
)


@dataclass(frozen=True)
class Skip:
    """A file left out by policy: lockfile, generated, vendored, minified, binary, excluded, secret_file."""

    path: str
    reason: str


@dataclass(frozen=True)
class UnitPart:
    """One hunk as the model sees it (see LEGEND), already redacted."""

    path: str
    hunk_index: int
    text: str


@dataclass(frozen=True)
class Unit:
    """Whole hunks for one model call; `tokens` is the sum of the parts' counts."""

    id: int
    parts: tuple[UnitPart, ...]
    tokens: int
    risk: float

    @property
    def text(self) -> str:
        return "\n\n".join(part.text for part in self.parts)


@dataclass(frozen=True)
class HunkRef:
    """A hunk that was not packed because it alone exceeds `unit_tokens` (a `budget` gap)."""

    path: str
    hunk_index: int
    tokens: int


@dataclass(frozen=True)
class Plan:
    units: tuple[Unit, ...]
    skipped: tuple[Skip, ...]
    reviewable: tuple[str, ...]
    hunks_total: Mapping[str, int]
    lines_changed: int
    no_patch: tuple[str, ...]
    oversize: tuple[HunkRef, ...] = ()


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A gitignore-like glob: `*`/`?` stay inside one path segment, `**` crosses them, a pattern
    without `/` matches at any depth, and a pattern that names a directory covers what is under it."""
    pat = pattern.strip()
    anchored = "/" in pat.rstrip("/")
    pat = pat.lstrip("/")
    if pat.endswith("/"):
        pat += "**"
    out: list[str] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pat.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pat.find("]", i + 2)) != -1:
            body = pat[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append(("[^" if negate else "[") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + ("" if anchored else "(?:.*/)?") + "".join(out) + "(?:/.*)?$")


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    return any(glob_regex(p).match(path) for p in patterns if p.strip())


def skip_reason(file: DiffFile, *, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> str | None:
    """Why policy leaves this file out of the model's view, or None. Secret files win over everything."""
    names = [file.path] + ([file.old_path] if file.old_path else [])
    if any(_SECRET_NAME.match(PurePosixPath(p).name) for p in names):
        return "secret_file"
    if matches_any(file.path, exclude) or (include and not matches_any(file.path, include)):
        return "excluded"
    pure = PurePosixPath(file.path)
    name = pure.name
    if file.binary or pure.suffix.lower() in _BINARY_EXT:
        return "binary"
    if name.lower() in _LOCKFILES or name.lower().endswith(".lock"):
        return "lockfile"
    if any(part in _VENDOR_DIRS for part in pure.parts[:-1]):
        return "vendored"
    if _GENERATED_NAME.search(name) or (pure.parts[0] == "dist" and len(pure.parts) > 1):
        return "generated"
    if _MINIFIED_NAME.search(name):
        return "minified"
    head = [
        line.text
        for hunk in file.hunks
        for line in hunk.lines
        if line.kind != "-" and line.new is not None and line.new <= _GENERATED_HEAD_LINES
    ]
    if any(_GENERATED_MARK.match(text) for text in head):
        return "generated"
    lengths = [len(line.text) for line in file.added_lines() if line.text.strip()]
    if lengths and max(lengths) >= _MINIFIED_LONGEST and sum(lengths) / len(lengths) >= _MINIFIED_AVG_LINE:
        return "minified"
    return None


def category(path: str) -> str:
    """source, test, config or docs; CI workflows count as source."""
    pure = PurePosixPath(path)
    dirs = {part.lower() for part in pure.parts[:-1]}
    if path.startswith(".github/workflows/"):
        return "source"
    suffix = pure.suffix.lower()
    if suffix in _DOC_EXT or (not suffix and _DOC_NAME.match(pure.name)) or dirs & _DOC_DIRS:
        return "docs"
    if dirs & _TEST_DIRS or _TEST_NAME.match(pure.name):
        return "test"
    if suffix in _CONFIG_EXT:
        return "config"
    return "source"


def sensitive(path: str) -> bool:
    return bool(_SENSITIVE.search(_CAMEL.sub("_", path).lower()))


def hunk_risk(path: str, hunk: Hunk) -> float:
    """Category dominates, security-sensitive paths weigh 1.5x, added lines add up to 0.9;
    deletion-only hunks score below every hunk that adds code."""
    weight = _CATEGORY_WEIGHT[category(path)] * (1.5 if sensitive(path) else 1.0)
    if hunk.added == 0:
        return round(0.1 * weight, 4)
    return round(weight + 0.9 * min(1.0, math.log2(1 + hunk.added) / 8), 4)


def _file_header(file: DiffFile) -> str:
    details: list[str] = [file.status]
    if file.old_path and file.old_path != file.path:
        details.append(f"{file.status} from {file.old_path}")
    if file.mode_changed:
        details.append(f"mode {file.old_mode} -> {file.new_mode}")
    return f"## File: {file.path} ({', '.join(details)})"


def _numbered(hunk: Hunk, extension: Sequence[tuple[int, str]]) -> list[str]:
    head = f"@@ -{hunk.old_start},{hunk.old_len} +{hunk.new_start},{hunk.new_len} @@"
    out = [f"{head} {hunk.header}" if hunk.header else head]
    out.extend(f"{n:>6} ~ {text}" for n, text in extension)
    for line in hunk.lines:
        if line.kind == "-":
            out.append(f"{f'({line.old})':>6} - {line.text}")
        else:
            out.append(f"{line.new:>6} {'+' if line.kind == '+' else ' '} {line.text}")
    return out


def _indent(text: str) -> int:
    return len(text.expandtabs(4)) - len(text.expandtabs(4).lstrip())


def enclosing_context(hunk: Hunk, head_lines: Sequence[str]) -> tuple[tuple[int, str], ...]:
    """The file lines from the enclosing definition down to the hunk's first line, when that
    definition is above the hunk and at most CONTEXT_MAX_LINES away; () otherwise.

    Scope is climbed by indentation: a less-indented line that is not a definition narrows the
    search, and reaching column 0 without a definition means there is no enclosing one."""
    for line in hunk.lines:
        if line.kind == "-" or line.new is None:
            continue
        if line.new > len(head_lines) or head_lines[line.new - 1].rstrip() != line.text.rstrip():
            return ()
    changed = [line.text for line in hunk.lines if line.kind != " " and line.text.strip()]
    if not changed:
        return ()
    bound = min(_indent(t) for t in changed)
    first_change = next(i for i, line in enumerate(hunk.lines) if line.kind != " ")
    leading = [line.text for line in hunk.lines[:first_change]]
    start = hunk.new_start + 1 if hunk.new_len == 0 else hunk.new_start
    above = [(n, head_lines[n - 1]) for n in range(start - 1, max(0, start - 1 - CONTEXT_MAX_LINES), -1)]
    candidates = [(None, text) for text in reversed(leading)] + above
    for n, text in candidates:
        if bound == 0:
            return ()
        if not text.strip() or _indent(text) >= bound:
            continue
        if len(text) <= _DEF_MAX_LINE and _DEF.match(text):
            if n is None:
                return ()
            return tuple((k, head_lines[k - 1]) for k in range(n, start))
        bound = _indent(text)
    return ()


@dataclass
class _Open:
    parts: list[tuple[UnitPart, float]]
    tokens: int


def make_plan(
    files: Sequence[DiffFile],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    unit_tokens: int,
    count_tokens: Callable[[str], int],
    read_file: Callable[[str], str | None] | None = None,
    redact: Callable[[str], str] = lambda s: s,
) -> Plan:
    """Filter, rank and pack. `read_file(path)` returns the head text (None when unavailable)
    and is called at most once per file, only for hunks that want context."""
    if unit_tokens <= 0:
        raise ValueError(f"unit_tokens must be a positive number of tokens, got {unit_tokens}")
    skipped: list[Skip] = []
    no_patch: list[str] = []
    reviewable: list[DiffFile] = []
    for f in files:
        reason = skip_reason(f, include=include, exclude=exclude)
        if reason:
            skipped.append(Skip(f.path, reason))
        elif not f.has_patch:
            no_patch.append(f.path)
        else:
            reviewable.append(f)

    ranked = sorted(
        ((hunk_risk(f.path, h), f, h) for f in reviewable for h in f.hunks),
        key=lambda item: (-item[0], item[1].path, item[2].index),
    )
    heads: dict[str, list[str] | None] = {}

    def head_lines(f: DiffFile) -> list[str] | None:
        if read_file is None or f.status == "removed" or category(f.path) in ("docs", "config"):
            return None
        if f.path not in heads:
            text = read_file(f.path)
            heads[f.path] = None if text is None else text.splitlines()
        return heads[f.path]

    units: list[_Open] = []
    oversize: list[HunkRef] = []
    for risk, f, hunk in ranked:
        header = _file_header(f)
        plain = UnitPart(f.path, hunk.index, redact("\n".join([header, *_numbered(hunk, ())])))
        plain_tokens = count_tokens(plain.text)
        if plain_tokens > unit_tokens:
            oversize.append(HunkRef(f.path, hunk.index, plain_tokens))
            continue
        options = [(plain, plain_tokens)]
        lines = head_lines(f)
        extension = enclosing_context(hunk, lines) if lines is not None else ()
        if extension:
            rich = UnitPart(f.path, hunk.index, redact("\n".join([header, *_numbered(hunk, extension)])))
            options.insert(0, (rich, count_tokens(rich.text)))
        _place(units, options, risk, unit_tokens)

    done = tuple(
        Unit(id=i, parts=_ordered(u.parts), tokens=u.tokens, risk=max(r for _, r in u.parts))
        for i, u in enumerate(units)
    )
    file_risk = {f.path: max((hunk_risk(f.path, h) for h in f.hunks), default=-1.0) for f in reviewable}
    return Plan(
        units=done,
        skipped=tuple(sorted(skipped, key=lambda s: s.path)),
        reviewable=tuple(sorted(file_risk, key=lambda p: (-file_risk[p], p))),
        hunks_total={f.path: len(f.hunks) for f in files},
        lines_changed=sum(f.additions + f.deletions for f in files),
        no_patch=tuple(sorted(no_patch)),
        oversize=tuple(oversize),
    )


def _place(units: list[_Open], options: Sequence[tuple[UnitPart, int]], risk: float, limit: int) -> None:
    """First fit in risk order: the earliest unit that takes the hunk, with context if that fits
    there, else without; a new unit only when none does."""
    for unit in units:
        for part, tokens in options:
            if unit.tokens + tokens <= limit:
                unit.parts.append((part, risk))
                unit.tokens += tokens
                return
    part, tokens = next((o for o in options if o[1] <= limit), options[-1])
    units.append(_Open(parts=[(part, risk)], tokens=tokens))


def _ordered(parts: Sequence[tuple[UnitPart, float]]) -> tuple[UnitPart, ...]:
    """Within a unit: files by their riskiest hunk, each file's hunks in file order."""
    best: dict[str, float] = {}
    for part, risk in parts:
        best[part.path] = max(risk, best.get(part.path, risk))
    ranked = sorted(parts, key=lambda item: (-best[item[0].path], item[0].path, item[0].hunk_index))
    return tuple(part for part, _ in ranked)


_REASON_ORDER = ("no_model", "no_credentials", "model_error")


def coverage(
    plan: Plan,
    files: Sequence[DiffFile],
    *,
    reviewed_units: Collection[int],
    unsent_reason: Mapping[int, str] | None = None,
    default_unsent: str = "budget",
) -> Coverage:
    """Per-file status from the plan and the units whose answers were used. Hunks never packed
    (oversize) count as `budget`; a unit not reviewed takes its reason from `unsent_reason`, else
    `default_unsent`. With mixed reasons, a run-wide cause (no_model, no_credentials,
    model_error) is named before `budget`."""
    known = {u.id for u in plan.units}
    unknown = sorted(set(reviewed_units) - known) + sorted(set(unsent_reason or {}) - known)
    if unknown:
        raise ValueError(f"coverage: unit ids {unknown} are not in the plan (it has {len(known)} units)")
    where = {(p.path, p.hunk_index): u.id for u in plan.units for p in u.parts}
    skipped = {s.path: s.reason for s in plan.skipped}
    reviewable = set(plan.reviewable)
    no_patch = set(plan.no_patch)
    entries: list[FileCoverage] = []
    lines_reviewed = 0
    for f in sorted(files, key=lambda f: f.path):
        total = len(f.hunks)
        if f.path in skipped:
            entries.append(FileCoverage(f.path, "skipped", skipped[f.path], total, 0))
            continue
        if f.path in no_patch:
            entries.append(FileCoverage(f.path, "listed", "no_patch", total, 0))
            continue
        if f.path not in reviewable:
            raise ValueError(f"coverage: {f.path!r} is not in the plan; build the plan from the same files")
        missing: list[str] = []
        for hunk in f.hunks:
            uid = where.get((f.path, hunk.index))
            if uid is not None and uid in reviewed_units:
                lines_reviewed += hunk.added + hunk.removed
            elif uid is None:
                missing.append("budget")
            else:
                missing.append((unsent_reason or {}).get(uid, default_unsent))
        done = total - len(missing)
        if not missing:
            entries.append(FileCoverage(f.path, "reviewed", None, total, total))
            continue
        reason = next((r for r in _REASON_ORDER if r in missing), missing[0])
        entries.append(FileCoverage(f.path, "partial" if done else "listed", reason, total, done))
    return Coverage(
        files=tuple(entries),
        lines_changed=sum(f.additions + f.deletions for f in files),
        lines_reviewed=lines_reviewed,
    )
