"""Suite-wide: tests that need the sandbox GitHub on 127.0.0.N:80 skip, with the reason, when
this process may not bind port 80 (not root, no CAP_NET_BIND_SERVICE). The one place that
probes is ``free_loopback_address``; its ``LoopbackPortDenied`` becomes a skip here, whether it
is raised in a fixture or in a test body.

Also the real PostgreSQL of the tests: one throwaway cluster per run (``postgres_cluster``) and
a fresh database per test (``pg_dsn``)."""

from __future__ import annotations

import os
import uuid

import pytest

from dsh_github_reviewer.testing import LoopbackPortDenied

# Fixtures that start a real server or process: a test using one is slow by the marker's own
# definition ("spawns processes or real servers"), whether or not it says so, so that
# ``-m "not slow"`` is the fast unit set.
SLOW_FIXTURES = frozenset({"pg_dsn", "postgres_cluster", "sandbox80", "browser", "page"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) \
                or "/tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.slow)


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


# -- a real PostgreSQL ------------------------------------------------------------------------

@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway cluster for the whole run (initdb in a temp dir, a free loopback port),
    stopped and deleted at the end. Without a server binary the tests that need it skip with
    the reason, unless DSH_TEST_POSTGRES=required (scripts/test, hence CI) makes it a failure."""
    from dsh_harness.testing.postgres import PostgresCluster, PostgresUnavailable

    try:
        cluster = PostgresCluster().start()
    except PostgresUnavailable as exc:
        if os.environ.get("DSH_TEST_POSTGRES") == "required":
            pytest.fail(f"DSH_TEST_POSTGRES=required: {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_dsn(postgres_cluster):
    """A fresh, empty database on the test cluster for one test (dropped afterwards)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_cluster.dsn(name)
    finally:
        with psycopg.connect(postgres_cluster.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
