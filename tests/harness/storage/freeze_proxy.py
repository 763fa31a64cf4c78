"""A TCP proxy in front of PostgreSQL that stands for a client process stopped (SIGSTOP, a VM
pause) at a chosen moment: once the client has written a chunk that contains ``marker``, the
proxy forwards that chunk and then nothing more, either way — the client sends nothing and
reads nothing, as a stopped process would, while the server sees an open, silent connection.

Freezing at a chunk boundary (what the client wrote in one go) is what a stop can do: a process
stops between two of its writes, never inside one."""

from __future__ import annotations

import asyncio
import contextlib

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class FreezingProxy:
    def __init__(self, dsn: str, marker: bytes):
        parts = conninfo_to_dict(dsn)
        self.target = (parts.get("host") or "127.0.0.1", int(parts.get("port") or 5432))
        self.dsn = dsn
        self.marker = marker
        self.frozen = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pumps: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FreezingProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def proxied_dsn(self) -> str:
        """The DSN with the proxy as the server."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return make_conninfo(self.dsn, host="127.0.0.1", port=str(port))

    async def close(self) -> None:
        """Cut every connection (the stopped process dies): its server sessions end."""
        if self._server is not None:
            self._server.close()
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        for writer in self._writers:
            writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_writer]
        for pump in (self._pump(reader, up_writer, watch=True),
                     self._pump(up_reader, writer, watch=False)):
            task = asyncio.create_task(pump)
            self._pumps.add(task)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *,
                    watch: bool) -> None:
        with contextlib.suppress(ConnectionError):
            while not self.frozen.is_set():
                chunk = await src.read(65536)
                if not chunk or self.frozen.is_set():
                    break
                dst.write(chunk)
                await dst.drain()
                if watch and self.marker in chunk:
                    self.frozen.set()
        # Frozen (or closed): hold everything until the test closes the proxy.
        await asyncio.Event().wait()
