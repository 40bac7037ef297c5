"""The bench tool's receive path, without a socket: the bytes a broker would send go into a
`BenchClient`; what it writes back and what its `Subscriber` accounts are checked. This is
the compiled part of the tool (`mqttq.build`), so the pure-Python run covers it too
(tests/integration/test_pure_python.py)."""

from __future__ import annotations

import asyncio
from typing import cast

from mqttq.bench.client import BenchClient, Counters
from mqttq.bench.payload import PayloadBuilder
from mqttq.bench.scenarios import SubscriberSpec
from mqttq.bench.stats import LatencyHistogram
from mqttq.bench.subscriber import Subscriber
from mqttq.codec import PacketReader, PubackPacket, PublishPacket, encode_packet


class _Transport:
    """Collects what the client writes."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        pass


def _receiver(backlog: int = -1) -> tuple[BenchClient, Subscriber, _Transport, Counters]:
    counters = Counters()
    subscriber = Subscriber(
        SubscriberSpec(0, "sub-0", "bench/#", None), counters, LatencyHistogram()
    )
    subscriber.backlog = backlog
    client = BenchClient("sub-0", 5, counters, on_payload=subscriber.on_payload)
    transport = _Transport()
    client.connection_made(cast(asyncio.Transport, transport))
    return client, subscriber, transport, counters


def _publish(sequence: int, packet_id: int, *, publisher: int = 3, qos: int = 1) -> bytes:
    payload = PayloadBuilder(publisher, 62).build(sequence, 0)
    return encode_packet(PublishPacket("bench/t", payload, qos, False, False, packet_id), 5)


def _written_packets(transport: _Transport) -> list[object]:
    reader = PacketReader(1 << 20, 5)
    reader.feed(b"".join(transport.written))
    packets = []
    while (packet := reader.next_packet()) is not None:
        packets.append(packet)
    return packets


def test_a_read_of_qos1_publishes_is_acknowledged_in_one_write_in_order() -> None:
    client, subscriber, transport, counters = _receiver()
    client.data_received(b"".join(_publish(n, n + 1) for n in range(5)))
    assert len(transport.written) == 1
    packets = _written_packets(transport)
    assert [type(p) for p in packets] == [PubackPacket] * 5
    assert [cast(PubackPacket, p).packet_id for p in packets] == [1, 2, 3, 4, 5]
    assert counters.received == 5
    assert subscriber.unique == 5
    assert subscriber.result.trackers[3].highest == 4


def test_a_packet_split_across_reads_is_delivered_once_whole() -> None:
    client, _subscriber, transport, counters = _receiver()
    data = _publish(0, 7)
    client.data_received(data[:10])
    assert counters.received == 0
    assert transport.written == []
    client.data_received(data[10:])
    assert counters.received == 1
    assert [cast(PubackPacket, p).packet_id for p in _written_packets(transport)] == [7]


def test_a_redelivered_sequence_counts_as_a_duplicate_and_is_still_acknowledged() -> None:
    client, _subscriber, transport, counters = _receiver()
    client.data_received(_publish(0, 1) + _publish(0, 2))
    assert counters.received == 1
    assert counters.duplicates == 1
    assert len(_written_packets(transport)) == 2


def test_the_backlog_counts_as_drained_at_its_last_unique_message() -> None:
    client, subscriber, _transport, _counters = _receiver(backlog=3)
    client.data_received(_publish(0, 1) + _publish(1, 2))
    assert subscriber.result.drained_ns is None
    client.data_received(_publish(1, 3))  # a duplicate does not complete it
    assert subscriber.result.drained_ns is None
    client.data_received(_publish(2, 4))
    assert subscriber.result.drained_ns is not None


def test_a_payload_that_is_not_the_tools_counts_as_foreign() -> None:
    client, subscriber, transport, counters = _receiver()
    packet = PublishPacket("bench/t", b"not a bench payload", 1, False, False, 9)
    client.data_received(encode_packet(packet, 5))
    assert subscriber.result.foreign == 1
    assert counters.received == 0
    assert [cast(PubackPacket, p).packet_id for p in _written_packets(transport)] == [9]
