"""Suite-wide: tests that need the sandbox GitHub on 127.0.0.N:80 skip, with the reason, when
this process may not bind port 80 (not root, no CAP_NET_BIND_SERVICE). The one place that
probes is ``free_loopback_address``; its ``LoopbackPortDenied`` becomes a skip here, whether it
is raised in a fixture or in a test body."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing import LoopbackPortDenied


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    try:
        return (yield)
    except LoopbackPortDenied as exc:
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except LoopbackPortDenied as exc:
        pytest.skip(str(exc))
