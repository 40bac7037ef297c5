"""`application_session_ctx`: what a disconnected APPLICATION client's consumer leaves for
its next connection (mqttq.protocol.app_pack.AppContext), by client id.

Two adapters with one contract (tests/contract/test_app_context_contract.py): SQLite in
the embedded data file (a table of the schema in `sqlite_schema`, version 4) and PostgreSQL
(`mqttq.storage.postgres.app_context`, with `[auth] store = "postgres"`). Writes happen once per
disconnect, so each call is one statement, durable when it returns. The unacknowledged
entries are stored as TBMQ does, a JSON list of {offset, packetId, kind}.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mqttq.errors import StorageError
from mqttq.model import AppContext, PendingKind, Unacked
from mqttq.storage.sqlite.schema import connect

__all__ = ["SqliteAppContextStore", "context_from_row", "unacked_to_json"]

T = TypeVar("T")

COLUMNS = "client_id, last_updated_time, pack_offset, unacked"


def unacked_to_json(unacked: list[Unacked]) -> str:
    return json.dumps(
        [{"offset": u.offset, "packetId": u.packet_id, "kind": str(u.kind)} for u in unacked],
        separators=(",", ":"),
    )


def context_from_row(row: tuple[Any, ...]) -> AppContext:
    """An AppContext from (client_id, last_updated_time, pack_offset, unacked JSON)."""
    client_id, updated, offset, unacked = row
    items = [
        Unacked(int(u["offset"]), int(u["packetId"]), PendingKind(u["kind"]))
        for u in json.loads(unacked)
    ]
    return AppContext(client_id, None if offset is None else int(offset), items, float(updated))


def context_row(context: AppContext) -> tuple[Any, ...]:
    return (
        context.client_id,
        context.updated_at,
        context.offset,
        unacked_to_json(context.unacked),
    )


class SqliteAppContextStore:
    """AppContextStore on the embedded SQLite file (its own connection; calls run in a
    worker thread one at a time). Failures raise StorageError naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    async def open(self) -> None:
        def work() -> None:
            with self._lock:
                if self._conn is None:
                    conn = connect(self.path)
                    conn.close()  # connect() made the schema; calls use their own thread's
                    self._conn = sqlite3.connect(
                        self.path, isolation_level=None, check_same_thread=False
                    )
                    self._conn.execute("PRAGMA busy_timeout = 5000")

        await asyncio.to_thread(work)

    async def close(self) -> None:
        def work() -> None:
            with self._lock:
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.close()

        await asyncio.to_thread(work)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                if self._conn is None:
                    raise StorageError(f"sqlite: {self.path} is not open")
                try:
                    return work(self._conn)
                except sqlite3.Error as exc:
                    raise StorageError(f"sqlite: {self.path}: {exc}") from None

        return await asyncio.to_thread(locked)

    async def load_app_context(self, client_id: str) -> AppContext | None:
        query = f"SELECT {COLUMNS} FROM application_session_ctx WHERE client_id = ?"
        row = await self._run(lambda conn: conn.execute(query, (client_id,)).fetchone())
        return None if row is None else context_from_row(row)

    async def save_app_context(self, context: AppContext) -> None:
        query = f"INSERT OR REPLACE INTO application_session_ctx ({COLUMNS}) VALUES (?, ?, ?, ?)"
        row = context_row(context)
        await self._run(lambda conn: conn.execute(query, row))

    async def delete_app_context(self, client_id: str) -> None:
        query = "DELETE FROM application_session_ctx WHERE client_id = ?"
        await self._run(lambda conn: conn.execute(query, (client_id,)))

    async def list_app_contexts(self) -> list[AppContext]:
        query = f"SELECT {COLUMNS} FROM application_session_ctx ORDER BY client_id"
        rows = await self._run(lambda conn: conn.execute(query).fetchall())
        return [context_from_row(row) for row in rows]
