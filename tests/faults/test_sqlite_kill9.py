"""kill -9 of a process writing to SqliteStorage loses nothing it acknowledged.

The durability contract of mqttq.storage.ports: once enqueue() returned, the entry is on
disk. The child prints each entry right after its enqueue() returned; every printed entry
must be in the database after the child was killed mid-stream.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from mqttq.storage.sqlite.store import SqliteStorage

ACKS_BEFORE_KILL = 400
_REPO = Path(__file__).resolve().parents[2]


def read_acks(stream: bytes) -> list[tuple[str, int, int, bytes]]:
    acks = []
    for line in stream.split(b"\n"):
        parts = line.split()
        if len(parts) == 4:  # a line cut by the kill has no ack in it
            client, serial, packet_id, payload = parts
            acks.append((client.decode(), int(serial), int(packet_id), payload))
    return acks


def test_acknowledged_entries_survive_kill9(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("sqlite_kill9_child.py")), str(path)],
        stdout=subprocess.PIPE,
        cwd=_REPO,
        env=env,
    )
    assert child.stdout is not None
    seen = 0
    head = []
    while seen < ACKS_BEFORE_KILL:
        line = child.stdout.readline()
        if not line:
            break
        head.append(line)
        seen += 1
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate()
    assert child.returncode == -signal.SIGKILL, "the child ended before it was killed"
    acks = read_acks(b"".join(head) + rest)
    assert len(acks) >= ACKS_BEFORE_KILL

    async def stored() -> dict[tuple[str, int], tuple[int, bytes]]:
        storage = SqliteStorage(path, queue_limit=65535)
        await storage.open()
        try:
            found = {}
            for client in {a[0] for a in acks}:
                for entry in await storage.fetch(client, 0):
                    found[client, entry.serial] = (entry.packet_id, entry.message.payload)
            return found
        finally:
            await storage.close()

    found = asyncio.run(stored())
    missing = [a for a in acks if found.get((a[0], a[1])) != (a[2], a[3])]
    assert missing == []
