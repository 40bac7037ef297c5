"""PUBLISH bytes kept for messages that go to several sessions: a fan-out, or the backlog
that many sessions hold in common and drain on reconnect (storage hands them the same
message object). Each message is encoded once per protocol family; each session only
adds its packet id (`mqttq.codec.writer.publish_template`)."""

from __future__ import annotations

from mqttq.codec.writer import publish_template
from mqttq.model import Message

__all__ = ["EncodedPublishes"]


class _Family:
    """Templates of one protocol family (5.0, or 3.1 and 3.1.1, which write a PUBLISH
    the same way), by message object. Holding the message keeps its id from being
    reused while its entry exists."""

    __slots__ = ("bytes", "known")

    def __init__(self) -> None:
        self.known: dict[int, tuple[Message, bytes, bytes]] = {}
        self.bytes = 0


class EncodedPublishes:
    """The templates of the messages sent lately (see the module docstring). Bounded: a
    family is emptied once it holds `max_messages` messages or `max_bytes` bytes, so a
    stream of messages each sent once costs a dict entry and no growth; a PUBLISH larger
    than `max_bytes` / 16 is encoded each time instead of kept."""

    __slots__ = ("_max_bytes", "_max_messages", "_v3", "_v5")

    def __init__(self, max_messages: int = 1024, max_bytes: int = 4 * 1024 * 1024) -> None:
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._v5 = _Family()
        self._v3 = _Family()

    def template(self, message: Message, protocol_level: int) -> tuple[bytes, bytes]:
        """`message` as a PUBLISH at `protocol_level` with DUP 0, cut where the packet id
        goes: `head + id + tail` (QoS 0: `head + tail`). Its QoS, retain flag and
        properties are the message's own."""
        family = self._v5 if protocol_level == 5 else self._v3
        known = family.known
        found = known.get(id(message))
        if found is not None:
            return found[1], found[2]
        head, tail = publish_template(
            message.topic,
            message.payload,
            message.qos,
            message.retain,
            message.properties,
            protocol_level,
        )
        size = len(head) + len(tail)
        if size * 16 <= self._max_bytes:
            if len(known) >= self._max_messages or family.bytes + size > self._max_bytes:
                known.clear()
                family.bytes = 0
            known[id(message)] = (message, head, tail)
            family.bytes += size
        return head, tail
