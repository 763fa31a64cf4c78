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


async def main(kind: str, directory: str, start: int) -> None:
    backend = (JsonBackend if kind == "json" else SqliteBackend)(Path(directory))
    domain = await Domain.open(SPEC, backend)
    n = start
    while True:
        await domain.put("recs", f"r{n:06d}", Rec(n=n, payload="x" * (n % 500)))
        # Also overwrite one hot key, so a torn rewrite of existing data would show.
        await domain.put("recs", "hot", Rec(n=n, payload="hot"))
        print(n, flush=True)
        n += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
