"""Publishing sinks, checked the way the runner and GitHub would read what we write."""

from __future__ import annotations

import functools
import io
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from reviewer import publish
from reviewer.publish import find_sticky, fit_comment, post_inline_review, upsert_sticky, utf16_len
from reviewer.report import Finding
from reviewer.runner_sinks import annotate, echo_untrusted, mask, write_outputs, write_summary
from reviewer.source.github import CommentInfo, GitHubClient
from reviewer.state import MARKER_PREFIX, STATE_KEY_ENV, parse_state, sign_sticky, state_key, state_marker
from tests.factories import (
    BASE,
    HEAD,
    REPO,
    add_two_file_pull,
    fake_github,
    finding,
    github_client,
    line_index,
)
from tests.fakes.github_server import FakeGitHub
from tests.fakes.runner_files import runner_outputs

make_finding = functools.partial(
    finding,
    title="Off-by-one in the page loop",
    path="src/app.py",
    line=12,
    trigger="a list with exactly one page",
    observation="The loop stops one page early.",
    suggestion="Use range(n + 1).",
    quote="for i in range(n):",
    anchored=True,
    anchor_reason="exact",
)


# --- workflow-command reader (the runner's rules, re-implemented) -------------------------------


def _unescape(value: str, *, prop: bool) -> str:
    if prop:
        value = value.replace("%3A", ":").replace("%2C", ",")
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def runner_commands(log: str) -> list[tuple[str, dict[str, str], str]]:
    """Workflow commands the runner would act on, honouring ::stop-commands::."""
    commands = []
    resume: str | None = None
    for line in log.split("\n"):
        line = line.strip()
        if resume is not None:
            if line == f"::{resume}::":
                resume = None
            continue
        if not line.startswith("::"):
            continue
        end = line.find("::", 2)
        if end < 0:
            continue
        info, message = line[2:end], line[end + 2 :]
        name, _, raw_props = info.partition(" ")
        props = {}
        for pair in filter(None, raw_props.split(",")):
            key, _, value = pair.partition("=")
            props[key] = _unescape(value, prop=True)
        if name == "stop-commands":
            resume = message
        commands.append((name, props, _unescape(message, prop=False)))
    return commands


# --- job summary -------------------------------------------------------------------------------


