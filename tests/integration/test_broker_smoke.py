"""In-process smoke tests: a Broker on port 0 in its own event-loop thread, driven by paho-mqtt
(3.1.1 and 5.0) and, where paho hides the wire (DUP, packet ids), by a raw socket."""

from __future__ import annotations

import contextlib
import queue
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties

from mqttq.codec.enums import ProtocolLevel, ReasonCode
from mqttq.codec.packets import (
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PubackPacket,
    PublishPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.reader import PacketReader
from mqttq.codec.writer import encode_packet
from mqttq.errors import StorageError
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import Storage
from mqttq.storage.sqlite.store import SqliteStorage
from tests.harness import BrokerLoop, running_broker

HOST = "127.0.0.1"
DEADLINE = 10.0
"""Bounds a hang; never a performance assertion."""


BrokerThread = BrokerLoop
"""A Broker running on an event loop in a background thread (tests/harness.py)."""


@pytest.fixture
def start_broker() -> Iterator[Callable[[Storage], BrokerThread]]:
    with contextlib.ExitStack() as running:
        yield lambda storage: running.enter_context(running_broker(storage))


@pytest.fixture
def broker(start_broker: Callable[[Storage], BrokerThread]) -> BrokerThread:
    return start_broker(MemoryStorage())


class Paho:
    """A paho client whose received messages land in a queue."""

    def __init__(
        self,
        port: int,
        client_id: str,
        version: MQTTProtocolVersion,
        *,
        clean: bool = True,
        **connect: Any,
    ) -> None:
        kwargs: dict[str, Any] = {"client_id": client_id, "protocol": version}
        if version != paho.MQTTv5:
            kwargs["clean_session"] = clean
        self.client = paho.Client(CallbackAPIVersion.VERSION2, **kwargs)
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connacks: queue.Queue[tuple[bool, int]] = queue.Queue()
        self.client.on_message = lambda _c, _u, message: self.messages.put(message)
        self.client.on_connect = lambda _c, _u, flags, rc, _p: self.connacks.put(
            (flags.session_present, rc.value)
        )
        if version == paho.MQTTv5:
            connect.setdefault("clean_start", clean)
        self.client.connect(HOST, port, **connect)
        self.client.loop_start()
        self.session_present, code = self.connacks.get(timeout=DEADLINE)
        assert code == 0

    def subscribe(self, topic: str, qos: int) -> None:
        done: queue.Queue[Any] = queue.Queue()
        self.client.on_subscribe = lambda *args: done.put(args)
        self.client.subscribe(topic, qos)
        done.get(timeout=DEADLINE)

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos, retain).wait_for_publish(DEADLINE)

    def next(self) -> paho.MQTTMessage:
        return self.messages.get(timeout=DEADLINE)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class Raw:
    """A bare TCP client speaking through mqttq's codec (for DUP and packet ids)."""

    def __init__(self, port: int, level: ProtocolLevel = ProtocolLevel.MQTT_3_1_1) -> None:
        self.level = level
        self.sock = socket.create_connection((HOST, port), timeout=DEADLINE)
        self.reader = PacketReader(1 << 20, level)

    def send(self, packet: Packet) -> None:
        self.sock.sendall(encode_packet(packet, self.level))

    def receive(self) -> Packet:
        while (packet := self.reader.next_packet()) is None:
            data = self.sock.recv(65536)
            assert data, "connection closed"
            self.reader.feed(data)
        return packet

    def closed(self) -> bool:
        """True once the broker closes the connection (after any packets still queued)."""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return True
            self.reader.feed(data)


@pytest.fixture
def raw(broker: BrokerThread) -> Iterator[Callable[[ProtocolLevel], Raw]]:
    opened: list[Raw] = []

    def connect(level: ProtocolLevel = ProtocolLevel.MQTT_3_1_1) -> Raw:
        client = Raw(broker.port, level)
        opened.append(client)
        return client

    yield connect
    for client in opened:
        client.sock.close()


