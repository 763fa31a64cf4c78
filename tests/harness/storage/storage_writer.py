"""Child process for the crash test: writes records forever, acknowledging each on stdout."""

import asyncio
import sys
from pathlib import Path

from pydantic import BaseModel

from dsh_harness import DomainSpec
from dsh_harness.storage import Domain
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend


class Rec(BaseModel):
    n: int
    payload: str


SPEC = DomainSpec(name="crash", version=1, tables={"recs": Rec})


async def main(kind: str, directory: str, start: int, mode: str) -> None:
    backend = (JsonBackend if kind == "json" else SqliteBackend)(Path(directory))
    domain = await Domain.open(SPEC, backend)
    n = start
    while mode == "tx":
        # Three records per transaction; the hot one is read-modify-written, so a torn or
        # partial commit shows as a hot counter that disagrees with the newest record.
        async with domain.transaction() as tx:
            hot = await tx.get("recs", "hot")
            tx.put("recs", f"r{n:06d}", Rec(n=n, payload="x" * (n % 500)))
            tx.put("recs", "hot", Rec(n=n, payload=f"after {hot.n if hot else -1}"))
            tx.put("recs", "pair", Rec(n=n, payload="pair"))
        print(n, flush=True)
        n += 1
    while True:
        await domain.put("recs", f"r{n:06d}", Rec(n=n, payload="x" * (n % 500)))
        # Also overwrite one hot key, so a torn rewrite of existing data would show.
        await domain.put("recs", "hot", Rec(n=n, payload="hot"))
        print(n, flush=True)
        n += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]),
                     sys.argv[4] if len(sys.argv) > 4 else "single"))