def test_summary_appends(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("# earlier step\n", encoding="utf-8")
    first = write_summary(path, "## imreview\n\nclean\n")
    second = write_summary(str(path), "## second PR\n")
    assert first.ok and second.ok
    assert first.sink == "summary"
    assert path.read_text(encoding="utf-8") == "# earlier step\n## imreview\n\nclean\n## second PR\n"


def test_summary_outside_actions_is_not_ok() -> None:
    result = write_summary(None, "text")
    assert not result.ok
    assert "not in Actions" in result.detail
    assert not write_summary("", "text").ok


def test_summary_cap_cuts_multibyte_text_at_a_line_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("x" * 100 + "\n", encoding="utf-8")
    lines = [f"第{i}行：审查发现 — ünïcödé 😀\n" for i in range(200)]
    text = "".join(lines)
    result = write_summary(path, text, limit_bytes=2_000)
    raw = path.read_bytes()
    assert result.ok
    assert "truncated" in result.detail
    assert len(raw) <= 2_000
    written = raw.decode("utf-8")[101:]
    assert "Truncated" in written
    kept = written[: written.index("\n>")]
    assert kept and kept.endswith("\n")
    assert text.startswith(kept)
    assert set(kept.splitlines(keepends=True)) <= set(lines)


def test_summary_default_cap_is_under_githubs_one_mebibyte(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    result = write_summary(path, "审查\n" * 200_000)
    assert result.ok
    size = path.stat().st_size
    assert 900_000 < size <= 1_000_000
    assert "Truncated" in path.read_text(encoding="utf-8")


def test_summary_already_at_the_cap_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_bytes(b"x" * 99 + b"\n")
    result = write_summary(path, "one more line\n", limit_bytes=100)
    assert not result.ok and "nothing appended" in result.detail
    assert path.read_bytes() == b"x" * 99 + b"\n"


def test_summary_closes_a_code_fence_cut_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    write_summary(path, "intro\n```diff\n" + "+ added line\n" * 500 + "```\n", limit_bytes=1_000)
    text = path.read_text(encoding="utf-8")
    before_note = text[: text.index("> **Truncated")]
    assert before_note.count("```") % 2 == 0


# --- outputs -----------------------------------------------------------------------------------


def test_outputs_heredoc_round_trip_through_the_runners_parser(tmp_path: Path) -> None:
    path = tmp_path / "output"
    path.write_text("earlier=1\n", encoding="utf-8")
    hostile = "line one\nverdict=clean\nghadelimiter_00000000-0000-0000-0000-000000000000\nx<<y\n"
    outputs = {
        "verdict": "findings",
        "matrix": json.dumps({"include": [{"pr": 1}, {"pr": 2}]}),
        "comment-url": "https://github.com/o/r/pull/1#issuecomment-1\nhttps://github.com/o/r/pull/2#issuecomment-2",
        "max-priority": "",
        "report-path": hostile,
    }
    write_outputs(path, outputs)
    text = path.read_text(encoding="utf-8")
    assert runner_outputs(text) == {"earlier": "1", **outputs}
    delimiters = re.findall(r"^[\w-]+<<(ghadelimiter_.*)$", text, re.M)
    assert len(delimiters) == len(outputs) == len(set(delimiters))
    assert all(re.fullmatch(r"ghadelimiter_[0-9a-f-]{36}", d) for d in delimiters)


def test_outputs_unset_path_writes_nothing(tmp_path: Path) -> None:
    write_outputs(None, {"verdict": "clean"})
    assert list(tmp_path.iterdir()) == []


def test_outputs_reject_a_bad_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="output name"):
        write_outputs(tmp_path / "o", {"a\nb": "x"})


# --- annotations, stop-commands, masks ---------------------------------------------------------


def test_annotation_text_cannot_inject_commands() -> None:
    title = "evil::error file=x.py::pwned, 100% : done\r\n::add-mask::token"
    observation = "first\n::error::injected\n%0A stays literal, commas, colons: ::"
    finding = make_finding(title=title, observation=observation, path="dir,a:b/f%.py", end_line=14)
    stream = io.StringIO()
    assert annotate([finding], stream) == (1, 0)
    log = stream.getvalue()
    assert log.count("\n") == 1
    [(name, props, message)] = runner_commands(log)
    assert name == "warning"
    assert props == {
        "file": "dir,a:b/f%.py",
        "line": "12",
        "endLine": "14",
        "title": f"[P2] {title}",
    }
    assert message.startswith(observation)
    assert "Use range(n + 1)." in message


def test_annotations_levels_and_the_ten_per_level_cap() -> None:
    p1 = [make_finding(priority="P1", title=f"p1 {i}") for i in range(3)]
    p2 = [make_finding(priority="P2", title=f"p2 {i}") for i in range(12)]
    p3 = [make_finding(priority="P3", title=f"p3 {i}") for i in range(11)]
    unanchored = make_finding(anchored=False, title="floating")
    removed_line = make_finding(side="LEFT", title="on a removed line")
    stream = io.StringIO()
    printed_dropped = annotate([*p2, unanchored, *p3, removed_line, *p1], stream)
    commands = runner_commands(stream.getvalue())
    levels = [name for name, _, _ in commands]
    assert levels.count("warning") == 10
    assert levels.count("notice") == 10
    assert printed_dropped == (20, 6)
    titles = [props["title"] for _, props, _ in commands]
    assert all(f"[P1] p1 {i}" in titles for i in range(3))
    assert not any("floating" in t or "removed line" in t for t in titles)


def test_echo_untrusted_switches_commands_off() -> None:
    stream = io.StringIO()
    echo_untrusted(stream, "PR title\n::error::fake\n::set-output name=verdict::clean")
    echo_untrusted(stream, "::warning::again")
    log = stream.getvalue()
    commands = runner_commands(log)
    assert [name for name, _, _ in commands] == ["stop-commands", "stop-commands"]
    tokens = [message for _, _, message in commands]
    assert tokens[0] != tokens[1]
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in tokens)
    assert "::error::fake" in log


def test_mask_keeps_a_multiline_secret_in_one_command() -> None:
    stream = io.StringIO()
    mask(stream, "line1\nline2%")
    mask(stream, "   ")
    assert stream.getvalue() == "::add-mask::line1%0Aline2%25\n"
    [(name, _, value)] = runner_commands(stream.getvalue())
    assert (name, value) == ("add-mask", "line1\nline2%")


# --- markers and sizes -------------------------------------------------------------------------


def sample_state(**overrides: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "head": HEAD,
        "base": BASE,
        "config": "3f2a9c",
        "model": "openai/gpt-4o-mini",
        "cost_usd": 0.0123,
        "total_cost_usd": 0.0456,
        "reviewed_heads": [BASE, HEAD],
        "verdict": "findings",
        "findings": 2,
        "p1": 0,
        "max_priority": "P2",
    }
    state.update(overrides)
    return state


