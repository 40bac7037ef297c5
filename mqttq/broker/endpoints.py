"""The broker's listeners, from `[listener]`: plain TCP always, TLS (`[listener.tls]`),
WebSocket (`[listener.ws]`) and WebSocket over TLS (`[listener.wss]`) when configured.

Every listener feeds the same `Client` protocol (limits, auth, tenants and metrics are
the same whatever the transport); the client knows which listener it came through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from mqttq.auth.blocked.service import BlockedClients
from mqttq.broker.connection.client import Client
from mqttq.broker.net.listeners import (
    BACKLOG,
    TCP,
    ListenerKind,
    Listening,
    bound_port,
    start_tcp_listener,
)
from mqttq.broker.net.plain_tcp import start_socket_listener
from mqttq.broker.net.proxy_protocol import ProxyGate, ProxyStatistics, TrustedNetworks
from mqttq.broker.net.tls import CertificateHolder
from mqttq.broker.net.websocket import WebSocketConnection
from mqttq.broker.sessions.lifecycle import Lifecycle
from mqttq.config import ListenerSettings

__all__ = ["LISTENER_NAMES", "Endpoints", "open_endpoints"]

LISTENER_NAMES = ("tcp", "tls", "ws", "wss")

WEBSOCKET_MESSAGE_SLACK = 64 * 1024
"""Bytes a WebSocket message may hold beyond the largest MQTT packet (a client may pack
a few small packets with a large one)."""


@dataclass(slots=True)
class Endpoints:
    """The bound listeners: servers and ports by name, and the certificate holders that
    SIGHUP reloads."""

    servers: dict[str, Listening] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    certificates: list[CertificateHolder] = field(default_factory=list)
    proxy: ProxyStatistics = field(default_factory=ProxyStatistics)
    """Connections through the PROXY protocol listeners (tcp, ws), by outcome."""

    def close(self) -> None:
        """Stop accepting on every listener (connected clients stay)."""
        for server in self.servers.values():
            server.close()

    def reload_certificates(self) -> bool:
        """Re-read every TLS listener's files; True when all were reloaded."""
        return all([holder.reload() for holder in self.certificates])


async def open_endpoints(
    loop: asyncio.AbstractEventLoop,
    life: Lifecycle,
    listener: ListenerSettings,
    *,
    handshake_timeout: float,
    max_packet_size: int,
) -> Endpoints:
    """Check the TLS files (ConfigError naming the key), then bind every configured
    listener on `listener.host`; on a failure the ones already bound are closed.
    `handshake_timeout` bounds a TLS handshake and a WebSocket upgrade."""
    tls = wss = None
    if listener.tls.enabled:
        tls = CertificateHolder(listener.tls, "listener.tls")
    if listener.wss.enabled:
        wss = CertificateHolder(listener.wss, "listener.wss")
    max_size = max_packet_size + WEBSOCKET_MESSAGE_SLACK
    host = listener.host
    found = Endpoints()

    def clients(kind: ListenerKind) -> Callable[[], asyncio.Protocol]:
        return lambda: Client(life, kind)

    def websocket(kind: ListenerKind, path: str) -> Callable[[], asyncio.Protocol]:
        return lambda: WebSocketConnection(clients(kind), path, max_size, handshake_timeout)

    trusted = TrustedNetworks(listener.proxy_trusted)

    def address_refused(address: str) -> bool:
        # Looked up per connection: the blocked list joins the chain around the start.
        chain = life.authenticator.chain
        blocked = None if chain is None else chain.provider("blocked")
        return isinstance(blocked, BlockedClients) and blocked.address_refused(address)

    def proxied(inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        timeout = listener.proxy_header_timeout
        return lambda: ProxyGate(inner, trusted, found.proxy, timeout, address_refused)

    tcp = clients(TCP)
    plan: list[tuple[str, int, Callable[[], asyncio.Protocol], CertificateHolder | None]] = [
        ("tcp", listener.port, proxied(tcp) if listener.proxy_protocol else tcp, None)
    ]
    if tls is not None:
        kind = ListenerKind("tls", listener.tls.identity_as_username)
        plan.append(("tls", listener.tls.port, clients(kind), tls))
        found.certificates.append(tls)
    if listener.ws.enabled:
        ws = websocket(ListenerKind("ws"), listener.ws.path)
        if listener.ws.proxy_protocol:
            ws = proxied(ws)
        plan.append(("ws", listener.ws.port, ws, None))
    if wss is not None:
        kind = ListenerKind("wss", listener.wss.identity_as_username)
        plan.append(("wss", listener.wss.port, websocket(kind, listener.wss.path), wss))
        found.certificates.append(wss)
    try:
        for name, port, factory, holder in plan:
            server: Listening
            if name == "tcp":  # plain MQTT: no transport object per connection
                server = await start_socket_listener(
                    loop,
                    factory,
                    host,
                    port,
                    backlog=BACKLOG,
                    reuse_port=listener.reuse_port,
                    proxied=listener.proxy_protocol,
                )
            else:
                server = await start_tcp_listener(
                    loop,
                    factory,
                    host,
                    port,
                    ssl=None if holder is None else holder.context,
                    ssl_handshake_timeout=handshake_timeout if holder is not None else None,
                    reuse_port=listener.reuse_port,
                )
            found.servers[name] = server
            found.ports[name] = bound_port(server)
    except BaseException:
        found.close()
        raise
    return found
