"""The AdminUserStore contract on SQLite and on a real PostgreSQL, and login checks."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from mqttq.auth.admin_users import (
    AdminUser,
    AdminUserExists,
    AdminUserStore,
    Role,
    authenticate_admin,
    check_admin_username,
    new_admin_user,
)
from mqttq.auth.passwords import verify_password
from mqttq.auth.ports import AuthStoreError
from mqttq.storage.postgres.admin_users import PostgresAdminUserStore
from mqttq.storage.sqlite.admin_users import SqliteAdminUserStore
from mqttq.storage.sqlite.auth import SqliteAuthStore

Factory = Callable[[], AdminUserStore]
Body = Callable[[AdminUserStore], Awaitable[None]]


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    if request.param == "sqlite":
        path = tmp_path / "data" / "auth.db"
        return lambda: SqliteAdminUserStore(path)
    url = request.getfixturevalue("postgres_url")
    return lambda: PostgresAdminUserStore(url)


def run_with(store: AdminUserStore, body: Body) -> None:
    async def main() -> None:
        await store.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def test_add_get_list_passwd_delete(make_store: Factory) -> None:
    alice = new_admin_user("alice", "s3cret", Role.ADMIN, 1000.5)
    bob = new_admin_user("bob", "hunter2", Role.VIEWER, 2000.0)

    async def body(store: AdminUserStore) -> None:
        assert await store.get_admin_user("alice") is None
        await store.add_admin_user(bob)
        await store.add_admin_user(alice)
        with pytest.raises(AdminUserExists):
            await store.add_admin_user(new_admin_user("alice", "other", Role.VIEWER, 3.0))
        assert await store.get_admin_user("alice") == alice
        assert [u.username for u in await store.list_admin_users()] == ["alice", "bob"]
        assert (await store.list_admin_users())[1] == bob
        new_hash = new_admin_user("bob", "changed", Role.VIEWER, 0.0).password_hash
        assert await store.set_admin_password("bob", new_hash)
        assert not await store.set_admin_password("nobody", new_hash)
        again = await store.get_admin_user("bob")
        assert again is not None and verify_password("changed", again.password_hash)
        assert again.role is Role.VIEWER and again.created_at == 2000.0
        assert await store.delete_admin_user("bob")
        assert not await store.delete_admin_user("bob")
        assert [u.username for u in await store.list_admin_users()] == ["alice"]

    run_with(make_store(), body)


def test_a_second_store_sees_the_writes(make_store: Factory) -> None:
    async def write(store: AdminUserStore) -> None:
        await store.add_admin_user(new_admin_user("carol", "pw", Role.ADMIN, 5.0))

    async def read(store: AdminUserStore) -> None:
        user = await store.get_admin_user("carol")
        assert user is not None and user.role is Role.ADMIN

    run_with(make_store(), write)
    run_with(make_store(), read)


def test_authenticate(make_store: Factory) -> None:
    async def body(store: AdminUserStore) -> None:
        await store.add_admin_user(new_admin_user("dora", "right", Role.VIEWER, 1.0))
        user = await authenticate_admin(store, "dora", "right")
        assert user is not None and user.username == "dora"
        assert await authenticate_admin(store, "dora", "wrong") is None
        assert await authenticate_admin(store, "nobody", "right") is None

    run_with(make_store(), body)


def test_hash_is_scrypt_with_its_parameters_and_a_salt_per_user() -> None:
    one = new_admin_user("a", "same", Role.ADMIN, 0.0)
    two = new_admin_user("b", "same", Role.ADMIN, 0.0)
    assert one.password_hash.startswith("scrypt$16384$8$1$")
    assert one.password_hash != two.password_hash
    assert "same" not in one.password_hash


def test_sqlite_table_beside_the_credentials(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"

    async def body(store: AdminUserStore) -> None:
        credentials = SqliteAuthStore(path)
        await credentials.open()  # the broker's own store on the same file
        try:
            await store.add_admin_user(new_admin_user("eve", "pw", Role.ADMIN, 7.0))
        finally:
            await credentials.close()

    run_with(SqliteAdminUserStore(path), body)
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        rows = conn.execute("SELECT username, role, created_at FROM mqtt_admin_users").fetchall()
    assert {"mqtt_client_credentials", "mqtt_admin_users"} <= tables
    assert rows == [("eve", "admin", 7.0)]


def test_a_bad_role_in_a_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    run_with(SqliteAdminUserStore(path), lambda store: asyncio.sleep(0))
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO mqtt_admin_users VALUES ('mallory', 'x', 'root', 1.0)")

    async def body(store: AdminUserStore) -> None:
        with pytest.raises(AuthStoreError, match="'mallory' has a bad row"):
            await store.get_admin_user("mallory")

    run_with(SqliteAdminUserStore(path), body)


@pytest.mark.parametrize(
    ("name", "ok"),
    [("alice", True), ("", False), (" alice", False), ("a\nb", False), ("x" * 65, False)],
)
def test_username_check(name: str, ok: bool) -> None:
    assert (check_admin_username(name) is None) is ok


def test_public_view_has_no_hash() -> None:
    user = AdminUser("f", "scrypt$secret", Role.VIEWER, 3.0)
    assert user.public() == {"username": "f", "role": "viewer", "created_at": 3.0}