def test_state_marker_round_trips_and_stays_one_line() -> None:
    state = sample_state()
    marker = state_marker(state)
    assert marker.startswith(MARKER_PREFIX) and marker.endswith(" -->")
    assert "\n" not in marker
    assert list(json.loads(marker[len(MARKER_PREFIX) : -4])) == list(state)
    assert parse_state(f"## Review\n\nbody text\n\n{marker}\n") == state


def test_state_marker_values_cannot_close_the_html_comment() -> None:
    state = sample_state(model="evil --> <!-- x --!> & \u2028 done", verdict="-->")
    marker = state_marker(state)
    assert marker.count("-->") == 1 and marker.endswith("-->")
    assert "--!>" not in marker and "\u2028" not in marker
    assert parse_state("text\r\n" + marker + "\r\n") == state


@pytest.mark.parametrize(
    "body",
    [
        "",
        "no marker here",
        f'{MARKER_PREFIX}{{"head": "x"}} -->\nsomething after the marker',
        f"text\n{MARKER_PREFIX}{{not json -->",
        f"text\n{MARKER_PREFIX}[1, 2] -->",
        f'text\n{MARKER_PREFIX}{{"a": 1}}',
    ],
)
def test_parse_state_tolerates_junk(body: str) -> None:
    assert parse_state(body) is None


def test_state_marker_requires_full_shas() -> None:
    with pytest.raises(ValueError, match="40-character"):
        state_marker(sample_state(head=HEAD[:7]))
    with pytest.raises(ValueError, match="'base'"):
        state_marker(sample_state(base=""))
    junk_heads = state_marker(sample_state(reviewed_heads=["abc", HEAD, 7]))
    assert parse_state(junk_heads)["reviewed_heads"] == [HEAD]


def test_fit_comment_counts_utf16_and_keeps_the_marker() -> None:
    marker = state_marker(sample_state())
    text = "😀😀😀😀 emoji\n" * 5_000 + marker
    assert len(text) < 60_000 < utf16_len(text)
    fitted = fit_comment(text, 60_000)
    assert utf16_len(fitted) <= 60_000
    assert fitted.endswith("\n" + marker)
    assert parse_state(fitted) == sample_state()
    assert "truncated" in fitted
    assert fit_comment("short", 60_000) == "short"


def test_fit_comment_default_limit_is_60000() -> None:
    assert utf16_len(fit_comment("a" * 70_000)) <= publish.COMMENT_LIMIT == 60_000


# --- GitHub sinks, against the loopback fake GitHub --------------------------------------------


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    # "ours" is an Actions GITHUB_TOKEN: comments appear as github-actions[bot]
    tokens = {"ours": {}, "theirs": {"login": "mallory"}, "read-only": {"write": False}}
    with fake_github(tokens, strict=True) as server:
        add_two_file_pull(server)
        yield server


client = github_client


def writes(gh: FakeGitHub) -> list[str]:
    return [f"{r.method} {r.path}" for r in gh.requests if r.method != "GET"]


@pytest.fixture(autouse=True)
def state_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow's secret that signs our state marker (a model API key or IMREVIEW_STATE_KEY)."""
    monkeypatch.setenv(STATE_KEY_ENV, "test-state-secret-0123456789abcdefgh")


def sticky_body(text: str, **state: Any) -> str:
    """A sticky comment as we write it: the state marker signed with the workflow's key."""
    body = f"{text}\n\n{state_marker(sample_state(**state))}"
    return sign_sticky(body, repo=REPO, number=7, key=state_key())


def test_sticky_is_created_once_then_edited_in_place(gh: FakeGitHub) -> None:
    api = client(gh)
    login = api.viewer_login()
    results = [
        upsert_sticky(api, REPO, 7, body=sticky_body(f"run {i}", findings=i), login=login) for i in range(3)
    ]
    assert [r.ok for r in results] == [True, True, True]
    assert "created" in results[0].detail and "updated" in results[2].detail
    [comment] = gh.comments(REPO, 7)
    assert comment["user"]["login"] == login == "github-actions[bot]"
    assert parse_state(comment["body"])["findings"] == 2
    assert comment["body"].startswith("run 2")
    assert results[0].url == results[2].url == comment["html_url"]
    assert [w.split()[0] for w in writes(gh)] == ["POST", "PATCH", "PATCH"]


def test_sticky_ignores_someone_elses_copy_of_the_marker(gh: FakeGitHub) -> None:
    body = sticky_body("looks like ours")
    client(gh, "theirs").create_issue_comment(REPO, 7, body)
    api = client(gh)
    login = api.viewer_login()
    assert find_sticky(api, REPO, 7, login=login) is None
    result = upsert_sticky(api, REPO, 7, body=sticky_body("the real one"), login=login)
    assert result.ok
    comments = gh.comments(REPO, 7)
    assert [(c["user"]["login"], c["body"].split("\n")[0]) for c in comments] == [
        ("mallory", "looks like ours"),
        ("github-actions[bot]", "the real one"),
    ]


