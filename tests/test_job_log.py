"""What lands in a job log: no alarming line for a request that is expected to fail."""

from __future__ import annotations

import logging

import pytest

from reviewer.source.github import GitHubClient
from tests.factories import fake_github


def test_the_expected_403_of_get_user_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with fake_github({"actions-token": {}}) as gh:
        caplog.set_level(logging.DEBUG)
        assert GitHubClient("actions-token", gh.url).viewer_login() == "github-actions[bot]"
        assert any(r.method == "GET" and r.path.endswith("/user") for r in gh.requests), "the probe ran"
    assert not [r for r in caplog.records if "failed with 403" in r.getMessage()]


def test_other_403s_are_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    logging.getLogger("github.GithubRetry").info("Request GET /repos/o/r/pulls failed with 403: Forbidden")
    assert [r.getMessage() for r in caplog.records] == [
        "Request GET /repos/o/r/pulls failed with 403: Forbidden"
    ]
