"""Outbound QoS 1/2 flows (broker -> client) as one transition table, sans I/O.

Rule 1: every step of a delivery's acknowledgement lives in `TRANSITIONS`:
PUBLISH QoS 1 -> PUBACK [MQTT-4.3.2]; PUBLISH QoS 2 -> PUBREC -> (PUBREL sent) -> PUBCOMP
[MQTT-4.3.3]. An error PUBREC ends a QoS 2 flow without PUBREL [MQTT-4.4.0-2]; a PUBREC
repeated after PUBREL was sent is answered with PUBREL again.
Rule 2: an acknowledgement whose (state, packet type) pair is missing from the table, or
whose packet id is not in flight, is a `ProtocolError` (PACKET_IDENTIFIER_NOT_FOUND for an
unknown id, PROTOCOL_ERROR for a pair); the delivery stays as it was.

`OutboundWindow` holds a session's deliveries in flight by packet id; a delivery's state is
read from the entry itself (its QoS, and `pubrel` once PUBREC arrived), so that what
storage keeps (`mark_pubrel`) and what the window says cannot disagree. The inbound twin is
`protocol/inflight.py` `InboundWindow`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from mqttq.codec.enums import PacketType
from mqttq.errors import ProtocolError
from mqttq.model import QueuedMessage
from mqttq.protocol.inflight import PacketIdAllocator
from mqttq.reasons import ReasonCode

__all__ = ["TRANSITIONS", "OutboundState", "OutboundWindow", "next_state", "state_of"]


class OutboundState(IntEnum):
    """Where one outbound QoS 1/2 delivery is; COMPLETE frees its packet id."""

    COMPLETE = 0
    AWAIT_PUBACK = 1
    """QoS 1 PUBLISH sent."""
    AWAIT_PUBREC = 2
    """QoS 2 PUBLISH sent."""
    AWAIT_PUBCOMP = 3
    """PUBREC received, PUBREL sent (or to be sent once storage marked it)."""


TRANSITIONS: Final[dict[tuple[OutboundState, PacketType], tuple[OutboundState, OutboundState]]] = {
    (OutboundState.AWAIT_PUBACK, PacketType.PUBACK): (
        OutboundState.COMPLETE,
        OutboundState.COMPLETE,
    ),
    (OutboundState.AWAIT_PUBREC, PacketType.PUBREC): (
        OutboundState.AWAIT_PUBCOMP,
        OutboundState.COMPLETE,  # [MQTT-4.4.0-2]
    ),
    (OutboundState.AWAIT_PUBCOMP, PacketType.PUBREC): (
        OutboundState.AWAIT_PUBCOMP,  # PUBREL again
        OutboundState.COMPLETE,
    ),
    (OutboundState.AWAIT_PUBCOMP, PacketType.PUBCOMP): (
        OutboundState.COMPLETE,
        OutboundState.COMPLETE,
    ),
}
"""(state, type of the acknowledgement received from the client) -> (the state after it
with a success reason code, the state after it with an error one, >= 0x80)."""


def _flatten() -> tuple[int, ...]:
    steps = [-1] * 32
    for (state, packet_type), (ok, error) in TRANSITIONS.items():
        steps[state * 8 + packet_type] = ok + 4 * error
    return tuple(steps)


_STEPS: Final = _flatten()
"""The table flattened for the per-acknowledgement path: index state * 8 + packet type,
value (state after success) + 4 * (state after error), -1 for a pair missing. Under mypyc
an enum member is a Python attribute load and a dict lookup hashes; a tuple index is
neither."""
_COMPLETE: Final = 0
_AWAIT_PUBACK: Final = 1
_AWAIT_PUBREC: Final = 2
_AWAIT_PUBCOMP: Final = 3
_PUBACK: Final = 4  # PacketType.PUBACK
_PUBREC: Final = 5  # PacketType.PUBREC
_PUBCOMP: Final = 7  # PacketType.PUBCOMP


def state_of(entry: QueuedMessage) -> int:
    """The `OutboundState` of a delivery in flight, read from the entry."""
    if entry.message.qos == 1:
        return _AWAIT_PUBACK
    return _AWAIT_PUBCOMP if entry.pubrel else _AWAIT_PUBREC


def next_state(state: int, packet_type: int, reason_code: int) -> int:
    """The state after receiving `packet_type` with `reason_code` in `state`, or
    ProtocolError(PROTOCOL_ERROR) when the table has no such pair."""
    step = _STEPS[state * 8 + packet_type] if 0 <= state < 4 and 0 <= packet_type < 8 else -1
    if step < 0:
        raise _not_in_table(state, packet_type)
    return step >> 2 if reason_code >= 0x80 else step & 3


def _not_in_table(state: int, packet_type: int) -> ProtocolError:
    return ProtocolError(
        ReasonCode.PROTOCOL_ERROR,
        f"{PacketType(packet_type).name} not allowed in state {OutboundState(state).name}",
    )


class OutboundWindow:
    """A session's QoS 1/2 deliveries sent and not yet completed, by packet id (see the
    module docstring). Its length counts against the client's Receive Maximum
    [MQTT-4.9.0-2]; the session decides when to send."""

    __slots__ = ("_ids", "entries")

    def __init__(self) -> None:
        self.entries: dict[int, QueuedMessage] = {}
        """The deliveries in flight, in send order."""
        self._ids: PacketIdAllocator | None = None
        """Created by the first packet id allocated here (a non-persistent session's;
        storage assigns a persistent one's)."""

    def __len__(self) -> int:
        return len(self.entries)

    def allocate(self) -> int:
        """An unused packet id [MQTT-2.2.1-4] (ValueError when all 65535 are in flight)."""
        ids = self._ids
        if ids is None:
            ids = self._ids = PacketIdAllocator(self.entries)
        return ids.allocate()

    def sent(self, entry: QueuedMessage) -> None:
        """`entry` went out as PUBLISH (or, resumed with `pubrel`, as PUBREL)."""
        self.entries[entry.packet_id] = entry

    def puback_received(self, packet_id: int) -> QueuedMessage:
        """PUBACK: the QoS 1 delivery, now complete."""
        return self._step(packet_id, _PUBACK, 0)

    def pubrec_received(self, packet_id: int, reason_code: int) -> QueuedMessage:
        """PUBREC: the QoS 2 delivery, now awaiting PUBCOMP (`pubrel` set), or complete
        after an error reason code."""
        return self._step(packet_id, _PUBREC, reason_code)

    def pubcomp_received(self, packet_id: int) -> QueuedMessage:
        """PUBCOMP: the QoS 2 delivery, now complete."""
        return self._step(packet_id, _PUBCOMP, 0)

    def awaiting_pubcomp(self, packet_id: int) -> bool:
        """True when a PUBREL for `packet_id` is due (its PUBREC arrived)."""
        entry = self.entries.get(packet_id)
        return entry is not None and entry.pubrel

    def unacknowledged(self) -> set[int]:
        """Packet ids whose PUBLISH went out and got no PUBACK / PUBREC yet."""
        return {packet_id for packet_id, entry in self.entries.items() if not entry.pubrel}

    def clear(self) -> None:
        self.entries.clear()

    def _step(self, packet_id: int, packet_type: int, reason_code: int) -> QueuedMessage:
        entries = self.entries
        entry = entries.get(packet_id)
        if entry is None:
            raise ProtocolError(
                ReasonCode.PACKET_IDENTIFIER_NOT_FOUND,
                f"{PacketType(packet_type).name} for packet id {packet_id}, not in flight",
            )
        # `state_of` and `next_state` written out: this runs for every acknowledgement.
        if entry.message.qos == 1:
            state = _AWAIT_PUBACK
        else:
            state = _AWAIT_PUBCOMP if entry.pubrel else _AWAIT_PUBREC
        step = _STEPS[state * 8 + packet_type]  # packet_type: one of the three above
        if step < 0:
            raise _not_in_table(state, packet_type)
        after = step >> 2 if reason_code >= 0x80 else step & 3
        if after == _COMPLETE:
            del entries[packet_id]
        elif after == _AWAIT_PUBCOMP:
            entry.pubrel = True
        return entry