def test_sticky_marker_must_be_on_the_last_line(gh: FakeGitHub) -> None:
    api = client(gh)
    login = api.viewer_login()
    api.create_issue_comment(REPO, 7, f"quoting {state_marker(sample_state())}\nnot a sticky comment")
    assert find_sticky(api, REPO, 7, login=login) is None


def test_sticky_deletes_our_own_newer_duplicates(gh: FakeGitHub) -> None:
    api = client(gh)
    login = api.viewer_login()
    first = api.create_issue_comment(REPO, 7, sticky_body("old 1"))
    api.create_issue_comment(REPO, 7, sticky_body("old 2"))
    assert find_sticky(api, REPO, 7, login=login) == first
    result = upsert_sticky(api, REPO, 7, body=sticky_body("fresh"), login=login)
    assert result.ok and "removed 1 duplicate" in result.detail
    [comment] = gh.comments(REPO, 7)
    assert comment["id"] == first.id
    assert comment["body"].startswith("fresh")


class RacingClient(GitHubClient):
    """Another run of the workflow posts its sticky comment just before ours lands."""

    def __init__(self, gh: FakeGitHub) -> None:
        super().__init__("ours", gh.url, seconds_between_writes=0.0)
        self.other_run = github_client(gh)

    def create_issue_comment(self, repo: str, number: int, body: str) -> CommentInfo:
        self.other_run.create_issue_comment(repo, number, sticky_body("other run"))
        return super().create_issue_comment(repo, number, body)


def test_sticky_race_keeps_the_lowest_id_with_our_body(gh: FakeGitHub) -> None:
    api = RacingClient(gh)
    result = upsert_sticky(api, REPO, 7, body=sticky_body("ours"), login=api.viewer_login())
    assert result.ok
    [comment] = gh.comments(REPO, 7)
    assert comment["body"].startswith("ours")
    assert comment["html_url"] == result.url


def test_sticky_with_a_read_only_token_degrades_and_stops_writing(gh: FakeGitHub) -> None:
    api = client(gh, "read-only")
    result = upsert_sticky(api, REPO, 7, body=sticky_body("x"), login=api.viewer_login())
    assert not result.ok
    assert "read-only" in result.detail and "summary" in result.detail
    assert writes(gh) == ["POST /repos/o/r/issues/7/comments"]
    assert gh.comments(REPO, 7) == []


def test_sticky_post_is_never_retried_blindly(gh: FakeGitHub) -> None:
    gh.fail("POST", r"/issues/7/comments$", 502)
    api = client(gh)
    result = upsert_sticky(api, REPO, 7, body=sticky_body("x"), login=api.viewer_login())
    assert not result.ok and "502" in result.detail
    assert writes(gh) == ["POST /repos/o/r/issues/7/comments"]


def test_sticky_refuses_a_body_github_would_reject(gh: FakeGitHub) -> None:
    api = client(gh)
    result = upsert_sticky(api, REPO, 7, body="😀" * 40_000, login=api.viewer_login())
    assert not result.ok and "65,536" in result.detail
    assert writes(gh) == []


def fold(findings: Sequence[Finding]) -> str:
    return "\n".join(f"- FOLDED {f.path}:{f.line} {f.title}" for f in findings)


def review(gh: FakeGitHub, comments: Sequence[tuple[Finding, str]], api: GitHubClient | None = None):
    api = api or client(gh)
    return post_inline_review(
        api,
        REPO,
        7,
        head_sha=HEAD,
        body="## imreview\n\nTwo findings.",
        comments=comments,
        index=line_index(),
        login=api.viewer_login(),
        fold=fold,
    )


def mixed_findings() -> list[tuple[Finding, str]]:
    findings = [
        make_finding(title="single", line=11),
        make_finding(title="range in one hunk", line=11, end_line=12),
        make_finding(title="range across hunks", line=13, end_line=42),
        make_finding(title="removed line", line=11, side="LEFT"),
        make_finding(title="model made up this line", line=30),
        make_finding(title="other file", path="src/missing.py", line=11),
        make_finding(title="unanchored", line=12, anchored=False),
    ]
    return [(f, f"**{f.title}**") for f in findings]


def posted_reviews(gh: FakeGitHub) -> list[dict[str, Any]]:
    return gh.reviews(REPO, 7)


