"""Client events as messages: connected, disconnected, subscribed, unsubscribed, session
expired, message dropped.

An event is published as a QoS 1 message on `$events/<kind>/<client id>` in the client's
tenant, with a JSON payload (`event`, `client_id`, `tenant`, `timestamp` in unix
milliseconds, and what the kind adds: `reason`, `topic_filters`, `topic`, `qos`). Only the
kinds some integration asked for (`events = [...]`) are published: nothing is built for the
others. An integration that takes events subscribes its session to `$events/<kind>/+`, so
events reach its sink, in order and durably, as messages do; an MQTT client may subscribe
to them too. A `$` topic is never matched by `#`. The broker's own integration sessions
make no events.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from mqttq.codec.properties import Properties
from mqttq.integrations.spec import EVENTS_PREFIX
from mqttq.model import Message
from mqttq.protocol.connect import INTEGRATION_CLIENT_PREFIX

if TYPE_CHECKING:
    from mqttq.broker.delivery.hub import Hub

__all__ = ["ClientEvents"]


class ClientEvents:
    """Publishes the client events of the kinds in `kinds` (set by the integrations)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.kinds: frozenset[str] = frozenset()

    def emit(self, kind: str, tenant: str, client_id: str, **fields: Any) -> None:
        """Publish one event when some integration takes `kind`; never raises for it."""
        if kind not in self.kinds or client_id.startswith(INTEGRATION_CLIENT_PREFIX):
            return
        now = time.time()
        body = {
            "event": kind,
            "client_id": client_id,
            "tenant": tenant,
            "timestamp": int(now * 1000),
            **fields,
        }
        properties = Properties()
        properties.content_type = "application/json"
        message = Message(
            f"{EVENTS_PREFIX}{kind}/{client_id}",
            json.dumps(body, separators=(",", ":")).encode(),
            1,
            False,
            properties,
            now,
            None,
            client_id,
        )
        self.hub.publish_detached(tenant, message)
