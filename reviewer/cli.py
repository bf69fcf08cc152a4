"""The `imreview` command line: build a Config and a Source, run the pipeline, map errors to exits.

Heavy imports (litellm, PyGithub) happen inside the commands that need them, so `--help` stays fast.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from reviewer import __version__
from reviewer.errors import ImreviewError, UsageError

if TYPE_CHECKING:
    from reviewer.config import Overrides
    from reviewer.events import SkipRules
    from reviewer.pull import PullJob
    from reviewer.source.github import GitHubClient

F = TypeVar("F", bound=Callable[..., Any])

PRIORITY_CHOICES = click.Choice(["never", "P1", "P2", "P3"], case_sensitive=False)


def config_option(name: str, **changes: Any) -> Callable[[F], F]:
    """The option for one key of the config table (`reviewer.config.OVERRIDE_KEYS`): its flag, the
    type its value is checked as and its help line all come from the table's row; `changes` adjusts
    the click option (another help line, a laxer type). Budget flags are all positive: 0 would
    plan a review that cannot run (leave `--model` unset for the deterministic checks alone)."""
    from reviewer.config import OVERRIDE_KEYS, flag_settings

    key = OVERRIDE_KEYS[name]
    return click.option(str(key.flag), name, **{**flag_settings(key), **changes})


BUDGET_KEYS = ("max_cost_usd", "max_input_tokens", "max_output_tokens", "max_seconds", "max_calls")


def review_options(func: F) -> F:
    """The options shared by every reviewing command (DESIGN section 2)."""
    options = [
        *map(config_option, ("model", "fallback_models", "api_base")),
        click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Config file (YAML)."),
        config_option("language"),
        *map(config_option, (*BUDGET_KEYS, "max_concurrency", "max_output_tokens_per_call")),
        *map(config_option, ("request_timeout", "max_findings")),
        config_option("fail_on", type=PRIORITY_CHOICES, metavar="[never|P1|P2|P3]"),
        config_option("on_error"),
        click.option(
            "--summary",
            "summary_path",
            default="-",
            show_default=True,
            help="Write the summary (- = stdout).",
        ),
        click.option("--json", "json_path", help="Write report.json here."),
        click.option("--comment", "comment_path", help="Write the rendered PR comment here."),
        config_option("template_dir", type=click.Path(file_okay=False)),
        *map(config_option, ("include", "exclude")),
        click.option("--quiet", "-q", is_flag=True, help="Only warnings and errors on stderr."),
        click.option(
            "--verbose",
            "-v",
            is_flag=True,
            help="Progress lines and stage timings on stderr, even when piped.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


max_pr_cost_option = click.option(
    "--max-pr-cost-usd",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Cap on a PR's cost over all its runs, kept in its sticky comment (0 = no cap).",
)
"""Shared by `pr` and `scan`: the per-PR cumulative cost cap (DESIGN section 3)."""


def _overrides(opts: Mapping[str, Any]) -> Overrides:
    """The settings given as options, typed (click spells a choice as listed, `--fail-on p1` is P1)."""
    from reviewer.config import Overrides

    return Overrides.given(opts)


def guarded(func: F) -> F:
    """One place turns errors into exit codes: 2 usage/config, 3 unexpected."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ImreviewError as exc:
            click.echo(f"imreview: error: {exc}", err=True)
            sys.exit(2 if isinstance(exc, UsageError) else 3)
        except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:
            click.echo(f"imreview: unexpected error: {type(exc).__name__}: {exc}", err=True)
            traceback.print_exc(file=sys.stderr)
            sys.exit(3)

    return wrapper  # type: ignore[return-value]


def _note(message: str) -> None:
    click.echo(message, err=True)


def _progress(opts: Mapping[str, Any]) -> AbstractContextManager[Any]:
    from reviewer import progress

    # Log groups belong to `imreview action`; here stdout carries the summary, so progress stays on stderr.
    return progress.use(progress.for_environment({}, quiet=opts["quiet"], verbose=opts["verbose"]))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imreview")
def cli() -> None:
    """Review pull requests with a language model inside a hard budget."""


