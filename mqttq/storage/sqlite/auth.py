"""SqliteAuthStore: credentials and tenant quotas in their own SQLite file (embedded mode).

The broker passes `<data_dir>/auth.db`, apart from the session store's file: credentials
are written rarely, by an operator, and must not wait behind the message store's group
commit. One connection, in WAL mode with synchronous=FULL and autocommit (each write is one
statement, durable when it returns); calls run in a worker thread (`asyncio.to_thread`)
one at a time under a lock, so the event loop never waits on the disk. Table layout and
timestamps: see `mqttq.storage.formats.auth_rows`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from mqttq.auth.model import Credential, Tenant
from mqttq.auth.ports import AuthStoreError, CredentialExists
from mqttq.limits.quota import QUOTA_FIELDS
from mqttq.storage.formats.auth_rows import (
    CREDENTIAL_COLUMNS,
    CREDENTIALS_TABLE,
    NOT_UTF8,
    TENANT_COLUMNS,
    TENANTS_TABLE,
    credential_from_row,
    credential_row,
    one_line,
    tenant_from_row,
    tenant_row,
    upsert_sql,
)
from mqttq.storage.sqlite.connect import open_durable

__all__ = ["SCHEMA_VERSION", "SqliteAuthStore"]

T = TypeVar("T")

SCHEMA_VERSION: Final = 2
"""2: mqtt_client_credentials.acl_rules."""

_QUOTA_TYPES: Final = {"max_connection_rate": "REAL", "max_publish_rate": "REAL"}
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    f"""CREATE TABLE IF NOT EXISTS {CREDENTIALS_TABLE} (
        username TEXT PRIMARY KEY,
        password_hash TEXT NOT NULL,
        tenant TEXT NOT NULL,
        client_type TEXT NOT NULL,
        client_id_pattern TEXT,
        publish_acl TEXT NOT NULL,
        subscribe_acl TEXT NOT NULL,
        acl_rules TEXT NOT NULL DEFAULT '[]',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        scram TEXT NOT NULL DEFAULT '[]'
    )""",
    f"CREATE INDEX IF NOT EXISTS {CREDENTIALS_TABLE}_tenant "
    f"ON {CREDENTIALS_TABLE} (tenant, username)",
    f"""CREATE TABLE IF NOT EXISTS {TENANTS_TABLE} (
        name TEXT PRIMARY KEY,
        {", ".join(f"{q} {_QUOTA_TYPES.get(q, 'INTEGER')} NOT NULL" for q in QUOTA_FIELDS)},
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
)

_CREDENTIALS: Final = f"SELECT {', '.join(CREDENTIAL_COLUMNS)} FROM {CREDENTIALS_TABLE}"
_TENANTS: Final = f"SELECT {', '.join(TENANT_COLUMNS)} FROM {TENANTS_TABLE}"
_ADD_CREDENTIAL: Final = (
    f"INSERT INTO {CREDENTIALS_TABLE} ({', '.join(CREDENTIAL_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(CREDENTIAL_COLUMNS))}) ON CONFLICT (username) DO NOTHING"
)
_PUT_CREDENTIAL: Final = upsert_sql(CREDENTIALS_TABLE, CREDENTIAL_COLUMNS, "?")
_PUT_TENANT: Final = upsert_sql(TENANTS_TABLE, TENANT_COLUMNS, "?")


def _acl_json(acl: tuple[str, ...]) -> str:
    # ensure_ascii=False: a lone surrogate fails to encode, as in any other column.
    return json.dumps(list(acl), ensure_ascii=False)


_ADDED_COLUMNS: Final = {"scram": "TEXT NOT NULL DEFAULT '[]'"}
"""Columns a file of an older mqttq may lack, added on open (found by name, not by the
schema version, which counts the changes before them)."""


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({CREDENTIALS_TABLE})")}
    for column, declaration in _ADDED_COLUMNS.items():
        if column not in present:
            conn.execute(f"ALTER TABLE {CREDENTIALS_TABLE} ADD COLUMN {column} {declaration}")


