"""zh-CN output: localized headers and labels, no English template strings left over."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import Repo, cli_env, run_cli
from tests.factories import review_args
from tests.fakes.model_server import FakeModelServer, text

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