V311, V5 = paho.MQTTv311, paho.MQTTv5


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_subscribe_each_qos(
    broker: BrokerThread, version: MQTTProtocolVersion, qos: int
) -> None:
    subscriber = Paho(broker.port, "sub", version)
    subscriber.subscribe("smoke/#", 2)
    publisher = Paho(broker.port, "pub", version)
    for n in range(3):
        publisher.publish(f"smoke/{n}", b"m%d" % n, qos)
    got = [subscriber.next() for _ in range(3)]
    assert [(m.topic, m.payload, m.qos) for m in got] == [
        (f"smoke/{n}", b"m%d" % n, qos) for n in range(3)
    ]
    publisher.close()
    subscriber.close()


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_persistent_session_receives_what_was_published_offline(
    start_broker: Callable[[Storage], BrokerThread], tmp_path: Path, version: MQTTProtocolVersion
) -> None:
    broker = start_broker(SqliteStorage(tmp_path / "db.sqlite3"))
    props = None
    if version == V5:
        props = PahoProperties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
    subscriber = Paho(broker.port, "keeper", version, clean=False, properties=props)
    subscriber.subscribe("queue/t", 2)
    subscriber.close()
    publisher = Paho(broker.port, "pub", version)
    for n, qos in enumerate((1, 1, 2)):
        publisher.publish("queue/t", b"offline-%d" % n, qos)
    publisher.close()
    back = Paho(broker.port, "keeper", version, clean=False, properties=props)
    assert back.session_present
    got = [back.next() for _ in range(3)]
    # paho hands a QoS 2 message over on PUBREL, so only same-QoS order is observable.
    assert sorted((m.payload, m.qos) for m in got) == [
        (b"offline-0", 1),
        (b"offline-1", 1),
        (b"offline-2", 2),
    ]
    assert [m.payload for m in got if m.qos == 1] == [b"offline-0", b"offline-1"]
    back.close()


def test_unacknowledged_message_is_resent_with_dup_and_same_id(
    broker: BrokerThread, raw: Callable[..., Raw]
) -> None:
    first_connection = raw()
    first_connection.send(ConnectPacket("raw-sub", ProtocolLevel.MQTT_3_1_1, clean_start=False))
    assert isinstance(first_connection.receive(), ConnackPacket)
    first_connection.send(SubscribePacket(1, [SubscriptionRequest("dup/t", qos=1)]))
    first_connection.receive()  # SUBACK
    publisher = Paho(broker.port, "pub", V311)
    publisher.publish("dup/t", b"once", 1)
    first = first_connection.receive()
    assert isinstance(first, PublishPacket) and not first.dup
    first_connection.sock.close()  # no PUBACK
    again = raw()
    again.send(ConnectPacket("raw-sub", ProtocolLevel.MQTT_3_1_1, clean_start=False))
    connack = again.receive()
    assert isinstance(connack, ConnackPacket) and connack.session_present
    resent = again.receive()
    assert isinstance(resent, PublishPacket)
    assert (resent.payload, resent.packet_id, resent.dup) == (b"once", first.packet_id, True)
    publisher.close()


def test_queue_survives_a_broker_restart(
    start_broker: Callable[[Storage], BrokerThread], tmp_path: Path
) -> None:
    path = tmp_path / "db.sqlite3"
    broker = start_broker(SqliteStorage(path))
    subscriber = Paho(broker.port, "durable", V311, clean=False)
    subscriber.subscribe("restart/t", 1)
    subscriber.close()
    publisher = Paho(broker.port, "pub", V311)
    publisher.publish("restart/t", b"kept", 1)
    publisher.close()
    broker.stop()
    broker = start_broker(SqliteStorage(path))
    back = Paho(broker.port, "durable", V311, clean=False)
    assert back.session_present
    message = back.next()
    assert (message.topic, message.payload, message.qos) == ("restart/t", b"kept", 1)
    back.close()


