"""zh-CN output: localized headers and labels, no English template strings left over."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import Repo, cli_env, run_cli
from tests.factories import review_args
from tests.fakes.github_server import FakeGitHub
from tests.fakes.model_server import FakeModelServer, text
from tests.test_action_e2e import Runner, add_pull, event_payload, finding, reviewer_model, with_model

# Words that are names, not prose: the product, Git/GitHub terms kept in Chinese technical writing.
ALLOWED = {
    "imreview",
    "CI",
    "head",
    "base",
    "merge",
    "token",
    "tokens",
    "hunk",
    "schema",
    "publish_ready",
    "id",
    "git",
    "GitHub",
    "diff",
}
ALLOWED |= {"MERGE", "DELETE", "INLINE", "MOVE"}  # signal kinds are the method's terms
# the test's own data: author, refs, repository, commit subject, the model's code words
ALLOWED |= {"Test", "Author", "feature", "work", "main", "HEAD", "repo", "sub", "div", "ZeroDivisionError"}


def _english_words(markdown: str) -> set[str]:
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)  # code spans: paths, shas, model names, quotes
    text = re.sub(r"\(https?://[^)]*\)", " ", text)
    text = re.sub(r"[\w./-]+\.(?:py|md|json)\b", " ", text)  # file paths in table cells
    text = re.sub(r"<[^>]+>", " ", text)  # <details>, <sub>
    text = re.sub(r"\b[0-9a-f]{7,40}\b", " ", text)  # commit shas
    return {w for w in re.findall(r"[A-Za-z_]{3,}", text) if w not in ALLOWED}


def test_zh_cn_summary_and_comment_have_no_english_template_strings(
    feature_repo: Repo, tmp_path: Path
) -> None:
    answer = {
        "findings": [
            {
                "path": "lib/util.py",
                "line": 2,
                "priority": "P2",
                "title": "b 为 0 时除零",
                "trigger": "div(1, 0)",
                "observation": "抛出 ZeroDivisionError",
                "suggestion": "先检查 b",
                "quote": "return a / b",
                "confidence": 0.8,
            },
        ],
        "exclusions": [{"claim": "sub 少减了一", "reason": "调用方期望如此", "path": "app.py", "line": 6}],
        "signals": [{"kind": "DELETE", "target": "app.py:1", "into": "", "reason": "无人调用"}],
    }

    def handler(body):
        prompt = body["messages"][-1]["content"]
        if '"verdicts"' in prompt:
            ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, flags=re.M)
            return text(json.dumps({"verdicts": [{"id": i, "holds": True, "reason": "可达"} for i in ids]}))
        return text(json.dumps(answer))

    comment = tmp_path / "comment.md"
    with FakeModelServer(handler=handler) as server:
        proc = run_cli(
            review_args(feature_repo.path, server.api_base, "--language", "zh-CN", "--comment", str(comment)),
            cwd=tmp_path,
            env=cli_env(tmp_path),
        )
        system = server.requests[0]["messages"][0]["content"]
    assert proc.returncode == 0, proc.stderr
    summary = proc.stdout
    for heading in (
        "## 发现",
        "## 已排除项",
        "## 减法信号",
        "## 覆盖范围",
        "## 完成门",
        "## 预算",
    ):
        assert heading in summary
    assert "已解析 1/1" in summary and "均在限额内" in summary and "已检视 2" in summary
    assert "代码块（hunk）" in summary
    assert "触发点：" in summary and "失败阈值 从不" in summary
    assert "zh-CN" in system and "简体中文" in system
    summary_words = _english_words(summary.split("## 警告")[0].replace("zh-CN", ""))
    assert not summary_words, " ".join(sorted(summary_words))
    assert not _english_words(comment.read_text().split("<!--")[0]), _english_words(comment.read_text())


# Sentences the Python code used to write in English whatever the language (issue 19): the model
# client's warnings, the context and verification warnings, what the sinks did, the source's gaps,
# the skip reasons and the dropped findings' details. Each is now a key of templates/i18n.
MOVED = (
    *(
        f"warning.{name}"
        for name in (
            "unknown_window",
            "unknown_window_server",
            "no_price",
            "usage_mismatch",
            "context_read",
            "context_unavailable",
            "verification_skipped",
        )
    ),
    *(
        f"publish.{name}"
        for name in (
            "read_only",
            "comment_too_long",
            "comment_failed",
            "comment_created",
            "comment_updated",
            "comment_created_unchecked",
            "duplicates_removed",
            "duplicates_kept",
            "no_new_findings",
            "review_posted",
            "review_overflow",
            "review_folded",
            "review_failed",
            "review_unbound",
            "review_not_pending",
            "no_review",
            "nothing_refused",
            "annotations",
            "outputs_not_in_actions",
            "outputs_written",
            "write_failed",
            "summary_not_in_actions",
            "summary_full",
            "summary_write_failed",
            "summary_cut",
            "summary_appended",
        )
    ),
    "gap.files_capped",
    "gap.files_listed",
    "gap.merge_base_error",
    *(
        f"skip.{name}"
        for name in ("closed", "not_open", "draft", "bot", "unnamed_bot", "event", "no_event", "action")
    ),
    *(
        f"command_refusal.{name}"
        for name in (
            "not_created",
            "not_created_unnamed",
            "bot",
            "unnamed_bot",
            "not_a_pull",
            "not_a_command",
            "association",
            "association_nobody",
            "unknown",
            "no_finding",
        )
    ),
    "dropped_item.truncated",
    "dropped_item.example",
    "dropped_item.not_in_pr",
)


def _raw(language: str) -> dict[str, str]:
    from reviewer.render import Renderer

    return Renderer(language=language).messages("")


def _fragments(message: str) -> list[str]:
    """The literal words of a message between its placeholders, long enough to be telling."""
    return [part.strip(" ;:()") for part in re.split(r"\{\w+\}", message) if len(part.strip(" ;:()")) >= 8]


def _placeholders(message: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", message))


def test_the_moved_messages_are_in_both_languages_with_the_same_placeholders() -> None:
    en, zh = _raw("en"), _raw("zh-CN")
    assert [key for key in MOVED if key not in en] == []
    assert [key for key in MOVED if key not in zh or zh[key] == en[key]] == [], "translate them"
    differing = {key: (en[key], zh[key]) for key in MOVED if _placeholders(en[key]) != _placeholders(zh[key])}
    assert differing == {}


def _english_left(text: str, keys: tuple[str, ...] = MOVED) -> dict[str, str]:
    """English words of the moved messages found in `text` (names both languages keep aside)."""
    en, zh = _raw("en"), _raw("zh-CN")
    return {key: part for key in keys for part in _fragments(en[key]) if part in text and part not in zh[key]}


def _chinese_missing(text: str, keys: tuple[str, ...]) -> dict[str, str]:
    zh = _raw("zh-CN")
    return {key: part for key in keys for part in _fragments(zh[key])[:1] if part not in text}


def test_a_zh_cn_review_says_its_warnings_and_what_it_posted_in_chinese(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    """The newcomer's report: "created the sticky comment" and four English warnings in a zh-CN summary."""
    add_pull(gh)
    model.handler = reviewer_model({"app.py": [finding()]})
    run = runner.run(
        "pull_request",
        event_payload("pull_request.opened"),
        language="zh-CN",
        inline_comments="true",
        **with_model(model),
    )
    assert run.code == 0, run.stderr
    report = json.dumps(run.report(), ensure_ascii=False)
    for said in (run.summary, report):
        assert _english_left(said) == {}
    expected = (
        "warning.unknown_window_server",
        "warning.no_price",
        "warning.usage_mismatch",
        "warning.context_unavailable",
        "publish.comment_created",
        "publish.review_posted",
    )
    assert _chinese_missing(run.summary, expected) == {}
    assert "已创建汇总评论" in run.summary and "created the sticky comment" not in run.summary


def test_a_zh_cn_skip_says_why_in_chinese(gh: FakeGitHub, model: FakeModelServer, runner: Runner) -> None:
    add_pull(gh, draft=True)
    run = runner.run(
        "pull_request", event_payload("pull_request.opened.draft"), language="zh-CN", **with_model(model)
    )
    assert run.code == 0, run.stderr
    assert _english_left(run.summary) == {}
    assert _chinese_missing(run.summary, ("skip.draft",)) == {}
    assert "拉取请求是草稿" in run.summary


def test_a_zh_cn_refused_command_says_why_in_chinese(
    gh: FakeGitHub, model: FakeModelServer, runner: Runner
) -> None:
    from tests.test_comment_commands import BASE_SHA, REPO, pr_comment

    add_pull(gh)
    gh.add_content(REPO, BASE_SHA, ".github/imreview.yml", "maintainer_associations: [OWNER]\n")
    command = pr_comment(gh, "/imreview review", association="MEMBER")
    run = runner.run("issue_comment", command, language="zh-CN", **with_model(model))
    assert run.code == 0, run.stderr
    assert _english_left(run.summary) == {}
    assert _chinese_missing(run.summary, ("command_refusal.association",)) == {}
