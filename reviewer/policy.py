"""What a file or a line is: the one place every stage asks (issue 19). A file is skipped
(`skip_reason`), a secret never shown (`is_secret_file`), or source / test / config / docs
(`category`); a line may open a definition (`opens_definition`) or define names (`definition_names`,
`defined_names`). Pure: paths and text in, answers out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from reviewer.diff import DiffFile


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_LOCKFILES = _words(
    "package-lock.json npm-shrinkwrap.json yarn.lock pnpm-lock.yaml bun.lockb deno.lock poetry.lock pdm.lock "
    "uv.lock pipfile.lock cargo.lock go.sum go.work.sum gemfile.lock composer.lock podfile.lock pubspec.lock "
    "mix.lock flake.lock packages.lock.json gradle.lockfile package.resolved"
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


SECRET_NAME = re.compile(
    r"^(\.env([.\-_].+)?|.+\.env(?!\.(?:py|js|ts|rb|go|sh|java)$)(\.[\w-]+)?"
    r"|\.envrc|\.netrc|_netrc|\.pypirc|\.npmrc|\.git-credentials|\.htpasswd|credentials(\.json)?"
    r"|id_(rsa|dsa|ecdsa|ed25519)(\..*)?|client_secret.*\.json|service[-_]account.*\.json|secrets\.ya?ml"
    r"|.*\.(pem|key|p12|pfx|jks|keystore|kdbx|ppk))$",
    re.IGNORECASE,
)
"""Names of files that hold secrets by convention (`.env`, private keys, credential stores)."""


def is_secret_file(path: str) -> bool:
    """One rule for every place that could show a file to a model: the planner never sends such a
    file's diff, and repository context never quotes one, whether it is in the change or not."""
    return SECRET_NAME.match(PurePosixPath(path).name) is not None


_GLOB = re.compile(r"\*\*/|\*\*|\*|\?|\[([\s\S][^\]]*)\]|[\s\S]")
_GLOB_PARTS = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}


def _glob_part(m: re.Match[str]) -> str:
    if (body := m.group(1)) is not None:
        negate = body.startswith("!")
        return ("[^" if negate else "[") + body[negate:].replace("\\", "\\\\") + "]"
    return _GLOB_PARTS.get(m.group(0)) or re.escape(m.group(0))


@functools.lru_cache(maxsize=1 << 16)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A gitignore-like glob: `*`/`?` stay inside one path segment, `**` crosses them, a pattern
    without `/` matches at any depth, and a pattern that names a directory covers what is under it."""
    pat = pattern.strip()
    anchored = "/" in pat.rstrip("/")
    pat = pat.lstrip("/")
    pat += "**" if pat.endswith("/") else ""
    return re.compile("^" + ("" if anchored else "(?:.*/)?") + _GLOB.sub(_glob_part, pat) + "(?:/.*)?$")


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    return any(glob_regex(p).match(path) for p in patterns if p.strip())


@functools.lru_cache(maxsize=1 << 16)
def pure_path(path: str) -> PurePosixPath:
    """Parsed once per path: the rules and the planner ask about every file's name and folders."""
    return PurePosixPath(path)


