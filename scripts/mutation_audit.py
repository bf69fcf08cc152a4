"""A mutation audit: how much of what users rely on do the tests guard?

Each row of MUTATIONS is one small, realistic change to the code (a dropped call, an inverted
condition, an off-by-one at a limit) in a module that guards the budget, secrets, identity, the
verdict or publishing, with what a user would suffer if it shipped and the test files that should
notice. The audit copies the repository's working tree into a temporary directory once, then for
each mutation: applies it, runs only that mutation's test files
(`python -m pytest -x -q -p no:cacheprovider FILES`, with a timeout), restores the file. A mutation
is *killed* when those tests fail, *survived* when they pass.

    python scripts/mutation_audit.py                 # every mutation; a Markdown table and the score
    python scripts/mutation_audit.py --only NAME     # one mutation (repeatable)
    python scripts/mutation_audit.py --check         # only check the table (fast, no pytest run)
    python scripts/mutation_audit.py --list          # the names
    python scripts/mutation_audit.py --part 0/2      # every 2nd mutation from the first (split a run)
    python scripts/mutation_audit.py --baseline      # first run each test list on the unmutated copy

A kill means something only when the same tests pass on the unmutated code: `--baseline` checks
that first (and stops, exit 2, naming the tests that fail without any mutation).

The table must not rot silently: every `old` text must occur exactly once in its file, and every
test file must exist; otherwise the script stops (exit 2) naming the row. tests/test_mutation_audit.py
runs that check. Exit 0 when the score reaches TARGET, 1 when not. The last results are kept in
docs/mutation-audit.md (`--write` rewrites it).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.90
TIMEOUT_SECONDS = 900.0
DOC = ROOT / "docs" / "mutation-audit.md"


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    harm: str
    tests: tuple[str, ...]


def _m(name: str, file: str, old: str, new: str, harm: str, *tests: str) -> Mutation:
    return Mutation(name, file, old, new, harm, tuple(f"tests/{t}" for t in tests))


MUTATIONS: tuple[Mutation, ...] = (
    # --- secrets: what must never reach the model --------------------------------------------
    _m(
        "secret-rename-old-path",
        "reviewer/policy.py",
        "names = [file.path] + ([file.old_path] if file.old_path else [])",
        "names = [file.path]",
        "a secret file renamed to an innocent name (git mv .env env.txt) is sent to the model",
        "test_secrets_sent.py",
        "test_secrets.py",
    ),
    _m(
        "enclosing-definition-not-redacted",
        "reviewer/plan.py",
        "rich = UnitPart(f.path, hunk.index, redact(",
        "rich = UnitPart(f.path, hunk.index, (",
        "a token added inside a function is sent unredacted when its enclosing definition is attached",
        "test_secrets_sent.py",
    ),
    _m(
        "repository-context-not-redacted",
        "reviewer/plan.py",
        "text = ctx.render(chosen, redact)",
        "text = ctx.render(chosen)",
        "a token in a helper shown as repository context is sent unredacted",
        "test_context.py",
    ),
    _m(
        "verify-context-not-redacted",
        "reviewer/verify.py",
        'return redact("\\n".join(f"{n} {code}" for n, code in enumerate(shown, lo + 1)))',
        'return "\\n".join(f"{n} {code}" for n, code in enumerate(shown, lo + 1))',
        "the code around a finding sent to the verification call is not redacted",
        "test_secrets_sent.py",
        "test_verify.py",
    ),
    # --- caps: what a run, a PR and a call may spend ------------------------------------------
    _m(
        "scan-share-whole-limit",
        "reviewer/pull.py",
        "budget = Budget(limits, parent=parent)",
        "budget = Budget(limits)",
        "a PR of a scan spends against its own cost limit, not what the run has left: the run overspends",
        "test_caps_exact.py",
    ),
    _m(
        "pr-cap-exact-pull",
        "reviewer/pull.py",
        "if job.max_pr_cost_usd > 0 and job.max_pr_cost_usd - spent <= 0:",
        "if job.max_pr_cost_usd > 0 and job.max_pr_cost_usd - spent < 0:",
        "a PR whose spend is exactly max-pr-cost-usd is reviewed again",
        "test_pr_cost_cap.py::test_a_pr_whose_cost_is_exactly_the_cap_is_not_reviewed_again",
    ),
    _m(
        "pr-cap-exact-scan",
        "reviewer/scan.py",
        "(state.total_cost_usd or 0.0) >= cap",
        "(state.total_cost_usd or 0.0) > cap",
        "a scan starts a review job for a PR whose spend is exactly max-pr-cost-usd",
        "test_fan_out.py",
    ),
    _m(
        "learned-window-grows",
        "reviewer/llm.py",
        "if window < current[0]:",
        "if window != current[0]:",
        "a server-reported window larger than what the model can take is believed: requests overflow",
        "test_caps_exact.py",
        "test_llm.py",
    ),
    _m(
        "served-window-over-config",
        "reviewer/model_facts.py",
        "if configured and configured < served:",
        "if configured and configured > served:",
        "a server's window wins over a smaller configured context_window: requests overflow the model",
        "test_caps_exact.py",
        "test_llm.py",
    ),
    # --- stale or dishonest results ------------------------------------------------------------
    _m(
        "carried-survives-reanswer",
        "reviewer/incremental.py",
        "if hunk is not None and (c.path, hunk) in answered:",
        "if hunk is None and (c.path, hunk) in answered:",
        "a carried finding survives after its hunk was re-reviewed without it: fail-on fails on a fixed bug",
        "test_stale_results.py",
        "test_incremental.py",
    ),
    _m(
        "compare-300-trusted",
        "reviewer/incremental.py",
        "if files >= COMPARE_FILES_CAP:",
        "if files > COMPARE_FILES_CAP:",
        "a compare listing of exactly 300 files (possibly cut off) is trusted: pushed hunks go unreviewed",
        "test_stale_results.py",
        "test_incremental.py",
    ),
    _m(
        "partial-yields-clean",
        "reviewer/gate.py",
        'unreviewed = any(f.status in ("listed", "partial") for f in reviewable)',
        'unreviewed = any(f.status in ("listed",) for f in reviewable)',
        "a file left partial because one line did not fit the window still yields clean",
        "test_stale_results.py",
        "test_gate.py",
    ),
    # --- duplicates ------------------------------------------------------------------------------
    _m(
        "retry-without-lookup",
        "reviewer/publish.py",
        "time.sleep(wait)\n            found = landed() if",
        "time.sleep(wait)\n            found = None if",
        "after a rate-limited create that landed, the retry posts a second comment",
        "test_faults.py::test_a_rate_limited_create_that_landed_is_found_before_the_retry_and_not_posted_again",
        "test_publish.py",
    ),
    # --- prompt echoes ----------------------------------------------------------------------------
    _m(
        "placeholder-form-echo",
        "reviewer/findings.py",
        "v in EXAMPLE_VALUES or _PLACEHOLDER.fullmatch(v)",
        "v in EXAMPLE_VALUES",
        "an echoed placeholder in a form not on the exact list becomes a finding",
        "test_findings.py",
        "test_cli_review.py",
    ),
    # --- budget: the ledger every call reserves from ----------------------------------------------
    _m(
        "budget-input-one-over",
        "reviewer/budget.py",
        "if held_in > input_left or",
        "if held_in > input_left + 1 or",
        "a call one token past max-input-tokens is allowed",
        "test_budget.py",
    ),
    _m(
        "budget-output-exact-refused",
        "reviewer/budget.py",
        "if held_out > output_left or",
        "if held_out >= output_left or",
        "a call that exactly fits the output tokens left is refused: the review stops early",
        "test_budget.py",
    ),
    _m(
        "budget-calls-one-over",
        "reviewer/budget.py",
        "+ 1 > limits.calls:",
        "+ 1 > limits.calls + 1:",
        "one call more than max-calls is made",
        "test_budget.py",
    ),
    _m(
        "budget-cost-unchecked",
        "reviewer/budget.py",
        "over = held_cost is not None and",
        "over = held_cost is None and",
        "a call that costs more than the money left is made: max-cost-usd is passed",
        "test_budget.py",
    ),
    _m(
        "budget-seconds-at-limit",
        "reviewer/budget.py",
        "if check_seconds and elapsed >= limits.seconds:",
        "if check_seconds and elapsed > limits.seconds:",
        "a call is started when max-seconds is exactly used up",
        "test_budget.py",
    ),
    _m(
        "scan-limit-one-over",
        "reviewer/scan.py",
        "if reviewed >= limit:",
        "if reviewed > limit:",
        "a scan reviews one PR more than scan-limit",
        "test_scan.py::test_scan_limit_labels_and_oldest_updated_first",
    ),
    # --- secrets ------------------------------------------------------------------------------------
    _m(
        "redact-generic-skipped",
        "reviewer/rules.py",
        "return _GENERIC.sub(_mask_generic, text) if _may_name_credential(text) else text",
        "return text",
        "a password assigned in the diff (SECRET_KEY = ...) is sent to the model and printed",
        "test_secrets.py",
    ),
    _m(
        "redact-key-bodies-skipped",
        "reviewer/rules.py",
        "text = _mask_key_bodies(text)",
        "text = text",
        "the body of a private key shown in the diff or as context is sent whole",
        "test_secrets.py",
    ),
    _m(
        "secret-file-searched-as-context",
        "reviewer/policy.py",
        "if is_secret_file(path) or any(part in _CONTEXT_SKIP_DIRS",
        "if any(part in _CONTEXT_SKIP_DIRS",
        "a .env file of the repository is quoted to the model as repository context",
        "test_context.py",
    ),
    _m(
        "verify-p3-rechecked",
        "reviewer/verify.py",
        'and f.priority in ("P1", "P2")',
        'and f.priority in ("P1", "P2", "P3")',
        "P3 findings are re-checked too: a verification call paid for nothing",
        "test_verify.py",
    ),
    _m(
        "verify-quote-not-checked",
        "reviewer/verify.py",
        "return any(q in fnd.norm(line) or q in fnd.norm(redact(line))",
        "return True or any(q in fnd.norm(line) or q in fnd.norm(redact(line))",
        "a finding quoting code that is not at head is published instead of refuted",
        "test_verify.py",
    ),
    _m(
        "echo-exact-code-kept",
        "reviewer/findings.py",
        "return any(v.strip() in EXAMPLE_VALUES for v in code if v.strip())",
        "return False",
        "a finding quoting the prompt's example code is published",
        "test_findings.py::test_a_finding_quoting_the_example_code_is_an_echo_even_with_a_real_title",
        "test_findings.py",
    ),
    # --- identity: which comment and which state are ours -------------------------------------------
    _m(
        "state-mac-any-pr",
        "reviewer/state.py",
        "            str(number),",
        '            "0",',
        "a signed sticky copied from another PR is trusted: its review is skipped as done",
        "test_identity.py",
        "test_publish.py",
    ),
    _m(
        "bound-to-any-id",
        "reviewer/state.py",
        "return isinstance(value, int) and not isinstance(value, bool) and value == comment.id",
        "return isinstance(value, int) and not isinstance(value, bool)",
        "without a key, a copy of our comment by another bot is taken for ours and edited",
        "test_identity.py",
    ),
    _m(
        "review-marker-any-login",
        "reviewer/publish.py",
        "_same_login(review.user, login)\n                and isinstance(mac, str)",
        "True\n                and isinstance(mac, str)",
        "a review by another account that carries a copied marker silences our inline comments",
        "test_identity.py",
        "test_publish.py",
    ),
    _m(
        "landed-any-login",
        "reviewer/publish.py",
        "if sent(c) and _same_login(c.user, login)]",
        "if sent(c)]",
        "a copy of our comment by someone else is taken for our lost create: nothing is posted",
        "test_faults.py",
        "test_publish.py",
    ),
    _m(
        "incomplete-counts-as-reviewed",
        "reviewer/pull.py",
        'and state.verdict not in ("", "incomplete")',
        'and state.verdict not in ("",)',
        "an incomplete review at the same head is skipped as done: the PR is never fully reviewed",
        "test_stale_results.py::test_an_incomplete_review_at_the_same_head_is_reviewed_again",
        "test_scan.py::test_two_scans_in_a_row_review_once_and_then_only_what_changed",
    ),
    # --- verdict ------------------------------------------------------------------------------------
    _m(
        "moved-head-not-incomplete",
        "reviewer/gate.py",
        "if head_moved or model_down(",
        "if model_down(",
        "a review of a head that moved during the run is called findings or clean",
        "test_gate.py",
    ),
    _m(
        "nothing-reviewed-clean",
        "reviewer/gate.py",
        "if (reviewable and not reviewed_any) or unreviewed:",
        "if unreviewed:",
        "a PR none of whose files was reviewed is called clean",
        "test_gate.py",
    ),
    _m(
        "fail-on-below-threshold",
        "reviewer/gate.py",
        "priority_rank(f.priority) <= threshold",
        "priority_rank(f.priority) < threshold",
        "fail-on: P2 does not fail the job on a P2 finding",
        "test_gate.py",
    ),
    _m(
        "incomplete-never-fails",
        "reviewer/gate.py",
        'if verdict_ == "incomplete" and on_error == "fail":',
        'if verdict_ == "incomplete" and on_error == "warn":',
        "on-error: fail lets an incomplete review pass the job",
        "test_gate.py",
    ),
    _m(
        "overrun-not-blocking",
        "reviewer/gate.py",
        "overrun = [name for name, _, _ in over if name not in disclosed]",
        "overrun = []",
        "an undisclosed overrun of a limit is published as respected",
        "test_gate.py",
    ),
    _m(
        "include-unmatched-clean",
        "reviewer/gate.py",
        'if any(g.why == "include_unmatched" for g in gaps):',
        "if False:",
        "an include pattern that matched no file yields clean: nothing was reviewed",
        "test_gate.py",
        "test_cli_review.py",
    ),
    _m(
        "unanswered-units-pass-gate",
        "reviewer/gate.py",
        "answers_parsed + answers_gapped >= answers_expected",
        "answers_parsed + answers_gapped + 1 >= answers_expected",
        "a review with one model answer missing and not reported as a gap is published as complete",
        "test_stale_results.py::test_every_model_answer_is_parsed_or_reported_as_a_gap_before_publishing",
        "test_gate.py",
    ),
    # --- incremental ----------------------------------------------------------------------------------
    _m(
        "force-push-trusted",
        "reviewer/incremental.py",
        'if status != "ahead":',
        'if status not in ("ahead", "diverged"):',
        "after a force-push only part of the PR is re-reviewed; the rest keeps a review of other code",
        "test_stale_results.py",
        "test_incremental.py::test_a_force_push_is_a_full_review_and_says_why",
    ),
    # --- publishing -----------------------------------------------------------------------------------
    _m(
        "max-findings-one-over",
        "templates/comment.md.j2",
        "{% set shown = findings[:max_findings] %}",
        "{% set shown = findings[:max_findings + 1] %}",
        "the sticky comment shows one finding more than max-findings",
        "test_caps_exact.py::test_max_findings_at_one_below_and_one_above",
        "test_render.py",
    ),
    _m(
        "carried-posted-inline",
        "reviewer/publish.py",
        "if f.anchored and f.carried_from is None]",
        "if f.anchored]",
        "a carried finding is posted inline again on every push",
        "test_stale_results.py::test_a_carried_finding_is_never_posted_inline_even_when_inline_comments_were_off_before",
        "test_incremental.py::test_a_push_touching_one_file_sends_only_its_new_hunk_and_carries_the_rest",
    ),
)


EQUIVALENT: dict[str, str] = {
    "nothing-reviewed-clean": "a reviewable file is `reviewed`, `partial` or `listed`; when none is reviewed "
    "or partial, one is listed, so `unreviewed` already makes the verdict incomplete",
    "include-unmatched-clean": "`include_unmatched` is also in UNREVIEWED_WHYS, so the verdict is incomplete "
    "anyway; it could only differ with findings, and no file (so no rule) is reviewed then",
    "review-marker-any-login": "the marker's MAC covers repo, PR, head and ids: another account can only "
    "copy a marker of ours, whose ids our own review already posted (GitHub does not let anyone delete a "
    "submitted review)",
    "landed-any-login": "the body looked for is the exact body this run sent, signed and stamped with this "
    "run's head and cost: no one else can have posted it before the create was lost",
}
"""Survivors that no test can kill, and why: the behaviour a user sees does not change."""


# --------------------------------------------------------------------------- checking the table


class TableError(Exception):
    """A row of MUTATIONS that no longer applies to the code."""


def problems(root: Path = ROOT, mutations: Sequence[Mutation] = MUTATIONS) -> list[str]:
    """Every way the table does not fit the code at `root`: a duplicate name, a missing file, an
    old text found not exactly once, an old text equal to its new text, a missing test file."""
    out: list[str] = []
    seen: set[str] = set()
    for m in mutations:
        where = f"mutation {m.name!r} ({m.file})"
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", m.name):
            out.append(f"{where}: the name must be lowercase letters, digits, '-' or '_'")
        if m.name in seen:
            out.append(f"{where}: the name is used twice")
        seen.add(m.name)
        if m.old == m.new:
            out.append(f"{where}: old and new text are the same")
        if not m.harm.strip() or "|" in m.harm:
            out.append(f"{where}: the harm must be one line of text without '|'")
        if not m.tests:
            out.append(f"{where}: no test file guards it")
        for test in m.tests:
            file, _, name = test.partition("::")
            if not (root / file).is_file():
                out.append(f"{where}: test file {file} does not exist")
            elif name and not re.search(rf"^def {re.escape(name)}\(", (root / file).read_text(), re.M):
                out.append(f"{where}: no test {name} in {file}")
        path = root / m.file
        if not path.is_file():
            out.append(f"{where}: the file does not exist")
            continue
        found = path.read_text(encoding="utf-8").count(m.old)
        if found != 1:
            out.append(f"{where}: old text {m.old!r} occurs {found} times, not exactly once")
    return out


def check(root: Path = ROOT, mutations: Sequence[Mutation] = MUTATIONS) -> None:
    found = problems(root, mutations)
    if found:
        raise TableError("the mutation table does not fit the code:\n  " + "\n  ".join(found))


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Result:
    mutation: Mutation
    killed: bool
    by: str
    """The first failing test (`file::name`), `timeout` (counted as killed), or "" when it survived."""
    seconds: float


_FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.M)


def copy_tree(dest: Path) -> None:
    """The working tree's tracked and untracked-but-not-ignored files (so an uncommitted edit is
    audited as it is), copied once."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if not src.is_file():  # deleted in the working tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def run_one(work: Path, m: Mutation, timeout: float) -> Result:
    path = work / m.file
    original = path.read_text(encoding="utf-8")
    if original.count(m.old) != 1:
        raise TableError(f"mutation {m.name!r}: old text not found exactly once in {m.file}")
    path.write_text(original.replace(m.old, m.new, 1), encoding="utf-8")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
            cwd=work,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Result(m, True, "timeout", time.monotonic() - started)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.monotonic() - started
    if done.returncode == 0:
        return Result(m, False, "", seconds)
    failed = _FAILED.search(done.stdout)
    by = failed.group(1) if failed else f"pytest exit {done.returncode}"
    return Result(m, True, by, seconds)


