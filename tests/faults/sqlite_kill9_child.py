"""Child process of test_sqlite_kill9: enqueue forever, print every acknowledged entry.

Usage: python sqlite_kill9_child.py DB_PATH. Each line printed is `client serial packet_id
payload`, written only after the enqueue() that stored it returned, i.e. after its commit.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mqttq.model import Message
from mqttq.storage.sqlite.store import SqliteStorage

WORKERS = 16
CLIENTS = 4
BATCH = 5
CALLS_PER_WORKER = 2000
"""Bounded so no client passes the queue limit: DROP_OLDEST must never hide an ack."""


async def worker(storage: SqliteStorage, number: int) -> None:
    client_id = f"c{number % CLIENTS}"
    for call in range(CALLS_PER_WORKER):
        items = [
            (client_id, Message(topic="k", payload=f"w{number}-{call}-{i}".encode(), qos=1))
            for i in range(BATCH)
        ]
        entries = await storage.enqueue(items)
        lines = []
        for (_client, message), entry in zip(items, entries, strict=True):
            assert entry is not None
            lines.append(
                f"{client_id} {entry.serial} {entry.packet_id} {message.payload.decode()}\n"
            )
        sys.stdout.write("".join(lines))
        sys.stdout.flush()


async def main(path: Path) -> None:
    storage = SqliteStorage(path, queue_limit=65535)
    await storage.open()
    await asyncio.gather(*(worker(storage, n) for n in range(WORKERS)))
    await storage.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
