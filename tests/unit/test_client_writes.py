"""When a Client's buffered bytes reach its transport: what a read makes the broker send
(the forwarded PUBLISH, the publisher's PUBACK) is written before `data_received`
returns; what other callbacks send, at the end of the loop iteration. Real Hub,
Lifecycle and Client over in-memory transports that keep every write."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, cast

import uvloop

from mqttq.auth.authenticator import Authenticator
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.broker.connection.client import Client
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.server import node_limits
from mqttq.broker.sessions.lifecycle import Lifecycle
from mqttq.codec import encode_packet
from mqttq.codec.enums import PacketType, ProtocolLevel
from mqttq.codec.packets import (
    ConnectPacket,
    PingreqPacket,
    PublishPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.config import Settings
from mqttq.storage.memory import MemoryStorage
from tests.memory_transport import MemoryTransport


def _first_types(transport: MemoryTransport) -> list[PacketType]:
    """The packet type of the first packet of each write."""
    return [PacketType(data[0] >> 4) for data in transport.writes]


async def _stack() -> Lifecycle:
    storage = MemoryStorage()
    await storage.open()
    settings = Settings()
    hub = Hub(settings.mqtt, storage, node_limits(settings.mqtt_limit))
    authenticator = Authenticator(EmptyAuthStore(), anonymous="always")
    return Lifecycle(hub, asyncio.get_running_loop(), authenticator)


async def _connect(life: Lifecycle, client_id: str) -> tuple[Client, MemoryTransport]:
    client = Client(life)
    transport = MemoryTransport()
    client.connection_made(cast(asyncio.Transport, transport))
    connect = ConnectPacket(client_id, ProtocolLevel.MQTT_5, True, 60)
    client.data_received(encode_packet(connect, 5))
    for _ in range(100):
        await asyncio.sleep(0)
        if client.session is not None and client.session.ready and transport.writes:
            return client, transport
    raise AssertionError(f"{client_id} did not connect")


def _run(main: Coroutine[Any, Any, None]) -> None:
    uvloop.run(asyncio.wait_for(main, 30))


def test_a_read_writes_the_forwarded_publish_and_the_puback_before_it_returns() -> None:
    _run(_forwarded_in_the_read())


def test_what_no_read_caused_is_written_at_the_end_of_the_iteration() -> None:
    _run(_sent_from_elsewhere())


async def _forwarded_in_the_read() -> None:
    life = await _stack()
    subscriber, to_subscriber = await _connect(life, "sub")
    subscriber.data_received(encode_packet(SubscribePacket(1, [SubscriptionRequest("t", 1)]), 5))
    await asyncio.sleep(0)
    assert _first_types(to_subscriber)[-1] is PacketType.SUBACK
    publisher, to_publisher = await _connect(life, "pub")
    subscriber_writes, publisher_writes = len(to_subscriber.writes), len(to_publisher.writes)

    publish = encode_packet(PublishPacket("t", b"hello", 1, False, False, 7), 5)
    publisher.data_received(publish)  # no loop iteration runs before the checks below

    assert _first_types(to_subscriber)[subscriber_writes:] == [PacketType.PUBLISH]
    assert b"hello" in to_subscriber.writes[-1]
    assert _first_types(to_publisher)[publisher_writes:] == [PacketType.PUBACK]
    # Two packets in one read: one write per connection, both packets in it.
    second = encode_packet(PublishPacket("t", b"two", 1, False, False, 8), 5)
    third = encode_packet(PublishPacket("t", b"three", 1, False, False, 9), 5)
    publisher.data_received(second + third)
    assert len(to_subscriber.writes) == subscriber_writes + 2
    assert b"two" in to_subscriber.writes[-1] and b"three" in to_subscriber.writes[-1]
    assert len(to_publisher.writes) == publisher_writes + 2
    assert life.writes is None


async def _sent_from_elsewhere() -> None:
    life = await _stack()
    client, transport = await _connect(life, "c")
    before = len(transport.writes)
    client.send(PingreqPacket())  # as a timer or a storage callback would send
    assert len(transport.writes) == before
    await asyncio.sleep(0)
    assert len(transport.writes) == before + 1


class BrokenTransport(MemoryTransport):
    """Fails every write."""

    def write(self, data: bytes) -> None:
        raise RuntimeError("broken transport")


def test_a_write_that_fails_is_reported_and_the_others_still_go_out() -> None:
    _run(_one_write_fails())


async def _one_write_fails() -> None:
    life = await _stack()
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(
        lambda _loop, context: reported.append(context)
    )
    subscriber, _ = await _connect(life, "sub")
    subscriber.data_received(encode_packet(SubscribePacket(1, [SubscriptionRequest("t", 1)]), 5))
    await asyncio.sleep(0)
    subscriber.transport = cast(asyncio.Transport, BrokenTransport())
    publisher, to_publisher = await _connect(life, "pub")
    before = len(to_publisher.writes)

    publisher.data_received(encode_packet(PublishPacket("t", b"x", 1, False, False, 1), 5))

    assert _first_types(to_publisher)[before:] == [PacketType.PUBACK]
    assert [str(context["exception"]) for context in reported] == ["broken transport"]