@cli.command(short_help="Review a local branch: merge-base(BASE, HEAD)..HEAD.")
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.option("--base", help="Base ref (default: upstream, origin/HEAD, main, master).")
@click.option("--head", default="HEAD", show_default=True, help="Head ref.")
@review_options
@guarded
def review(path: str, base: str | None, head: str, config_file: str | None, **opts: Any) -> None:
    """Review merge-base(BASE, HEAD)..HEAD of the local git repository at PATH."""
    from reviewer.config import build_config, env_layer, load_config_file, parse_config_text
    from reviewer.run import review_and_report
    from reviewer.source.local import CONFIG_PATH, make_local_source

    # -q: progress notes (which commits are reviewed) are not printed; warnings still are
    source = make_local_source(path, base, head, (lambda _: None) if opts["quiet"] else _note)
    if config_file:
        file_layer = load_config_file(config_file, required=True)
    else:
        text = source.base_config_text(_note)
        where = f"{source.base_ref}:{CONFIG_PATH}"
        file_layer = parse_config_text(text, where) if text is not None else {}
    config = build_config(file_layer=file_layer, env=env_layer(os.environ), overrides=_overrides(opts))
    with _progress(opts):
        code = review_and_report(
            source,
            config,
            summary_path=opts["summary_path"],
            json_path=opts["json_path"],
            comment_path=opts["comment_path"],
            warn=_note,
        )
    sys.exit(code)


@cli.command(short_help="Review one GitHub pull request OWNER/REPO#N (needs GITHUB_TOKEN).")
@click.argument("target")
@click.option("--post-comment", is_flag=True, help="Create or update the sticky PR comment.")
@click.option("--inline-comments", is_flag=True, help="Also post one review with inline comments.")
@click.option("--skip-drafts", is_flag=True, help="Skip the PR when it is a draft (off: it was named).")
@click.option("--skip-bots", is_flag=True, help="Skip the PR when a bot opened it.")
@click.option("--skip-closed", is_flag=True, help="Skip the PR when it is not open.")
@max_pr_cost_option
@click.option(
    "--skip-reviewed",
    is_flag=True,
    help="No model call when our sticky comment already reviewed this head with the same config.",
)
@review_options
@guarded
def pr(target: str, **opts: Any) -> None:
    """Review a GitHub pull request OWNER/REPO#N through the API (GITHUB_TOKEN, GITHUB_API_URL).

    Posts nothing unless asked; no skip rule applies unless a --skip-* flag turns it on.
    """
    from reviewer.events import SkipRules
    from reviewer.pull import review_pull
    from reviewer.run import write_report_files, write_text

    repo, number = parse_pr_target(target)
    client = _github_client("`imreview pr` reads the PR through the GitHub API")
    skip = SkipRules(
        drafts=opts["skip_drafts"],
        bots=opts["skip_bots"],
        closed=opts["skip_closed"],
        reviewed=opts["skip_reviewed"],
        explicit=False,
    )
    job = _pull_job(repo, number, opts, skip)
    with _progress(opts):
        outcome = review_pull(client, job, warn=_note)
    if outcome.report is not None and outcome.rendered is not None:
        write_report_files(
            outcome.report,
            comment=outcome.rendered.comment,
            summary=outcome.summary,
            json_path=opts["json_path"],
            comment_path=opts["comment_path"],
            summary_path=opts["summary_path"],
        )
    else:
        write_text(opts["summary_path"], outcome.summary)
    sys.exit(outcome.exit_code)


