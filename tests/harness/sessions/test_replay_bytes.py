"""Byte stability: requests for the same history are the bytes main sent before this code.

The fixtures were recorded with the SDK's ``chat.completions.create`` path (see replay_kit).
Compaction summary requests changed on purpose since (they continue the session's prompt):
``assert_same_requests`` checks them as prefixes of the session's requests instead.
"""

from __future__ import annotations

import shutil

import pytest

from dsh_harness.sessions.jsonl_store import file_name
from tests.harness.replay_kit import (
    FIXTURE,
    OLD_LOG_ID,
    RawServer,
    assert_same_requests,
    policy,
    read_raw,
    resume_old_log,
    same_history,
)


@pytest.mark.parametrize("replay", ["all", "current_turn"])
async def test_same_history_same_request_bytes(tmp_path, replay):
    with RawServer(policy=policy) as server:
        await same_history(tmp_path, server, replay)
    assert_same_requests(server.raw, read_raw(FIXTURE / f"same_history_{replay}.jsonl"))
    # Sent in pieces (the transcript's runs), framed as one body of a known length, as the
    # SDK's create sent it: no chunked transfer encoding, which some providers refuse.
    assert server.framing == [(str(len(body)), None) for body in server.raw]


async def test_a_log_written_before_attempts_replays_unchanged(tmp_path):
    """Its deadline and error turns were replayed then (closed with synthesized results) and
    still are; only attempts that fail from now on are left out of the replay."""
    sessions = tmp_path / "home" / "sessions"
    sessions.mkdir(parents=True)
    shutil.copy(FIXTURE / "old_log.session.jsonl", sessions / file_name(OLD_LOG_ID))
    with RawServer(policy=policy) as server:
        await resume_old_log(tmp_path, server)
    assert server.raw == read_raw(FIXTURE / "old_log_resumed.jsonl")


@pytest.mark.parametrize("how", ["postgres", "jsonl_copied_to_postgres"])
async def test_postgres_sessions_send_the_same_request_bytes(tmp_path, pg_dsn, how):
    """The same five turns (compaction and a restart included) on the postgres store, or
    written by the JSONL store, copied with ``sessions copy`` and resumed on postgres, send
    exactly the requests recorded on main: the provider's prefix cache hits across stores."""
    from dsh_harness.sessions.copy import copy_sessions
    from dsh_harness.sessions.jsonl_store import JsonlSessionStore
    from dsh_harness.sessions.postgres_store import PostgresSessionStore
    from tests.harness.agent_kit import make_harness
    from tests.harness.replay_kit import COMPACTION, TURNS

    sid = "test:same:all"
    extra = 'reasoning_replay = "all"\n' + COMPACTION
    on_pg = extra + f'[sessions]\nstore = "postgres"\ndsn = "{pg_dsn}"\n'
    with RawServer(policy=policy) as server:
        h = make_harness(tmp_path, server.base_url, on_pg if how == "postgres" else extra)
        agent = await h.agents.create(sid)
        for text in TURNS[:3]:
            assert (await agent.followup(text)).ok
        await h.close()
        if how != "postgres":
            jsonl, pg = JsonlSessionStore(tmp_path / "home" / "sessions"), \
                PostgresSessionStore(pg_dsn)
            report = await copy_sessions(jsonl, pg, ids=[sid], force=False,
                                         backup_dir=tmp_path / "bk")
            assert report.copied == [sid]
            await pg.close()
        h = make_harness(tmp_path, server.base_url, on_pg)
        agent = await h.agents.resume(sid)
        for text in TURNS[3:]:
            assert (await agent.followup(text)).ok
        await h.close()
    assert_same_requests(server.raw, read_raw(FIXTURE / "same_history_all.jsonl"))
