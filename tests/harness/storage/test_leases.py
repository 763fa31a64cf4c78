"""Leases with fencing tokens: one holder at a time, takeover after expiry with a larger token,
late writes of a lost holder refused inside their own transaction. The postgres leases run on
the test cluster (two ``Leases`` objects are two replicas); ``LocalLeases`` keeps the same
contract within one process."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from dsh_harness import DomainSpec, LeaseLost
from dsh_harness.storage import Domain
from dsh_harness.storage.leases import LocalLeases
from dsh_harness.storage.postgres_backend import PostgresBackend


class Item(BaseModel):
    n: int


SPEC = DomainSpec(name="demo", version=1, tables={"items": Item})


@pytest.fixture(params=["local", "postgres"])
async def pair(request):
    """Two replicas' lease services on the same storage."""
    if request.param == "local":
        shared = LocalLeases("a")
        yield shared, LocalLeases("b", shared.table), None  # one process's table, two owners
        return
    backend = PostgresBackend(request.getfixturevalue("pg_dsn"))
    yield backend.leases("replica-a"), backend.leases("replica-b"), backend
    await backend.close()


async def test_one_holder_at_a_time_and_release_frees(pair):
    a, b, _ = pair
    lease = await a.acquire("pr:1", 60)
    assert lease is not None and lease.owner == a.owner
    assert await b.acquire("pr:1", 60) is None
    assert await b.acquire("pr:2", 60) is not None, "other names are independent"
    assert [x.name for x in await a.held("pr:")] == ["pr:1", "pr:2"]
    await a.release(lease)
    taken = await b.acquire("pr:1", 60)
    assert taken is not None and taken.token > lease.token


async def test_an_expired_lease_is_taken_over_and_the_old_holder_cannot_renew(pair):
    a, b, _ = pair
    old = await a.acquire("poll:acct", 0)  # expires at once: its holder stopped renewing
    new = await b.acquire("poll:acct", 60)
    assert new is not None and new.token > old.token
    assert await a.renew(old, 60) is None, "lost"
    await a.release(old)  # a no-op: it is not the holder's any more
    assert [x.owner for x in await b.held("poll:")] == [b.owner]
    renewed = await b.renew(new, 120)
    assert renewed is not None and renewed.token == new.token
    assert renewed.expires_at > new.expires_at


async def test_a_late_write_of_a_lost_holder_is_refused_by_its_token(pg_dsn):
    backend = PostgresBackend(pg_dsn)
    a, b = backend.leases("replica-a"), backend.leases("replica-b")
    d = await Domain.open(SPEC, backend)
    old = await a.acquire("pr:7", 0)
    with a.fenced(old):
        await d.put("items", "pr:7", Item(n=1))  # still its token: accepted
    new = await b.acquire("pr:7", 60)
    with b.fenced(new):
        await d.update("items", "pr:7", lambda cur: Item(n=cur.n + 10))
    with a.fenced(old):
        with pytest.raises(LeaseLost, match=r"'pr:7' with token .* is no longer held"):
            await d.put("items", "pr:7", Item(n=999))
        with pytest.raises(LeaseLost):
            async with d.transaction() as tx:
                tx.put("items", "other", Item(n=5))
    assert (await d.get("items", "pr:7")).n == 11
    assert await d.get("items", "other") is None
    await d.put("items", "unfenced", Item(n=1))  # outside a fence nothing is checked
    await d.close()
    await backend.close()


async def test_replicas_heartbeat_and_retire(pg_dsn):
    backend = PostgresBackend(pg_dsn)
    a, b = backend.leases("replica-a"), backend.leases("replica-b")
    await a.heartbeat({"version": "1"})
    await b.heartbeat()
    await a.heartbeat({"version": "2"})
    replicas = {r.id: r for r in await a.replicas()}
    assert set(replicas) == {"replica-a", "replica-b"}
    assert replicas["replica-a"].info == {"version": "2"}
    assert replicas["replica-a"].heartbeat_at >= replicas["replica-a"].started_at
    await a.acquire("pr:1", 60)
    await a.retire()
    assert [r.id for r in await b.replicas()] == ["replica-b"]
    assert await b.acquire("pr:1", 60) is not None, "a retired replica's leases are free"
    await backend.close()


async def test_harness_uses_shared_leases_only_on_a_shared_backend(tmp_path, pg_dsn):
    from dsh_harness import Harness, parse_config

    local = Harness(parse_config('home = "h"\n', "t.toml", tmp_path), load_entry_points=False)
    assert not local.leases.shared and local.leases.owner == local.replica_id
    shared = Harness(parse_config(f'home = "h"\n[storage]\nbackend = "postgres"\n'
                                  f'dsn = "{pg_dsn}"\n', "t.toml", tmp_path),
                     load_entry_points=False)
    assert shared.leases.shared
    await shared.startup()
    assert [r.id for r in await shared.leases.replicas()] == [shared.replica_id]
    await shared.plugins.acall_all("dsh_shutdown", harness=shared)
    other = PostgresBackend(pg_dsn)
    assert await other.leases("x").replicas() == [], "a clean shutdown retires the replica"
    await other.close()
    await shared.close()


async def test_a_lease_is_not_reentrant(pair):
    """Two tasks of one replica compete for it like two replicas (concurrency slots)."""
    a, _, _ = pair
    first = await a.acquire("slot:0", 60)
    assert first is not None and await a.acquire("slot:0", 60) is None
    await a.release(first)
    assert await a.acquire("slot:0", 60) is not None
