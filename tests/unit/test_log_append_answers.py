"""A message that an integration's log takes as well as a subscriber: the subscriber has
it at once, the publisher's PUBACKs wait for the log's write and come in order; a failed
write answers 0x80. `OrderedSteps`: steps sharing a future run in order; a step that only
answers holds no delivery back. Real Hub, Lifecycle and Client over in-memory transports
(the log is the hub's `appenders` seam, its write a future the test settles)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine
from typing import Any, cast

import uvloop

from mqttq.auth.authenticator import Authenticator
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.broker.connection.client import MAX_PENDING_STEPS, Client
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.delivery.pending import OrderedSteps, StepRun
from mqttq.broker.server import node_limits
from mqttq.broker.sessions.lifecycle import Lifecycle
from mqttq.codec import encode_packet
from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import (
    ConnectPacket,
    Packet,
    PubackPacket,
    PublishPacket,
    PubrecPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.reader import decode_packet
from mqttq.config import Settings
from mqttq.model import Message
from mqttq.reasons import ReasonCode
from mqttq.storage.memory import MemoryStorage
from tests.memory_transport import MemoryTransport


class ControlledLog:
    """An integration log whose write of each loop iteration is a future the test settles:
    `append` returns the iteration's one future, as `IntegrationLog.append` does."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.writes: list[asyncio.Future[None]] = []
        self._open: asyncio.Future[None] | None = None

    def append(self, message: Message) -> asyncio.Future[None]:
        self.messages.append(message)
        if self._open is None:
            loop = asyncio.get_running_loop()
            self._open = loop.create_future()
            self.writes.append(self._open)
            loop.call_soon(self._close_iteration)
        return self._open

    def _close_iteration(self) -> None:
        self._open = None

    def settle(self, index: int, error: Exception | None = None) -> None:
        if error is None:
            self.writes[index].set_result(None)
        else:
            self.writes[index].set_exception(error)


def _packets(transport: MemoryTransport, start: int = 0) -> list[Packet]:
    data = b"".join(transport.writes[start:])
    out: list[Packet] = []
    while data:
        packet, used = decode_packet(data, 5, 1 << 20)
        out.append(packet)
        data = data[used:]
    return out


async def _stack(receive_maximum: int | None = None) -> tuple[Lifecycle, Hub]:
    storage = MemoryStorage()
    await storage.open()
    settings = Settings()
    if receive_maximum is not None:
        mqtt = dataclasses.replace(settings.mqtt, receive_maximum=receive_maximum)
        settings = dataclasses.replace(settings, mqtt=mqtt)
    hub = Hub(settings.mqtt, storage, node_limits(settings.mqtt_limit))
    authenticator = Authenticator(EmptyAuthStore(), anonymous="always")
    return Lifecycle(hub, asyncio.get_running_loop(), authenticator), hub


async def _connect(
    life: Lifecycle, client_id: str, transport: MemoryTransport | None = None
) -> tuple[Client, MemoryTransport]:
    client = Client(life)
    transport = MemoryTransport() if transport is None else transport
    client.connection_made(cast(asyncio.Transport, transport))
    client.data_received(encode_packet(ConnectPacket(client_id, ProtocolLevel.MQTT_5, True, 60), 5))
    for _ in range(100):
        await asyncio.sleep(0)
        if client.session is not None and client.session.ready and transport.writes:
            return client, transport
    raise AssertionError(f"{client_id} did not connect")


async def _subscribe(client: Client, topic_filter: str) -> None:
    request = SubscriptionRequest(topic_filter, 1)
    client.data_received(encode_packet(SubscribePacket(1, [request]), 5))
    await asyncio.sleep(0)


def _publishes(count: int, first_id: int = 1) -> bytes:
    return b"".join(
        encode_packet(PublishPacket("t", f"m{n}".encode(), 1, False, False, n), 5)
        for n in range(first_id, first_id + count)
    )


async def _turns() -> None:
    """A few loop iterations: the write's callbacks, the answers, the transport's flush."""
    for _ in range(5):
        await asyncio.sleep(0)


