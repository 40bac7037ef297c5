"""ClientLink: what the handlers of a client's packets need of its connection.

The packet handlers (broker/connection/dispatch.py), the enhanced authentication
(broker/connection/enhanced.py) and the admission of a CONNECT (broker/connection/admission.py)
read who the client is (`identity`, `space`, `enhanced`), reach the broker's `hub` and
`loop`, and act on the connection: answer CONNECT asynchronously (`start_connect`), wait
out a rate limit (`defer`), read the next packet of an authentication exchange
(`wait_packet`), refuse, fail, close, or end it on the client's DISCONNECT
(`disconnected`). What the intake and the session need of it too (`Publisher`, `Outlet`).
`Client` (broker/connection/client.py) is the one ClientLink; naming this base class
instead of it keeps those modules below the client that calls them.

A compiled base class rather than a `typing.Protocol`, for the reason `Outlet` gives:
`dispatch.on_publish` reads `identity`, `space` and `hub` for every PUBLISH, and a field
of a compiled base class is a native read. The methods a subclass overrides are the ones
not called per message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mqttq.auth.identity import Identity
from mqttq.broker.connection.enhanced_session import EnhancedSession
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.delivery.publisher import Publisher
from mqttq.broker.delivery.tenants import TenantSpace
from mqttq.codec.packets import ConnectPacket, DisconnectPacket, Packet
from mqttq.errors import ProtocolError
from mqttq.reasons import ReasonCode

__all__ = ["ClientLink"]


class ClientLink(Publisher):
    """One client's connection as its packet handlers see it (see the module docstring)."""

    __slots__ = ("enhanced", "hub", "identity", "loop", "space")

    hub: Hub
    """The broker's sessions and routing."""
    loop: asyncio.AbstractEventLoop
    """The event loop the connection runs on (its clock: `loop.time()`)."""
    identity: Identity | None
    """Who the client is (tenant, ACLs), once CONNECT was authenticated."""
    space: TenantSpace | None
    """The tenant namespace the client publishes into, set with `identity`."""
    enhanced: EnhancedSession | None
    """The CONNECT's enhanced authentication (SCRAM), for re-authentication."""

    def local_is_loopback(self) -> bool:
        """True when the client reached the broker on a loopback address."""
        raise NotImplementedError

    def start_connect(self, packet: ConnectPacket) -> None:
        """Have CONNECT answered asynchronously; nothing more is read until it is."""
        raise NotImplementedError

    def defer(self, delay: float, then: Callable[[], None]) -> None:
        """Handle nothing more from this client for `delay` seconds, then run `then`."""
        raise NotImplementedError

    def wait_packet(self) -> asyncio.Future[Packet | None]:
        """While CONNECT is answered: the client's next packet, None when the connection
        closes first."""
        raise NotImplementedError

    def refuse(self, reason_code: ReasonCode, message: str) -> None:
        """Refuse the CONNECT with an error CONNACK and close."""
        raise NotImplementedError

    def fail(self, error: ProtocolError) -> None:
        """Answer a client fault with what the spec names and close."""
        raise NotImplementedError

    def close(self) -> None:
        """Flush what is queued and close the transport."""
        raise NotImplementedError

    def disconnected(self, packet: DisconnectPacket) -> None:
        """The client sent DISCONNECT: the session lifecycle notes it (the will, the
        session's end), and the connection closes."""
        raise NotImplementedError