def test_retained_message_set_replaced_and_cleared(broker: BrokerThread) -> None:
    publisher = Paho(broker.port, "pub", V5)
    publisher.publish("ret/t", b"first", 1, retain=True)
    publisher.publish("ret/t", b"second", 1, retain=True)
    late = Paho(broker.port, "late", V5)
    late.subscribe("ret/#", 1)
    message = late.next()
    assert (message.payload, message.retain) == (b"second", True)
    publisher.publish("ret/t", b"", 1, retain=True)
    cleared = late.next()  # the empty retained message still reaches current subscribers
    assert (cleared.payload, cleared.retain) == (b"", False)
    later = Paho(broker.port, "later", V5)
    later.subscribe("ret/#", 1)
    publisher.publish("ret/other", b"marker", 1)
    assert later.next().payload == b"marker"  # nothing retained came before it
    for client in (publisher, late, later):
        client.close()


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_will_on_abnormal_close_only(broker: BrokerThread, version: MQTTProtocolVersion) -> None:
    watcher = Paho(broker.port, "watcher", V5)
    watcher.subscribe("will/#", 1)
    for client_id, abrupt in (("polite", False), ("crasher", True)):
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version)
        client.will_set(f"will/{client_id}", b"gone", 1)
        client.connect(HOST, broker.port)
        client.loop_start()
        client.publish("will/alive", client_id.encode(), 1).wait_for_publish(DEADLINE)
        client.loop_stop()
        if abrupt:
            sock = client.socket()
            assert sock is not None
            sock.close()
        else:
            client.disconnect()
    got = [watcher.next() for _ in range(3)]
    assert [(m.topic, m.payload) for m in got] == [
        ("will/alive", b"polite"),
        ("will/alive", b"crasher"),
        ("will/crasher", b"gone"),
    ]
    watcher.close()


def test_takeover_disconnects_the_first_connection_with_0x8e(
    broker: BrokerThread, raw: Callable[..., Raw]
) -> None:
    first = raw(ProtocolLevel.MQTT_5)
    first.send(ConnectPacket("twin", ProtocolLevel.MQTT_5))
    assert isinstance(first.receive(), ConnackPacket)
    second = raw(ProtocolLevel.MQTT_5)
    second.send(ConnectPacket("twin", ProtocolLevel.MQTT_5))
    assert isinstance(second.receive(), ConnackPacket)
    disconnect = first.receive()
    assert isinstance(disconnect, DisconnectPacket)
    assert disconnect.reason_code == ReasonCode.SESSION_TAKEN_OVER
    assert first.closed()
    stats = broker.broker.statistics()
    assert stats["connections"] == 1 and stats["sessions"] == 1


class EnqueueFails(MemoryStorage):
    """A real MemoryStorage whose queue writes fail, as a full disk would."""

    async def enqueue(self, items: Any) -> Any:
        raise StorageError("disk full")


def assert_refused_for_storage(publisher: Raw) -> None:
    """The answer to a QoS 1 PUBLISH the broker could not store: PUBACK 0x80 at 5.0; at
    3.1.1, which cannot say it failed, no PUBACK at all and the connection closed."""
    if publisher.level == ProtocolLevel.MQTT_5:
        puback = publisher.receive()
        assert isinstance(puback, PubackPacket)
        assert puback.reason_code == ReasonCode.UNSPECIFIED_ERROR
    else:
        assert publisher.closed()
        assert publisher.reader.next_packet() is None


@pytest.mark.parametrize("level", [ProtocolLevel.MQTT_5, ProtocolLevel.MQTT_3_1_1])
def test_storage_failure_is_never_acknowledged_as_success(
    start_broker: Callable[[Storage], BrokerThread], level: ProtocolLevel
) -> None:
    broker = start_broker(EnqueueFails())
    keeper = Paho(broker.port, "keeper", V311, clean=False)
    keeper.subscribe("durable/t", 1)
    keeper.close()
    publisher = Raw(broker.port, level)
    try:
        publisher.send(ConnectPacket("pub", level))
        assert isinstance(publisher.receive(), ConnackPacket)
        publisher.send(PublishPacket("durable/t", b"m", 1, packet_id=1))
        assert_refused_for_storage(publisher)
    finally:
        publisher.sock.close()
