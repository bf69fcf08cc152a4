"""Build the shipped `imreview eval` dataset: small real git repositories with planted defects.

    python benchmarks/eval/build_dataset.py OUT_DIR      # repos + patches + dataset.json in OUT_DIR
    imreview eval OUT_DIR/dataset.json --model MODEL

Each case is a repository whose `main` branch is the base and whose `feature` branch is the change
under review (or, for `diff` items, a patch file). Labels name the line by its text at head, so the
dataset's line numbers are computed, never typed by hand. Planted defects cover P1, P2 and P3;
near misses (code that looks wrong but is not) are labelled `rejected`; three defects can only be
seen with repository context: a caller in an unchanged file, a changed contract, a constant's unit.

`--check FILE` exits 1 when FILE differs from what this script generates (the test keeps the
committed `dataset.json` in sync with the cases).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Mark:
    path: str
    text: str  # a unique piece of the labelled line, at head
    description: str
    severity: str
    evidence: tuple[tuple[str, str], ...] = ()  # (path, unique piece of a line at head) outside the diff


@dataclass(frozen=True)
class Case:
    id: str
    base: dict[str, str]
    head: dict[str, str]
    expected: tuple[Mark, ...] = ()
    rejected: tuple[Mark, ...] = ()
    as_patch: bool = False
    message: str = "change"
    notes: str = field(default="")


CASES: tuple[Case, ...] = (
    Case(
        id="pagination-offset",
        message="Add page_count and tidy page()",
        base={
            "shop/pagination.py": '''"""Paging over lists of products."""


def page(items, number, size):
    """Items of the 1-based page `number`."""
    start = (number - 1) * size
    return items[start : start + size]
''',
        },
        head={
            "shop/catalog.py": '''from shop.pagination import page, page_count


def catalog_page(products, number, per_page=20):
    """One page of the catalog and the number of pages, for the template."""
    return {"items": page(products, number, per_page), "pages": page_count(len(products), per_page)}
''',
            "shop/pagination.py": '''"""Paging over lists of products."""


def page(items, number, size):
    """Items of the 1-based page `number`."""
    start = number * size
    return items[start : start + size]


def page_count(total, size):
    """How many pages `total` items fill."""
    return (total + size - 1) // size
''',
        },
        expected=(
            Mark(
                "shop/pagination.py",
                "start = number * size",
                "page() now starts at number * size for a 1-based page: page 1 skips the first `size` items "
                "and the last page comes back empty (was (number - 1) * size).",
                "P1",
            ),
        ),
        rejected=(
            Mark(
                "shop/pagination.py",
                "return (total + size - 1) // size",
                "Looks like an off-by-one, but it is the usual ceiling division: 10 items of 5 give 2 pages.",
                "P3",
            ),
        ),
    ),
    Case(
        id="user-search-injection",
        message="Search users by name prefix; list recent users",
        base={
            "users/search.py": """import sqlite3


def find_user(conn: sqlite3.Connection, name: str):
    cur = conn.execute("SELECT id, name FROM users WHERE name = ?", (name,))
    return cur.fetchone()
""",
        },
        head={
            "users/search.py": """import sqlite3


def find_user(conn: sqlite3.Connection, name: str):
    cur = conn.execute("SELECT id, name FROM users WHERE name = ?", (name,))
    return cur.fetchone()


def find_by_prefix(conn: sqlite3.Connection, prefix: str):
    cur = conn.execute(f"SELECT id, name FROM users WHERE name LIKE '{prefix}%'")
    return cur.fetchall()


def recent(conn: sqlite3.Connection, limit):
    limit = int(limit)
    cur = conn.execute(f"SELECT id, name FROM users ORDER BY created DESC LIMIT {limit}")
    return cur.fetchall()
""",
        },
        expected=(
            Mark(
                "users/search.py",
                "LIKE '{prefix}%'",
                "SQL injection: `prefix` comes from the caller and is formatted into the query; a prefix "
                "with a quote reads or changes any table. Use a placeholder and pass prefix + '%'.",
                "P1",
            ),
        ),
        rejected=(
            Mark(
                "users/search.py",
                "LIMIT {limit}",
                "An f-string in SQL, but `limit` was converted with int() just above: no injection.",
                "P3",
            ),
        ),
    ),
    Case(
        id="settings-missing-key",
        message="Read the timeout and retries from settings",
        base={
            "config/loader.py": '''"""Typed access to the settings mapping."""


def load_name(settings):
    return str(settings.get("name", "service"))
''',
        },
        head={
            "config/loader.py": '''"""Typed access to the settings mapping."""


def load_name(settings):
    return str(settings.get("name", "service"))


def load_timeout_ms(settings):
    raw = settings.get("timeout")
    return int(raw) * 1000


def load_retries(settings):
    return int(settings.get("retries", 3))
''',
        },
        expected=(
            Mark(
                "config/loader.py",
                "return int(raw) * 1000",
                "When settings has no 'timeout' key, settings.get returns None and int(None) raises "
                "TypeError; every other key here has a default.",
                "P2",
            ),
        ),
        rejected=(
            Mark(
                "config/loader.py",
                'int(settings.get("retries", 3))',
                "Same shape as the timeout, but the default of 3 makes a missing key safe.",
                "P3",
            ),
        ),
    ),
    Case(
        id="tags-shared-default",
        message="Let callers pass the tag list",
        base={
            "blog/tags.py": """def with_tag(tag):
    tags = []
    tags.append(tag.strip().lower())
    return tags