@cli.command(short_help="List, review or fan out open PRs (needs GITHUB_TOKEN).")
@click.argument("repository")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Most PRs reviewed (or planned).",
)
@click.option(
    "--labels", multiple=True, help="Only PRs carrying one of these labels (repeatable, or comma-separated)."
)
@click.option(
    "--review", "do_review", is_flag=True, help="Review the PRs that need it (default: only list them)."
)
@click.option(
    "--matrix", is_flag=True, help='Print the fan-out matrix {"include":[{"pr":N},...]} (at most 256).'
)
@click.option(
    "--post-comment", is_flag=True, help="With --review: create or update each PR's sticky comment."
)
@click.option("--inline-comments", is_flag=True, help="With --review: also post inline review comments.")
@click.option("--include-drafts", is_flag=True, help="Do not skip draft PRs.")
@click.option("--include-bots", is_flag=True, help="Do not skip PRs opened by bots.")
@max_pr_cost_option
@review_options
@guarded
def scan(
    repository: str, limit: int, labels: tuple[str, ...], do_review: bool, matrix: bool, **opts: Any
) -> None:
    """Scan the open PRs of OWNER/REPO: list, review (--review) or plan a fan-out (--matrix).

    Needs a GitHub token in GITHUB_TOKEN (read access to list and review; posting comments needs
    pull-requests: write), and GITHUB_API_URL on GitHub Enterprise Server.

    Unchanged PRs (our sticky comment already reviewed their head with the same config) cost no
    model call; cost and seconds are one budget for the whole run, tokens and calls are per PR.
    """
    from reviewer.events import SkipRules, label_names
    from reviewer.run import write_text
    from reviewer.scan import ScanSettings, scan_json, summary
    from reviewer.scan import scan as run_scan

    if repository.count("/") != 1 or not all(repository.split("/")):
        raise UsageError(f"REPOSITORY {repository!r} must look like OWNER/REPO, e.g. octo-org/widgets")
    if matrix and do_review:
        raise UsageError("--matrix plans a fan-out and --review reviews here: choose one")
    client = _github_client("`imreview scan` lists the PRs through the GitHub API")
    drafts, bots = not opts["include_drafts"], not opts["include_bots"]
    job = _pull_job(repository, 0, opts, SkipRules(drafts=drafts, bots=bots, closed=True, reviewed=True))
    labels_given = label_names(*labels)
    settings = ScanSettings(job=job, limit=limit, labels=labels_given, plan_only=not do_review)
    result = run_scan(client, settings, warn=_note)
    renderer = job.messages()
    write_text(opts["json_path"], scan_json(result))
    if matrix:
        click.echo(result.matrix_json())
    # with --matrix, stdout is the matrix alone (a workflow reads it): the summary goes to a named file only
    path = opts["summary_path"]
    write_text(None if matrix and path == "-" else path, summary(result, renderer))
    sys.exit(max((o.exit_code for o in result.outcomes), default=0))


def _pull_job(repo: str, number: int, opts: Mapping[str, Any], skip: SkipRules) -> PullJob:
    """The job `pr` and `scan` run for a PR (`scan`: the template of every PR's job)."""
    from reviewer.pull import PullJob

    return PullJob(
        repo=repo,
        number=number,
        overrides=_overrides(opts),
        config_file=opts["config_file"],
        skip=skip,
        post_comment=opts["post_comment"],
        inline_comments=opts["inline_comments"],
        max_pr_cost_usd=opts["max_pr_cost_usd"],
    )


def _github_client(need: str, *, signs: bool = True) -> GitHubClient:
    """The API client from GITHUB_TOKEN and GITHUB_API_URL; `need` says why the command cannot do
    without a token. `signs`: the command may sign sticky state, so a weak key stops it first."""
    from reviewer.source.github import GitHubClient, github_timeout

    token = os.environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise UsageError(f"GITHUB_TOKEN is not set: {need}")
    if signs:
        from reviewer.state import check_state_key

        check_state_key(os.environ)
    return GitHubClient(
        token,
        os.environ.get("GITHUB_API_URL", "").strip() or "https://api.github.com",
        timeout=github_timeout(os.environ),
    )


def parse_pr_target(target: str) -> tuple[str, int]:
    """`OWNER/REPO#N` → (repo, N); anything else is a usage error naming the argument."""
    repo, sep, number = target.partition("#")
    if not sep or repo.count("/") != 1 or not all(repo.split("/")) or not number.isdigit() or int(number) < 1:
        raise UsageError(f"TARGET {target!r} must look like OWNER/REPO#N, e.g. octo-org/widgets#42")
    return repo, int(number)


@cli.command(short_help="Print `ignore:` lines for the findings dismissed on a PR OWNER/REPO#N.")
@click.argument("target")
@guarded
def dismissed(target: str) -> None:
    """The lines to add under `ignore:` in .github/imreview.yml so that the findings maintainers
    dismissed on this PR are raised on no other PR (docs/commands.md). Reads the PR's signed sticky
    state: needs GITHUB_TOKEN and the key the workflow signs with (IMREVIEW_STATE_KEY, or the model
    API key) in the environment."""
    from reviewer.memory import ignore_lines
    from reviewer.publish import INTEGRATION_LOGIN
    from reviewer.pull import ListedComments, find_prior, list_comments

    repo, number = parse_pr_target(target)
    client = _github_client("`imreview dismissed` reads the PR's comment through the API", signs=False)
    listed = list_comments(client, repo, number)
    state = find_prior(client, repo, number, listed).state
    if state is None and listed.comments is not None:  # a person's token reading the workflow bot's comment
        as_bot = ListedComments(INTEGRATION_LOGIN, listed.comments)
        state = find_prior(client, repo, number, as_bot).state
    if state is None:
        raise UsageError(
            f"{target}: no sticky comment of imreview that this environment's key proves ours "
            "(set IMREVIEW_STATE_KEY, or the model API key, as the workflow has it)"
        )
    click.echo(ignore_lines(state, target), nl=False)


