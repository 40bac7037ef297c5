"""SqliteStorage enqueue throughput with 1, 10 and 100 concurrent callers (not a test).

Each caller loops `await storage.enqueue([(client, message)])` (one message per call, as a
QoS 1 PUBLISH to one offline persistent subscriber would) for a fixed time. Printed per run:
messages/s, commits/s and calls per commit, which shows group commit at work: with more
callers, more calls share one fsync.

    python benchmarks/storage_sqlite.py [--seconds 3] [--payload 64] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from mqttq.model import Message
from mqttq.storage.sqlite import SqliteStorage


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--payload", type=int, default=64, help="payload bytes")
    parser.add_argument("--commit-interval", type=float, default=0.002, help="seconds")
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(
            f"SqliteStorage, {args.payload}-byte payloads, commit_interval {args.commit_interval}s"
        )
        for callers in (1, 10, 100):
            path = Path(tmp) / f"bench-{callers}.db"
            asyncio.run(run(path, callers, args.seconds, args.payload, args.commit_interval))


if __name__ == "__main__":
    main()
