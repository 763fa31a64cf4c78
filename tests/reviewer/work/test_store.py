"""The work records: v1 -> v2 migration on both backends, and the inbox's atomic write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel, ConfigDict

from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.work.records import DOMAIN, PrRecord, backoff, instructions_key
from dsh_github_reviewer.work.store import WorkStore, domain_spec
from dsh_harness import DomainSpec
from dsh_harness.storage import Domain
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class AnyV1(BaseModel):
    model_config = ConfigDict(extra="allow")


V1 = DomainSpec(name=DOMAIN, version=1, tables={"accounts": AnyV1})
INSTR = {"source": "acme/shop@main:.github/review_instructions.md", "text": "Be careful."}


def v1_entry(head: str, **extra) -> dict:
    return {"head_sha": head, "status": "reviewed", "updated_at": NOW.isoformat(),
            "reviewed_head_sha": head, "instructions": INSTR, "reviews_done": 1,
            "processed_comment_ids": [7], "last_seen_open_at": NOW.isoformat(), **extra}


def bot(comment_id: int) -> dict:
    return {"comment_id": comment_id, "kind": "bot", "source": "issue", "author": "m",
            "association": "MEMBER", "message": "hi", "created_at": NOW.isoformat()}


@pytest.fixture(params=["json", "sqlite"])
def backend(request, tmp_path):
    return (JsonBackend if request.param == "json" else SqliteBackend)(tmp_path / "storage")


async def test_v1_store_migrates_on_open(backend):
    old = await Domain.open(V1, backend)
    await old.put("accounts", "demo", AnyV1.model_validate({
        "prs": {"acme/shop#1": v1_entry("a" * 40, inflight=bot(11), queued=[bot(12)]),
                "acme/shop#2": v1_entry("b" * 40)},
        "feeds": {"acme/shop": {"issue_comments_since": NOW.isoformat(),
                                "review_comments_since": NOW.isoformat()}},
        "last_tick_at": NOW.isoformat(), "rate_limited_until": None, "last_error": None}))
    await old.close()

    domain = await Domain.open(domain_spec(), backend)
    store = WorkStore(domain, "demo")
    prs = await store.prs()
    assert set(prs) == {PrRef("demo", "acme/shop", 1), PrRef("demo", "acme/shop", 2)}
    # On disk the records keep the layout they were always stored under.
    assert sorted(await domain.all("prs")) == ["demo:acme/shop#1", "demo:acme/shop#2"]
    first = prs[PrRef("demo", "acme/shop", 1)]
    assert [c.comment_id for c in first.queued] == [11, 12], "in-flight first, not lost"
    assert first.processed(7) and first.reviews_done == 1
    # Instructions are stored once, shared by both PRs.
    key = instructions_key(INSTR["source"], INSTR["text"])
    assert {p.instructions_key for p in prs.values()} == {key}
    assert (await store.instructions(key)).text == "Be careful."
    assert len(await domain.all("instructions")) == 1
    account = await store.load_account()
    assert account.last_tick_at == NOW and "acme/shop" in account.feeds
    await domain.close()
    again = await Domain.open(domain_spec(), backend)   # migrated once; opens as v2
    assert len(await WorkStore(again, "demo").prs()) == 2
    await again.close()


def test_backoff_doubles_and_caps():
    assert [backoff(n, 10).total_seconds() for n in (1, 2, 3)] == [20, 40, 80]
    assert backoff(50, 10) == timedelta(minutes=30)


def test_due_at_covers_review_commands_and_notices():
    rec = PrRecord(head_sha="a", status="reviewed", updated_at=NOW)
    assert rec.due_at(10, NOW) is None
    rec.status, rec.fail_count, rec.last_failed_at = "reviewing", 1, NOW
    assert rec.due_at(10, NOW) == NOW + timedelta(seconds=20)
    rec.not_before = NOW + timedelta(hours=1)   # a rate-limit pause counts no attempt
    assert rec.due_at(10, NOW) == NOW + timedelta(hours=1)
    rec.status = "gave_up"
    assert rec.due_at(10, NOW) is None
