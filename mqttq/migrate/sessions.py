"""Session records for migrated clients, in the broker's SQLite database (--sessions-to).

Why they are needed: with `[storage] device = "redis"`, the broker keeps its sessions in
SQLite and only the queues in Redis. A client that reconnects with Clean Start 0 and no
session record gets a new session (session present 0), and a new persistent session starts
empty: the broker deletes whatever Redis held for that client id
(`broker/lifecycle.py` `_attach` -> `storage.delete_session` -> the queue's `clear`). So
migrated messages reach a client only if the broker knows its session when it starts.

What is written: one `SessionRecord` per migrated client: DEVICE, protocol level 4 (the
level is replaced by the client's at its next CONNECT), the given session expiry (never, by
default: TBMQ 1.x's persistent sessions did not expire), disconnected now, and no
subscriptions: TBMQ 1.x kept subscriptions in Kafka, not in these tables. Queued messages
are delivered on reconnect all the same; the client subscribes again for new ones.

A record that already exists is left alone (it is the broker's own, with its
subscriptions). The broker reads the records when it starts: write them while it is
stopped, or restart it afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from mqttq.errors import StorageError
from mqttq.migrate.errors import MigrateError, one_line
from mqttq.storage.ports import SessionRecord
from mqttq.storage.sqlite.store import SqliteStorage

PROTOCOL_LEVEL = 4
"""MQTT 3.1.1: what TBMQ 1.x's rows imply (no session expiry); replaced on reconnect."""


class SessionRecords:
    """Adds session records for migrated clients to the SQLite file at `path`."""

    def __init__(self, path: Path, *, session_expiry_interval: int) -> None:
        self.path = path
        self.session_expiry_interval = session_expiry_interval
        self._storage: SqliteStorage | None = None
        self._known: set[str] = set()
        self.written = 0
        self.kept = 0

    async def open(self) -> None:
        """Open (creating if needed) the database and note the sessions it has."""
        storage = SqliteStorage(self.path)
        try:
            await storage.open()
            self._known = {record.client_id for record in await storage.load_sessions()}
        except (StorageError, OSError) as exc:
            await storage.close()
            raise MigrateError(
                f"cannot use the session database {self.path}: {one_line(exc)}"
            ) from exc
        self._storage = storage

    async def close(self) -> None:
        """Commit and close."""
        storage, self._storage = self._storage, None
        if storage is not None:
            try:
                await storage.close()
            except (StorageError, OSError) as exc:
                raise MigrateError(f"session database {self.path}: {one_line(exc)}") from exc

    async def ensure(self, client_ids: Sequence[str]) -> None:
        """A record for each client that has none (durable when this returns)."""
        storage = self._storage
        if storage is None:
            raise MigrateError(f"session database {self.path}: not open")
        now = time.time()
        new = []
        for client_id in client_ids:
            if client_id in self._known:
                self.kept += 1
            else:
                self._known.add(client_id)
                new.append(
                    SessionRecord(
                        client_id, PROTOCOL_LEVEL, self.session_expiry_interval, disconnected_at=now
                    )
                )
        if not new:
            return
        try:
            await asyncio.gather(*(storage.save_session(record) for record in new))
        except (StorageError, OSError) as exc:
            raise MigrateError(f"session database {self.path}: {one_line(exc)}") from exc
        self.written += len(new)