def baseline(work: Path, mutations: Sequence[Mutation], timeout: float) -> list[str]:
    """The test lists of `mutations` that fail on the unmutated copy (each distinct list run once)."""
    failing: list[str] = []
    for tests in dict.fromkeys(m.tests for m in mutations):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            failing.append(" ".join(tests))
    return failing


def table(results: Sequence[Result]) -> str:
    rows = [
        "| mutation | file | what a user would suffer | result | caught by |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        status = "killed" if r.killed else "**survived**"
        by = f"`{r.by}`" if r.by else "—"
        rows.append(f"| `{r.mutation.name}` | {r.mutation.file} | {r.mutation.harm} | {status} | {by} |")
    return "\n".join(rows)


def score(results: Sequence[Result]) -> tuple[int, int]:
    return sum(r.killed for r in results), len(results)


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def document(results: Sequence[Result]) -> str:
    killed, total = score(results)
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return (
        "# Mutation audit\n\n"
        "`python scripts/mutation_audit.py` applies each mutation below to a copy of the repository, "
        "runs only the test files that guard it, and counts it killed when they fail. "
        "`--only NAME` runs one; tests/test_mutation_audit.py checks that every mutation still applies "
        "to the code (its old text occurs exactly once).\n\n"
        f"Date: {today}. Commit: {_commit()}. Score: **{killed} / {total} killed "
        f"({100 * killed / max(total, 1):.0f} %)**.\n\n"
        + HISTORY
        + table(results)
        + "\n"
        + _survivors(results)
    )


HISTORY = (
    "Before the tests added for issue 21 (main at 3cb880f), the suite caught 2 of the 9 survivors the "
    "issue lists that were re-run on that suite (`pr-cap-exact-pull`, by the exact-cap test of "
    "tests/test_pr_cost_cap.py, and `pr-cap-exact-scan`, by tests/test_fan_out.py); the renamed secret "
    "file and the verification call's code also survived it. A survivor below says why it changes "
    "nothing a user can see.\n\n"
)


def _survivors(results: Sequence[Result]) -> str:
    left = [r for r in results if not r.killed]
    if not left:
        return ""
    lines = ["", "## Survivors", ""]
    for r in left:
        why = EQUIVALENT.get(r.mutation.name, "no test catches it yet")
        lines.append(f"- `{r.mutation.name}`: {why}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run this mutation only")
    parser.add_argument("--check", action="store_true", help="only check that the table fits the code")
    parser.add_argument("--list", action="store_true", help="print the mutations' names")
    parser.add_argument("--write", action="store_true", help=f"write the results to {DOC.relative_to(ROOT)}")
    parser.add_argument(
        "--part", default="", metavar="K/N", help="run every Nth mutation from the Kth (0-based)"
    )
    parser.add_argument("--baseline", action="store_true", help="check the tests pass unmutated first")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_SECONDS, help="seconds per mutation")
    args = parser.parse_args(argv)
    try:
        check()
    except TableError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(m.name for m in MUTATIONS))
        return 0
    if args.check:
        print(f"{len(MUTATIONS)} mutations, each old text found exactly once")
        return 0
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.part:
        k, n = (int(v) for v in args.part.split("/"))
        chosen = chosen[k::n]
    unknown = set(args.only) - {m.name for m in MUTATIONS}
    if unknown:
        print(f"no mutation named {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
        return 2
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="imreview-mutants-") as tmp:
        work = Path(tmp)
        copy_tree(work)
        if args.baseline:
            failing = baseline(work, chosen, args.timeout)
            if failing:
                print("tests that fail without any mutation:\n  " + "\n  ".join(failing), file=sys.stderr)
                return 2
        for m in chosen:
            r = run_one(work, m, args.timeout)
            results.append(r)
            status = "killed" if r.killed else "SURVIVED"
            print(f"{m.name}: {status} {r.by} ({r.seconds:.0f} s)", file=sys.stderr, flush=True)
    print(table(results))
    killed, total = score(results)
    print(f"\nScore: {killed} / {total} killed ({100 * killed / max(total, 1):.0f} %)")
    if args.write:
        DOC.write_text(document(results), encoding="utf-8")
    return 0 if killed >= TARGET * total else 1


if __name__ == "__main__":
    sys.exit(main())
