"""Domain values shared by routing, storage and the broker: messages and subscriptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from mqttq.codec.properties import Properties


@dataclass(slots=True, init=False)
class Message:
    """An application message as the broker holds it, independent of any connection.

    Treated as immutable once routed: many sessions share one instance. A per-subscriber
    copy (granted QoS, retain as delivered, subscription identifiers) is made by
    `for_subscriber` only when it differs from the original.

    `properties` carries only the PUBLISH-level properties that travel with the message
    (payload format, message expiry as sent, content type, response topic, correlation data,
    user properties); topic alias and subscription identifiers never do.
    """

    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = field(default_factory=Properties)
    created_at: float = 0.0
    """Wall-clock time (unix seconds) the broker accepted the message."""
    expires_at: float | None = None
    """Wall-clock time the message expires (created_at + message expiry interval)."""
    publisher_id: str = ""
    """Client id of the publisher, for No Local [MQTT-3.8.3-3]."""
    subscription_identifiers: tuple[int, ...] = ()
    """Identifiers of the matching subscriptions, filled per subscriber [MQTT-3.3.4-3]."""

    def __init__(  # noqa: PLR0917 (the fields, as the generated one takes them)
        self,
        topic: str,
        payload: bytes,
        qos: int = 0,
        retain: bool = False,
        properties: Properties | None = None,
        created_at: float = 0.0,
        expires_at: float | None = None,
        publisher_id: str = "",
        subscription_identifiers: tuple[int, ...] = (),
    ) -> None:
        # Written out: mypyc compiles this one, not the one `dataclasses` generates
        # (300 -> 160 ns, and a message is built for every PUBLISH).
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = Properties() if properties is None else properties
        self.created_at = created_at
        self.expires_at = expires_at
        self.publisher_id = publisher_id
        self.subscription_identifiers = subscription_identifiers

    def for_subscriber(
        self, qos: int, retain: bool, subscription_identifiers: tuple[int, ...]
    ) -> Message:
        """This message as one subscriber receives it: `self` when the delivered QoS and
        RETAIN flag are the message's own and there are no subscription identifiers (the
        instance is shared), else a copy carrying them [MQTT-3.8.4-8, MQTT-3.3.4-3]."""
        if qos == self.qos and retain == self.retain and not subscription_identifiers:
            return self
        return Message(
            self.topic,
            self.payload,
            qos,
            retain,
            self.properties,
            self.created_at,
            self.expires_at,
            self.publisher_id,
            subscription_identifiers,
        )

    def is_expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def remaining_expiry(self, now: float) -> int | None:
        """Message Expiry Interval to send now, rewritten as time remaining [MQTT-3.3.2-6]."""
        if self.expires_at is None:
            return None
        return max(0, int(self.expires_at - now + 0.999))


@dataclass(slots=True, init=False)
class QueuedMessage:
    """One entry of a session's outgoing queue, ordered by `serial` (the storage ports
    hand these out; here, in a compiled module, because one is built per queued entry)."""

    serial: int
    """Only grows, across the packet-id wrap (serial 65536 holds packet id 1)."""
    packet_id: int
    """1..65535, assigned at enqueue time and kept across reconnects."""
    message: Message
    """As delivered to this subscriber: granted qos, retain flag, subscription ids."""
    pubrel: bool = False
    """True once PUBREC arrived: only PUBREL remains to send [MQTT-4.3.3]."""
    holder: str | None = None
    """From `enqueue` of a store with a presence marker (Redis): the node the client was
    connected to when the entry was written, "" for none; None: the store cannot say."""

    def __init__(
        self,
        serial: int,
        packet_id: int,
        message: Message,
        pubrel: bool = False,
        holder: str | None = None,
    ) -> None:
        # Written out, as Message's: the generated one runs interpreted (a fan-out of
        # 10,000 entries builds 10,000 of these on the writer thread).
        self.serial = serial
        self.packet_id = packet_id
        self.message = message
        self.pubrel = pubrel
        self.holder = holder


@dataclass(slots=True)
class Subscription:
    """A granted subscription of one session [MQTT-3.8.3]."""

    topic_filter: str
    """As the client sent it, including any `$share/<group>/` prefix."""
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    subscription_identifier: int | None = None


class PendingKind(StrEnum):
    """What an in-flight entry waits for: PUBACK/PUBREC (PUBLISH) or PUBCOMP (PUBREL)."""

    PUBLISH = "PUBLISH"
    PUBREL = "PUBREL"


@dataclass(frozen=True, slots=True)
class Unacked:
    """One in-flight delivery as saved in `application_session_ctx`."""

    offset: int
    packet_id: int
    kind: PendingKind


@dataclass(slots=True)
class AppContext:
    """What a disconnected APPLICATION session leaves for its next connection."""

    client_id: str
    offset: int | None = None
    """Records below this offset and not in `unacked` were handled (acknowledged, QoS 0 or
    expired); None when no pack was in progress."""
    unacked: list[Unacked] = field(default_factory=list)
    """In-flight deliveries, in the order they were sent."""
    updated_at: float = 0.0