def skip_reason(file: DiffFile, *, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> str | None:
    """Why policy leaves this file out of the model's view, or None. Secret files win over everything."""
    names = [file.path] + ([file.old_path] if file.old_path else [])
    if any(is_secret_file(p) for p in names):
        return "secret_file"
    if matches_any(file.path, exclude) or (include and not matches_any(file.path, include)):
        return "excluded"
    return next((reason for reason, applies in _SKIPPED_KINDS if applies(file)), None)


def _generated_mark(file: DiffFile) -> bool:
    """A "generated" mark on an added line within the first _GENERATED_HEAD_LINES of the file."""
    for hunk in file.hunks:
        if hunk.new_start > _GENERATED_HEAD_LINES:
            continue
        for line in hunk.lines:
            if line.kind == "-" or line.new is None:
                continue
            if line.new > _GENERATED_HEAD_LINES:
                break
            if _GENERATED_MARK.match(line.text):
                return True
    return False


def _minified_lines(file: DiffFile) -> bool:
    """Added lines as long as minified code: one very long line and a long average."""
    if file.longest_added < _MINIFIED_LONGEST:
        return False
    lengths = [len(line.text) for line in file.added_lines() if line.text.strip()]
    return (
        bool(lengths)
        and max(lengths) >= _MINIFIED_LONGEST
        and sum(lengths) / len(lengths) >= _MINIFIED_AVG_LINE
    )


def _name(file: DiffFile) -> str:
    return pure_path(file.path).name.lower()


def _in_dist(path: str) -> bool:
    parts = pure_path(path).parts
    return parts[0] == "dist" and len(parts) > 1


_SKIPPED_KINDS: tuple[tuple[str, Callable[[DiffFile], bool]], ...] = (
    ("binary", lambda f: f.binary or pure_path(f.path).suffix.lower() in _BINARY_EXT),
    ("lockfile", lambda f: _name(f) in _LOCKFILES or _name(f).endswith(".lock")),
    ("vendored", lambda f: any(part in _VENDOR_DIRS for part in pure_path(f.path).parts[:-1])),
    ("generated", lambda f: bool(_GENERATED_NAME.search(pure_path(f.path).name)) or _in_dist(f.path)),
    ("minified", lambda f: bool(_MINIFIED_NAME.search(pure_path(f.path).name))),
    ("generated", _generated_mark),
    ("minified", _minified_lines),
)
"""What else leaves a file out, checked in this order: the first that applies is the reason."""


@functools.lru_cache(maxsize=1 << 16)
def category(path: str) -> str:
    """source, test, config or docs; CI workflows count as source."""
    pure = pure_path(path)
    dirs = {part.lower() for part in pure.parts[:-1]}
    if path.startswith(".github/workflows/"):
        return "source"
    suffix = pure.suffix.lower()
    if suffix in _DOC_EXT or (not suffix and _DOC_NAME.match(pure.name)) or dirs & _DOC_DIRS:
        return "docs"
    if is_test_path(path):
        return "test"
    if suffix in _CONFIG_EXT:
        return "config"
    return "source"


@functools.lru_cache(maxsize=1 << 16)
def sensitive(path: str) -> bool:
    return bool(_SENSITIVE.search(_CAMEL.sub("_", path).lower()))


@functools.lru_cache(maxsize=1 << 16)
def is_test_path(path: str) -> bool:
    """A test file by folder (`tests/`, `spec/`, `__tests__/`, `e2e/`, `testdata/`…) or by name
    (`test_x.py`, `x_test.go`, `x.spec.ts`, `XTest.java`, `conftest.py`)."""
    pure = pure_path(path)
    return bool({part.lower() for part in pure.parts[:-1]} & _TEST_DIRS) or bool(_TEST_NAME.match(pure.name))


_SAMPLE_DIRS = _words(
    "fixtures fixture __fixtures__ testdata test_data test-data examples example samples sample demo demos"
)


@functools.lru_cache(maxsize=1 << 16)
def holds_sample_data(path: str) -> bool:
    """Where committed credentials are usually fake: tests and their fixtures, examples and samples,
    and documentation (by path alone; `category` decides docs and tests)."""
    dirs = {part.lower() for part in pure_path(path).parts[:-1]}
    return bool(dirs & _SAMPLE_DIRS) or category(path) in ("test", "docs")


def is_fixture_path(path: str) -> bool:
    """Files under a fixture or test-data folder: data, not code."""
    return bool({part.lower() for part in pure_path(path).parts[:-1]} & _FIXTURE_DIRS)


_FIXTURE_DIRS = frozenset({"fixtures", "__fixtures__", "testdata", "test_data", "test-data"})
_CONTEXT_SKIP_DIRS = _VENDOR_DIRS | {"dist"}
"""Folders repository context never quotes: vendored code and built output."""


def searchable(path: str) -> bool:
    """Whether a head file may be searched and shown as repository context: not a secret file
    (`.env`, a key), not vendored or built output (`dist/`), not minified, not a lockfile."""
    pure = pure_path(path)
    name = pure.name.lower()
    if is_secret_file(path) or any(part in _CONTEXT_SKIP_DIRS for part in pure.parts[:-1]):
        return False
    return not (".min." in name or name.endswith(".lock") or name.endswith("-lock.json"))


# --- line kinds ----------------------------------------------------------------------------------

MIN_NAME = 3
"""Shorter identifiers are too common to be one symbol."""

KEYWORDS = _words("""
    and as assert async await break case catch class const continue def default defer del delete do elif
    else enum except export extends false final finally fn for from func function global go goto if impl
    implements import in instanceof interface is lambda let match mod module mut namespace new nil none
    nonlocal not null of or package pass private protected pub public raise return self static struct super
    switch this throw throws trait true try type typeof undefined union unsafe use using val var void
    where while with yield int str bool float dict list tuple set bytes object string char long short double
    print len range isinstance super cls args kwargs println printf error err ok
""")
_DEF_WORDS = (
    r"(?:def|class|function|func|fn|struct|enum|trait|interface|type|record|object|module|namespace|fun"
    r"|macro|let|var|const|val|static|union|typedef)"
)
_MODIFIERS = (
    r"(?:(?:export|default|public|private|protected|internal|static|final|abstract|async|pub(?:\([\w\s]+\))?"
    r"|unsafe|extern|inline|virtual|override|open|data|sealed|readonly|declare|mut)\s+)*"
)

_NO_C_DECLARATIONS = frozenset({".py", ".pyi", ".rb", ".rake", ".ex", ".exs", ".sh", ".bash", ".lua"})


_DEFINITION_FORMS = (
    re.compile(rf"^\s*{_MODIFIERS}{_DEF_WORDS}\s+(?:\([^)]*\)\s*)?[*&]*([A-Za-z_]\w*)"),
    re.compile(r"^([A-Za-z_]\w*)\s*(?::\s*[\w\[\]., |]+)?=(?!=)"),
    re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)"),
)
_C_DECLARATION = re.compile(
    r"^(?!return\b|else\b)(?:[\w:<>*&\[\]]+\s+){1,4}[*&]*([A-Za-z_]\w*)\s*\([^;]*(?:\)\s*(?:const\s*)?\{?|,)\s*$"
)


