"""Micro-benchmark of an offline backlog drain on the embedded SQLite store (a script,
not a test).

The persistent scenario of `benchmarks/peers/compare.py` without sockets and without the load
tool: a real Hub/Lifecycle/Client stack on a real `SqliteStorage` in a temporary
directory, driven through fake transports. 100 persistent sessions subscribe to one topic
(QoS 1) and disconnect; one publisher sends 100 QoS 1 messages (10,000 entries); then every
session reconnects, gets its backlog and acknowledges it, 50 reconnects at a time like
`mqttq bench`. Printed per trial: the process CPU (every thread: loop, SQLite writer and
reader) and the wall time of the drain, from the first CONNECT to the last removal
committed, and the same for the publishing.

    python benchmarks/micro/drain_inproc.py --trials 5
    MQTTQ_PURE=1 python benchmarks/micro/drain_inproc.py --trials 1 --profile drain.prof

docs/benchmarks.md (issue 14, section 6) quotes these numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

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
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    PubackPacket,
    PublishPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.properties import Properties
from mqttq.codec.reader import PacketReader
from mqttq.config import Settings
from mqttq.storage.sqlite.store import SqliteStorage

SESSIONS = 100
MESSAGES = 100
IN_FLIGHT_CONNECTS = 50
PAYLOAD = b"x" * 62
TOPIC = "bench/drain"


class RecordingTransport:
    """Decodes what the broker writes; with `auto_ack`, answers each QoS 1 PUBLISH with
    its PUBACK in the next loop iteration, as a client's read would, and counts them."""

    def __init__(self, client: Client, auto_ack: bool = False) -> None:
        self.closed = False
        self.packets: list[Any] = []
        self.acked_at: list[float] = []
        """perf_counter() of each PUBACK written (the publisher's transport)."""
        self.received = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.connack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.expected = MESSAGES
        self._client = client
        self._reader = PacketReader(1 << 28, 5)
        self._auto_ack = auto_ack
        self._acks: list[bytes] = []

    def write(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        while (packet := reader.next_packet()) is not None:
            if self._auto_ack and isinstance(packet, PublishPacket):
                if not self._acks:
                    asyncio.get_running_loop().call_soon(self._send_acks)
                self._acks.append(encode_packet(PubackPacket(packet.packet_id), 5))
                self.received += 1
                if self.received == self.expected and not self.done.done():
                    self.done.set_result(None)
            else:
                if isinstance(packet, ConnackPacket) and not self.connack.done():
                    self.connack.set_result(None)
                elif isinstance(packet, PubackPacket):
                    self.acked_at.append(time.perf_counter())
                self.packets.append(packet)

    def _send_acks(self) -> None:
        acks, self._acks = self._acks, []
        if not self.closed:
            self._client.data_received(b"".join(acks))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self._client.connection_lost, None)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _connect(
    life: Lifecycle, client_id: str, clean: bool, auto_ack: bool = False
) -> tuple[Client, RecordingTransport]:
    client = Client(life)
    transport = RecordingTransport(client, auto_ack)
    client.connection_made(cast(asyncio.Transport, transport))
    props = Properties(receive_maximum=65535, session_expiry_interval=3600)
    packet = ConnectPacket(client_id, ProtocolLevel.MQTT_5, clean, 60, properties=props)
    client.data_received(encode_packet(packet, 5))
    return client, transport


async def _until(done: Any, what: str) -> None:
    for _ in range(200_000):
        if done():
            return
        await asyncio.sleep(0)
    raise RuntimeError(f"timed out waiting for {what}")


async def trial(
    directory: Path, profile: cProfile.Profile | None = None
) -> tuple[float, float, float, float, float]:
    """(publish CPU ms, publish wall ms, drain CPU ms, drain wall ms, ms from the burst of
    PUBLISHes to the 50th PUBACK); `profile` records the drain (the loop's thread only)."""
    storage = SqliteStorage(directory / "mqttq.sqlite3")
    await storage.open()
    settings = Settings()
    hub = Hub(settings.mqtt, storage, node_limits(settings.mqtt_limit))
    authenticator = Authenticator(EmptyAuthStore(), anonymous="always")
    life = Lifecycle(hub, asyncio.get_running_loop(), authenticator)
    ids = [f"drain-sub-{index:04d}" for index in range(SESSIONS)]
    for client_id in ids:
        client, _transport = _connect(life, client_id, True)
        await _until(lambda c=client: c.session is not None and c.session.ready, "CONNACK")
        client.data_received(encode_packet(SubscribePacket(1, [SubscriptionRequest(TOPIC, 1)]), 5))
        await hub.tasks.barrier(client_id)
        client.data_received(encode_packet(DisconnectPacket(), 5))
        await _until(lambda c=client: c.closed, "the disconnect")
    await hub.tasks.barrier()
    publisher, out = _connect(life, "drain-pub", True)
    await _until(lambda: publisher.session is not None and publisher.session.ready, "CONNACK")
    out.packets.clear()
    burst = b"".join(
        encode_packet(PublishPacket(TOPIC, PAYLOAD, 1, False, False, pid), 5)
        for pid in range(1, MESSAGES + 1)
    )

    def all_acked() -> bool:
        return len(out.acked_at) >= MESSAGES

    cpu, wall = time.process_time(), time.perf_counter()
    publisher.data_received(burst)
    await _until(all_acked, "the PUBACKs")
    publish = (time.process_time() - cpu) * 1e3, (time.perf_counter() - wall) * 1e3
    puback_p50 = (out.acked_at[MESSAGES // 2 - 1] - wall) * 1e3
    await hub.tasks.barrier()

    if profile is not None:
        profile.enable()
    cpu, wall = time.process_time(), time.perf_counter()
    semaphore = asyncio.Semaphore(IN_FLIGHT_CONNECTS)

    async def drain(client_id: str) -> None:
        async with semaphore:  # like the tool: a CONNECT in flight until its CONNACK
            _client, transport = _connect(life, client_id, False, auto_ack=True)
            await transport.connack
        await transport.done

    await asyncio.gather(*(drain(client_id) for client_id in ids))
    await hub.tasks.barrier()
    drained = (time.process_time() - cpu) * 1e3, (time.perf_counter() - wall) * 1e3
    if profile is not None:
        profile.disable()
    await storage.close()
    return (*publish, *drained, puback_p50)


async def run(
    trials: int, profile: cProfile.Profile | None
) -> list[tuple[float, float, float, float, float]]:
    results = []
    for index in range(trials):
        with tempfile.TemporaryDirectory(prefix="mqttq-drain-") as tmp:
            results.append(await trial(Path(tmp), profile if index == trials - 1 else None))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--profile", help="write cProfile stats of the last drain here")
    args = parser.parse_args()
    profile = cProfile.Profile() if args.profile else None
    results = uvloop.run(run(args.trials, profile))
    if profile is not None:
        profile.dump_stats(args.profile)
    for name, index in (("publish", 0), ("drain", 2)):
        cpu = statistics.median(r[index] for r in results)
        wall = statistics.median(r[index + 1] for r in results)
        print(
            f"{name}: {cpu:.1f} ms CPU, {wall:.1f} ms wall for {SESSIONS * MESSAGES:,} entries"
            f" (median of {len(results)})"
        )
    p50 = statistics.median(r[4] for r in results)
    print(f"50th PUBACK: {p50:.1f} ms after the burst of {MESSAGES} PUBLISHes (median)")


if __name__ == "__main__":
    main()