""",
        },
        head={
            "blog/tags.py": """def with_tag(tag, tags=[]):
    tags.append(tag.strip().lower())
    return tags
""",
        },
        expected=(
            Mark(
                "blog/tags.py",
                "def with_tag(tag, tags=[]):",
                "Mutable default argument: without `tags` every call appends to the same list, so tags "
                "leak from one post into the next. Use tags=None and create the list inside.",
                "P3",
            ),
        ),
    ),
    Case(
        id="money-signature-caller",
        message="to_cents takes the currency (JPY has no minor unit)",
        notes="repository context: the broken caller is in an unchanged file",
        base={
            "billing/money.py": '''def to_cents(amount):
    """Amount in the minor unit, rounded half to even."""
    return round(amount * 100)
''',
            "billing/invoice.py": """from billing.money import to_cents


def invoice_total(lines):
    subtotal = sum(line["price"] * line["qty"] for line in lines)
    return to_cents(subtotal)
""",
        },
        head={
            "billing/money.py": '''MINOR_UNITS = {"JPY": 0, "USD": 2, "EUR": 2}


def to_cents(amount, currency):
    """Amount in the currency's minor unit, rounded half to even."""
    return round(amount * 10 ** MINOR_UNITS[currency])
''',
        },
        expected=(
            Mark(
                "billing/money.py",
                "def to_cents(amount, currency):",
                "to_cents now requires `currency`, but billing/invoice.py (unchanged) still calls "
                "to_cents(subtotal): every invoice total raises TypeError.",
                "P1",
                evidence=(("billing/invoice.py", "return to_cents(subtotal)"),),
            ),
        ),
    ),
    Case(
        id="account-lookup-contract",
        message="get_account returns None for unknown ids instead of raising",
        notes="repository context: the caller relies on the KeyError the change removed",
        base={
            "accounts/store.py": '''_ACCOUNTS = {}


def get_account(account_id):
    """The account; KeyError when there is none."""
    return _ACCOUNTS[account_id]
''',
            "accounts/api.py": """from accounts.store import get_account


def balance(account_id):
    try:
        account = get_account(account_id)
    except KeyError:
        return 404, "no such account"
    return 200, account["balance"]
""",
        },
        head={
            "accounts/store.py": '''_ACCOUNTS = {}


def get_account(account_id):
    """The account, or None when there is none."""
    if account_id not in _ACCOUNTS:
        return None
    return _ACCOUNTS[account_id]