@cli.command(short_help="The GitHub Action entry point (runs inside the Action's container).")
@guarded
def action() -> None:
    """The GitHub Action entry point: reads the runner's environment and event payload."""
    from reviewer.action import run_action

    sys.exit(run_action(os.environ))


REPORT_KEYS_ADDED_IN_V1: dict[str, Any] = {"answers": None, "unverified": []}
"""Keys a v1 report gained after 0.1.0; a report written before them still renders."""


@cli.command(short_help="Re-render a saved report.json with the current or your templates.")
@click.argument("report_path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--template", "template", default="summary", show_default=True, help="summary, comment, or a .j2 file."
)
@click.option("--template-dir", type=click.Path(file_okay=False), help="Template overrides.")
@click.option("--language", help="Override the report's language.")
@guarded
def render(report_path: str, template: str, template_dir: str | None, language: str | None) -> None:
    """Re-render a saved report.json with the current (or overridden) templates."""
    from reviewer.render import Renderer
    from reviewer.schema import load_report_schema

    try:
        data = json.loads(Path(report_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"REPORT {report_path!r} is not readable JSON: {exc}") from exc
    if isinstance(data, dict):
        for key, empty in REPORT_KEYS_ADDED_IN_V1.items():
            data.setdefault(key, empty)
    _validate_report(data, report_path, load_report_schema())
    lang = language or data["settings"]["language"]
    if template == "summary":
        text = Renderer(language=lang, template_dir=template_dir).summary(data)
    elif template == "comment":
        renderer = Renderer(language=lang, template_dir=template_dir)
        text = renderer.comment(data, max_findings=data["settings"]["max_findings"])
    elif Path(template).is_file():
        own = Path(template).resolve()
        text = Renderer(language=lang, template_dir=own.parent).render(own.name, report=data)
    else:
        raise UsageError(f"--template {template!r}: expected 'summary', 'comment' or a template file")
    click.echo(text)


@cli.command("eval", short_help="Score a model on a labelled dataset: precision, recall, cost.")
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False))
@config_option("model", help="litellm model string to review with (env IMREVIEW_MODEL).")
@config_option("api_base")
@click.option("--judge-model", help="Also ask this model whether a finding and a label describe one defect.")
@click.option("--json", "json_path", help="Write the scores as JSON here.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Config file (YAML).")
@config_option("language", help="Language of prompts and output, e.g. en, zh-CN.")
@config_option("max_input_tokens", help="Budget per item: prompt tokens (default 200,000).")
@config_option("max_calls", help="Budget per item: model requests (default 24).")
@config_option("max_cost_usd", help="Budget per item: US dollars (default 1.00).")
@guarded
def eval_(
    dataset: str, judge_model: str | None, json_path: str | None, config_file: str | None, **opts: Any
) -> None:
    """Review every item of a labelled DATASET and report precision, recall, F1, cost and time."""
    from reviewer.config import build_config, env_layer, load_config_file
    from reviewer.evaluate import evaluate
    from reviewer.render import Renderer
    from reviewer.run import write_text

    file_layer = load_config_file(config_file, required=True) if config_file else None
    config = build_config(file_layer=file_layer, env=env_layer(os.environ), overrides=_overrides(opts))
    card = evaluate(
        dataset,
        config,
        judge_model=judge_model,
        warn=_note,
        progress=lambda item: _note(
            f"imreview eval: {item.id}: {item.tally.true_positives}/{item.tally.found} matched"
        ),
    )
    renderer = Renderer(language=config.language, template_dir=config.template_dir)
    click.echo(renderer.render("eval.md.j2", card=card.to_dict()))
    if json_path:
        write_text(json_path, json.dumps(card.to_dict(), indent=2, ensure_ascii=False) + "\n")


def _validate_report(data: Any, where: str, schema: Mapping[str, Any]) -> None:
    try:
        import jsonschema
    except ImportError:
        if not isinstance(data, dict) or data.get("schema") != "imreview.report/v1":
            raise UsageError(f"REPORT {where!r} is not an imreview.report/v1 report") from None
        return
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        at = "/".join(str(p) for p in first.path) or "(top level)"
        raise UsageError(f"REPORT {where!r} does not match imreview.report/v1 at {at}: {first.message}")


def main(argv: list[str] | None = None) -> int:
    """Console-script and entrypoint.py entry; returns the exit code instead of exiting."""
    try:
        cli.main(args=argv, prog_name="imreview", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    return 0
