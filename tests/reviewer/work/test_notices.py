"""A give-up comment is public: it never quotes a raw GitHub or model provider body."""

from __future__ import annotations

from datetime import UTC, datetime

from dsh_github_reviewer.work.notices import notice_body, public_error
from dsh_github_reviewer.work.records import Notice


def test_a_response_body_is_cut_to_its_status():
    provider = ("turn ended: error: provider 'deepseek': HTTP 401: {\"error\": {\"message\": "
                "\"Incorrect API key provided: sk-a****wxyz\"}}")
    assert public_error(provider) == "turn ended: error: provider 'deepseek': HTTP 401"
    github = "GET repos/o/r/pulls/1: HTTP 502: <html>upstream\n proxy.internal:8443</html>"
    assert public_error(github) == "GET repos/o/r/pulls/1: HTTP 502"
    assert public_error("ConnectError from api.github.com: refused") == (
        "ConnectError from api.github.com: refused")


def test_the_notice_shows_the_public_error_only():
    notice = Notice(trigger="demo:auto:abc", what="the review of head abc",
                    error="provider 'x': HTTP 500: {\"detail\": \"db01 timeout at 10.0.0.7\"}",
                    created_at=datetime(2026, 1, 1, tzinfo=UTC))
    body = notice_body(notice, 5)
    assert "Last error: `provider 'x': HTTP 500`." in body
    assert "10.0.0.7" not in body and "detail" not in body
