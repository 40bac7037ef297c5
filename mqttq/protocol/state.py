"""Connection states and every packet a client may send in each, as one table.

Rule 1: every transition of a connection's state lives in this file.
Rule 2: a (state, packet type) pair missing from `TRANSITIONS` is a Protocol Error; the
connection is then closed (5.0: with DISCONNECT 0x82 when CONNECT was accepted).

Only packets a client sends to a server appear: CONNACK, SUBACK, UNSUBACK and PINGRESP from
a client are errors in every state. AUTH keeps a CONNECTED connection CONNECTED: whether
it is in order is the enhanced authentication's own table (protocol/enhanced_auth.py),
which refuses it with 0x82 on a connection whose CONNECT had no Authentication Method
[MQTT-4.12.0-1] and during a CONNECT exchange lets only AUTH and DISCONNECT through.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from mqttq.codec.enums import PacketType
from mqttq.errors import ProtocolError
from mqttq.reasons import ReasonCode

__all__ = ["STAYS_CONNECTED", "TRANSITIONS", "ConnState", "next_state"]


class ConnState(Enum):
    """Where a network connection is in its life."""

    AWAIT_CONNECT = "await_connect"
    """TCP is open; the first packet must be CONNECT [MQTT-3.1.0-1]."""
    CONNECTED = "connected"
    """CONNECT decoded; the broker answers it with CONNACK (or refuses and closes)."""
    CLOSED = "closed"
    """DISCONNECT received or the connection failed; nothing more is read."""


_AFTER_CONNECT = (
    PacketType.PUBLISH,
    PacketType.PUBACK,
    PacketType.PUBREC,
    PacketType.PUBREL,
    PacketType.PUBCOMP,
    PacketType.SUBSCRIBE,
    PacketType.UNSUBSCRIBE,
    PacketType.PINGREQ,
    PacketType.AUTH,
)

TRANSITIONS: Final[dict[tuple[ConnState, PacketType], ConnState]] = {
    (ConnState.AWAIT_CONNECT, PacketType.CONNECT): ConnState.CONNECTED,
    # A second CONNECT is a Protocol Error [MQTT-3.1.0-2]: deliberately absent.
    **{(ConnState.CONNECTED, packet_type): ConnState.CONNECTED for packet_type in _AFTER_CONNECT},
    (ConnState.CONNECTED, PacketType.DISCONNECT): ConnState.CLOSED,
}
"""(state, type of a packet received from the client) -> the state after it."""

STAYS_CONNECTED: Final[frozenset[PacketType]] = frozenset(
    packet_type
    for (state, packet_type), after in TRANSITIONS.items()
    if state is ConnState.CONNECTED and after is ConnState.CONNECTED
)
"""Packet types that leave a CONNECTED connection CONNECTED: the per-packet fast path of
`next_state`, read from the table above."""


def next_state(state: ConnState, packet_type: PacketType) -> ConnState:
    """The state after receiving `packet_type` in `state`, or ProtocolError(PROTOCOL_ERROR)."""
    try:
        return TRANSITIONS[state, packet_type]
    except KeyError:
        raise ProtocolError(
            ReasonCode.PROTOCOL_ERROR,
            f"{packet_type.name} not allowed in state {state.name}",
        ) from None