class SqliteAuthStore:
    """The AuthStore on one SQLite file (created, with its parent directory, on open).
    Every failure of the file or of SQLite raises AuthStoreError naming the path."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        # A threading lock, not an asyncio one: the store is loop-agnostic (the CLI runs
        # it on a private loop) and the lock is held only inside the worker thread.
        self._lock = threading.Lock()

    def _error(self, what: str, exc: BaseException) -> AuthStoreError:
        return AuthStoreError(f"sqlite: cannot {what} {self.path}: {one_line(exc)}")

    async def open(self) -> None:
        """Open (creating the file and its tables if needed); AuthStoreError if the file
        cannot be created, opened or written."""
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        with self._lock:
            if self._conn is not None:
                return
            conn: sqlite3.Connection | None = None
            try:
                conn = open_durable(self.path)
                conn.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA:
                    conn.execute(statement)
                row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                stored = row[0] if row is not None else None
                if stored is None:
                    conn.execute(
                        "INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,)
                    )
                elif stored < SCHEMA_VERSION:
                    conn.execute(
                        f"ALTER TABLE {CREDENTIALS_TABLE} "
                        "ADD COLUMN acl_rules TEXT NOT NULL DEFAULT '[]'"
                    )
                    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
                elif stored > SCHEMA_VERSION:
                    conn.execute("ROLLBACK")
                    raise AuthStoreError(
                        f"sqlite: {self.path} has schema version {stored}, newer than this "
                        f"mqttq knows ({SCHEMA_VERSION}): upgrade mqttq"
                    )
                _add_missing_columns(conn)
                conn.execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                if conn is not None:
                    conn.close()
                raise self._error("open", exc) from None
            except AuthStoreError:
                assert conn is not None
                conn.close()
                raise
            self._conn = conn

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
                raise self._error("use", exc) from None
            except UnicodeEncodeError:
                raise AuthStoreError(f"sqlite {self.path}: {NOT_UTF8}") from None

    # --- credentials ---------------------------------------------------------------------

    async def get_credential(self, username: str) -> Credential | None:
        def work(conn: sqlite3.Connection) -> Any:
            return conn.execute(f"{_CREDENTIALS} WHERE username = ?", (username,)).fetchone()

        row = await self._run(work)
        return None if row is None else credential_from_row(row)

    async def list_credentials(self, tenant: str | None = None) -> list[Credential]:
        """All credentials (of one tenant when given), ordered by username."""

        def work(conn: sqlite3.Connection) -> list[Any]:
            if tenant is None:
                return conn.execute(f"{_CREDENTIALS} ORDER BY username").fetchall()
            query = f"{_CREDENTIALS} WHERE tenant = ? ORDER BY username"
            return conn.execute(query, (tenant,)).fetchall()

        return [credential_from_row(row) for row in await self._run(work)]

    async def tenant_has_credentials(self, tenant: str) -> bool:
        def work(conn: sqlite3.Connection) -> Any:
            query = f"SELECT 1 FROM {CREDENTIALS_TABLE} WHERE tenant = ? LIMIT 1"
            return conn.execute(query, (tenant,)).fetchone()

        return await self._run(work) is not None

    async def add_credential(self, credential: Credential) -> None:
        """Insert; CredentialExists when the username is taken (nothing changes)."""
        row = credential_row(credential, time.time(), _acl_json)

        def work(conn: sqlite3.Connection) -> int:
            return conn.execute(_ADD_CREDENTIAL, row).rowcount

        if await self._run(work) == 0:
            raise CredentialExists(credential.username)

    async def put_credential(self, credential: Credential) -> None:
        """Insert or replace; a replaced row keeps its created_at."""
        row = credential_row(credential, time.time(), _acl_json)
        await self._run(lambda conn: conn.execute(_PUT_CREDENTIAL, row))

    async def delete_credential(self, username: str) -> bool:
        query = f"DELETE FROM {CREDENTIALS_TABLE} WHERE username = ?"
        removed = await self._run(lambda conn: conn.execute(query, (username,)).rowcount)
        return removed > 0

    # --- tenants -------------------------------------------------------------------------

    async def get_tenant(self, name: str) -> Tenant | None:
        def work(conn: sqlite3.Connection) -> Any:
            return conn.execute(f"{_TENANTS} WHERE name = ?", (name,)).fetchone()

        row = await self._run(work)
        return None if row is None else tenant_from_row(row)

    async def list_tenants(self) -> list[Tenant]:
        """Every tenant with a stored quota, ordered by name."""
        rows = await self._run(lambda conn: conn.execute(f"{_TENANTS} ORDER BY name").fetchall())
        return [tenant_from_row(row) for row in rows]

    async def put_tenant(self, tenant: Tenant) -> None:
        """Insert or replace the tenant's quota; a replaced row keeps its created_at."""
        row = tenant_row(tenant, time.time())
        await self._run(lambda conn: conn.execute(_PUT_TENANT, row))

    async def delete_tenant(self, name: str) -> bool:
        query = f"DELETE FROM {TENANTS_TABLE} WHERE name = ?"
        removed = await self._run(lambda conn: conn.execute(query, (name,)).rowcount)
        return removed > 0
