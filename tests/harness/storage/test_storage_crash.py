"""Crash safety: SIGKILL a writer at random moments; every acknowledged write must survive."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_harness.storage import Domain
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend
from tests.harness.storage.storage_writer import SPEC

WRITER = Path(__file__).with_name("storage_writer.py")
ROOT = Path(__file__).resolve().parents[3]
KILLS = 20


async def stored_records(kind: str, directory: Path) -> dict:
    backend = (JsonBackend if kind == "json" else SqliteBackend)(directory)
    domain = await Domain.open(SPEC, backend)  # must always open
    try:
        return await domain.all("recs")
    finally:
        await domain.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["single", "tx"])
@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_sigkill_never_loses_an_acknowledged_write(kind, mode, tmp_path):
    rng = random.Random(f"crash-{kind}-{mode}")
    acked: set[int] = set()
    last_hot = -1
    start = 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(KILLS):
        proc = subprocess.Popen([sys.executable, str(WRITER), kind, str(tmp_path), str(start),
                                 mode],
                                stdout=subprocess.PIPE, text=True, env=env)
        # Wait for the first ack so every kill lands mid-stream, then a random extra delay.
        first = proc.stdout.readline()
        assert first.strip(), "writer produced no output"
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        seen = [int(x) for x in [first, *out.splitlines()] if x.strip()]
        acked.update(seen)
        last_hot = max(last_hot, *seen)
        start = max(seen) + 1

        stored = asyncio.run(stored_records(kind, tmp_path))
        missing = [n for n in acked if f"r{n:06d}" not in stored]
        assert not missing, f"acknowledged writes lost: {missing[:5]}"
        assert stored["hot"].n >= last_hot
        if mode == "tx":
            # All or nothing: the hot counter, the pair and the newest record agree, and
            # each transaction saw the one before it.
            newest = max(r.n for k, r in stored.items() if k.startswith("r"))
            assert stored["hot"].n == stored["pair"].n == newest
            assert stored["hot"].payload in (f"after {newest - 1}", "after -1")
    assert len(acked) > KILLS
