"""The application_session_ctx contract (mqttq.storage.sqlite.app_context), on the embedded
SQLite file and on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from mqttq.model import AppContext, PendingKind, Unacked
from mqttq.storage.ports import AppContextStore
from mqttq.storage.postgres.app_context import PostgresAppContextStore
from mqttq.storage.sqlite.app_context import SqliteAppContextStore
from mqttq.storage.sqlite.schema import SCHEMA_VERSION
from mqttq.storage.sqlite.store import SqliteStorage
from tests.contract.conftest import Backend

Factory = Callable[[], AppContextStore]


BACKENDS = ("sqlite", "postgres")


@pytest.fixture
def make_store(backend: Backend) -> Factory:
    """New, unopened AppContextStores of this test's backend (tests/contract/conftest.py)."""
    if backend.name == "sqlite":
        path = backend.tmp_path / "data" / "mqttq.sqlite3"
        return lambda: SqliteAppContextStore(path)
    url = backend.url
    return lambda: PostgresAppContextStore(url)


def run(store: AppContextStore, body: Callable[[AppContextStore], Awaitable[None]]) -> None:
    async def main() -> None:
        await store.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


CTX = AppContext(
    "app/1 é",
    4200,
    [
        Unacked(4100, 65535, PendingKind.PUBLISH),
        Unacked(4150, 1, PendingKind.PUBREL),
        Unacked(2**40, 7, PendingKind.PUBLISH),
    ],
    1700000000.25,
)


def test_save_load_replace_delete(make_store: Factory) -> None:
    async def body(store: AppContextStore) -> None:
        assert await store.load_app_context(CTX.client_id) is None
        await store.save_app_context(CTX)
        assert await store.load_app_context(CTX.client_id) == CTX
        empty = AppContext(CTX.client_id, None, [], 5.0)
        await store.save_app_context(empty)
        await store.save_app_context(AppContext("b", 1, [], 6.0))
        assert await store.list_app_contexts() == [empty, AppContext("b", 1, [], 6.0)]
        await store.delete_app_context(CTX.client_id)
        await store.delete_app_context("never-saved")
        assert await store.load_app_context(CTX.client_id) is None
        assert [c.client_id for c in await store.list_app_contexts()] == ["b"]

    run(make_store(), body)


def test_survives_reopening(make_store: Factory) -> None:
    async def save(store: AppContextStore) -> None:
        await store.save_app_context(CTX)

    async def check(store: AppContextStore) -> None:
        assert await store.load_app_context(CTX.client_id) == CTX

    run(make_store(), save)
    run(make_store(), check)


def test_sqlite_shares_the_embedded_file(tmp_path: Path) -> None:
    """The table lives in the broker's own data file (at the storage's schema version),
    next to the sessions the SqliteStorage keeps there."""
    path = tmp_path / "mqttq.sqlite3"

    async def both() -> None:
        storage = SqliteStorage(path)
        await storage.open()
        store = SqliteAppContextStore(path)
        await store.open()
        await store.save_app_context(CTX)
        await store.close()
        await storage.close()

    asyncio.run(both())
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("SELECT client_id FROM application_session_ctx").fetchall() == [
            (CTX.client_id,)
        ]
    conn.close()