def _run(main: Coroutine[Any, Any, None]) -> None:
    uvloop.run(asyncio.wait_for(main, 30))


async def _with_log(
    receive_maximum: int | None = None,
) -> tuple[Lifecycle, Hub, ControlledLog, MemoryTransport]:
    life, hub = await _stack(receive_maximum)
    integration, _ = await _connect(life, "integration")
    await _subscribe(integration, "#")
    log = ControlledLog()
    hub.appenders["integration"] = log.append
    subscriber, to_subscriber = await _connect(life, "sub")
    await _subscribe(subscriber, "t")
    return life, hub, log, to_subscriber


def test_the_subscriber_has_them_at_once_and_the_pubacks_wait_for_the_write() -> None:
    async def scenario() -> None:
        life, _, log, to_subscriber = await _with_log()
        seen = len(to_subscriber.writes)
        publisher, to_publisher = await _connect(life, "pub")
        acked = len(to_publisher.writes)
        publisher.data_received(_publishes(3))
        await asyncio.sleep(0)
        publisher.data_received(_publishes(2, first_id=4))  # another iteration, another write
        await asyncio.sleep(0)
        delivered = _packets(to_subscriber, seen)
        assert [p.payload for p in delivered if isinstance(p, PublishPacket)] == [
            b"m1",
            b"m2",
            b"m3",
            b"m4",
            b"m5",
        ]
        assert [m.payload for m in log.messages] == [b"m1", b"m2", b"m3", b"m4", b"m5"]
        assert len(log.writes) == 2
        assert _packets(to_publisher, acked) == []  # no answer before the write
        log.settle(1)  # the second write first: its answers still wait for the first
        await _turns()
        assert _packets(to_publisher, acked) == []
        log.settle(0)
        await _turns()
        answers = _packets(to_publisher, acked)
        assert [(p.packet_id, p.reason_code) for p in answers if isinstance(p, PubackPacket)] == [
            (n, ReasonCode.SUCCESS) for n in range(1, 6)
        ]

    _run(scenario())


def test_a_failed_write_answers_unspecified_error_and_counts_each_message() -> None:
    async def scenario() -> None:
        life, hub, log, _ = await _with_log()
        publisher, to_publisher = await _connect(life, "pub")
        acked = len(to_publisher.writes)
        publisher.data_received(_publishes(2))
        await asyncio.sleep(0)
        assert hub.stats.storage_errors == 0
        log.settle(0, OSError("disk full"))
        await _turns()
        answers = _packets(to_publisher, acked)
        assert [(p.packet_id, p.reason_code) for p in answers if isinstance(p, PubackPacket)] == [
            (1, ReasonCode.UNSPECIFIED_ERROR),
            (2, ReasonCode.UNSPECIFIED_ERROR),
        ]
        assert hub.stats.storage_errors == 2

    _run(scenario())


def test_steps_sharing_a_future_run_in_order_after_the_earlier_ones() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        steps = OrderedSteps()
        first, shared = loop.create_future(), loop.create_future()
        ran: list[str] = []
        steps.add(first, lambda _f: ran.append("first"))
        for name in ("a", "b", "c"):
            steps.add(shared, lambda _f, name=name: ran.append(name), holds=False)
        shared.set_result(None)
        await asyncio.sleep(0)
        assert ran == []  # behind `first`
        first.set_result(None)
        await asyncio.sleep(0)
        assert ran == ["first", "a", "b", "c"]
        steps.add(shared, lambda _f: ran.append("late"))  # a done future: runs at once
        await asyncio.sleep(0)
        assert ran[-1] == "late"
        assert len(steps) == 0

    _run(scenario())


def test_only_steps_that_hold_deliveries_are_holding() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        steps = OrderedSteps()
        answer, held = loop.create_future(), loop.create_future()
        steps.add(answer, lambda _f: None, holds=False)
        assert len(steps) == 1
        assert not steps.holding()
        steps.add(held, lambda _f: None)
        assert steps.holding()
        answer.set_result(None)
        await asyncio.sleep(0)
        assert steps.holding()
        held.set_result(None)
        await asyncio.sleep(0)
        assert not steps.holding()
        assert len(steps) == 0

    _run(scenario())


