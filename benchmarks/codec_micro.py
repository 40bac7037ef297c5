"""Codec micro-benchmark: packets per second on the broker's hot path (not a test).

Measures, at MQTT 3.1.1 and 5.0: decode of a QoS 1 PUBLISH with a 62-byte payload, encode
of the same PUBLISH, encode of a PUBACK, and PacketReader draining a buffer of PUBLISHes.
Run: python benchmarks/codec_micro.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from mqttq.codec import (
    PacketReader,
    PubackPacket,
    PublishPacket,
    decode_packet,
    encode_packet,
)

MAX_PACKET_SIZE = 268_435_460


def _rate(operation: Callable[[], object], seconds: float) -> float:
    """Calls per second of `operation`, timed in batches for at least `seconds`."""
    batch = 1000
    calls = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(batch):
            operation()
        calls += batch
        elapsed = time.perf_counter() - start
    return calls / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    seconds: float = args.seconds

    publish = PublishPacket("bench/topic/0001", b"x" * 62, qos=1, packet_id=4242)
    puback = PubackPacket(4242)
    for level in (4, 5):
        wire = encode_packet(publish, level)
        view = memoryview(wire)
        stream = wire * 1000

        def drain(stream: bytes = stream, level: int = level) -> None:
            reader = PacketReader(MAX_PACKET_SIZE, level)
            reader.feed(stream)
            while reader.next_packet() is not None:
                pass

        results = {
            "PUBLISH decode": _rate(partial(decode_packet, view, level, MAX_PACKET_SIZE), seconds),
            "PUBLISH encode": _rate(partial(encode_packet, publish, level), seconds),
            "PUBACK encode": _rate(partial(encode_packet, puback, level), seconds),
            "PacketReader PUBLISH": _rate(drain, seconds) * 1000,
        }
        print(f"MQTT level {level} (PUBLISH {len(wire)} bytes on the wire, QoS 1):")
        for name, rate in results.items():
            print(f"  {name:<22} {rate:>12,.0f} packets/s")


if __name__ == "__main__":
    main()
