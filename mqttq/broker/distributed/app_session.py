"""One connected APPLICATION client (`AppClient`): its consumer of its own Kafka topic
and one per `$share` subscription (mqttq.broker.distributed.app_consumer), all sharing the
connection's packet ids; acknowledgements and flow control go to the consumer concerned.

Flow control: the client's transport buffer limits are the configured watermarks; above
the high one (`pause_writing`) nothing more is written and the consumers pause their Kafka
partitions before the next poll; below the low one they resume. So a client that does
not read holds at most a few packs and the transport buffer in broker memory.

An `AppClient` names what it needs of the Kafka side of every APPLICATION client: a
`ClientLog` (app_log.py's `AppLog`, which makes the AppClients), a `typing.Protocol`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from mqttq.broker.distributed.app_consumer import AppConsumer, ConsumerLog
from mqttq.codec.packets import PubrelPacket
from mqttq.reasons import ReasonCode
from mqttq.routing.topics import parse_shared
from mqttq.storage.kafka.app_topics import app_group, shared_group, shared_topic

if TYPE_CHECKING:
    from mqttq.broker.sessions.outlet import Outlet
    from mqttq.broker.sessions.session import Session

__all__ = ["AppClient", "ClientLog"]


class ClientLog(ConsumerLog, Protocol):
    """What an AppClient needs of the Kafka side of APPLICATION clients (`AppLog`): what
    its consumers need, the topic names, the shared topics made on demand, the table of
    connected clients it leaves when it stops, and the pause and lag counters."""

    pauses: int
    clients: dict[str, AppClient]
    lag: dict[str, int]

    @property
    def prefix(self) -> str: ...

    def client_topic(self, client_id: str) -> str: ...

    async def ensure_shared_topic(self, topic_filter: str) -> None: ...


class AppClient:
    """The consumers of one connected APPLICATION client (see the module docstring)."""

    def __init__(self, log: ClientLog, session: Session, client: Outlet) -> None:
        self.log = log
        self.session = session
        self.client = client
        self.taken: set[int] = set()
        """Packet ids in flight on this connection, over every consumer."""
        self.main: AppConsumer | None = None
        self.shared: dict[str, AppConsumer] = {}
        """Consumers of `$share` subscriptions, by the subscription's topic filter."""
        self.writable = asyncio.Event()
        self.writable.set()
        self._stopped = False
        settings = log.settings
        transport = client.transport
        if transport is not None:
            transport.set_write_buffer_limits(settings.high_watermark, settings.low_watermark)

    @property
    def consumers(self) -> list[AppConsumer]:
        main = [] if self.main is None else [self.main]
        return main + list(self.shared.values())

    def start(self) -> None:
        log = self.log
        client_id = self.session.client_id
        self.main = AppConsumer(
            self, log.client_topic(client_id), app_group(log.prefix, client_id), main=True
        )
        self.main.start()
        self.sync_shared()

    def sync_shared(self) -> asyncio.Future[None] | None:
        """Start a consumer for each `$share` subscription of the session without one and
        stop those whose subscription is gone; the future settles once the new shared
        topics exist (None when there are none)."""
        if self._stopped:
            return None
        session = self.session
        wanted: dict[str, str] = {}
        for subscription in session.space.router.subscriptions_of(session.client_id):
            share_name, inner = parse_shared(subscription.topic_filter)
            if share_name is not None:
                wanted[subscription.topic_filter] = share_name
        for topic_filter in [f for f in self.shared if f not in wanted]:
            consumer = self.shared.pop(topic_filter)
            session.hub.tasks.spawn(consumer.stop(), "app_consumer_stop", session.client_id)
        new = [(f, name) for f, name in wanted.items() if f not in self.shared]
        if not new:
            return None
        for topic_filter, share_name in new:
            _, inner = parse_shared(topic_filter)
            consumer = AppConsumer(
                self,
                shared_topic(self.log.prefix, inner),
                shared_group(self.log.prefix, share_name, inner),
                main=False,
            )
            self.shared[topic_filter] = consumer
        return asyncio.ensure_future(self._start_shared([f for f, _ in new]))

    async def _start_shared(self, filters: list[str]) -> None:
        for topic_filter in filters:
            _, inner = parse_shared(topic_filter)
            await self.log.ensure_shared_topic(inner)
            consumer = self.shared.get(topic_filter)
            if consumer is not None and not self._stopped:
                consumer.start()

    # ------------------------------------------------------------------ acks, flow

    def owner(self, packet_id: int) -> AppConsumer | None:
        """The consumer whose delivery `packet_id` is (called at every acknowledgement:
        the client's own topic is asked first, without building a list)."""
        main = self.main
        if main is not None and main.pack is not None and main.pack.owns(packet_id):
            return main
        for consumer in self.shared.values():
            if consumer.pack is not None and consumer.pack.owns(packet_id):
                return consumer
        return None

    def on_puback(self, packet_id: int) -> None:
        consumer = self.owner(packet_id)
        if consumer is not None and consumer.pack is not None:
            consumer.pack.on_puback(packet_id)
            consumer.acked()

    def on_pubrec(self, packet_id: int, reason_code: ReasonCode) -> bool:
        """True when the PUBREL is to be sent."""
        consumer = self.owner(packet_id)
        if consumer is None or consumer.pack is None:
            return False
        send = consumer.pack.on_pubrec(packet_id, reason_code >= 0x80)
        consumer.acked()
        return send

    def on_pubcomp(self, packet_id: int) -> None:
        consumer = self.owner(packet_id)
        if consumer is not None and consumer.pack is not None:
            consumer.pack.on_pubcomp(packet_id)
            consumer.acked()

    def pubrel_for(self, packet_id: int) -> PubrelPacket:
        if self.owner(packet_id) is None:
            return PubrelPacket(packet_id, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND)
        return PubrelPacket(packet_id)

    def pause_writing(self) -> None:
        """The write buffer passed the high watermark: nothing more is written, and each
        consumer pauses its partitions before it would poll again."""
        if self.writable.is_set():
            self.writable.clear()
            self.log.pauses += 1

    def resume_writing(self) -> None:
        self.writable.set()
        for consumer in self.consumers:
            consumer.resumed()

    async def stop(self) -> None:
        """The connection ended: stop every consumer; the main one saves its context."""
        if self._stopped:
            return
        self._stopped = True
        self.writable.set()
        if self.log.clients.get(self.session.client_id) is self:
            del self.log.clients[self.session.client_id]
            self.log.lag.pop(self.session.client_id, None)  # measured while connected
        if self.session.app is self:
            self.session.app = None
        await asyncio.gather(*(consumer.stop() for consumer in self.consumers))