def defined_names(path: str, text: str) -> set[str]:
    """What a line defines: the name after a definition keyword, assigned at column 0, `#define`d,
    or (outside Python-like languages) declared `type name(params)` at column 0 ending like one."""
    forms: tuple[re.Pattern[str], ...] = _DEFINITION_FORMS
    if pure_path(path).suffix.lower() not in _NO_C_DECLARATIONS:
        forms = (*forms, _C_DECLARATION)
    return {m.group(1) for form in forms if (m := form.match(text))}


_DEFINITION_LINE = re.compile(
    rf"^\s*{_MODIFIERS}(?:def|function|func|fn|fun|sub|proc)\s+(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_]\w*)"
    r"|^(?!\s)(?!return\b|else\b|if\b|while\b|for\b|switch\b)"
    r"[\w:<>,*&\[\] ]+[\s*&](?P<cname>[A-Za-z_]\w*)\s*\("
    r"|^\s*(?:export\s+)?(?:const|let|var)\s+(?P<jsname>[A-Za-z_]\w*)\s*=\s*(?:async\s+)?(?:function\b|\()"
)


def definition_names(text: str) -> list[str]:
    """The name a definition line (`def f(`, `func f(`, `int f(`, `const f = (`) defines, as a list
    of at most one: what the context finder takes as the function a hunk changes."""
    m = _DEFINITION_LINE.match(text)
    if not m:
        return []
    name = m.group("name") or m.group("cname") or m.group("jsname")
    return [name] if name and name.lower() not in KEYWORDS and len(name) >= MIN_NAME else []


_DEF_MAX_LINE = 300


def opens_definition(text: str) -> bool:
    """Whether a line opens a definition (a function, method, class, type, impl block) in any of
    the languages the planner knows: the scope the planner climbs to for a hunk's enclosing context.
    Wider than `definition_names` (classes, types, arrow functions) and name-free."""
    return len(text) <= _DEF_MAX_LINE and _DEF.match(text) is not None
