"""Reading TBMQ 1.x's tables from PostgreSQL: streamed from server-side cursors.

`PgSource` holds one connection. The rows of a run are read inside one REPEATABLE READ,
READ ONLY transaction (`snapshot()`): the conflict check, the messages and the sessions
without messages all see the same state of the database. Rows come from named (server-side)
cursors in binary form as plain tuples, `fetch_size` rows per round trip, so the client
holds one batch at a time however large the table is. (Measured alternatives: text form
costs the driver ~35% more per row, and `COPY ... TO STDOUT (FORMAT binary)` read row by row
~3x more.) Every PostgreSQL failure becomes a one-line MigrateError.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from operator import itemgetter
from typing import Any, Final, TypeVar

import psycopg
from psycopg import errors as pg_errors

from mqttq.migrate import schema
from mqttq.migrate.errors import MigrateError, one_line
from mqttq.storage.redis.keys import redacted

Row = tuple[Any, ...]
Sessions = dict[Any, tuple[Any, Any]]
"""client_id -> (last_serial_number, last_packet_id) of its device_session_ctx row."""
MessageBatch = tuple[list[Row], Sessions]
"""Message rows, and the session rows of the clients among them (those that have one)."""

_T = TypeVar("_T")
_client_id = itemgetter(0)

READ_AHEAD: Final = 2
"""Batches fetched ahead of the one being worked on."""
CONNECT_TIMEOUT: Final = 5
"""Seconds to reach PostgreSQL before giving up (libpq's connect_timeout)."""

_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redacted_dsn(dsn: str) -> str:
    """`dsn` (a postgresql:// URL or a key=value string) without its password."""
    if "://" in dsn:
        return redacted(dsn)
    return _PASSWORD.sub(r"\1***", dsn)


class PgSource:
    """One connection to the PostgreSQL holding TBMQ 1.x's tables.

    `url` is a libpq connection string (`postgresql://user:password@host:port/db` or
    `host=... dbname=...`). Use as `async with PgSource(url) as source:`.
    """

    def __init__(self, url: str, *, fetch_size: int = 5000) -> None:
        if fetch_size < 1:
            raise ValueError(f"fetch_size must be at least 1, not {fetch_size}")
        self.url = url
        self.fetch_size = fetch_size
        self._conn: psycopg.AsyncConnection[Row] | None = None
        self._cursors = 0

    def describe(self) -> str:
        """The URL without its password, for messages."""
        return f"PostgreSQL at {redacted_dsn(self.url)}"

    def _error(self, exc: BaseException) -> MigrateError:
        if isinstance(exc, pg_errors.UndefinedTable):
            return MigrateError(
                f"{self.describe()}: {one_line(exc)}: is this TBMQ 1.x's database? "
                "('mqttq migrate init-source' creates empty tables for trials)"
            )
        return MigrateError(f"{self.describe()}: {one_line(exc)}")

    async def __aenter__(self) -> PgSource:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect; MigrateError (one line) when PostgreSQL cannot be reached."""
        try:
            self._conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            )
        except (psycopg.Error, OSError) as exc:
            raise MigrateError(f"cannot connect to {self.describe()}: {one_line(exc)}") from exc

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _connection(self) -> psycopg.AsyncConnection[Row]:
        if self._conn is None:
            raise MigrateError(f"{self.describe()}: not connected")
        return self._conn

    def identity(self) -> str:
        """host:port/dbname of the server connected to: names a run's checkpoint."""
        info = self._connection().info
        return f"{info.host}:{info.port}/{info.dbname}"

    async def create_tables(self) -> None:
        """Create TBMQ 1.x's two tables and their indexes (kept when they exist)."""
        conn = self._connection()
        try:
            async with conn.transaction():
                for statement in schema.CREATE_SOURCE:
                    await conn.execute(statement)
        except psycopg.Error as exc:
            raise self._error(exc) from exc

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        """A REPEATABLE READ, READ ONLY transaction: reads inside see one state."""
        conn = self._connection()
        try:
            await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
            await conn.set_read_only(True)
            async with conn.transaction():
                yield
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        finally:
            if not conn.closed:
                await conn.set_read_only(False)

    async def estimate_rows(self) -> int | None:
        """The planner's estimate of device_publish_msg's rows (None when unknown)."""
        try:
            cursor = await self._connection().execute(schema.ESTIMATE_ROWS)
            row = await cursor.fetchone()
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        return int(row[0]) if row is not None and row[0] is not None and row[0] >= 0 else None

    async def stream(self, query: str, params: dict[str, Any]) -> AsyncGenerator[list[Row], None]:
        """The rows of `query` in batches of `fetch_size`, from a server-side cursor
        (inside `snapshot()`).

        The next batch is fetched while the caller works on this one (at most `READ_AHEAD`
        batches wait): PostgreSQL produces rows while the migration plans and writes.
        """
        async with contextlib.aclosing(self._batches(query, params, _no_extra)) as batches:
            async for rows, _extra in batches:
                yield rows

    async def _batches(
        self,
        query: str,
        params: dict[str, Any],
        extra: Callable[[psycopg.AsyncConnection[Row], list[Row]], Awaitable[_T]],
    ) -> AsyncGenerator[tuple[list[Row], _T], None]:
        """`stream()`'s batches, each with what `extra(connection, rows)` made of it (in
        the same snapshot, ahead of the reader like the rows)."""
        self._cursors += 1
        name = f"mqttq_migrate_{self._cursors}"
        conn = self._connection()
        ready: asyncio.Queue[tuple[list[Row], _T] | Exception | None] = asyncio.Queue(READ_AHEAD)
        stop = False

        async def produce(cursor: psycopg.AsyncServerCursor[Row]) -> None:
            try:
                while not stop:
                    rows = await cursor.fetchmany(self.fetch_size)
                    if not rows:
                        await ready.put(None)
                        return
                    await ready.put((rows, await extra(conn, rows)))
            except Exception as exc:  # handed to the reader, which raises it
                await ready.put(exc)

        try:
            async with conn.cursor(name, binary=True) as cursor:
                await cursor.execute(query, params)
                producer = asyncio.ensure_future(produce(cursor))
                try:
                    while True:
                        item = await ready.get()
                        if isinstance(item, Exception):
                            raise item
                        if item is None:
                            break
                        yield item
                finally:
                    # Let a fetch in progress end (the connection must stay usable), and
                    # unblock the producer if it waits for room.
                    stop = True
                    while not producer.done():
                        with contextlib.suppress(asyncio.QueueEmpty):
                            ready.get_nowait()
                        await asyncio.wait({producer}, timeout=0.05)
        except psycopg.Error as exc:
            raise self._error(exc) from exc

    def message_rows(
        self, pattern: str | None, after: str | None
    ) -> AsyncGenerator[MessageBatch, None]:
        """Message rows (schema positions) by client id then serial number, in batches, each
        with the session rows of its clients."""
        query = schema.message_rows_query(pattern=pattern is not None, after=after is not None)
        return self._batches(query, {"pattern": pattern, "after": after}, _sessions_of)

    def session_rows(
        self, pattern: str | None, after: str | None
    ) -> AsyncGenerator[list[Row], None]:
        """Session rows of clients without messages, by client id."""
        query = schema.session_rows_query(pattern=pattern is not None, after=after is not None)
        return self.stream(query, {"pattern": pattern, "after": after})

    async def client_ids(
        self, pattern: str | None, after: str | None
    ) -> AsyncGenerator[list[str], None]:
        """Every client id with a session or a message, in batches (no order)."""
        query = schema.client_ids_query(pattern=pattern is not None, after=after is not None)
        async with contextlib.aclosing(
            self.stream(query, {"pattern": pattern, "after": after})
        ) as batches:
            async for rows in batches:
                yield [row[0] for row in rows]


async def _no_extra(_conn: psycopg.AsyncConnection[Row], _rows: list[Row]) -> None:
    return None


async def _sessions_of(conn: psycopg.AsyncConnection[Row], rows: list[Row]) -> Sessions:
    """The session rows of the clients of `rows`: one lookup by primary key per batch."""
    client_ids = list(set(map(_client_id, rows)))
    cursor = await conn.execute(schema.SESSIONS_OF, {"client_ids": client_ids})
    return {row[0]: (row[1], row[2]) for row in await cursor.fetchall()}
