"""TCP listeners: bind, and hand every accepted connection to a fresh Client protocol.

`start_tcp_listener` serves TLS and WebSocket with asyncio's transports; plain MQTT over
TCP goes through `plain_tcp.start_socket_listener` (no transport object per connection).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from ssl import SSLContext
from typing import Protocol

__all__ = ["BACKLOG", "TCP", "ListenerKind", "Listening", "bound_port", "start_tcp_listener"]


@dataclass(frozen=True, slots=True)
class ListenerKind:
    """What a client came through: `name` is tcp, tls, ws or wss (the label in /metrics
    and /api/v1/sessions); `identity_as_username`: its certificate's CN is its user name."""

    name: str
    identity_as_username: bool = False


TCP = ListenerKind("tcp")


class Listening(Protocol):
    """A bound listener: an `asyncio.Server` or a `plain_tcp.SocketServer`."""

    @property
    def sockets(self) -> Sequence[socket.socket]: ...

    def close(self) -> None: ...


BACKLOG = 1024
"""Pending connections the kernel queues for us (bursts of reconnecting devices)."""


async def start_tcp_listener(
    loop: asyncio.AbstractEventLoop,
    protocol_factory: Callable[[], asyncio.Protocol],
    host: str,
    port: int,
    *,
    ssl: SSLContext | None = None,
    ssl_handshake_timeout: float | None = None,
    reuse_port: bool = False,
) -> asyncio.Server:
    """Bind `host:port` (port 0 picks a free one) and start accepting; with `ssl`, each
    connection reaches `protocol_factory`'s protocol once its TLS handshake is done
    (within `ssl_handshake_timeout` seconds). `reuse_port`: SO_REUSEPORT, so that other
    processes may bind the same port (the kernel spreads connections over them).

    asyncio's accept loop already survives EMFILE/ENFILE (it logs and retries after a
    pause), so a burst past the file-descriptor limit does not stop the listener.
    """
    server = await loop.create_server(
        protocol_factory,
        host,
        port,
        backlog=BACKLOG,
        reuse_address=True,
        reuse_port=reuse_port or None,
        start_serving=False,
        ssl=ssl,
        ssl_handshake_timeout=ssl_handshake_timeout,
    )
    for sock in server.sockets:
        # Half-open connections: the OS probes, keep alive x 1.5 is the MQTT bound. Accepted
        # sockets inherit the option, so no connection needs its own socket object for it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    await server.start_serving()
    return server


def bound_port(server: Listening) -> int:
    """The port the first socket of `server` is bound to."""
    for sock in server.sockets:
        return int(sock.getsockname()[1])
    raise RuntimeError("the listener has no socket")