def test_inline_review_posts_only_commentable_lines(gh: FakeGitHub) -> None:
    result = review(gh, mixed_findings())
    assert result.ok and result.sink == "review"
    [posted] = posted_reviews(gh)
    assert posted["state"] == "COMMENTED"
    assert posted["commit_id"] == HEAD
    index = line_index()
    for c in posted["comments"]:
        assert index.commentable(c["path"], c["line"], c["side"]), c
        if "start_line" in c:
            assert c["start_line"] < c["line"]
            assert index.range_commentable(c["path"], c["start_line"], c["line"], c["side"]), c
    placed = {(c["body"], c["line"], c.get("start_line"), c["side"]) for c in posted["comments"]}
    assert placed == {
        ("**single**", 11, None, "RIGHT"),
        ("**range in one hunk**", 12, 11, "RIGHT"),
        ("**range across hunks**", 13, None, "RIGHT"),
        ("**removed line**", 11, None, "LEFT"),
    }
    marker = publish.parse_review_marker(posted["body"])
    assert marker is not None and marker["head"] == HEAD
    assert len(marker["ids"]) == 4
    assert posted["body"].startswith("## imreview")


def test_inline_review_retries_once_without_comments_on_422(gh: FakeGitHub) -> None:
    gh.fail("POST", r"/pulls/7/reviews$", 422, {"message": "Unprocessable Entity", "errors": ["nope"]})
    result = review(gh, mixed_findings())
    assert result.ok and "rejected" in result.detail
    posts = gh.requests_to("POST", r"/pulls/7/reviews$")
    assert len(posts) == 2
    assert posts[0].body["comments"]
    assert not posts[1].body.get("comments")
    assert posts[1].body["event"] == "COMMENT"
    [posted] = posted_reviews(gh)
    assert posted["comments"] == []
    assert "FOLDED src/app.py:11 single" in posted["body"]
    assert "FOLDED src/app.py:11 removed line" in posted["body"]
    assert "made up" not in posted["body"]
    assert publish.parse_review_marker(posted["body"]) is not None


def test_inline_review_gives_up_after_one_retry(gh: FakeGitHub) -> None:
    gh.fail("POST", r"/pulls/7/reviews$", 422, times=5)
    result = review(gh, mixed_findings())
    assert not result.ok
    assert len(gh.requests_to("POST", r"/pulls/7/reviews$")) == 2


def test_inline_review_same_ids_twice_posts_once(gh: FakeGitHub) -> None:
    first = review(gh, mixed_findings())
    second = review(gh, mixed_findings())
    assert first.ok and second.ok
    assert second.detail == "no new findings"
    assert len(gh.requests_to("POST", r"/pulls/7/reviews$")) == 1
    newcomer = make_finding(title="found on the rerun", line=42)
    third = review(gh, [*mixed_findings(), (newcomer, "**new**")])
    assert third.ok
    latest = posted_reviews(gh)[-1]
    assert [c["body"] for c in latest["comments"]] == ["**new**"]


def test_inline_review_ids_in_someone_elses_review_do_not_count(gh: FakeGitHub) -> None:
    findings = mixed_findings()
    other = client(gh, "theirs")
    fake_marker = publish.review_marker(HEAD, [f.id for f, _ in findings])
    other.create_review(REPO, 7, commit_sha=HEAD, body=f"copied\n{fake_marker}", comments=[])
    assert review(gh, findings).detail != "no new findings"
    assert len(gh.requests_to("POST", r"/pulls/7/reviews$")) == 2


def test_inline_review_caps_at_30_comments_and_folds_the_rest(gh: FakeGitHub) -> None:
    findings = [(make_finding(title=f"t{i}", path="src/wide.py", line=i), f"c{i}") for i in range(1, 36)]
    result = review(gh, findings)
    assert result.ok and "5 more folded" in result.detail
    [posted] = posted_reviews(gh)
    assert len(posted["comments"]) == 30
    assert "FOLDED src/wide.py:35 t35" in posted["body"]
    assert len(publish.parse_review_marker(posted["body"])["ids"]) == 35


def test_inline_review_with_nothing_commentable_posts_nothing(gh: FakeGitHub) -> None:
    only_bad = [(make_finding(title="nowhere", line=99), "x")]
    result = review(gh, only_bad)
    assert (result.ok, result.detail) == (True, "no new findings")
    assert writes(gh) == []


def test_inline_review_with_a_read_only_token(gh: FakeGitHub) -> None:
    result = review(gh, mixed_findings(), api=client(gh, "read-only"))
    assert not result.ok and "read-only" in result.detail
    assert len(writes(gh)) == 1
