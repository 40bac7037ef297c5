"""Codec properties: round trips, truncated prefixes, garbage in, stream reassembly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttq.codec import Packet, PacketReader, PacketType, decode_packet, encode_packet
from mqttq.errors import Incomplete, ProtocolError

from .strategies import LEVELS, connect_packets, packet_strategies, packets

MAX_SIZE = 268_435_460
CASES = [(level, ptype) for level in LEVELS for ptype in packet_strategies(level)]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode(wire: bytes, level: int | None) -> tuple[Packet, int]:
    return decode_packet(memoryview(wire), level, MAX_SIZE)


@pytest.mark.parametrize(("level", "ptype"), CASES, ids=[f"v{lv}-{t.name}" for lv, t in CASES])
@FAST
@given(data=st.data())
def test_round_trip_and_every_strict_prefix_is_incomplete(
    level: int, ptype: PacketType, data: st.DataObject
) -> None:
    packet = data.draw(packet_strategies(level)[ptype])
    wire = encode_packet(packet, level)
    # Before CONNECT the reader knows no level: a CONNECT brings its own.
    decode_levels = [level, None] if ptype == PacketType.CONNECT else [level]
    for decode_level in decode_levels:
        assert _decode(wire, decode_level) == (packet, len(wire))
        for end in range(len(wire)):
            with pytest.raises(Incomplete):
                _decode(wire[:end], decode_level)


@pytest.mark.parametrize("level", [None, *LEVELS])
@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=48), max_size=st.integers(2, 64) | st.just(MAX_SIZE))
def test_random_bytes_raise_only_incomplete_or_protocol_error(
    level: int | None, garbage: bytes, max_size: int
) -> None:
    try:
        packet, consumed = decode_packet(memoryview(garbage), level, max_size)
    except (Incomplete, ProtocolError):
        return
    assert 0 < consumed <= min(len(garbage), max_size)
    assert packet.packet_type == garbage[0] >> 4


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_packets_raise_only_incomplete_or_protocol_error(
    level: int, data: st.DataObject
) -> None:
    """Valid packets with bytes overwritten reach deep into every decoder."""
    wire = bytearray(encode_packet(data.draw(packets(level)), level))
    for _ in range(data.draw(st.integers(1, 3))):
        wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
    decode_level = data.draw(st.sampled_from([None, level]))
    try:
        _, consumed = _decode(bytes(wire), decode_level)
    except (Incomplete, ProtocolError):
        return
    assert consumed <= len(wire)


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_reader_reassembles_a_stream_split_anywhere(level: int, data: st.DataObject) -> None:
    stream_packets: list[Packet] = [
        data.draw(connect_packets(level)),
        *data.draw(st.lists(packets(level), max_size=8)),
    ]
    stream = b"".join(encode_packet(packet, level) for packet in stream_packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    reader = PacketReader(MAX_SIZE)
    received: list[Packet] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        reader.feed(stream[start:cut])
        start = cut
        while (packet := reader.next_packet()) is not None:
            received.append(packet)
    assert received == stream_packets
    assert reader.protocol_level == level
    assert reader.buffered == 0
