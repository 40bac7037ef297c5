"""PostgresAuthStore: credentials and tenant quotas in PostgreSQL (distributed mode).

Every broker of a cluster reads the same two tables (layout: `mqttq.storage.formats.auth_rows`;
ACLs are text[], quotas bigint / double precision, timestamps double precision seconds
since the epoch). One psycopg 3 async connection in autocommit mode, used by one call at a
time: the store is read once per CONNECT with credentials and written by operators, so one
connection is plenty. When the connection breaks (server restart, network cut) the call
reconnects once and retries; every other failure is an AuthStoreError of one line naming
the server, never a driver exception. The URL's password never appears in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

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

__all__ = ["CONNECT_TIMEOUT", "PostgresAuthStore", "PostgresConnection"]

T = TypeVar("T")
Conn = psycopg.AsyncConnection[tuple[Any, ...]]

CONNECT_TIMEOUT: Final = 5
"""Seconds to reach PostgreSQL before giving up (libpq's connect_timeout)."""

# Two brokers starting at once must not race on CREATE TABLE IF NOT EXISTS (it is not
# atomic in PostgreSQL): the schema is created under this transaction-scoped advisory lock.
_SCHEMA_LOCK: Final = 0x6D717474_61757468  # "mqttauth"
_QUOTA_TYPES: Final = {
    "max_connection_rate": "double precision",
    "max_publish_rate": "double precision",
}
_SCHEMA: Final = (
    f"""CREATE TABLE IF NOT EXISTS {CREDENTIALS_TABLE} (
        username text PRIMARY KEY,
        password_hash text NOT NULL,
        tenant text NOT NULL,
        client_type text NOT NULL,
        client_id_pattern text,
        publish_acl text[] NOT NULL,
        subscribe_acl text[] NOT NULL,
        acl_rules text NOT NULL DEFAULT '[]',
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        scram text NOT NULL DEFAULT '[]'
    )""",
    # Tables of an older mqttq: the columns came later.
    f"ALTER TABLE {CREDENTIALS_TABLE} "
    "ADD COLUMN IF NOT EXISTS acl_rules text NOT NULL DEFAULT '[]'",
    f"ALTER TABLE {CREDENTIALS_TABLE} ADD COLUMN IF NOT EXISTS scram text NOT NULL DEFAULT '[]'",
    f"CREATE INDEX IF NOT EXISTS {CREDENTIALS_TABLE}_tenant "
    f"ON {CREDENTIALS_TABLE} (tenant, username)",
    f"""CREATE TABLE IF NOT EXISTS {TENANTS_TABLE} (
        name text PRIMARY KEY,
        {", ".join(f"{q} {_QUOTA_TYPES.get(q, 'bigint')} NOT NULL" for q in QUOTA_FIELDS)},
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL
    )""",
)

# COLLATE "C": code point order, the same as SQLite's and Python's, whatever the
# database's locale.
_CREDENTIALS: Final = f"SELECT {', '.join(CREDENTIAL_COLUMNS)} FROM {CREDENTIALS_TABLE}"
_BY_USERNAME: Final = 'ORDER BY username COLLATE "C"'
_TENANTS: Final = f"SELECT {', '.join(TENANT_COLUMNS)} FROM {TENANTS_TABLE}"
_ADD_CREDENTIAL: Final = (
    f"INSERT INTO {CREDENTIALS_TABLE} ({', '.join(CREDENTIAL_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(CREDENTIAL_COLUMNS))}) ON CONFLICT (username) DO NOTHING"
)
_PUT_CREDENTIAL: Final = upsert_sql(CREDENTIALS_TABLE, CREDENTIAL_COLUMNS, "%s")
_PUT_TENANT: Final = upsert_sql(TENANTS_TABLE, TENANT_COLUMNS, "%s")


def _acl_array(acl: tuple[str, ...]) -> list[str]:
    return list(acl)


def _describe(url: str) -> str | None:
    """host:port/dbname of `url`, for messages (never the password); None when `url` is
    not a connection string."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return None
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    dbname = info.get("dbname")
    return f"{host}:{port}" + (f"/{dbname}" if dbname else "")


class PostgresConnection:
    """One autocommit psycopg connection to `url` (a libpq connection string:
    `postgresql://user:password@host:port/dbname` or `host=... dbname=...`), used by one
    call at a time, reconnected once when it broke; `schema` (statements) is created under
    an advisory lock on open. Every failure is an AuthStoreError of one line."""

    schema: tuple[str, ...] = ()
    schema_lock: int = _SCHEMA_LOCK

    def __init__(self, url: str) -> None:
        self.url = url
        where = _describe(url)
        self._valid_url = where is not None
        self.where = where or "(invalid url)"
        self._conn: Conn | None = None
        self._lock: asyncio.Lock | None = None

    async def _connect(self) -> Conn:
        if not self._valid_url:
            # The parser's message quotes the URL, password included: never shown.
            raise AuthStoreError(
                "postgres: the url is not a libpq connection string "
                "(postgresql://user:password@host:port/dbname)"
            )
        try:
            return await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            )
        except (psycopg.Error, OSError) as exc:
            raise AuthStoreError(
                f"postgres: cannot connect to {self.where}: {one_line(exc)}"
            ) from None

    async def open(self) -> None:
        """Connect and create the tables if they do not exist; AuthStoreError when the
        server cannot be reached or the tables cannot be created."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._conn is not None:
                return
            conn = await self._connect()
            try:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.schema_lock,))
                    for statement in self.schema:
                        await conn.execute(statement)
            except psycopg.Error as exc:
                await conn.close()
                raise AuthStoreError(
                    f"postgres {self.where}: cannot create the tables: {one_line(exc)}"
                ) from None
            self._conn = conn

    async def close(self) -> None:
        """Close the connection; a later `open` connects again."""
        conn, self._conn = self._conn, None
        self._lock = None
        if conn is not None:
            await conn.close()

    async def _run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        lock = self._lock
        if lock is None or self._conn is None:
            raise AuthStoreError(f"postgres {self.where}: the store is not open")
        async with lock:
            retried = False
            while True:
                conn = self._conn
                if conn is None:
                    raise AuthStoreError(f"postgres {self.where}: the store is closed")
                try:
                    return await work(conn)
                except UnicodeEncodeError:
                    raise AuthStoreError(f"postgres {self.where}: {NOT_UTF8}") from None
                except psycopg.Error as exc:
                    if retried or not (conn.broken or conn.closed):
                        raise AuthStoreError(f"postgres {self.where}: {one_line(exc)}") from None
                retried = True
                # Keep the broken connection until a new one exists: when this connect
                # fails, the next call tries again.
                self._conn = await self._connect()
                with contextlib.suppress(psycopg.Error):
                    await conn.close()

    async def _fetch(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        async def work(conn: Conn) -> list[tuple[Any, ...]]:
            cursor = await conn.execute(query, params)
            return await cursor.fetchall()

        return await self._run(work)

    async def _write(self, query: str, params: tuple[Any, ...]) -> int:
        async def work(conn: Conn) -> int:
            cursor = await conn.execute(query, params)
            return cursor.rowcount

        return await self._run(work)


class PostgresAuthStore(PostgresConnection):
    """The AuthStore on a PostgreSQL database (see PostgresConnection for `url`)."""

    schema = _SCHEMA

    # --- credentials ---------------------------------------------------------------------

    async def get_credential(self, username: str) -> Credential | None:
        rows = await self._fetch(f"{_CREDENTIALS} WHERE username = %s", (username,))
        return credential_from_row(rows[0]) if rows else None

    async def list_credentials(self, tenant: str | None = None) -> list[Credential]:
        """All credentials (of one tenant when given), ordered by username."""
        if tenant is None:
            rows = await self._fetch(f"{_CREDENTIALS} {_BY_USERNAME}")
        else:
            rows = await self._fetch(f"{_CREDENTIALS} WHERE tenant = %s {_BY_USERNAME}", (tenant,))
        return [credential_from_row(row) for row in rows]

    async def tenant_has_credentials(self, tenant: str) -> bool:
        query = f"SELECT 1 FROM {CREDENTIALS_TABLE} WHERE tenant = %s LIMIT 1"
        return bool(await self._fetch(query, (tenant,)))

    async def add_credential(self, credential: Credential) -> None:
        """Insert; CredentialExists when the username is taken (nothing changes)."""
        row = credential_row(credential, time.time(), _acl_array)
        if await self._write(_ADD_CREDENTIAL, row) == 0:
            raise CredentialExists(credential.username)

    async def put_credential(self, credential: Credential) -> None:
        """Insert or replace; a replaced row keeps its created_at."""
        await self._write(_PUT_CREDENTIAL, credential_row(credential, time.time(), _acl_array))

    async def delete_credential(self, username: str) -> bool:
        query = f"DELETE FROM {CREDENTIALS_TABLE} WHERE username = %s"
        return await self._write(query, (username,)) > 0

    # --- tenants -------------------------------------------------------------------------

    async def get_tenant(self, name: str) -> Tenant | None:
        rows = await self._fetch(f"{_TENANTS} WHERE name = %s", (name,))
        return tenant_from_row(rows[0]) if rows else None

    async def list_tenants(self) -> list[Tenant]:
        """Every tenant with a stored quota, ordered by name."""
        rows = await self._fetch(f'{_TENANTS} ORDER BY name COLLATE "C"')
        return [tenant_from_row(row) for row in rows]

    async def put_tenant(self, tenant: Tenant) -> None:
        """Insert or replace the tenant's quota; a replaced row keeps its created_at."""
        await self._write(_PUT_TENANT, tenant_row(tenant, time.time()))

    async def delete_tenant(self, name: str) -> bool:
        query = f"DELETE FROM {TENANTS_TABLE} WHERE name = %s"
        return await self._write(query, (name,)) > 0
