"""Client events as messages: connected, disconnected, subscribed, unsubscribed, session
expired, message dropped.

An event is published as a QoS 1 message in the client's tenant, with a JSON payload
(`event`, `client_id`, `tenant`, `timestamp` in unix milliseconds, and what the kind
adds: `address`, `protocol` and `listener` for connected, `reason` for disconnected
(mqttq.broker.sessions.end_reasons, with `reason_code` where there is one) and message
dropped, `topic_filters`, `topic`, `qos`).

Two parties ask for events, and nothing is built for a kind neither asked for:
- `[events] kinds` (`configure`), for MQTT subscribers: published on `[events] topic`
  (`$events/{kind}/{client_id}` unless set), readable by any client whose subscribe ACL
  covers it. A `$` topic is never matched by a filter starting with `#` or `+`
  [MQTT-4.7.2-1]: a subscriber names `$events/...` (or its own template's first level).
- integrations (`events = [...]` in an `[[integration]]`, which sets `kinds`): always on
  `$events/<kind>/<client id>` (`mqttq.integrations.spec.event_filter`), whatever the
  template, so that an integration's filters do not depend on it.
The broker's own integration sessions make no events.

The events name what they need of the hub, an `EventsHost` (a `typing.Protocol` that `Hub`
satisfies): publish a message with no client to answer, and look up a session.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from mqttq.codec.properties import Properties
from mqttq.errors import ConfigError
from mqttq.integrations.spec import EVENT_KINDS, EVENTS_PREFIX
from mqttq.model import Message
from mqttq.protocol.connect import INTEGRATION_CLIENT_PREFIX

if TYPE_CHECKING:
    import asyncio

    from mqttq.broker.sessions.session import Session

__all__ = ["DEFAULT_TOPIC", "PROTOCOL_NAMES", "ClientEvents", "EventsHost"]

DEFAULT_TOPIC: Final = EVENTS_PREFIX + "{kind}/{client_id}"
PROTOCOL_NAMES: Final = {3: "MQTT 3.1", 4: "MQTT 3.1.1", 5: "MQTT 5.0"}
"""The protocol of a connected event, by CONNECT's protocol level."""


class EventsHost(Protocol):
    """What the events need of the hub (`Hub`)."""

    @property
    def sessions(self) -> Mapping[str, Session]:
        """Every session of the broker by client id."""
        ...

    def publish_detached(self, tenant: str, message: Message) -> asyncio.Future[Any] | None:
        """Publish with no client to acknowledge."""
        ...


class ClientEvents:
    """Publishes client events (see the module docstring). `kinds` is what integrations
    take (set by them); `configure` adds what `[events]` asks for MQTT subscribers."""

    def __init__(self, hub: EventsHost) -> None:
        self.hub = hub
        self._integration_kinds: frozenset[str] = frozenset()
        self._subscriber_kinds: frozenset[str] = frozenset()
        self._all: frozenset[str] = frozenset()
        self.topic = DEFAULT_TOPIC
        self.published = 0
        """Event messages published (`$SYS` does not count them as received)."""

    @property
    def kinds(self) -> frozenset[str]:
        """Every kind some party asked for (empty: `emit` is never worth calling)."""
        return self._all

    @kinds.setter
    def kinds(self, kinds: frozenset[str]) -> None:
        """The kinds the integrations take (the union over every attached one)."""
        self._integration_kinds = frozenset(kinds)
        self._all = self._integration_kinds | self._subscriber_kinds

    def configure(self, kinds: tuple[str, ...], topic: str = DEFAULT_TOPIC) -> None:
        """`[events]`: publish `kinds` on `topic` (`{kind}` and `{client_id}` replaced);
        ConfigError naming `events.kinds` for a kind that does not exist."""
        for kind in kinds:
            if kind not in EVENT_KINDS:
                raise ConfigError(
                    "events.kinds", f"unknown event {kind!r}; known: {', '.join(EVENT_KINDS)}"
                )
        self._subscriber_kinds = frozenset(kinds)
        self._all = self._integration_kinds | self._subscriber_kinds
        self.topic = topic

    def topics_for(self, kind: str, client_id: str) -> list[str]:
        """Where an event of `kind` by `client_id` is published (none, one or two)."""
        topics: list[str] = []
        if kind in self._subscriber_kinds:
            topics.append(self.topic.replace("{kind}", kind).replace("{client_id}", client_id))
        if kind in self._integration_kinds:
            canonical = f"{EVENTS_PREFIX}{kind}/{client_id}"
            if canonical not in topics:
                topics.append(canonical)
        return topics

    def emit(self, kind: str, tenant: str, client_id: str, **fields: Any) -> None:
        """Publish one event when some party asked for `kind`; never raises for it."""
        if kind not in self._all or client_id.startswith(INTEGRATION_CLIENT_PREFIX):
            return
        if kind == "connected":
            fields = self._connected_details(client_id, fields)
        now = time.time()
        body = {
            "event": kind,
            "client_id": client_id,
            "tenant": tenant,
            "timestamp": int(now * 1000),
            **fields,
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        properties = Properties()
        properties.content_type = "application/json"
        for topic in self.topics_for(kind, client_id):
            message = Message(topic, payload, 1, False, properties, now, None, client_id)
            self.hub.publish_detached(tenant, message)
            self.published += 1

    def _connected_details(self, client_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """The client's address (as ACLs and the admin API see it: through a PROXY
        protocol header, the client's own) and its protocol's name."""
        session = self.hub.sessions.get(client_id)
        client = None if session is None else session.client
        details = dict(fields)
        if client is not None:
            details.setdefault("address", client.peer)
        level = details.get("protocol_level")
        if isinstance(level, int) and level in PROTOCOL_NAMES:
            details.setdefault("protocol", PROTOCOL_NAMES[level])
        return details
