"""Micro-benchmark of the broker's per-message Python work (a script, not a test).

Drives a real Hub/Lifecycle/Client stack in one process through fake transports: no
sockets, no syscalls, so what it measures is the interpreter's work per message (decode,
state, routing, delivery, encode, acks), the part `mqttq bench` cannot separate from the
kernel. Two loads:

- `p2p`: 100 publisher/subscriber pairs, QoS 1, 62-byte payloads, 10 PUBLISHes per read;
  the subscribers answer with PUBACKs. One message = PUBLISH in, PUBLISH out, two acks.
- `fanout`: 1 publisher, 50 QoS 0 subscribers on the same topic.
- `p2p --integration-log`: the `p2p` load with one integration matching every message
  (`t/#`): each message is also appended to its log (`IntegrationLog`, a temporary
  directory: one write and one fdatasync per loop iteration, on a worker thread, counted
  here too), and the publisher's PUBACK waits for that; no worker drains it. The
  integration's own cost on the publish path, without its sink.
- `p2p-idle`: the `p2p` stack, one PUBLISH per read and its subscriber's PUBACK, then 1 ms
  of sleep, as at 1,000 msg/s every message meets an idle process: the median of the
  thread's CPU per message (the work after a wake-up, without the loop and the kernel).

    python benchmarks/micro/broker_inproc.py p2p --messages 40000     # CPU us per message
    python benchmarks/micro/broker_inproc.py p2p --integration-log --settle-heap
    python benchmarks/micro/broker_inproc.py fanout --messages 4000
    taskset -c 0 python benchmarks/micro/broker_inproc.py p2p-idle --messages 4000

On a shared machine CPU time is noisy; the instruction count is not. With valgrind:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/micro/broker_inproc.py p2p --messages 2000 --trials 1
    # once with N and once with 2N messages: (Ir(2N) - Ir(N)) / N = instructions per message

docs/benchmarks.md ("Hot path changes") quotes these numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import uvloop

from mqttq.auth.authenticator import Authenticator
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.broker.connection.client import Client
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.server import node_limits
from mqttq.broker.sessions.lifecycle import Lifecycle
from mqttq.codec import encode_packet
from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import (
    ConnectPacket,
    PubackPacket,
    PublishPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.properties import Properties
from mqttq.config import Settings
from mqttq.heap import settle_heap
from mqttq.integrations.append_log import IntegrationLog
from mqttq.storage.memory import MemoryStorage

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `tests`
from tests.memory_transport import MemoryTransport

PAYLOAD = b"x" * 62
BURST = 10
"""PUBLISHes (and PUBACKs) per data_received call."""
IDLE_GAP = 0.001
"""Seconds of sleep before each message of `p2p-idle` (1,000 msg/s)."""


async def _connect(life: Lifecycle, client_id: str, receive_maximum: int) -> Client:
    client = Client(life)
    client.connection_made(cast(asyncio.Transport, MemoryTransport(keep=False)))
    props = Properties(receive_maximum=receive_maximum)
    client.data_received(
        encode_packet(ConnectPacket(client_id, ProtocolLevel.MQTT_5, True, 60, properties=props), 5)
    )
    for _ in range(100):
        await asyncio.sleep(0)
        if client.session is not None and client.session.ready:
            return client
    raise RuntimeError(f"{client_id} did not connect")


async def run(
    mode: str,
    messages: int,
    trials: int,
    integration_log: bool = False,
    settled: bool = False,
) -> list[float]:
    """CPU microseconds per inbound message, one figure per trial (`integration_log`: see
    the module docstring; `settled`: the collector settled as `mqttq serve` settles it,
    once the clients are connected)."""
    storage = MemoryStorage()
    await storage.open()
    settings = Settings()
    hub = Hub(settings.mqtt, storage, node_limits(settings.mqtt_limit))
    authenticator = Authenticator(EmptyAuthStore(), anonymous="always")
    life = Lifecycle(hub, asyncio.get_running_loop(), authenticator)
    p2p = mode in ("p2p", "p2p-idle")
    subscriber_count = 100 if p2p else 50
    publisher_count = 100 if p2p else 1
    subscribers = []
    for index in range(subscriber_count):
        client = await _connect(life, f"s{index}", 65535)
        topic_filter = f"t/{index}" if p2p else "t/x"
        request = SubscriptionRequest(topic_filter, 1 if p2p else 0)
        client.data_received(encode_packet(SubscribePacket(1, [request]), 5))
        subscribers.append(client)
    appended: IntegrationLog | None = None
    if integration_log:
        # A session subscribed to every topic whose deliveries go to a log, as an
        # integration's do (mqttq/broker/integrations.py registers it the same way).
        sink = await _connect(life, "integration", 65535)
        sink.data_received(encode_packet(SubscribePacket(1, [SubscriptionRequest("t/#", 1)]), 5))
        appended = IntegrationLog(Path(tempfile.mkdtemp(prefix="mqttq-bench-log-")), "default")
        appended.open()
        hub.appenders["integration"] = appended.append
    publishers = [await _connect(life, f"p{index}", 65535) for index in range(publisher_count)]
    await asyncio.sleep(0)
    if settled:
        settle_heap()
    qos = 1 if p2p else 0
    bursts = []
    for index in range(publisher_count):
        topic = f"t/{index}" if p2p else "t/x"
        packets = [
            encode_packet(PublishPacket(topic, PAYLOAD, qos, False, False, pid if qos else None), 5)
            for pid in range(1, 101)
        ]
        bursts.append([b"".join(packets[k : k + BURST]) for k in range(0, 100, BURST)])
    acks = [encode_packet(PubackPacket(pid), 5) for pid in range(1, 65536)]
    next_id = [0] * subscriber_count
    if mode == "p2p-idle":
        return [await _idle_trial(publishers, subscribers, acks, messages) for _ in range(trials)]
    rounds = max(1, messages // (publisher_count * BURST))
    results = []
    for _ in range(trials):
        start = time.process_time()
        for round_index in range(rounds):
            for index, publisher in enumerate(publishers):
                publisher.data_received(bursts[index][round_index % len(bursts[index])])
            await asyncio.sleep(0)  # the flushes run
            while appended is not None and publishers[-1].steps:
                # The log's fsync, then its answers. Woken by it, not polling: a poll's loop
                # iterations are CPU the broker would not spend, and vary with the disk.
                # (Set before the wait: a sync of an earlier round; the check runs again.)
                await appended.grown.wait()
                appended.grown.clear()
                await asyncio.sleep(0)  # the answers run
            if p2p:
                for index, subscriber in enumerate(subscribers):
                    base = next_id[index]
                    subscriber.data_received(
                        b"".join(acks[(base + k) % 65535] for k in range(BURST))
                    )
                    next_id[index] = base + BURST
                await asyncio.sleep(0)
        elapsed = time.process_time() - start
        results.append(elapsed / (rounds * publisher_count * BURST) * 1e6)
    return results


async def _idle_trial(
    publishers: list[Client], subscribers: list[Client], acks: list[bytes], messages: int
) -> float:
    """Median thread CPU (us) of one p2p QoS 1 message handled after IDLE_GAP of sleep."""
    packets = [
        [
            encode_packet(PublishPacket(f"t/{index}", PAYLOAD, 1, False, False, pid), 5)
            for pid in range(1, 101)
        ]
        for index in range(len(publishers))
    ]
    acked = [0] * len(subscribers)  # the subscribers' sessions number from 1 again
    costs = []
    for count in range(messages):
        index = count % len(publishers)
        started = time.thread_time_ns()
        publishers[index].data_received(packets[index][(count // len(publishers)) % 100])
        await asyncio.sleep(0)  # the flushes run
        subscribers[index].data_received(acks[acked[index] % 65535])
        acked[index] += 1
        await asyncio.sleep(0)
        costs.append(time.thread_time_ns() - started)
        time.sleep(IDLE_GAP)
    return statistics.median(costs) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("p2p", "fanout", "p2p-idle"))
    parser.add_argument("--messages", type=int, default=40_000, help="inbound messages per trial")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument(
        "--integration-log", action="store_true", help="p2p: one integration's log takes all"
    )
    parser.add_argument(
        "--settle-heap",
        action="store_true",
        help="the collector as `mqttq serve` sets it (mqttq/heap.py), once connected",
    )
    args = parser.parse_args()
    results = uvloop.run(
        run(args.mode, args.messages, args.trials, args.integration_log, args.settle_heap)
    )
    print(
        f"{args.mode}: {statistics.median(results):.2f} us CPU per inbound message "
        f"(median of {len(results)}, min {min(results):.2f})"
    )


if __name__ == "__main__":
    main()
