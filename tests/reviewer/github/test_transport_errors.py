"""A request that gets no HTTP answer says what happened: a reset connection
used to log an empty ``ReadError:``; now the exception type, the host and what an empty error
means — and never the token."""

from __future__ import annotations

import asyncio
import socket
import struct

import httpx2
import pytest

from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.errors import GitHubError

PAT = "ghp_" + "r" * 36


@pytest.fixture
async def resetting():
    """A loopback server that reads the request, then resets the connection (RST)."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_reset_connection_names_its_type_and_host(resetting):
    async with httpx2.AsyncClient(timeout=5) as http:
        client = GitHubClient(f"http://{resetting}", PatAuth(PAT), http)
        with pytest.raises(GitHubError) as exc:
            await client.get_pull("octo", "app", 1)
    message = str(exc.value)
    kind = message.split(": ", 1)[1].split(" from ", 1)[0]
    assert message.startswith(f"GET repos/octo/app/pulls/1: {kind} from {resetting}: ")
    assert kind.endswith("Error") and not message.endswith(": ")
    assert PAT not in message
    if message.endswith("closed or reset)"):
        assert message.endswith("no detail (the connection was closed or reset)")