def test_runs_of_answers_keep_their_place_among_the_other_steps_and_count_each() -> None:
    async def scenario() -> None:
        life, _, log, _ = await _with_log()
        publisher, to_publisher = await _connect(life, "pub")
        acked = len(to_publisher.writes)
        steps = publisher.steps
        ran: list[str] = []
        publisher.data_received(_publishes(2))
        write = log.writes[0]
        run = steps.last_run(write)
        assert isinstance(run, StepRun)
        assert run.items == [1 << 2 | 1, 2 << 2 | 1]  # packet id << 2 | QoS
        steps.add(write, lambda _f: ran.append("single"), holds=False)
        publisher.data_received(_publishes(1, first_id=3))  # after another step: a new run
        assert steps.last_run(write) not in (None, run)
        held = asyncio.get_running_loop().create_future()
        steps.add(held, lambda _f: ran.append("held"))  # a stored delivery's, say
        await asyncio.sleep(0)
        publisher.data_received(_publishes(1, first_id=4))  # the next write, behind `held`
        assert len(steps) == 6  # a run counts each of its items (flow control)
        log.settle(1, OSError("disk full"))
        log.settle(0)
        await _turns()
        assert ran == ["single"]
        answers = _packets(to_publisher, acked)
        assert [(p.packet_id, p.reason_code) for p in answers if isinstance(p, PubackPacket)] == [
            (1, ReasonCode.SUCCESS),
            (2, ReasonCode.SUCCESS),
            (3, ReasonCode.SUCCESS),
        ]
        assert steps.last_run(write) is None  # a completed run takes no more items
        held.set_result(None)
        await _turns()
        assert ran == ["single", "held"]
        answers = _packets(to_publisher, acked)
        assert [(p.packet_id, p.reason_code) for p in answers if isinstance(p, PubackPacket)][
            3:
        ] == [(4, ReasonCode.UNSPECIFIED_ERROR)]
        assert len(steps) == 0

    _run(scenario())


def test_pubacks_and_pubrecs_of_one_write_come_in_order_with_their_packet_ids() -> None:
    async def scenario() -> None:
        life, _, log, _ = await _with_log()
        publisher, to_publisher = await _connect(life, "pub")
        acked = len(to_publisher.writes)
        publisher.data_received(
            b"".join(
                encode_packet(PublishPacket("t", b"m", qos, False, False, packet_id), 5)
                for packet_id, qos in ((7, 2), (65535, 1), (1, 2), (300, 1))
            )
        )
        await asyncio.sleep(0)
        assert len(publisher.steps) == 4
        log.settle(0)
        await _turns()
        answers = _packets(to_publisher, acked)
        assert [(type(p).__name__, p.packet_id, p.reason_code) for p in answers] == [  # type: ignore[attr-defined]
            ("PubrecPacket", 7, ReasonCode.SUCCESS),
            ("PubackPacket", 65535, ReasonCode.SUCCESS),
            ("PubrecPacket", 1, ReasonCode.SUCCESS),
            ("PubackPacket", 300, ReasonCode.SUCCESS),
        ]
        assert all(isinstance(p, PubackPacket | PubrecPacket) for p in answers)
        assert len(publisher.steps) == 0

    _run(scenario())


class PausableTransport(MemoryTransport):
    """Notes whether the broker stopped reading from it."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def test_a_publisher_whose_answers_pile_up_in_runs_is_paused_until_they_go() -> None:
    async def scenario() -> None:
        count = MAX_PENDING_STEPS + 10
        life, _, log, _ = await _with_log(receive_maximum=65535)
        transport = PausableTransport()
        publisher, _ = await _connect(life, "pub", transport)
        acked = len(transport.writes)
        publisher.data_received(_publishes(count))  # one write's run: one step
        assert len(publisher.steps) == count
        assert transport.paused
        log.settle(0)
        await _turns()
        assert not transport.paused
        answers = _packets(transport, acked)
        assert [p.packet_id for p in answers if isinstance(p, PubackPacket)] == list(
            range(1, count + 1)
        )

    _run(scenario())
