"""TCP listeners: bind, and hand every accepted connection to a fresh Client protocol."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

__all__ = ["bound_port", "start_tcp_listener"]

BACKLOG = 1024
"""Pending connections the kernel queues for us (bursts of reconnecting devices)."""


async def start_tcp_listener(
    loop: asyncio.AbstractEventLoop,
    protocol_factory: Callable[[], asyncio.Protocol],
    host: str,
    port: int,
) -> asyncio.Server:
    """Bind `host:port` (port 0 picks a free one) and start accepting.

    asyncio's accept loop already survives EMFILE/ENFILE (it logs and retries after a
    pause), so a burst past the file-descriptor limit does not stop the listener.
    """
    server = await loop.create_server(
        protocol_factory, host, port, backlog=BACKLOG, reuse_address=True, start_serving=False
    )
    for sock in server.sockets:
        # Half-open connections: the OS probes, keep alive x 1.5 is the MQTT bound. Accepted
        # sockets inherit the option, so no connection needs its own socket object for it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    await server.start_serving()
    return server


def bound_port(server: asyncio.Server) -> int:
    """The port the first socket of `server` is bound to."""
    for sock in server.sockets:
        return int(sock.getsockname()[1])
    raise RuntimeError("the listener has no socket")
