"""`BridgeSource`: the bridge in, remote topic filters handed to the local broker.

It keeps one persistent session at the remote (Clean Start 0, a Session Expiry Interval,
subscriptions made once, when the remote has no session for us), so that what is published
at the remote while the bridge is down waits there and arrives after the reconnect. Each
remote PUBLISH becomes a `Delivery` handed to `deliver` (the broker hook republishes it
locally), one at a time in arrival order; the remote PUBLISH is acknowledged only after
`deliver` returned, so a crash in between means a redelivery, never a loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Container

from mqttq.codec import PublishPacket, ReasonCode
from mqttq.integrations.bridge.client import Backoff, ClientError, MqttClient
from mqttq.integrations.bridge.loop import bridge_origin, stamped
from mqttq.integrations.bridge.settings import MqttSinkSettings
from mqttq.integrations.record import Delivery

Deliver = Callable[[Delivery], Awaitable[None]]


class BridgeSource:
    """`direction = "in"`: subscribe at the remote and hand every message to `deliver`.

    `own_origins` holds the client ids of this broker's out bridges (any container; the
    manager's is a live view): a remote message stamped `mqttq-bridge` with one of them is
    our own export coming back, acknowledged and dropped.
    The Delivery's topic is the remote topic mapped by `topic_rewrite` and `topic_prefix`;
    its user properties carry `mqttq-bridge = <name>`; its `client_id` is the bridge's.
    """

    def __init__(
        self,
        settings: MqttSinkSettings,
        name: str,
        deliver: Deliver,
        *,
        tenant: str = "default",
        own_origins: Container[str] = frozenset(),
        where: str = "",
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self.name = name
        self.deliver = deliver
        self.tenant = tenant
        self.own_origins = own_origins
        """Asked per message: a live view sees out bridges added after this one."""
        self.where = where or f"integration[{name}]"
        self.backoff = backoff if backoff is not None else Backoff()
        self.last_error: str | None = None
        """Why the last connection attempt failed or ended (one line, no secret)."""
        self.connected = asyncio.Event()
        """Set while connected and subscribed."""
        self._client: MqttClient | None = None
        self._closing = asyncio.Event()
        self._received = 0
        self._dropped = 0

    def statistics(self) -> dict[str, int]:
        """`received`: messages handed to `deliver`; `dropped`: own exports coming back."""
        return {"received": self._received, "dropped": self._dropped}

    async def run(self) -> None:
        """Connect, subscribe and deliver until `close()`; reconnect after a loss with
        exponential backoff and jitter. A `ConfigError` (an unset `${NAME}`) is raised."""
        options = self.settings.client_options(self.name, self.where)
        client = self._client = MqttClient(options, self._on_message)
        try:
            while not self._closing.is_set():
                try:
                    await self._connect(client)
                    self.backoff.reset()
                    self.last_error = await client.wait_lost()
                except ClientError as exc:
                    self.last_error = str(exc)
                    await client.disconnect()
                self.connected.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), self.backoff.next_delay())
        finally:
            self.connected.clear()
            await client.close()

    async def close(self) -> None:
        """Stop `run()`: disconnect (the remote keeps the session and queues for us)."""
        self._closing.set()
        client = self._client
        if client is not None:
            await client.disconnect()

    async def _connect(self, client: MqttClient) -> None:
        session_present = await client.connect()
        if not session_present:
            filters = self.settings.remote_filters
            codes = await client.subscribe(filters, self.settings.qos)
            refused = [
                f"{topic_filter!r} ({ReasonCode(code).name})"
                for topic_filter, code in zip(filters, codes, strict=False)
                if code >= 0x80
            ]
            if refused:
                # Permanent at this remote (an ACL): say so and keep the filters it took.
                self.last_error = f"{client.options.address} refused {', '.join(refused)}"
        self.connected.set()

    async def _on_message(self, packet: PublishPacket) -> None:
        props = packet.properties
        if bridge_origin(props.user_properties) in self.own_origins:
            self._dropped += 1
            return
        delivery = Delivery(
            topic=self.settings.map_topic(packet.topic),
            payload=packet.payload,
            qos=packet.qos,
            retain=packet.retain,
            client_id=self._client.options.client_id if self._client is not None else "",
            tenant=self.tenant,
            timestamp_ms=time.time_ns() // 1_000_000,
            user_properties=tuple(stamped(props.user_properties, self.name)),
            content_type=props.content_type,
            response_topic=props.response_topic,
            correlation_data=props.correlation_data,
            message_expiry_interval=props.message_expiry_interval,
        )
        await self.deliver(delivery)
        self._received += 1
