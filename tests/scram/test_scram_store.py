"""SCRAM secrets in both AuthStore adapters (SQLite and a real PostgreSQL): stored per
mechanism, read back exactly, never the password; a file of an older mqttq gains the
column and keeps its rows."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from mqttq.auth.model import Credential
from mqttq.auth.ports import AuthStore, AuthStoreError
from mqttq.auth.scram import make_secret
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.auth.conftest import AuthStoreFactory, make_auth_store

__all__ = ["make_auth_store"]  # the fixture, imported for this module's tests

SECRETS = (
    make_secret("SCRAM-SHA-256", "pencil", iterations=4096),
    make_secret("SCRAM-SHA-512", "pencil", iterations=5000),
)


def run(store: AuthStore, body: Callable[[AuthStore], Awaitable[None]]) -> None:
    async def main() -> None:
        await store.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def test_scram_secrets_round_trip(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await store.add_credential(Credential("user", "scrypt$x", tenant="acme", scram=SECRETS))
        await store.add_credential(Credential("plain", "scrypt$y"))
        got = await store.get_credential("user")
        assert got is not None and got.scram == SECRETS and got.tenant == "acme"
        assert got.scram_secret("SCRAM-SHA-512") == SECRETS[1]
        plain = await store.get_credential("plain")
        assert plain is not None and plain.scram == ()
        assert plain.scram_secret("SCRAM-SHA-256") is None
        await store.put_credential(dataclasses.replace(got, scram=SECRETS[:1]))
        again = await store.get_credential("user")
        assert again is not None and again.scram == SECRETS[:1]

    run(make_auth_store(), body)


def test_sqlite_row_holds_keys_not_the_password(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"

    async def body(store: AuthStore) -> None:
        await store.add_credential(Credential("user", "scrypt$x", scram=SECRETS))

    run(SqliteAuthStore(path), body)
    with sqlite3.connect(path) as conn:
        [(stored,)] = conn.execute("SELECT scram FROM mqtt_client_credentials").fetchall()
    conn.close()
    assert "pencil" not in stored
    assert stored.startswith('["SCRAM-SHA-256$4096$')


def test_sqlite_file_of_schema_2_gains_the_scram_column(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (2)")
        conn.execute(
            "CREATE TABLE mqtt_client_credentials (username TEXT PRIMARY KEY, password_hash "
            "TEXT NOT NULL, tenant TEXT NOT NULL, client_type TEXT NOT NULL, client_id_pattern "
            "TEXT, publish_acl TEXT NOT NULL, subscribe_acl TEXT NOT NULL, acl_rules TEXT NOT "
            "NULL DEFAULT '[]', created_at REAL NOT NULL, updated_at REAL NOT NULL)"
        )
        conn.execute(
            "INSERT INTO mqtt_client_credentials VALUES "
            "('old', 'h', 'default', 'DEVICE', NULL, '[\"a/#\"]', '[\"#\"]', '[]', 1.0, 2.0)"
        )
    conn.close()

    async def body(store: AuthStore) -> None:
        old = await store.get_credential("old")
        assert old is not None and old.publish_acl == ("a/#",) and old.scram == ()
        await store.put_credential(dataclasses.replace(old, scram=SECRETS))
        again = await store.get_credential("old")
        assert again is not None and again.scram == SECRETS

    run(SqliteAuthStore(path), body)


def test_corrupt_scram_column_is_an_auth_store_error(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"

    async def add(store: AuthStore) -> None:
        await store.add_credential(Credential("user", "scrypt$x", scram=SECRETS))

    run(SqliteAuthStore(path), add)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE mqtt_client_credentials SET scram = '[\"SCRAM-SHA-256$1$x\"]'")
    conn.close()

    async def read(store: AuthStore) -> None:
        with pytest.raises(AuthStoreError, match="'user': stored SCRAM secrets are invalid"):
            await store.get_credential("user")

    run(SqliteAuthStore(path), read)
