"""Reviewing one GitHub PR: config and templates from the base branch, rerun skip, PR sinks.

Shared by `imreview pr` and `imreview action`; PyGithub stays inside `source.github`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reviewer.config import Config, build_config, config_hash, env_layer, load_config_file, parse_config_text
from reviewer.diff import LineIndex
from reviewer.errors import GitHubError, NoWriteAccess
from reviewer.render import Renderer
from reviewer.report import Finding, Published, Report
from reviewer.source.github import GitHubClient, GitHubSource

DEFAULT_CONFIG_PATH = ".github/imreview.yml"
TEMPLATE_FILES = (
    "summary.md.j2",
    "comment.md.j2",
    "inline.md.j2",
    "review_body.md.j2",
    "macros.md.j2",
    "prompts/system.j2",
    "prompts/review.j2",
    "prompts/repair.j2",
    "prompts/verify.j2",
    "i18n/en.yml",
    "i18n/zh-CN.yml",
)
Warn = Callable[[str], None]


def repo_config(
    client: GitHubClient,
    source: GitHubSource,
    *,
    config_file: str | None = None,
    config_path: str = DEFAULT_CONFIG_PATH,
    overrides: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
) -> Config:
    """Config from a local file when named, else from the PR's BASE branch (never the PR's head)."""
    if config_file:
        file_layer = load_config_file(config_file, required=True)
    else:
        pull = source.pull_info()
        text = client.file_text(pull.base_repo or source.repo, config_path, pull.base_sha)
        file_layer = parse_config_text(text, config_path) if text is not None else {}
    return build_config(
        file_layer=file_layer, env=env_layer(env if env is not None else os.environ), overrides=overrides
    )


def base_templates(
    client: GitHubClient, repo: str, base_sha: str, template_dir: str, scratch: Path
) -> tuple[Path, int]:
    """Copy the template overrides found under `template_dir` at the base sha into `scratch`."""
    found = 0
    for name in TEMPLATE_FILES:
        text = client.file_text(repo, f"{template_dir.strip('/')}/{name}", base_sha)
        if text is None:
            continue
        target = scratch / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        found += 1
    return scratch, found


@dataclass(frozen=True)
class PriorReview:
    """What our sticky comment says about the last review, and whether it makes this run a no-op."""

    state: dict[str, Any] | None
    comment_url: str | None
    same: bool


def prior_review(
    client: GitHubClient,
    repo: str,
    number: int,
    *,
    login: str,
    head_sha: str,
    config: Config,
    renderer: Renderer,
) -> PriorReview:
    """DESIGN 6: a rerun at a reviewed head, same config hash, verdict not incomplete → skip the model."""
    from reviewer.publish import find_sticky, parse_state

    try:
        sticky = find_sticky(client, repo, number, login=login)
    except GitHubError:
        return PriorReview(None, None, False)
    state = parse_state(sticky.body) if sticky else None
    same = bool(
        state
        and state.get("head") == head_sha
        and state.get("config") == config_hash(config, renderer.templates_digest())
        and state.get("verdict") not in (None, "incomplete")
    )
    return PriorReview(state, sticky.url if sticky else None, same)


def pr_publisher(
    client: GitHubClient,
    repo: str,
    number: int,
    config: Config,
    renderer: Renderer,
    *,
    login: str,
    post_comment: bool,
    inline_comments: bool,
    warn: Warn,
) -> Callable[[Report, str, LineIndex], Sequence[Published]]:
    """The PR sinks in order: sticky comment, then the inline review; a 403 stops further writes."""
    from reviewer.publish import post_inline_review, upsert_sticky

    def publish(report: Report, comment: str, index: LineIndex) -> Sequence[Published]:
        results: list[Published] = []
        if post_comment:
            results.append(upsert_sticky(client, repo, number, body=comment, login=login))
        read_only = any(not r.ok and "read-only" in r.detail for r in results)
        if inline_comments and not read_only:
            published = _published_findings(report.findings, config.max_findings)
            data = report.to_dict()
            by_id = {f["id"]: f for f in data["findings"]}
            results.append(
                post_inline_review(
                    client,
                    repo,
                    number,
                    head_sha=report.snapshot.head.sha,
                    body=renderer.review_body(data),
                    comments=[(f, renderer.inline(by_id[f.id])) for f in published],
                    index=index,
                    login=login,
                    fold=lambda fs: renderer.review_body(data, folded=[by_id[f.id] for f in fs]),
                )
            )
        for r in results:
            if not r.ok:
                warn(f"imreview: {r.sink}: {r.detail}")
        return results

    return publish


@dataclass(frozen=True)
class PrWriting:
    """What writing to one PR needs: the last review our sticky comment recorded, and the sinks."""

    prior: PriorReview
    publisher: Callable[[Report, str, LineIndex], Sequence[Published]] | None


NO_WRITING = PrWriting(PriorReview(None, None, False), None)


def prepare_writing(
    client: GitHubClient,
    repo: str,
    number: int,
    config: Config,
    renderer: Renderer,
    *,
    head_sha: str,
    post_comment: bool,
    inline_comments: bool,
    warn: Warn,
) -> PrWriting:
    """Our identity, the prior state from our sticky comment, and the publisher (none when no sink is on)."""
    if not (post_comment or inline_comments):
        return NO_WRITING
    login = viewer_login(client)
    prior = prior_review(
        client, repo, number, login=login, head_sha=head_sha, config=config, renderer=renderer
    )
    publisher = pr_publisher(
        client,
        repo,
        number,
        config,
        renderer,
        login=login,
        post_comment=post_comment,
        inline_comments=inline_comments,
        warn=warn,
    )
    return PrWriting(prior, publisher)


def _published_findings(findings: Sequence[Finding], limit: int) -> list[Finding]:
    return [f for f in findings[: max(0, limit)] if f.anchored]


def viewer_login(client: GitHubClient) -> str:
    try:
        return client.viewer_login()
    except NoWriteAccess:
        return "github-actions[bot]"
