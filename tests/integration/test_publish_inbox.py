"""The publish inbox (broker/inbox.py) on a real SQLite store, through a real socket: a
message for persistent sessions is acknowledged once its inbox row committed, fanned out
after, and a row left behind is queued exactly once at the next start."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from mqttq.broker.delivery import inbox
from mqttq.codec.enums import ProtocolLevel, ReasonCode
from mqttq.codec.packets import (
    ConnackPacket,
    ConnectPacket,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    SubackPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.properties import Properties
from mqttq.codec.writer import encode_packet
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.ports import QueuedMessage, Storage
from mqttq.storage.sqlite.store import SqliteStorage
from tests.integration.test_broker_smoke import (
    BrokerThread,
    Raw,
    assert_refused_for_storage,
    start_broker,
)

__all__ = ["start_broker"]  # the fixture, used by name

V5 = ProtocolLevel.MQTT_5
KEEP = Properties(session_expiry_interval=3600)


class FanOutFails(SqliteStorage):
    """A real SQLite store whose queue writes for logged messages fail (a full disk after
    the inbox row was written): the row must stay."""

    async def enqueue_logged(
        self, items: Sequence[tuple[str, Message]], seqs: Sequence[int]
    ) -> list[QueuedMessage | None]:
        raise StorageError("disk full")


class FanOutGated(SqliteStorage):
    """A real SQLite store whose queue writes for logged messages wait for `gate`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()

    async def enqueue_logged(
        self, items: Sequence[tuple[str, Message]], seqs: Sequence[int]
    ) -> list[QueuedMessage | None]:
        await asyncio.to_thread(self.gate.wait, 10.0)
        return await super().enqueue_logged(items, seqs)


class InboxFails(SqliteStorage):
    """A real SQLite store that cannot write inbox rows."""

    async def append_inbox(self, rows: Sequence[tuple[str, Message]]) -> list[int]:
        raise StorageError("disk full")


@pytest.fixture
def connect(start_broker: Callable[[Storage], BrokerThread]) -> Iterator[Callable[..., Raw]]:
    opened: list[Raw] = []

    def open_client(
        broker: BrokerThread,
        client_id: str,
        *,
        clean: bool = True,
        level: ProtocolLevel = V5,
        props: Properties | None = None,
    ) -> Raw:
        client = Raw(broker.port, level)
        opened.append(client)
        client.send(ConnectPacket(client_id, level, clean, 60, properties=props or Properties()))
        connack = client.receive()
        assert isinstance(connack, ConnackPacket) and connack.reason_code == 0, connack
        return client

    yield open_client
    for client in opened:
        client.sock.close()


def _subscribe_offline(
    broker: BrokerThread, connect: Callable[..., Raw], client_id: str, topic_filter: str
) -> None:
    """A persistent session subscribed to `topic_filter` at QoS 2, then offline."""
    subscriber = connect(broker, client_id, props=KEEP)
    subscriber.send(SubscribePacket(1, [SubscriptionRequest(topic_filter, qos=2)]))
    assert isinstance(subscriber.receive(), SubackPacket)
    subscriber.sock.close()


def _inbox_rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT seq, tenant FROM inbox ORDER BY seq"))


def _receive_all(client: Raw, count: int) -> list[PublishPacket]:
    """`count` PUBLISHes, each acknowledged and every QoS 2 flow completed."""
    got: list[PublishPacket] = []
    awaiting_pubrel: set[int] = set()
    while len(got) < count or awaiting_pubrel:
        packet = client.receive()
        if isinstance(packet, PubrelPacket):
            awaiting_pubrel.discard(packet.packet_id)
            client.send(PubcompPacket(packet.packet_id))
            continue
        assert isinstance(packet, PublishPacket), packet
        got.append(packet)
        assert packet.packet_id is not None
        if packet.qos == 1:
            client.send(PubackPacket(packet.packet_id))
        elif packet.qos == 2:
            awaiting_pubrel.add(packet.packet_id)
            client.send(PubrecPacket(packet.packet_id))
    return got


def _nothing_more(client: Raw) -> None:
    """Proves the session has nothing queued: a PINGREQ's answer is the next packet."""
    client.sock.settimeout(1.0)
    try:
        data = client.sock.recv(65536)
    except TimeoutError:
        data = b""
    finally:
        client.sock.settimeout(10.0)
    client.reader.feed(data)
    assert client.reader.next_packet() is None


