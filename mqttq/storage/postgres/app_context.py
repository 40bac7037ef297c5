"""`application_session_ctx` in PostgreSQL (`[auth] store = "postgres"`): the
AppContextStore (mqttq.storage.ports) on the credentials' database, so every node of
a cluster sees the context a client left on another node."""

from __future__ import annotations

from typing import Final

from mqttq.model import AppContext
from mqttq.storage.postgres.auth import PostgresConnection
from mqttq.storage.sqlite.app_context import COLUMNS, context_from_row, context_row

__all__ = ["PostgresAppContextStore"]

_TABLE: Final = """CREATE TABLE IF NOT EXISTS application_session_ctx (
    client_id text PRIMARY KEY,
    last_updated_time double precision NOT NULL,
    pack_offset bigint,
    unacked jsonb NOT NULL
)"""


class PostgresAppContextStore(PostgresConnection):
    """AppContextStore on PostgreSQL (`url`: a libpq connection string)."""

    schema = (_TABLE,)
    schema_lock = 0x6D717474_61707063  # "mqttappc"

    async def load_app_context(self, client_id: str) -> AppContext | None:
        query = f"SELECT {_SELECT} FROM application_session_ctx WHERE client_id = %s"
        rows = await self._fetch(query, (client_id,))
        return context_from_row(rows[0]) if rows else None

    async def save_app_context(self, context: AppContext) -> None:
        query = (
            f"INSERT INTO application_session_ctx ({COLUMNS}) VALUES (%s, %s, %s, %s::jsonb) "
            "ON CONFLICT (client_id) DO UPDATE SET last_updated_time = EXCLUDED.last_updated_time,"
            " pack_offset = EXCLUDED.pack_offset, unacked = EXCLUDED.unacked"
        )
        await self._write(query, context_row(context))

    async def delete_app_context(self, client_id: str) -> None:
        await self._write("DELETE FROM application_session_ctx WHERE client_id = %s", (client_id,))

    async def list_app_contexts(self) -> list[AppContext]:
        query = f'SELECT {_SELECT} FROM application_session_ctx ORDER BY client_id COLLATE "C"'
        return [context_from_row(row) for row in await self._fetch(query)]


_SELECT: Final = "client_id, last_updated_time, pack_offset, unacked::text"
