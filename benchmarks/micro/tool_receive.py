"""The load tool's receive path, in process (a benchmark, not a test): how much CPU
`mqttq bench` spends on one delivered QoS 1 message, so that its ceiling is known.

Feeds a `BenchClient` reads of 100 QoS 1 PUBLISHes each (62-byte bench payloads, MQTT
5.0), as a broker draining a backlog sends them; per message the client decodes the
PUBLISH, queues its PUBACK, and its `Subscriber` reads the payload header, accounts the
sequence and records the latency; one write of the PUBACKs per read. No socket, no event
loop: the syscalls and the loop's own work come on top in a real run.

    python benchmarks/micro/tool_receive.py [--reads 300] [--trials 5]
    MQTTQ_PURE=1 python benchmarks/micro/tool_receive.py

docs/benchmarks.md (issue 14, section 11) quotes it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import cast

from mqttq.bench.client import BenchClient, Counters
from mqttq.bench.payload import PayloadBuilder
from mqttq.bench.scenarios import SubscriberSpec
from mqttq.bench.stats import LatencyHistogram
from mqttq.bench.subscriber import Subscriber
from mqttq.build import describe
from mqttq.codec import PublishPacket, encode_packet

PER_READ = 100


class _Sink:
    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def _reads(count: int) -> list[bytes]:
    builder = PayloadBuilder(0, 62)
    now = time.time_ns()
    return [
        b"".join(
            encode_packet(
                PublishPacket(
                    "bench/t/0", builder.build(r * PER_READ + i, now), 1, False, False, i + 1
                ),
                5,
            )
            for i in range(PER_READ)
        )
        for r in range(count)
    ]


def trial(reads: list[bytes]) -> float:
    """µs of CPU per message over `reads`, on a fresh client and subscriber."""
    counters = Counters()
    subscriber = Subscriber(SubscriberSpec(0, "c", "bench/t/#", None), counters, LatencyHistogram())
    client = BenchClient("c", 5, counters, on_payload=subscriber.on_payload)
    client.connection_made(cast(asyncio.Transport, _Sink()))
    start = time.process_time_ns()
    for data in reads:
        client.data_received(data)
    elapsed = time.process_time_ns() - start
    assert counters.received == len(reads) * PER_READ
    return elapsed / 1000 / (len(reads) * PER_READ)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    reads = _reads(args.reads)
    results = [trial(reads) for _ in range(args.trials)]
    print(
        f"tool receive path ({describe()}): {min(results):.2f} µs CPU per QoS 1 message "
        f"(best of {args.trials}; {sorted(round(r, 2) for r in results)})"
    )


if __name__ == "__main__":
    main()
