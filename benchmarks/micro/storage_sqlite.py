"""SqliteStorage enqueue throughput with 1, 10 and 100 concurrent callers (not a test).

Each caller loops `await storage.enqueue([(client, message)])` (one message per call, as a
QoS 1 PUBLISH to one offline persistent subscriber would) for a fixed time. Printed per run:
messages/s, commits/s and calls per commit, which shows group commit at work: with more
callers, more calls share one fsync.

`--fanout` measures instead the backlog of compare.py's persistent-qos1 scenario at the
storage alone: one `enqueue` of 100 messages x 100 clients (the same message object per
client, as the broker hands it), then every client's `fetch`, then `remove_many` in jobs of
1,000 entries; per phase the wall time and the process's CPU time (all threads: the loop,
the writer and the reader), best of `--rounds`.

    python benchmarks/micro/storage_sqlite.py [--seconds 3] [--payload 64] [--dir /tmp/x]
    python benchmarks/micro/storage_sqlite.py --fanout [--rounds 5] [--payload 62]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from mqttq.model import Message
from mqttq.storage.sqlite.store import SqliteStorage


async def run(path: Path, callers: int, seconds: float, payload: int, interval: float) -> None:
    storage = SqliteStorage(path, queue_limit=65535, commit_interval=interval)
    await storage.open()
    message = Message(topic="bench/t", payload=b"x" * payload, qos=1, created_at=time.time())
    sent = 0
    deadline = time.monotonic() + seconds

    async def caller(number: int) -> None:
        nonlocal sent
        # 100 clients per run: queues stay well below the limit, nothing is trimmed.
        items = [(f"client-{number % 100}", message)]
        while time.monotonic() < deadline:
            await storage.enqueue(items)
            sent += 1

    before = storage.statistics()
    started = time.monotonic()
    await asyncio.gather(*(caller(n) for n in range(callers)))
    elapsed = time.monotonic() - started
    after = storage.statistics()
    await storage.close()
    commits = after.commits - before.commits
    print(
        f"{callers:>4} callers: {sent / elapsed:>9.0f} msg/s  {commits / elapsed:>7.0f} commits/s"
        f"  {sent / max(commits, 1):>6.1f} calls/commit  (largest batch {after.largest_batch})"
    )


async def fanout(path: Path, rounds: int, payload: int, clients: int = 100) -> None:
    storage = SqliteStorage(path, queue_limit=65535)
    await storage.open()
    best: dict[str, tuple[float, float]] = {}

    def phase(name: str, wall: float, cpu: float) -> None:
        known = best.get(name)
        best[name] = (wall, cpu) if known is None else (min(known[0], wall), min(known[1], cpu))

    for _ in range(rounds):
        messages = [
            Message(topic="bench/t", payload=b"x" * payload, qos=1, created_at=time.time())
            for _ in range(100)
        ]
        items = [(f"client-{c:04d}", m) for m in messages for c in range(clients)]
        wall, cpu = time.perf_counter(), time.process_time()
        await storage.enqueue(items)
        phase("enqueue", time.perf_counter() - wall, time.process_time() - cpu)
        wall, cpu = time.perf_counter(), time.process_time()
        fetched = [await storage.fetch(f"client-{c:04d}", time.time()) for c in range(clients)]
        phase("fetch", time.perf_counter() - wall, time.process_time() - cpu)
        acks = [(f"client-{c:04d}", e.packet_id) for c in range(clients) for e in fetched[c]]
        wall, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(acks), 1000):
            await storage.remove_many(acks[start : start + 1000])
        phase("remove", time.perf_counter() - wall, time.process_time() - cpu)
    await storage.close()
    entries = 100 * clients
    for name, (wall, cpu) in best.items():
        print(
            f"{name:>8}: {wall * 1000:7.1f} ms wall {cpu * 1000:7.1f} ms CPU"
            f"  ({cpu * 1e6 / entries:5.2f} us CPU per entry, best of {rounds})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--payload", type=int, default=64, help="payload bytes")
    parser.add_argument("--commit-interval", type=float, default=0.002, help="seconds")
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go")
    parser.add_argument("--fanout", action="store_true", help="the 100 x 100 backlog instead")
    parser.add_argument("--rounds", type=int, default=5, help="--fanout rounds")
    args = parser.parse_args()
    if args.fanout:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            print(
                f"SqliteStorage fan-out, 100 messages x 100 clients, {args.payload}-byte payloads"
            )
            asyncio.run(fanout(Path(tmp) / "fanout.db", args.rounds, args.payload))
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(
            f"SqliteStorage, {args.payload}-byte payloads, commit_interval {args.commit_interval}s"
        )
        for callers in (1, 10, 100):
            path = Path(tmp) / f"bench-{callers}.db"
            asyncio.run(run(path, callers, args.seconds, args.payload, args.commit_interval))


if __name__ == "__main__":
    main()
