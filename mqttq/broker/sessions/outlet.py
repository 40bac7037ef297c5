"""Outlet: what a session needs of the connection it is delivered through.

A session sends PUBLISHes and PUBRELs, reads the client's Receive Maximum and whether its
encodings can be shared (`conn`), and stops while the connection is not `writable`. The
broker around a session ends its connection (`kick`, `normal_disconnect`) and shows where
it comes from (`listener`, `peer`, `transport`); an APPLICATION session's Kafka consumers
write through it in chunks (`flush_now`, `closed`). `Client`
(broker/connection/client.py) is the one Outlet; naming this base class instead of it
keeps `session.py` below the connection code it serves.

A base class rather than a `typing.Protocol` on purpose (as `Intake`): under mypyc a call
through a compiled base class is a native virtual call, a call through a Protocol a
Python-level one, and a session calls its outlet for every message it delivers. It extends
`asyncio.Protocol` because `Client` does and mypyc allows a native class one base only.
"""

from __future__ import annotations

import asyncio

from mqttq.broker.net.listeners import ListenerKind
from mqttq.codec.packets import Packet
from mqttq.codec.properties import Properties
from mqttq.protocol.connection import MqttConnection
from mqttq.reasons import ReasonCode

__all__ = ["Outlet"]


class Outlet(asyncio.Protocol):
    """One connection as a session sees it (see the module docstring)."""

    __slots__ = (
        "closed",
        "conn",
        "end_code",
        "end_reason",
        "listener",
        "normal_disconnect",
        "transport",
        "writable",
    )

    conn: MqttConnection
    """The sans-I/O connection: the client's Receive Maximum (`client_receive_maximum`),
    `takes_shared_encoding`, the protocol level."""
    writable: bool
    """False while the transport is above its high-water mark: deliveries wait."""
    closed: bool
    """The connection is over for MQTT: nothing more is sent on it."""
    normal_disconnect: bool
    """DISCONNECT 0x00 received (or an administrative removal): no will is published
    [MQTT-3.14.4-3]."""
    end_reason: str
    """Why the connection ended (mqttq.broker.sessions.end_reasons), noted once where it
    ends; "" while it is open, and when the socket just closed (connection_lost)."""
    end_code: int
    """The MQTT reason code of that end (its DISCONNECT's), -1 when there is none."""
    listener: ListenerKind
    """The listener the connection came through (tcp, tls, ws, wss)."""
    transport: asyncio.Transport | None
    """The socket's transport once the connection is made."""

    @property
    def peer(self) -> str:
        """The client's address as "host:port", for log lines ("?" once unknown); asked of
        the transport only when a line needs it, so an idle connection keeps no copy."""
        transport = self.transport
        peer = None if transport is None else transport.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    # The sends are written here, once, and not overridden: mypyc then calls them directly
    # (a method no subclass overrides is final to it), as it did when a session named
    # Client; only `flush_soon`, once per send, goes through the vtable.

    def send(self, packet: Packet) -> None:
        """Encode `packet` (a PUBREL, for a session) into the connection's buffer."""
        self.conn.send(packet)
        self.flush_soon()

    def send_publish_ack(self, qos: int, packet_id: int, reason_code: ReasonCode) -> None:
        """PUBACK (QoS 1) or PUBREC (QoS 2) without properties."""
        self.conn.send_publish_ack(qos, packet_id, reason_code)
        self.flush_soon()

    def send_message(  # noqa: PLR0917 (the fields of the PublishPacket it avoids building)
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        dup: bool,
        packet_id: int | None,
        properties: Properties,
    ) -> bool:
        """Write a PUBLISH given by its fields (see `MqttConnection.send_message`); False
        when it exceeds the client's Maximum Packet Size [MQTT-3.1.2-25] (nothing is
        written)."""
        sent = self.conn.send_message(topic, payload, qos, retain, dup, packet_id, properties)
        self.flush_soon()
        return sent

    def send_encoded_publish(self, data: bytes) -> bool:
        """Write an already encoded PUBLISH; False as `send_message`."""
        sent = self.conn.send_encoded_publish(data)
        self.flush_soon()
        return sent

    def flush_soon(self) -> None:
        """Have what the connection buffered written: at once past a threshold, else at
        the end of the event-loop iteration."""
        raise NotImplementedError

    def flush_now(self) -> None:
        """Write what is buffered to the transport now (not at the end of the iteration)."""
        raise NotImplementedError

    def kick(
        self, reason_code: ReasonCode, reason_string: str | None = None, why: str = ""
    ) -> None:
        """Close the connection from the server's side with `reason_code` (DISCONNECT at
        5.0); the session is released at once. `why`: the end reason, when the code does
        not say it (end_reasons.kick_reason)."""
        raise NotImplementedError
