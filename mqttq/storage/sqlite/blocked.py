"""SqliteBlockedStore: the embedded broker's blocked-client entries, in the table
`blocked_clients` of `<data_dir>/auth.db` (operator-written configuration, beside the
credentials), so they survive a restart.

The file is opened as the credential and integration stores open it: its own connection,
WAL, synchronous=FULL, autocommit (each write is one statement, durable when it returns);
calls run one at a time in a worker thread, so the event loop never waits on the disk.
`mqttq blocked add --data-dir ...` may write the file from another process while the
broker runs without an admin API: `follow` polls `PRAGMA data_version` (it changes when
another connection commits) every `poll_interval` seconds and reports each entry that
differs from what it saw last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from mqttq.auth.blocked.entries import BlockedClient, decode_entry, encode_entry
from mqttq.auth.blocked.ports import BlockedStoreError, Changed
from mqttq.storage.sqlite.connect import open_durable

__all__ = ["FILE_NAME", "SqliteBlockedStore"]

T = TypeVar("T")
logger = logging.getLogger("mqttq.storage.sqlite.blocked")

FILE_NAME: Final = "auth.db"
_SCHEMA: Final = """CREATE TABLE IF NOT EXISTS blocked_clients (
    id TEXT PRIMARY KEY,
    entry TEXT NOT NULL
)"""
_SELECT: Final = "SELECT id, entry FROM blocked_clients ORDER BY id"
_PUT: Final = (
    "INSERT INTO blocked_clients (id, entry) VALUES (?, ?) "
    "ON CONFLICT (id) DO UPDATE SET entry = excluded.entry"
)


class SqliteBlockedStore:
    """The BlockedStore on one SQLite file (created, with its directory, on open)."""

    def __init__(self, path: Path, *, poll_interval: float = 1.0) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self.poll_interval = poll_interval
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._seen: dict[str, str] = {}
        """id -> stored JSON, as of the last look (own writes included)."""
        self._version = 0
        """`PRAGMA data_version` at the last look."""
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, poll_interval: float = 1.0) -> SqliteBlockedStore:
        """The store of the broker whose data directory is `data_dir`."""
        return cls(Path(data_dir) / FILE_NAME, poll_interval=poll_interval)

    def _error(self, what: str, exc: BaseException) -> BlockedStoreError:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return BlockedStoreError(f"sqlite: cannot {what} {self.path}: {reason}")

    async def open(self) -> None:
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
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
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
                raise BlockedStoreError(f"sqlite: {self.path} is not open")
            try:
                return work(self._conn)
            except sqlite3.Error as exc:
                raise self._error("use", exc) from None

    # ------------------------------------------------------------------ the store

    async def load(self) -> list[BlockedClient]:
        self._version, rows = await self._run(_look)
        self._seen = rows
        return _decoded(rows, self.where)

    async def put(self, entry: BlockedClient) -> None:
        text = encode_entry(entry).decode()
        await self._run(lambda conn: conn.execute(_PUT, (entry.id, text)))
        self._seen[entry.id] = text

    async def delete(self, entry_id: str) -> bool:
        def work(conn: sqlite3.Connection) -> int:
            sql = "DELETE FROM blocked_clients WHERE id = ?"
            return int(conn.execute(sql, (entry_id,)).rowcount)

        removed = await self._run(work)
        self._seen.pop(entry_id, None)
        return removed > 0

    # ------------------------------------------------------------------ the feed

    def follow(self, changed: Changed) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._follow(changed), name="blocked clients follow"
            )

    async def _follow(self, changed: Changed) -> None:
        version = self._version
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                now_version = await self._run(_data_version)
                if now_version == version:
                    continue
                version, rows = await self._run(_look)
            except BlockedStoreError as exc:
                logger.warning("blocked clients not re-read: %s", exc)
                continue
            seen, self._seen = self._seen, rows
            for entry_id in sorted(seen.keys() | rows.keys()):
                text = rows.get(entry_id)
                if seen.get(entry_id) == text:
                    continue
                if text is None:
                    changed(entry_id, None)
                    continue
                try:
                    changed(entry_id, decode_entry(text))
                except ValueError as exc:
                    logger.error("%s: entry %r skipped: %s", self.where, entry_id, exc)


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _look(conn: sqlite3.Connection) -> tuple[int, dict[str, str]]:
    version = _data_version(conn)
    return version, {str(row[0]): str(row[1]) for row in conn.execute(_SELECT)}


def _decoded(rows: dict[str, str], where: str) -> list[BlockedClient]:
    entries = []
    for entry_id, text in rows.items():
        try:
            entries.append(decode_entry(text))
        except ValueError as exc:
            logger.error("%s: entry %r skipped: %s", where, entry_id, exc)
    return entries