''',
        },
        expected=(
            Mark(
                "accounts/store.py",
                "        return None",
                "Changed contract: accounts/api.py balance() catches KeyError to answer 404; get_account now "
                "returns None instead, so an unknown id crashes with TypeError on account['balance'].",
                "P2",
                evidence=(("accounts/api.py", "except KeyError:"),),
            ),
        ),
    ),
    Case(
        id="timeout-units",
        message="Fetch with the shared request timeout",
        notes="repository context: the constant's unit is only visible in an unchanged file",
        base={
            "net/settings.py": """# Shared network settings.
REQUEST_TIMEOUT = 30_000  # milliseconds
USER_AGENT = "shop-bot/1.0"
""",
            "net/client.py": """import requests

from net.settings import USER_AGENT


def fetch(url):
    return requests.get(url, headers={"User-Agent": USER_AGENT}, timeout=30)
""",
        },
        head={
            "net/client.py": """import requests

from net.settings import REQUEST_TIMEOUT, USER_AGENT


def fetch(url):
    return requests.get(url, headers={"User-Agent": USER_AGENT}, timeout=REQUEST_TIMEOUT)
""",
        },
        expected=(
            Mark(
                "net/client.py",
                "timeout=REQUEST_TIMEOUT)",
                "REQUEST_TIMEOUT is in milliseconds (net/settings.py) but requests takes seconds: the "
                "timeout grows from 30 s to 30,000 s (over 8 hours), so a stuck server hangs the caller.",
                "P2",
                evidence=(("net/settings.py", "REQUEST_TIMEOUT = 30_000"),),
            ),
        ),
    ),
    Case(
        id="slug-near-misses",
        message="Simplify slugify",
        base={
            "text/slug.py": """import re


def slugify(title):
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower())
    while slug.endswith("-"):
        slug = slug[:-1]
    while slug.startswith("-"):
        slug = slug[1:]
    return slug
""",
        },
        head={
            "text/slug.py": """import re


def slugify(title):
    if title is None:
        return ""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower())
    return slug.strip("-")
""",
        },
        rejected=(
            Mark(
                "text/slug.py",
                'return slug.strip("-")',
                "strip('-') removes the same leading and trailing dashes the two loops removed.",
                "P3",
            ),
            Mark(
                "text/slug.py",
                "if title is None:",
                "`is None` is the right test here; an empty title still goes through and yields ''.",
                "P3",
            ),
        ),
    ),
    Case(
        id="first-item-patch",
        message="Use the first queued job",
        as_patch=True,
        base={
            "jobs/queue.py": """def next_job(queue):
    if not queue:
        return None
    return queue.pop(0)
""",
        },
        head={
            "jobs/queue.py": """def next_job(queue):
    if len(queue) > 0:
        first = queue[1]
        queue.remove(first)
        return first
    return None
""",
        },
        expected=(
            Mark(
                "jobs/queue.py",
                "first = queue[1]",
                "queue[1] is the second job: with one job queued it raises IndexError, otherwise it runs "
                "jobs out of order. Use queue[0] (or queue.pop(0) as before).",
                "P1",
            ),
        ),
    ),
)


def _git(cwd: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Eval Builder",
        "GIT_AUTHOR_EMAIL": "eval@example.com",
        "GIT_COMMITTER_NAME": "Eval Builder",
        "GIT_COMMITTER_EMAIL": "eval@example.com",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8", newline="")


def _line_of(case: Case, path: str, piece: str) -> int:
    text = {**case.base, **case.head}[path]
    hits = [n for n, line in enumerate(text.splitlines(), 1) if piece in line]
    if len(hits) != 1:
        raise SystemExit(f"{case.id}: {piece!r} must occur once in {path} at head, found {len(hits)}")
    return hits[0]


def _labels(case: Case, marks: tuple[Mark, ...]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for m in marks:
        label: dict[str, object] = {
            "path": m.path,
            "line": _line_of(case, m.path, m.text),
            "description": m.description,
            "severity": m.severity,
        }
        if m.evidence:
            label["evidence"] = [{"path": p, "line": _line_of(case, p, piece)} for p, piece in m.evidence]
        out.append(label)
    return out


def dataset() -> list[dict[str, object]]:
    """The dataset JSON; paths are relative to the directory that holds it."""
    out: list[dict[str, object]] = []
    for case in CASES:
        item: dict[str, object] = {"id": case.id}
        if case.as_patch:
            item["diff"] = f"patches/{case.id}.patch"
        else:
            item["repo"] = f"repos/{case.id}"
        item.update(base="main", head="feature")
        item["expected"] = _labels(case, case.expected)
        item["rejected"] = _labels(case, case.rejected)
        if case.notes:
            item["notes"] = case.notes
        out.append(item)
    return out


def build(out_dir: Path) -> Path:
    """Create every repository (and patch) under `out_dir` and write `out_dir/dataset.json`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        repo = out_dir / "repos" / case.id
        if repo.exists():
            raise SystemExit(f"{repo} exists already: build into an empty directory")
        repo.mkdir(parents=True)
        _git(repo, "init", "-q", "-b", "main")
        _write(repo, case.base)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "--no-gpg-sign", "-m", "base")
        _git(repo, "checkout", "-q", "-b", "feature")
        _write(repo, case.head)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "--no-gpg-sign", "-m", case.message)
        if case.as_patch:
            patch = _git(repo, "diff", "--no-color", "--no-ext-diff", "main", "feature")
            target = out_dir / "patches" / f"{case.id}.patch"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(patch, encoding="utf-8", newline="")
    path = out_dir / "dataset.json"
    path.write_text(json.dumps(dataset(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--check":
        committed = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        if committed != dataset():
            print(f"{argv[1]} is out of date: regenerate it with --print", file=sys.stderr)
            return 1
        return 0
    if argv == ["--print"]:
        print(json.dumps(dataset(), indent=2, ensure_ascii=False))
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(build(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
