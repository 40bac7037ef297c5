"""SqliteIntegrationStore: integrations in the embedded broker's `<data_dir>/auth.db`.

The table `integrations` lives in the credentials' file (operator-written configuration,
written rarely, kept apart from the message store's group commit). It is opened the way
`mqttq.storage.sqlite.auth` opens that file: its own connection, WAL, synchronous=FULL,
autocommit (each write is one statement, durable when it returns), calls run one at a time
in a worker thread so the event loop never waits on the disk.

Change feed: one node owns the file, but `mqttq integration add --data-dir ...` may write it
from another process while the broker runs. `watch()` polls `PRAGMA data_version` (it
changes when another connection commits) every `poll_interval` seconds; after such a
commit, or a write through this store, it compares the table with what it saw last and
yields the names that differ (added, changed or deleted). The first item is `RESYNC`, once
the feed has taken its first look.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from mqttq.integrations.stored import StoredIntegration
from mqttq.integrations.stores import (
    RESYNC,
    IntegrationStoreError,
    decode_table,
    encode_table,
)
from mqttq.storage.sqlite.connect import open_durable

__all__ = ["FILE_NAME", "SqliteIntegrationStore"]

T = TypeVar("T")
Row = tuple[Any, ...]

FILE_NAME: Final = "auth.db"
"""The file under the data directory (the credentials' file)."""

_SCHEMA: Final = """CREATE TABLE IF NOT EXISTS integrations (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    paused INTEGER NOT NULL,
    origin TEXT NOT NULL,
    updated_at REAL NOT NULL
)"""
_SELECT: Final = "SELECT name, spec, paused, origin, updated_at FROM integrations ORDER BY name"
_PUT: Final = (
    "INSERT INTO integrations (name, spec, paused, origin, updated_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, paused = excluded.paused, "
    "origin = excluded.origin, updated_at = excluded.updated_at"
)


class SqliteIntegrationStore:
    """The IntegrationStore on one SQLite file (created, with its parent directory, on
    open). Every failure of the file or of SQLite raises IntegrationStoreError naming it."""

    def __init__(self, path: Path, *, poll_interval: float = 1.0) -> None:
        self.path = Path(path)
        self.poll_interval = poll_interval
        self._conn: sqlite3.Connection | None = None
        # A threading lock: the store is loop-agnostic (the CLI runs it on a private loop)
        # and the lock is only held inside the worker thread.
        self._lock = threading.Lock()
        self._writes = 0
        """Writes through this connection (`data_version` only counts the others')."""

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, poll_interval: float = 1.0) -> SqliteIntegrationStore:
        """The store of the broker whose data directory is `data_dir`."""
        return cls(Path(data_dir) / FILE_NAME, poll_interval=poll_interval)

    def _error(self, what: str, exc: BaseException) -> IntegrationStoreError:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return IntegrationStoreError(f"sqlite: cannot {what} {self.path}: {reason}")

    async def open(self) -> None:
        """Open (creating the file and the table if needed)."""
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        with self._lock:
            if self._conn is not None:
                return
            try:
                self._conn = open_durable(self.path, (_SCHEMA,))
            except (sqlite3.Error, OSError) as exc:
                raise self._error("open", exc) from None

    async def close(self) -> None:
        """Close the file; a later `open` opens it again."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._locked, work)

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                raise IntegrationStoreError(f"sqlite: {self.path} is not open")
            try:
                return work(self._conn)
            except sqlite3.Error as exc:
                raise self._error("use", exc) from None
            except UnicodeEncodeError:
                raise IntegrationStoreError(
                    f"sqlite {self.path}: a value is not valid UTF-8"
                ) from None

    # ------------------------------------------------------------------ the store

    async def load(self) -> list[StoredIntegration]:
        """Every stored integration, ordered by name."""
        rows = await self._run(lambda conn: conn.execute(_SELECT).fetchall())
        return [self._item(row) for row in rows]

    async def save(self, stored: StoredIntegration) -> None:
        """Insert or replace by name."""
        row = (
            stored.name,
            encode_table(stored.table, f"sqlite {self.path}"),
            int(stored.paused),
            stored.origin,
            stored.updated_at,
        )

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(_PUT, row)
            self._writes += 1

        await self._run(work)

    async def delete(self, name: str) -> bool:
        """Remove; False when there was none."""

        def work(conn: sqlite3.Connection) -> int:
            removed = conn.execute("DELETE FROM integrations WHERE name = ?", (name,)).rowcount
            self._writes += 1
            return int(removed)

        return await self._run(work) > 0

    def _item(self, row: Any) -> StoredIntegration:
        name, spec, paused, origin, updated_at = row
        table = decode_table(spec, name, f"sqlite {self.path}")
        return StoredIntegration(name, table, bool(paused), origin, float(updated_at))

    # ------------------------------------------------------------------ the feed

    async def watch(self) -> AsyncIterator[str]:
        """`RESYNC` once watching, then the name of every integration added, changed or
        deleted since, by this store or another process (seen within `poll_interval`).
        Runs until the consumer stops iterating; the store must be open."""
        version, seen = await self._run(self._look)
        writes = self._writes
        yield RESYNC
        while True:
            await asyncio.sleep(self.poll_interval)
            now_version = await self._run(_data_version)
            if now_version == version and self._writes == writes:
                continue
            writes = self._writes
            version, rows = await self._run(self._look)
            for name in sorted(seen.keys() | rows.keys()):
                if seen.get(name) != rows.get(name):
                    yield name
            seen = rows

    @staticmethod
    def _look(conn: sqlite3.Connection) -> tuple[int, dict[str, Row]]:
        version = _data_version(conn)
        return version, {row[0]: tuple(row) for row in conn.execute(_SELECT)}


def _data_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA data_version").fetchone()
    return int(row[0])
