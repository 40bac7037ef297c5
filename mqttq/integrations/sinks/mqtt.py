"""The `mqtt` sink: the bridge out, local messages published to a remote MQTT broker.

Each delivery becomes one PUBLISH at the remote (topic mapped by `topic_rewrite` then
`topic_prefix`, payload, retain flag and MQTT 5.0 properties kept) at `qos` (1 by default).
`send` returns once every PUBLISH of the batch is acknowledged; a PUBACK reason code >= 0x80
(MQTT 5.0) rejects that delivery for good; a connection lost or refused is `SinkUnavailable`.
The session at the remote is persistent (Clean Start 0 and a Session Expiry Interval), so
what was in flight when a connection dropped is re-sent with DUP=1 on the next one, and a
retried batch waits for those PUBACKs instead of publishing the same deliveries again
(matched by `Delivery.seq`). Loop prevention: see mqttq/integrations/bridge/loop.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

from mqttq.codec import Properties, ReasonCode
from mqttq.errors import ConfigError
from mqttq.integrations.bridge.client import ClientError, MqttClient
from mqttq.integrations.bridge.loop import bridge_origin, stamped
from mqttq.integrations.bridge.settings import MqttSinkSettings
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected, SinkRejected, SinkUnavailable

__all__ = ["PROBE_TOPIC", "MqttSink", "MqttSinkSettings"]

PROBE_TOPIC: Final = "$mqttq/bridge/{name}/probe"
"""Where `probe` publishes: a topic starting with '$' is matched by no '#' or '+' filter
[MQTT-4.7.2-1], so the sample reaches only a subscriber that names it."""


class MqttSink:
    """`direction = "out"`: delivers batches to the remote broker, in order."""

    def __init__(self, settings: MqttSinkSettings, name: str, *, where: str = "") -> None:
        self.settings = settings
        self.name = name
        self.where = where or f"integration[{name}]"
        self._client: MqttClient | None = None
        self._origin = ""
        self._pending: dict[int, asyncio.Future[ReasonCode]] = {}
        """PUBACK futures of the last failed batch by `Delivery.seq` (in flight still)."""
        self._skipped = 0

    def statistics(self) -> dict[str, int]:
        """`skipped`: deliveries not exported because they carry `mqttq-bridge` (loops)."""
        inflight = self._client.inflight if self._client is not None else 0
        return {"skipped": self._skipped, "inflight": inflight}

    async def open(self) -> None:
        """Connect to the remote (again); `SinkUnavailable` with the reason when it fails."""
        client = self._client
        if client is None:
            try:
                options = self.settings.client_options(self.name, self.where)
            except ConfigError as exc:
                raise SinkUnavailable(str(exc)) from None
            client = self._client = MqttClient(options)
            self._origin = options.client_id
        try:
            await client.connect()
        except ClientError as exc:
            raise SinkUnavailable(str(exc)) from None

    async def send(self, batch: Sequence[Delivery]) -> Sequence[Rejected]:
        """Publish `batch` in order and wait for every PUBACK; the deliveries the remote
        refused (PUBACK >= 0x80) are returned. Deliveries carrying `mqttq-bridge` are skipped
        (accepted, not sent)."""
        await self.open()
        client = self._client
        assert client is not None
        previous, self._pending = self._pending, {}
        sent: list[tuple[Delivery, str, asyncio.Future[ReasonCode]]] = []
        rejected: list[Rejected] = []
        qos = self.settings.qos
        try:
            for delivery in batch:
                if bridge_origin(delivery.user_properties) is not None:
                    self._skipped += 1
                    continue
                topic = self.settings.map_topic(delivery.topic)
                if not topic:
                    rejected.append(Rejected(delivery, "the mapped remote topic is empty"))
                    continue
                future = previous.get(delivery.seq) if delivery.seq else None
                if future is None:
                    future = await client.publish(
                        topic,
                        delivery.payload,
                        qos=qos,
                        retain=delivery.retain,
                        properties=self._properties(delivery),
                    )
                if future is not None:
                    if delivery.seq:
                        self._pending[delivery.seq] = future
                    sent.append((delivery, topic, future))
            codes = await client.wait_acks([future for _, _, future in sent])
        except ClientError as exc:
            raise SinkUnavailable(str(exc)) from None
        self._pending.clear()
        for (delivery, topic, _), code in zip(sent, codes, strict=True):
            if code >= 0x80:
                rejected.append(Rejected(delivery, f"remote refused {topic!r}: PUBACK {code.name}"))
        return rejected

    async def probe(self, sample: Delivery) -> str:
        """Publish `sample`'s payload at QoS 1 to `$mqttq/bridge/<name>/probe` at the remote
        and return what the remote answered."""
        await self.open()
        client = self._client
        assert client is not None
        topic = PROBE_TOPIC.format(name=self.name)
        address = client.options.address
        try:
            future = await client.publish(topic, sample.payload, qos=1)
            assert future is not None
            (code,) = await client.wait_acks([future])
        except ClientError as exc:
            raise SinkUnavailable(str(exc)) from None
        if code >= 0x80:
            raise SinkRejected(f"{address} refused {topic!r}: PUBACK {code.name}")
        version = "5.0" if client.options.protocol_version == 5 else "3.1.1"
        return f"{address} (MQTT {version}) acknowledged {topic!r}: PUBACK {code.name}"

    async def close(self) -> None:
        """Disconnect (the remote keeps the session); idempotent."""
        client, self._client = self._client, None
        self._pending.clear()
        if client is not None:
            await client.close()

    def _properties(self, delivery: Delivery) -> Properties:
        return Properties(
            message_expiry_interval=delivery.message_expiry_interval,
            content_type=delivery.content_type,
            response_topic=delivery.response_topic,
            correlation_data=delivery.correlation_data,
            user_properties=stamped(delivery.user_properties, self._origin),
        )