def test_a_fan_out_that_fails_leaves_the_row_and_the_next_start_queues_it_once(
    start_broker: Callable[[Storage], BrokerThread],
    connect: Callable[..., Raw],
    tmp_path: Path,
) -> None:
    """The publisher hears success as soon as the message is in the inbox; when queueing
    its entries then fails, the row stays, and the next start queues the message (with
    its properties) for the offline session once: a later restart adds nothing."""
    path = tmp_path / "db.sqlite3"
    broker = start_broker(FanOutFails(path))
    _subscribe_offline(broker, connect, "keeper", "inbox/+")
    publisher = connect(broker, "pub")
    props = Properties(user_properties=[("k", "v")], content_type="text/plain")
    publisher.send(PublishPacket("inbox/a", b"m1", 1, packet_id=1, properties=props))
    puback = publisher.receive()
    assert isinstance(puback, PubackPacket) and puback.reason_code == ReasonCode.SUCCESS
    publisher.send(PublishPacket("inbox/a", b"m2", 2, packet_id=2))
    pubrec = publisher.receive()
    assert isinstance(pubrec, PubrecPacket) and pubrec.reason_code == ReasonCode.SUCCESS
    broker.stop()
    assert [tenant for _seq, tenant in _inbox_rows(path)] == ["default", "default"]

    broker = start_broker(SqliteStorage(path))
    assert _inbox_rows(path) == []
    subscriber = connect(broker, "keeper", clean=False, props=KEEP)
    got = _receive_all(subscriber, 2)
    assert [(m.topic, m.payload, m.qos) for m in got] == [
        ("inbox/a", b"m1", 1),
        ("inbox/a", b"m2", 2),
    ]
    assert got[0].properties.user_properties == [("k", "v")]
    assert got[0].properties.content_type == "text/plain"
    _nothing_more(subscriber)
    broker.stop()

    broker = start_broker(SqliteStorage(path))
    again = connect(broker, "keeper", clean=False, props=KEEP)
    _nothing_more(again)


@pytest.mark.parametrize("level", [ProtocolLevel.MQTT_5, ProtocolLevel.MQTT_3_1_1])
def test_a_message_the_inbox_cannot_store_is_refused_and_not_routed(
    start_broker: Callable[[Storage], BrokerThread],
    connect: Callable[..., Raw],
    tmp_path: Path,
    level: ProtocolLevel,
) -> None:
    """No row, no success: 5.0 hears 0x80, 3.1.1 is disconnected without a PUBACK, and the
    subscriber gets nothing."""
    path = tmp_path / "db.sqlite3"
    broker = start_broker(InboxFails(path))
    _subscribe_offline(broker, connect, "keeper", "inbox/+")
    publisher = connect(broker, "pub", level=level)
    publisher.send(PublishPacket("inbox/a", b"lost", 1, packet_id=1))
    assert_refused_for_storage(publisher)
    subscriber = connect(broker, "keeper", clean=False, props=KEEP)
    _nothing_more(subscriber)


def test_held_messages_are_routed_and_answered_in_arrival_order(
    start_broker: Callable[[Storage], BrokerThread],
    connect: Callable[..., Raw],
    tmp_path: Path,
) -> None:
    """A pipelined burst mixing QoS 1 and 2 messages (inbox rows) with retained ones (held
    without a row, answered after their routing): every answer in order, every message
    queued in order, the retained one kept as retained."""
    broker = start_broker(SqliteStorage(tmp_path / "db.sqlite3"))
    _subscribe_offline(broker, connect, "keeper", "order/+")
    publisher = connect(broker, "pub")
    sent: list[tuple[bytes, int]] = []
    burst = bytearray()
    for n in range(1, 41):
        qos = 2 if n % 7 == 0 else 1
        retain = n == 20
        packet = PublishPacket("order/r" if retain else "order/a", b"%d" % n, qos, retain, False, n)
        burst += encode_packet(packet, V5)
        sent.append((b"%d" % n, qos))
    publisher.sock.sendall(bytes(burst))
    answers: list[tuple[int, int]] = []
    while len(answers) < len(sent):
        answer = publisher.receive()
        assert isinstance(answer, PubackPacket | PubrecPacket), answer
        answers.append((answer.packet_id, answer.reason_code))
    assert answers == [(n, ReasonCode.SUCCESS) for n in range(1, 41)]

    subscriber = connect(broker, "keeper", clean=False, props=KEEP)
    got = _receive_all(subscriber, len(sent))
    assert [(m.payload, m.qos) for m in got] == sent
    late = connect(broker, "late")
    late.send(SubscribePacket(1, [SubscriptionRequest("order/r", qos=1)]))
    assert isinstance(late.receive(), SubackPacket)
    retained = late.receive()
    assert isinstance(retained, PublishPacket)
    assert (retained.payload, retained.retain) == (b"20", True)


