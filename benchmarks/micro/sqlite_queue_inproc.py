"""Micro-benchmark of the SQLite queue store's writer work (a script, not a test).

Times the jobs the writer thread runs, inside the job (no commit, no fsync), on a real
`SqliteStorage` in a temporary directory:

- `fanout`: 100 messages to 100 clients in 5 calls of 2,000 entries, as the persistent
  scenario of `benchmarks/peers/compare.py` enqueues them (one run per client per call);
- `inbox-fanout`: the same 10,000 entries in one call, as the publish inbox queues the
  fan-out of a burst read in one loop iteration;
- `live`: live traffic to online persistent sessions, 100 clients, one entry each per call,
  each acknowledged one call later (runs of one entry);
- `removals`: 30,000 one-entry runs of one client removed in batches of 100 (the drain of
  a backlog that arrived one message at a time);
- `drain-acks`: the `fanout` backlog acknowledged as a drain does, in 5 batches of 2,000
  across all clients (each client's oldest 20 per batch), so most batches leave runs
  partly live (issue 14, section 11).

    python benchmarks/micro/sqlite_queue_inproc.py fanout
    python benchmarks/micro/sqlite_queue_inproc.py inbox-fanout --trials 15
    python benchmarks/micro/sqlite_queue_inproc.py live
    python benchmarks/micro/sqlite_queue_inproc.py removals
    python benchmarks/micro/sqlite_queue_inproc.py drain-acks

docs/benchmarks.md (issue 14, section 6) quotes these numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from mqttq.model import Message
from mqttq.storage.sqlite.store import SqliteStorage

CLIENTS = [f"bench-{index:04d}-sub" for index in range(100)]


def _message(n: int) -> Message:
    return Message("bench/queue", b"p%d" % n + b"x" * 60, 1, created_at=1_700_000_000.0)


async def fanout(storage: SqliteStorage) -> float:
    messages = [_message(n) for n in range(100)]
    seconds = 0.0
    for call in range(5):
        items = [(c, m) for m in messages[call * 20 : (call + 1) * 20] for c in CLIENTS]
        seconds += await storage._writer.submit(lambda conn, i=items: _timed(storage, conn, i))
    return seconds * 1e3


async def inbox_fanout(storage: SqliteStorage) -> float:
    messages = [_message(n) for n in range(100)]
    items = [(c, m) for m in messages for c in CLIENTS]
    return float(await storage._writer.submit(lambda conn: _timed(storage, conn, items))) * 1e3


async def live(storage: SqliteStorage) -> float:
    messages = [_message(n) for n in range(100)]
    rounds = 300

    def job(conn: sqlite3.Connection) -> float:
        start = time.process_time()
        previous = None
        for r in range(rounds):
            entries = storage._enqueue(conn, [(c, messages[r % 100]) for c in CLIENTS])
            if previous is not None:
                acked = [(c, e.packet_id) for c, e in zip(CLIENTS, previous, strict=True) if e]
                storage._remove(conn, acked)
            previous = entries
        return time.process_time() - start

    seconds = await storage._writer.submit(job)
    return seconds * 1e6 / (rounds * len(CLIENTS))


async def removals(storage: SqliteStorage) -> float:
    count = 30_000
    message = _message(0)
    entries = await asyncio.gather(*(storage.enqueue([("slow", message)]) for _ in range(count)))
    ids = [e[0].packet_id for e in entries if e[0] is not None]

    def job(conn: sqlite3.Connection) -> float:
        start = time.process_time()
        for k in range(0, count, 100):
            storage._remove(conn, [("slow", packet_id) for packet_id in ids[k : k + 100]])
        return time.process_time() - start

    return float(await storage._writer.submit(job)) * 1e3


async def drain_acks(storage: SqliteStorage) -> float:
    messages = [_message(n) for n in range(100)]
    items = [(c, m) for m in messages for c in CLIENTS]
    entries = await storage.enqueue(items)
    acks = [(c, e.packet_id) for (c, _m), e in zip(items, entries, strict=True) if e]

    def job(conn: sqlite3.Connection) -> float:
        start = time.process_time()
        for k in range(0, len(acks), 2000):
            storage._remove(conn, acks[k : k + 2000])
        return time.process_time() - start

    return float(await storage._writer.submit(job)) * 1e6 / len(acks)


def _timed(
    storage: SqliteStorage, conn: sqlite3.Connection, items: list[tuple[str, Message]]
) -> float:
    start = time.process_time()
    storage._enqueue(conn, items)
    return time.process_time() - start


UNITS = {
    "fanout": "ms of writer CPU for 10,000 entries (5 calls of 2,000)",
    "inbox-fanout": "ms of writer CPU for 10,000 entries in one call",
    "live": "us of writer CPU per message (enqueue + removal)",
    "removals": "ms of writer CPU for 30,000 one-entry runs, removed 100 at a time",
    "drain-acks": "us of writer CPU per entry, 10,000 removed in 5 batches across 100 clients",
}


async def run(mode: str) -> float:
    with tempfile.TemporaryDirectory(prefix="mqttq-queue-") as tmp:
        storage = SqliteStorage(Path(tmp) / "mqttq.sqlite3", queue_limit=65535)
        await storage.open()
        try:
            await storage.enqueue([(c, _message(-1)) for c in CLIENTS])  # clients known
            modes = {
                "fanout": fanout,
                "inbox-fanout": inbox_fanout,
                "live": live,
                "removals": removals,
                "drain-acks": drain_acks,
            }
            return await modes[mode](storage)
        finally:
            await storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=tuple(UNITS))
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    figures = [asyncio.run(run(args.mode)) for _ in range(args.trials)]
    shown = ", ".join(f"{f:.2f}" for f in figures)
    print(f"{args.mode}: {statistics.median(figures):.2f} {UNITS[args.mode]} (median of {shown})")


if __name__ == "__main__":
    main()
