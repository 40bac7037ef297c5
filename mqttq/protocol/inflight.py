"""Packet identifiers and QoS windows: what is in flight in each direction.

Inbound (client -> broker): the broker's Receive Maximum [MQTT-3.3.4-7] and the QoS 2
identifiers awaiting PUBREL [MQTT-4.3.3-10]. Outbound identifiers of a non-persistent
session come from `PacketIdAllocator`; a persistent session's come from storage.
"""

from __future__ import annotations

from collections.abc import Container

from mqttq.codec.enums import MAX_PACKET_ID
from mqttq.errors import ProtocolError
from mqttq.reasons import ReasonCode

__all__ = ["InboundWindow", "PacketIdAllocator"]


class PacketIdAllocator:
    """Hands out unused packet identifiers 1..65535 in rotation [MQTT-2.2.1-4].

    `in_use` is the live container of identifiers still in flight (the session's inflight
    table), consulted on each allocation.
    """

    __slots__ = ("_in_use", "_last")

    def __init__(self, in_use: Container[int], last: int = 0) -> None:
        self._in_use = in_use
        self._last = last

    def allocate(self) -> int:
        """A packet id not in `in_use`; ValueError when all 65535 are taken."""
        candidate = self._last
        in_use = self._in_use
        for _ in range(MAX_PACKET_ID):
            candidate = candidate + 1 if candidate < MAX_PACKET_ID else 1
            if candidate not in in_use:
                self._last = candidate
                return candidate
        raise ValueError("every packet identifier is in use")


class InboundWindow:
    """QoS 1/2 PUBLISHes from the client that the broker has not finished acknowledging.

    Counts against the broker's Receive Maximum: a QoS 1 PUBLISH until its PUBACK is sent,
    a QoS 2 PUBLISH until its PUBCOMP (or an error PUBREC) is sent [MQTT-3.3.4-7]; one more
    is RECEIVE_MAXIMUM_EXCEEDED (0x93). `awaiting_pubrel` (QoS 2 ids whose PUBREC went out
    and whose PUBREL has not arrived) is session state: the broker hands the same set from
    one connection of a session to the next, so that a PUBLISH re-sent after reconnect is
    recognised as a duplicate [MQTT-4.3.3-10].
    """

    __slots__ = ("_qos1_unacked", "_qos2", "awaiting_pubrel", "maximum")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.awaiting_pubrel: set[int] | None = None
        """Created by the first QoS 2 PUBLISH (most connections never send one)."""
        self._qos1_unacked = 0
        self._qos2: dict[int, bool] | None = None
        """QoS 2 ids counted against Receive Maximum -> True while their PUBREC is unsent;
        created by the first QoS 2 PUBLISH (most connections never send one)."""

    def __len__(self) -> int:
        """PUBLISHes that currently count against Receive Maximum."""
        qos2 = self._qos2
        return self._qos1_unacked + (0 if qos2 is None else len(qos2))

    def _take_quota(self) -> None:
        if len(self) >= self.maximum:
            raise ProtocolError(
                ReasonCode.RECEIVE_MAXIMUM_EXCEEDED,
                f"more than {self.maximum} unacknowledged QoS>0 PUBLISHes [MQTT-3.3.4-7]",
            )

    def publish_received(self, qos: int, packet_id: int) -> bool | None:
        """Account for a QoS 1/2 PUBLISH. True: a new message to route.

        False: a QoS 2 re-send whose first copy was already acknowledged; answer PUBREC
        again and do not route it [MQTT-4.3.3-10]. None: a re-send whose first PUBREC is
        still pending; that PUBREC answers both.
        """
        if qos == 1:
            self._take_quota()
            self._qos1_unacked += 1
            return True
        awaiting = self.awaiting_pubrel
        if awaiting is not None and packet_id in awaiting:
            qos2 = self._qos2
            return None if qos2 is not None and qos2.get(packet_id) else False
        self._take_quota()
        if awaiting is None:
            awaiting = self.awaiting_pubrel = set()
        awaiting.add(packet_id)
        if self._qos2 is None:
            self._qos2 = {}
        self._qos2[packet_id] = True
        return True

    def puback_sent(self) -> None:
        if self._qos1_unacked:
            self._qos1_unacked -= 1

    def pubrec_sent(self, packet_id: int, reason_code: ReasonCode) -> None:
        """An error PUBREC ends the flow: the id may be reused at once [MQTT-4.3.3-9]."""
        qos2 = self._qos2
        if reason_code >= 0x80:
            if self.awaiting_pubrel is not None:
                self.awaiting_pubrel.discard(packet_id)
            if qos2 is not None:
                qos2.pop(packet_id, None)
        elif qos2 is not None and packet_id in qos2:
            qos2[packet_id] = False

    def refused_unanswered(self, qos: int, packet_id: int) -> None:
        """A PUBLISH refused without an answer (3.x has no error PUBACK/PUBREC, so the
        connection closes instead): it was not taken, so a re-send after reconnect is a new
        message, not a duplicate to skip."""
        if qos == 1:
            self.puback_sent()
        else:
            self.pubrec_sent(packet_id, ReasonCode.UNSPECIFIED_ERROR)

    def pubrel_received(self, packet_id: int) -> bool:
        """True when the id was awaiting PUBREL (PUBCOMP success), else PUBCOMP 0x92."""
        awaiting = self.awaiting_pubrel
        if awaiting is None or packet_id not in awaiting:
            return False
        awaiting.discard(packet_id)
        if self._qos2 is not None:
            self._qos2.pop(packet_id, None)
        return True
