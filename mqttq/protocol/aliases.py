"""Topic aliases [MQTT-3.3.2.3.4], one table per direction and per network connection.

Aliases never outlive the network connection [MQTT-3.3.2-7]: a new MqttConnection starts
with empty tables.
"""

from __future__ import annotations

from mqttq.errors import ProtocolError
from mqttq.reasons import ReasonCode

__all__ = ["InboundAliases", "OutboundAliases"]


class InboundAliases:
    """Aliases the client sets on PUBLISHes it sends to the broker.

    `maximum` is the Topic Alias Maximum the broker announced in CONNACK.
    """

    __slots__ = ("_topics", "maximum")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self._topics: dict[int, str] | None = None
        """alias -> topic, created by the first PUBLISH that sets an alias."""

    def resolve(self, topic: str, alias: int | None) -> str:
        """The topic name a PUBLISH stands for, recording a new mapping when it sets one.

        Alias 0 or above our maximum: TOPIC_ALIAS_INVALID [MQTT-3.3.2-8] [MQTT-3.3.2-9].
        An empty topic without an alias, or with one the client never set, is a Protocol
        Error (MQTT 5.0 sections 3.3.2.1 and 3.3.2.3.4).
        """
        if alias is None:
            if not topic:
                raise ProtocolError(
                    ReasonCode.PROTOCOL_ERROR, "empty topic name without a topic alias"
                )
            return topic
        if alias == 0 or alias > self.maximum:
            raise ProtocolError(
                ReasonCode.TOPIC_ALIAS_INVALID,
                f"topic alias {alias} outside 1..{self.maximum} [MQTT-3.3.2-8/9]",
            )
        topics = self._topics
        if topic:
            if topics is None:
                topics = self._topics = {}
            topics[alias] = topic
            return topic
        known = None if topics is None else topics.get(alias)
        if known is None:
            raise ProtocolError(ReasonCode.PROTOCOL_ERROR, f"unknown topic alias {alias}")
        return known


class OutboundAliases:
    """Aliases the broker assigns on PUBLISHes it sends to one client.

    `maximum` is the client's Topic Alias Maximum from CONNECT; 0 means no aliases
    [MQTT-3.3.2-11]. Aliases go to topics in the order they are first sent until the
    table is full; later topics are sent in full (no eviction: replacing an alias costs
    as much as sending the topic). A mapping is recorded with `bind` only once the PUBLISH
    that carries it is actually sent, so a discarded (too large) packet leaves no trace.
    """

    __slots__ = ("_aliases", "maximum")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self._aliases: dict[str, int] = {}

    def lookup(self, topic: str) -> int | None:
        """The alias the client already knows for `topic`, if any."""
        return self._aliases.get(topic)

    def next_alias(self) -> int | None:
        """The alias a new topic would get, or None when the table is full."""
        size = len(self._aliases)
        return size + 1 if size < self.maximum else None

    def bind(self, topic: str, alias: int) -> None:
        """Record that a PUBLISH carrying both `topic` and `alias` was sent."""
        self._aliases[topic] = alias
