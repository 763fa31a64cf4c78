"""Storage benchmark: put/get latency and throughput for both backends at 1k and 10k records.

Each domain is pre-filled in one batch, then timed with single-record puts (each one durable:
fsync for json, a synchronous=FULL commit for sqlite) and gets. Prints a table; asserts nothing.
Usage: python bench/storage.py [--puts N] [--gets N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from dsh_harness import DomainSpec
from dsh_harness.storage import Domain
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend


class Rec(BaseModel):
    n: int
    head_sha: str
    status: str
    processed: list[int]


SPEC = DomainSpec(name="bench", version=1, tables={"recs": Rec})


def rec(i: int) -> Rec:
    return Rec(n=i, head_sha=f"{i:040x}", status="reviewed", processed=list(range(i % 20)))


def pct(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))] * 1000


async def run(kind: str, size: int, puts: int, gets: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        backend = (JsonBackend if kind == "json" else SqliteBackend)(Path(tmp))
        domain = await Domain.open(SPEC, backend)
        t0 = time.perf_counter()
        await domain.write_many([("recs", f"k{i:06d}", rec(i)) for i in range(size)])
        bulk = time.perf_counter() - t0
        put_t = []
        for i in range(puts):
            t = time.perf_counter()
            await domain.put("recs", f"k{(i * 7919) % size:06d}", rec(i))
            put_t.append(time.perf_counter() - t)
        get_t = []
        for i in range(gets):
            t = time.perf_counter()
            await domain.get("recs", f"k{(i * 104729) % size:06d}")
            get_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        await domain.close()
        reopen_t0 = time.perf_counter()
        domain = await Domain.open(SPEC, backend)
        reopen = time.perf_counter() - reopen_t0
        await domain.close()
        return {"bulk_s": bulk, "put_p50": pct(put_t, .5), "put_p99": pct(put_t, .99),
                "put_per_s": puts / sum(put_t), "get_p50": pct(get_t, .5),
                "get_p99": pct(get_t, .99), "get_per_s": gets / sum(get_t),
                "open_s": reopen, "put_mean": statistics.mean(put_t) * 1000}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--puts", type=int, default=200)
    ap.add_argument("--gets", type=int, default=2000)
    args = ap.parse_args()
    print(f"{'backend':8} {'records':>8} {'bulk load s':>11} {'put p50 ms':>10} "
          f"{'put p99 ms':>10} {'puts/s':>8} {'get p50 ms':>10} {'get p99 ms':>10} "
          f"{'gets/s':>8} {'open s':>7}")
    for kind in ("json", "sqlite"):
        for size in (1_000, 10_000):
            r = await run(kind, size, args.puts, args.gets)
            print(f"{kind:8} {size:>8} {r['bulk_s']:>11.3f} {r['put_p50']:>10.2f} "
                  f"{r['put_p99']:>10.2f} {r['put_per_s']:>8.0f} {r['get_p50']:>10.3f} "
                  f"{r['get_p99']:>10.3f} {r['get_per_s']:>8.0f} {r['open_s']:>7.3f}")


if __name__ == "__main__":
    asyncio.run(main())
