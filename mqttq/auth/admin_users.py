"""Admin users: the people who log in to the dashboard (not MQTT clients).

An admin user has a user name, a scrypt password hash (`mqttq.auth.passwords`: per-user
salt, cost parameters in the stored string), a role and a creation time. They are kept with
the credentials (the `mqtt_admin_users` table of the same SQLite `auth.db` or PostgreSQL
database); the adapters live in `mqttq.storage.{sqlite,postgres}.admin_users`.

Roles: `viewer` reads everything the admin API shows; `admin` may also change it.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from mqttq.auth.passwords import hash_password, verify_password
from mqttq.auth.ports import AuthStoreError

__all__ = [
    "ADMIN_USERS_TABLE",
    "AdminUser",
    "AdminUserExists",
    "AdminUserStore",
    "Role",
    "admin_user_from_row",
    "authenticate_admin",
    "check_admin_username",
    "new_admin_user",
]

ADMIN_USERS_TABLE: Final = "mqtt_admin_users"
MAX_USERNAME: Final = 64


class Role(StrEnum):
    """What an admin user may do: `viewer` reads, `admin` reads and changes."""

    VIEWER = "viewer"
    ADMIN = "admin"


class AdminUserExists(AuthStoreError):
    """`add` for a user name that already has an admin user."""

    def __init__(self, username: str) -> None:
        super().__init__(f"admin user {username!r} already exists")
        self.username = username


@dataclass(frozen=True, slots=True)
class AdminUser:
    """One dashboard login. `password_hash` is `scrypt$n$r$p$salt$key`; the clear password
    is never stored."""

    username: str
    password_hash: str
    role: Role
    created_at: float

    def public(self) -> dict[str, object]:
        """The user as the CLI and API show it: everything but the hash."""
        return {"username": self.username, "role": str(self.role), "created_at": self.created_at}


class AdminUserStore(Protocol):
    """Admin users by user name. Every method is a coroutine; a write is durable when it
    returns; unreachable storage raises AuthStoreError."""

    async def open(self) -> None:
        """Connect and create the table if it does not exist."""
        ...

    async def close(self) -> None: ...

    async def get_admin_user(self, username: str) -> AdminUser | None: ...

    async def list_admin_users(self) -> list[AdminUser]:
        """Every admin user, ordered by user name (code point order)."""
        ...

    async def add_admin_user(self, user: AdminUser) -> None:
        """Insert; AdminUserExists when the user name is taken (nothing changes)."""
        ...

    async def set_admin_password(self, username: str, password_hash: str) -> bool:
        """Replace the hash; False when there is no such user."""
        ...

    async def delete_admin_user(self, username: str) -> bool:
        """True when a user was removed."""
        ...


def admin_user_from_row(row: tuple[Any, ...] | Any, where: str) -> AdminUser:
    """The AdminUser of a row (username, password_hash, role, created_at); AuthStoreError
    naming it when the row cannot be one (edited by hand)."""
    username, password_hash, role, created_at = row
    try:
        return AdminUser(str(username), str(password_hash), Role(role), float(created_at))
    except (ValueError, TypeError):
        raise AuthStoreError(
            f"{where}: admin user {username!r} has a bad row (role {role!r})"
        ) from None


def check_admin_username(username: str) -> str | None:
    """Why `username` cannot name an admin user (None when it can): not empty, at most 64
    characters, printable, no white space at either end."""
    if not username:
        return "the user name is empty"
    if len(username) > MAX_USERNAME:
        return f"the user name is longer than {MAX_USERNAME} characters"
    if not username.isprintable() or username.strip() != username:
        return "the user name holds control characters or white space at an end"
    try:
        username.encode("utf-8")
    except UnicodeEncodeError:
        return "the user name is not valid UTF-8"
    return None


def new_admin_user(username: str, password: str, role: Role, now: float) -> AdminUser:
    """A user with a fresh salted hash of `password` (CPU-bound: tens of ms)."""
    return AdminUser(username, hash_password(password), role, now)


async def authenticate_admin(
    store: AdminUserStore, username: str, password: str
) -> AdminUser | None:
    """The user when `password` is theirs, else None. The hash runs in a thread; an
    unknown user name costs as much as a wrong password."""
    user = await store.get_admin_user(username)
    encoded = user.password_hash if user is not None else _dummy_hash()
    ok = await asyncio.to_thread(verify_password, password, encoded)
    return user if ok and user is not None else None


@functools.cache
def _dummy_hash() -> str:
    # Spent on a login with an unknown user name, so that the answer takes as long as a
    # wrong password for a known one (the time does not tell which user names exist).
    return hash_password("mqttq: no such admin user")