def test_a_topic_nobody_subscribes_to_is_learned(
    start_broker: Callable[[Storage], BrokerThread],
    connect: Callable[..., Raw],
    tmp_path: Path,
) -> None:
    """Where a persistent session subscribed, a QoS 1 message on a topic it does not match
    is first accepted through the inbox (0x00: routing comes after the answer); once that
    routing found no subscriber, the topic takes the direct path and hears 0x10."""
    broker = start_broker(SqliteStorage(tmp_path / "db.sqlite3"))
    _subscribe_offline(broker, connect, "keeper", "fed/+")
    publisher = connect(broker, "pub")
    codes = []
    for packet_id in (1, 2, 3):
        publisher.send(PublishPacket("unfed/t", b"x", 1, packet_id=packet_id))
        puback = publisher.receive()
        assert isinstance(puback, PubackPacket)
        codes.append(puback.reason_code)
    assert codes == [
        ReasonCode.SUCCESS,
        ReasonCode.NO_MATCHING_SUBSCRIBERS,
        ReasonCode.NO_MATCHING_SUBSCRIBERS,
    ]


def test_a_fan_out_backlog_holds_back_the_next_acknowledgements(
    start_broker: Callable[[Storage], BrokerThread],
    connect: Callable[..., Raw],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Backpressure: while the entries routed from the inbox are not committed (here: at
    least FANOUT_BACKLOG of them), a newly stored message is not acknowledged; it is once
    the fan-out caught up, and nothing is lost or reordered."""
    monkeypatch.setattr(inbox, "FANOUT_BACKLOG", 1)
    storage = FanOutGated(tmp_path / "db.sqlite3")
    broker = start_broker(storage)
    _subscribe_offline(broker, connect, "keeper", "gate/+")
    publisher = connect(broker, "pub")
    publisher.send(PublishPacket("gate/a", b"first", 1, packet_id=1))
    first = publisher.receive()
    assert isinstance(first, PubackPacket) and first.packet_id == 1
    publisher.send(PublishPacket("gate/a", b"second", 1, packet_id=2))
    _nothing_more(publisher)  # held back: the first message's entry is not committed
    storage.gate.set()
    second = publisher.receive()
    assert isinstance(second, PubackPacket) and second.packet_id == 2
    assert second.reason_code == ReasonCode.SUCCESS
    subscriber = connect(broker, "keeper", clean=False, props=KEEP)
    assert [m.payload for m in _receive_all(subscriber, 2)] == [b"first", b"second"]


def test_without_persistent_subscribers_messages_take_the_direct_path(
    start_broker: Callable[[Storage], BrokerThread],
    connect: Callable[..., Raw],
    tmp_path: Path,
) -> None:
    """Until a persistent session subscribes, no message goes through the inbox: the very
    first QoS 1 message to a topic nobody matches hears 0x10, and nothing is stored."""
    path = tmp_path / "db.sqlite3"
    broker = start_broker(SqliteStorage(path))
    live = connect(broker, "live")
    live.send(SubscribePacket(1, [SubscriptionRequest("direct/+", qos=1)]))
    assert isinstance(live.receive(), SubackPacket)
    publisher = connect(broker, "pub")
    publisher.send(PublishPacket("nobody/t", b"x", 1, packet_id=1))
    puback = publisher.receive()
    assert isinstance(puback, PubackPacket)
    assert puback.reason_code == ReasonCode.NO_MATCHING_SUBSCRIBERS
    publisher.send(PublishPacket("direct/t", b"y", 1, packet_id=2))
    puback = publisher.receive()
    assert isinstance(puback, PubackPacket) and puback.reason_code == ReasonCode.SUCCESS
    assert [m.payload for m in _receive_all(live, 1)] == [b"y"]
    assert _inbox_rows(path) == []
