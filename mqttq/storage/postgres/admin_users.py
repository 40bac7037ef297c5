"""PostgresAdminUserStore: dashboard admin users in the cluster's PostgreSQL database,
beside the credentials (`mqtt_admin_users`; every node reads the same rows). The
connection handling is the credential store's (`PostgresConnection`)."""

from __future__ import annotations

from typing import Final

from mqttq.auth.admin_users import (
    ADMIN_USERS_TABLE,
    AdminUser,
    AdminUserExists,
    admin_user_from_row,
)
from mqttq.storage.postgres.auth import PostgresConnection

__all__ = ["PostgresAdminUserStore"]

_SCHEMA_LOCK: Final = 0x6D717474_61646D6E  # "mqttadmn"
_SCHEMA: Final = (
    f"""CREATE TABLE IF NOT EXISTS {ADMIN_USERS_TABLE} (
        username text PRIMARY KEY,
        password_hash text NOT NULL,
        role text NOT NULL,
        created_at double precision NOT NULL
    )""",
)
_SELECT: Final = f"SELECT username, password_hash, role, created_at FROM {ADMIN_USERS_TABLE}"


class PostgresAdminUserStore(PostgresConnection):
    """The AdminUserStore on a PostgreSQL database (`url`: see PostgresConnection)."""

    schema = _SCHEMA
    schema_lock = _SCHEMA_LOCK

    async def get_admin_user(self, username: str) -> AdminUser | None:
        rows = await self._fetch(f"{_SELECT} WHERE username = %s", (username,))
        return admin_user_from_row(rows[0], f"postgres {self.where}") if rows else None

    async def list_admin_users(self) -> list[AdminUser]:
        """Every admin user, ordered by user name (code point order)."""
        rows = await self._fetch(f'{_SELECT} ORDER BY username COLLATE "C"')
        return [admin_user_from_row(row, f"postgres {self.where}") for row in rows]

    async def add_admin_user(self, user: AdminUser) -> None:
        """Insert; AdminUserExists when the user name is taken."""
        query = (
            f"INSERT INTO {ADMIN_USERS_TABLE} (username, password_hash, role, created_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (username) DO NOTHING"
        )
        row = (user.username, user.password_hash, str(user.role), user.created_at)
        if await self._write(query, row) == 0:
            raise AdminUserExists(user.username)

    async def set_admin_password(self, username: str, password_hash: str) -> bool:
        query = f"UPDATE {ADMIN_USERS_TABLE} SET password_hash = %s WHERE username = %s"
        return await self._write(query, (password_hash, username)) > 0

    async def delete_admin_user(self, username: str) -> bool:
        query = f"DELETE FROM {ADMIN_USERS_TABLE} WHERE username = %s"
        return await self._write(query, (username,)) > 0
