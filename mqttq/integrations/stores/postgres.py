"""PostgresIntegrationStore: integrations in PostgreSQL, shared by every node of a cluster.

The table `mqttq_integration` lives in the `[postgres] url` database, beside the
credentials: the same connection handling (`PostgresConnection`: one autocommit psycopg 3
connection, one call at a time, reconnected once when it broke, the table created under an
advisory lock so that nodes starting together do not race). The table as given is a `jsonb`
column (key order is not kept; values are).

Change feed: every save and delete sends `NOTIFY mqttq_integrations, '<name>'` in the same
transaction as the change, so a listener hears of it exactly when the change is visible.
`watch()` listens on a connection of its own; it yields `RESYNC` once listening, then the
names it hears, and after its connection breaks it connects again (backing off up to
`RETRY_MAX` seconds) and yields `RESYNC` again, since what changed meanwhile was not heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Final

import psycopg
from psycopg.types.json import Jsonb

from mqttq.auth.ports import AuthStoreError
from mqttq.integrations.stored import StoredIntegration
from mqttq.integrations.stores import (
    RESYNC,
    IntegrationStoreError,
    decode_table,
    encode_table,
)
from mqttq.storage.postgres.auth import Conn, PostgresConnection

__all__ = ["CHANNEL", "TABLE", "PostgresIntegrationStore"]

log = logging.getLogger(__name__)

TABLE: Final = "mqttq_integration"
CHANNEL: Final = "mqttq_integrations"
"""The NOTIFY channel; the payload is the integration's name."""

RETRY_INITIAL: Final = 0.1
RETRY_MAX: Final = 5.0
CHECK_INTERVAL: Final = 30.0
"""Seconds without a notification after which the listening connection is checked."""

_SCHEMA: Final = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        name text PRIMARY KEY,
        spec jsonb NOT NULL,
        paused boolean NOT NULL,
        origin text NOT NULL,
        updated_at double precision NOT NULL
    )""",
)
_SELECT: Final = (
    f'SELECT name, spec, paused, origin, updated_at FROM {TABLE} ORDER BY name COLLATE "C"'
)
_PUT: Final = (
    f"INSERT INTO {TABLE} (name, spec, paused, origin, updated_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, "
    "paused = excluded.paused, origin = excluded.origin, updated_at = excluded.updated_at"
)
_NOTIFY: Final = f"SELECT pg_notify('{CHANNEL}', %s)"


class PostgresIntegrationStore(PostgresConnection):
    """The IntegrationStore on a PostgreSQL database (`url`: a libpq connection string).
    Every failure is an IntegrationStoreError of one line naming the server (never the
    URL's password)."""

    schema = _SCHEMA
    schema_lock = 0x6D717474_696E7467  # "mqttintg"

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except AuthStoreError as exc:
            raise IntegrationStoreError(str(exc)) from None

    async def open(self) -> None:
        """Connect and create the table if it does not exist."""
        with self._errors():
            await super().open()

    async def load(self) -> list[StoredIntegration]:
        """Every stored integration, ordered by name."""
        with self._errors():
            rows = await self._fetch(_SELECT)
        where = f"postgres {self.where}"
        return [
            StoredIntegration(name, decode_table(spec, name, where), paused, origin, updated_at)
            for name, spec, paused, origin, updated_at in rows
        ]

    async def save(self, stored: StoredIntegration) -> None:
        """Insert or replace by name, and tell every listener, in one transaction."""
        encode_table(stored.table, f"postgres {self.where}")  # a clear error before the driver's
        row = (stored.name, Jsonb(stored.table), stored.paused, stored.origin, stored.updated_at)

        async def work(conn: Conn) -> None:
            async with conn.transaction():
                await conn.execute(_PUT, row)
                await conn.execute(_NOTIFY, (stored.name,))

        with self._errors():
            await self._run(work)

    async def delete(self, name: str) -> bool:
        """Remove (telling every listener, in the same transaction); False when there was
        none."""

        async def work(conn: Conn) -> int:
            async with conn.transaction():
                cursor = await conn.execute(f"DELETE FROM {TABLE} WHERE name = %s", (name,))
                removed = int(cursor.rowcount)
                if removed:
                    await conn.execute(_NOTIFY, (name,))
            return removed

        with self._errors():
            return await self._run(work) > 0

    async def watch(self) -> AsyncIterator[str]:
        """`RESYNC` once listening, then the name of every integration saved or deleted by
        any node; `RESYNC` again after a reconnection. Runs until the consumer stops
        iterating; needs no `open()` (it has its own connection)."""
        delay = RETRY_INITIAL
        while True:
            try:
                conn = await self._connect()
            except AuthStoreError as exc:
                log.warning("integrations feed: %s; trying again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
                delay = RETRY_INITIAL
                yield RESYNC
                while True:
                    async with contextlib.aclosing(
                        conn.notifies(timeout=CHECK_INTERVAL)
                    ) as notifies:
                        async for notify in notifies:
                            yield notify.payload
                    await conn.execute("SELECT 1")  # quiet for a while: still connected?
            except psycopg.Error as exc:
                reason = " ".join(str(exc).split()) or type(exc).__name__
                log.warning(
                    "integrations feed: postgres %s: %s; listening again", self.where, reason
                )
            finally:
                with contextlib.suppress(psycopg.Error):
                    await conn.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
