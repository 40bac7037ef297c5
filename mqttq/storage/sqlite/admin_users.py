"""SqliteAdminUserStore: dashboard admin users in the embedded credential database.

The table `mqtt_admin_users(username, password_hash, role, created_at)` lives in the same
`<data_dir>/auth.db` as the credentials, on a connection of its own (WAL, synchronous=FULL,
autocommit, a 5 s busy timeout) so that `mqttq admin-user` can write while a broker has the
file open. Calls run in a worker thread one at a time; the event loop never waits on disk.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from mqttq.auth.admin_users import (
    ADMIN_USERS_TABLE,
    AdminUser,
    AdminUserExists,
    admin_user_from_row,
)
from mqttq.auth.ports import AuthStoreError
from mqttq.storage.formats.auth_rows import NOT_UTF8, one_line
from mqttq.storage.sqlite.connect import open_durable

__all__ = ["SqliteAdminUserStore"]

T = TypeVar("T")

BUSY_TIMEOUT_MS: Final = 5_000
_SCHEMA: Final = f"""CREATE TABLE IF NOT EXISTS {ADMIN_USERS_TABLE} (
    username TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at REAL NOT NULL
)"""
_SELECT: Final = f"SELECT username, password_hash, role, created_at FROM {ADMIN_USERS_TABLE}"


class SqliteAdminUserStore:
    """The AdminUserStore on one SQLite file (created, with its directory, on open)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    async def open(self) -> None:
        """Open the file and create the table if needed; AuthStoreError when it cannot."""
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        with self._lock:
            if self._conn is not None:
                return
            try:
                self._conn = open_durable(self.path, (_SCHEMA,), busy_timeout_ms=BUSY_TIMEOUT_MS)
            except (sqlite3.Error, OSError) as exc:
                raise AuthStoreError(f"sqlite: cannot open {self.path}: {one_line(exc)}") from None

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
                raise AuthStoreError(f"sqlite: {self.path} is not open")
            try:
                return work(self._conn)
            except sqlite3.Error as exc:
                raise AuthStoreError(f"sqlite: cannot use {self.path}: {one_line(exc)}") from None
            except UnicodeEncodeError:
                raise AuthStoreError(f"sqlite {self.path}: {NOT_UTF8}") from None

    async def get_admin_user(self, username: str) -> AdminUser | None:
        row = await self._run(
            lambda conn: conn.execute(f"{_SELECT} WHERE username = ?", (username,)).fetchone()
        )
        return None if row is None else admin_user_from_row(row, f"sqlite {self.path}")

    async def list_admin_users(self) -> list[AdminUser]:
        """Every admin user, ordered by user name."""
        rows = await self._run(lambda conn: conn.execute(f"{_SELECT} ORDER BY username").fetchall())
        return [admin_user_from_row(row, f"sqlite {self.path}") for row in rows]

    async def add_admin_user(self, user: AdminUser) -> None:
        """Insert; AdminUserExists when the user name is taken."""
        query = (
            f"INSERT INTO {ADMIN_USERS_TABLE} (username, password_hash, role, created_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (username) DO NOTHING"
        )
        row = (user.username, user.password_hash, str(user.role), user.created_at)
        if await self._run(lambda conn: conn.execute(query, row).rowcount) == 0:
            raise AdminUserExists(user.username)

    async def set_admin_password(self, username: str, password_hash: str) -> bool:
        query = f"UPDATE {ADMIN_USERS_TABLE} SET password_hash = ? WHERE username = ?"
        changed = await self._run(
            lambda conn: conn.execute(query, (password_hash, username)).rowcount
        )
        return changed > 0

    async def delete_admin_user(self, username: str) -> bool:
        query = f"DELETE FROM {ADMIN_USERS_TABLE} WHERE username = ?"
        removed = await self._run(lambda conn: conn.execute(query, (username,)).rowcount)
        return removed > 0
