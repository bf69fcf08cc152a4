"""Realistic pull requests built from code-like text, for planner tests and `benchmarks/`.

A shape is a mapping path → (base text or None for a new file, head text). The code is made from
per-language blocks (a function or method of 5–8 lines), so hunks, definitions and risk categories
look like a real change: source in several languages, security-sensitive paths, tests, docs, config,
new files, big hunks and many small files.
"""

from __future__ import annotations

from collections.abc import Mapping

Shape = Mapping[str, tuple[str | None, str]]

_BLOCKS = {
    "py": (
        "def handle_{i}(request, session):\n"
        "    user = session.get_user(request.user_id)\n"
        "    if not user.can_access(resource_{i}):\n"
        '        raise PermissionError("denied {i}")\n'
        "    total = sum(item.price * item.quantity for item in request.items)\n"
        '    return {{"user": user.id, "total": total, "step": {i}}}\n'
    ),
    "go": (
        "func Process{i}(ctx context.Context, req *Request) (*Response, error) {{\n"
        "\tuser, err := store.LoadUser(ctx, req.UserID)\n"
        "\tif err != nil {{\n"
        '\t\treturn nil, fmt.Errorf("load user {i}: %w", err)\n'
        "\t}}\n"
        "\treturn &Response{{User: user.ID, Step: {i}}}, nil\n"
        "}}\n"
    ),
    "ts": (
        "export async function fetchItems{i}(client: ApiClient, query: string): Promise<Item[]> {{\n"
        "  const response = await client.get(`/items/{i}?q=${{encodeURIComponent(query)}}`);\n"
        "  if (!response.ok) {{\n"
        "    throw new Error(`request {i} failed: ${{response.status}}`);\n"
        "  }}\n"
        "  return (await response.json()).items.filter((item: Item) => item.visible);\n"
        "}}\n"
    ),
    "rs": (
        "pub fn parse_record_{i}(input: &str) -> Result<Record, ParseError> {{\n"
        "    let mut fields = input.split(',');\n"
        "    let id = fields.next().ok_or(ParseError::Missing({i}))?.trim().parse::<u64>()?;\n"
        "    let name = fields.next().unwrap_or_default().to_string();\n"
        "    Ok(Record {{ id, name, version: {i} }})\n"
        "}}\n"
    ),
    "java": (
        "    public Optional<Account> findAccount{i}(String owner, long limit) {{\n"
        "        Account account = repository.findByOwner(owner);\n"
        "        if (account == null || account.getBalance() > limit) {{\n"
        "            return Optional.empty();\n"
        "        }}\n"
        '        audit.log("lookup {i}", owner);\n'
        "        return Optional.of(account);\n"
        "    }}\n"
    ),
    "md": (
        "## Step {i}\n\n"
        "Run the migration for step {i} before deploying; it rewrites the index and may take minutes.\n"
    ),
    "yml": "  job_{i}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make check-{i}\n",
}


def blocks(lang: str, start: int, count: int) -> str:
    return "".join(_BLOCKS[lang].format(i=i) + "\n" for i in range(start, start + count))


def modified(lang: str, size: int, changed: int, seed: int) -> tuple[str, str]:
    """A file of `size` blocks whose head rewrites `changed` of them, spread out (one hunk each)."""
    base = [_BLOCKS[lang].format(i=seed * 1000 + i) for i in range(size)]
    head = list(base)
    step = max(size // max(changed, 1), 1)
    for k in range(0, min(changed * step, size), step):
        i = seed * 1000 + k
        head[k] = base[k].replace(f"{i}", f"{i + 500}") + _BLOCKS[lang].format(i=i + 700)
    return "\n".join(base) + "\n", "\n".join(head) + "\n"


def new_file(lang: str, lines: int, seed: int) -> str:
    out: list[str] = []
    i = 0
    while len(out) < lines:
        out.extend(_BLOCKS[lang].format(i=seed * 1000 + i).splitlines())
        out.append("")
        i += 1
    return "\n".join(out[:lines]) + "\n"


def small() -> Shape:
    return {
        "src/auth/session.py": modified("py", 8, 2, 1),
        "web/src/api/items.ts": modified("ts", 6, 1, 2),
        "docs/deploy.md": modified("md", 5, 1, 3),
    }


def medium() -> Shape:
    shape: dict[str, tuple[str | None, str]] = {
        "src/auth/login.py": modified("py", 12, 3, 10),
        "src/billing/invoice.go": modified("go", 10, 3, 11),
        "services/records/parse.rs": modified("rs", 8, 2, 12),
        "web/src/api/fetch.ts": modified("ts", 8, 2, 13),
        "app/src/main/java/Accounts.java": modified("java", 8, 2, 14),
        "src/report/new_report.py": (None, new_file("py", 150, 15)),
        "tests/test_login.py": modified("py", 6, 2, 16),
        "docs/guide.md": modified("md", 10, 2, 17),
        ".github/workflows/ci.yml": modified("yml", 6, 1, 18),
    }
    for n in range(3):
        shape[f"src/util/helpers_{n}.py"] = modified("py", 3, 1, 20 + n)
    return shape


def large() -> Shape:
    shape: dict[str, tuple[str | None, str]] = {
        "src/auth/tokens.py": modified("py", 30, 8, 30),
        "src/auth/permissions.go": modified("go", 24, 6, 31),
        "src/payments/checkout.ts": modified("ts", 24, 6, 32),
        "services/ingest/records.rs": modified("rs", 20, 5, 33),
        "app/src/main/java/Ledger.java": modified("java", 20, 5, 34),
        "src/ingest/pipeline.py": (None, new_file("py", 400, 35)),
        "web/src/components/table.ts": (None, new_file("ts", 180, 36)),
        "tests/test_tokens.py": modified("py", 16, 5, 37),
        "tests/payments.test.ts": modified("ts", 10, 3, 38),
        "docs/architecture.md": modified("md", 30, 6, 39),
        ".github/workflows/release.yml": modified("yml", 10, 2, 40),
    }
    langs = ("py", "go", "ts", "rs")
    for n in range(24):
        lang = langs[n % len(langs)]
        shape[f"pkg/mod_{n:02d}/impl.{lang}"] = modified(lang, 4, 1, 50 + n)
    return shape


def twelve_files() -> Shape:
    """12 source files of moderate size (the 8k-vs-32k window comparison)."""
    langs = ("py", "go", "ts", "rs", "java")
    return {
        f"src/part_{n:02d}/code.{langs[n % len(langs)]}": modified(langs[n % len(langs)], 10, 3, 60 + n)
        for n in range(12)
    }


SHAPES = {"small": small, "medium": medium, "large": large}


def changed_lines(shape: Shape) -> int:
    """A rough count of changed lines, for describing a shape (git's numstat is the real one)."""
    import difflib

    total = 0
    for base, head in shape.values():
        old = (base or "").splitlines()
        new = head.splitlines()
        total += sum(1 for line in difflib.unified_diff(old, new, lineterm="", n=0) if line[:1] in "+-") - (
            2 if base is not None or new else 0
        )
    return total
