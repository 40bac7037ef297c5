"""The IntegrationStore contract (mqttq.integrations.manager), on a real SQLite file and on
the suite's real PostgreSQL, and each store's change feed (`watch()`)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest

from mqttq.auth.model import Credential
from mqttq.integrations.stored import StoredIntegration
from mqttq.integrations.stores import RESYNC, IntegrationStoreError
from mqttq.integrations.stores.postgres import CHANNEL, TABLE, PostgresIntegrationStore
from mqttq.integrations.stores.sqlite import SqliteIntegrationStore
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.contract.conftest import Backend
from tests.services import free_port

FEED_WAIT = 20.0
"""A guard against a hang, not a timing assertion."""


class Store(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def load(self) -> list[StoredIntegration]: ...
    async def save(self, stored: StoredIntegration) -> None: ...
    async def delete(self, name: str) -> bool: ...
    def watch(self) -> AsyncIterator[str]: ...


class StoreFactory:
    """New, unopened stores on one location (one SQLite file, or one PostgreSQL database):
    a second store is a second node (or the CLI) on the same data."""

    def __init__(self, kind: str, location: str) -> None:
        self.kind = kind
        self.location = location

    def __call__(self) -> Store:
        if self.kind == "sqlite":
            return SqliteIntegrationStore(Path(self.location), poll_interval=0.02)
        return PostgresIntegrationStore(self.location)


BACKENDS = ("sqlite", "postgres")


@pytest.fixture
def make_store(backend: Backend) -> StoreFactory:
    """IntegrationStores of this test's backend (tests/contract/conftest.py)."""
    if backend.name == "sqlite":
        return StoreFactory("sqlite", str(backend.tmp_path / "data" / "auth.db"))
    return StoreFactory("postgres", backend.url)


def run_with(*stores: Store, body: Callable[..., Awaitable[None]]) -> None:
    """Open `stores`, run `body(*stores)` on a fresh loop, close them even when it fails."""

    async def main() -> None:
        for store in stores:
            await store.open()
        try:
            await body(*stores)
        finally:
            for store in stores:
                await store.close()

    asyncio.run(main())


HOOK: dict[str, Any] = {
    "name": "hook",
    "type": "http",
    "filters": ["sensors/#", "alarms/+/fire"],
    "url": "https://hooks.example/ingest?token=${HOOK_TOKEN}",
    "headers": {"Authorization": "Bearer ${HOOK_TOKEN}", "X-Site": "Zürich ☃"},
    "batch_size": 50,
    "linger_ms": 0,
    "enabled": True,
}
ROWS: dict[str, Any] = {
    "name": "rows",
    "type": "postgres",
    "filters": ["#"],
    "url": "postgresql://writer:${PG_PASSWORD}@db/metrics",
    "table": "readings",
    "columns": {"temperature": {"json": "$.t", "type": "double precision"}, "raw": "payload"},
    "create_table": False,
    "ratio": 0.25,
    "tags": [],
    "nested": {"a": [1, {"b": None}]},
}


def test_save_then_load_round_trips_every_field(make_store: StoreFactory) -> None:
    async def body(store: Store) -> None:
        assert await store.load() == []
        await store.save(StoredIntegration("hook", HOOK, False, "config", 1_700_000_000.25))
        await store.save(StoredIntegration("rows", ROWS, True, "api", 1_700_000_001.5))
        assert await store.load() == [
            StoredIntegration("hook", HOOK, False, "config", 1_700_000_000.25),
            StoredIntegration("rows", ROWS, True, "api", 1_700_000_001.5),
        ]

    run_with(make_store(), body=body)


def test_secrets_are_stored_as_given_templates_and_typed_values(make_store: StoreFactory) -> None:
    typed = {**HOOK, "name": "typed", "headers": {"Authorization": "Bearer s3cr3t", "X": "***"}}

    async def body(store: Store) -> None:
        await store.save(StoredIntegration("hook", HOOK))
        await store.save(StoredIntegration("typed", typed))
        tables = {item.name: item.table for item in await store.load()}
        assert tables["hook"]["headers"]["Authorization"] == "Bearer ${HOOK_TOKEN}"
        assert tables["hook"]["url"] == HOOK["url"]
        assert tables["typed"]["headers"] == {"Authorization": "Bearer s3cr3t", "X": "***"}

    run_with(make_store(), body=body)


def test_save_replaces_by_name(make_store: StoreFactory) -> None:
    changed = {**HOOK, "filters": ["other/#"], "headers": {}}

    async def body(store: Store) -> None:
        await store.save(StoredIntegration("hook", HOOK, False, "config", 1.0))
        await store.save(StoredIntegration("hook", changed, True, "api", 2.0))
        assert await store.load() == [StoredIntegration("hook", changed, True, "api", 2.0)]

    run_with(make_store(), body=body)


def test_delete_says_whether_there_was_one(make_store: StoreFactory) -> None:
    async def body(store: Store) -> None:
        await store.save(StoredIntegration("hook", HOOK))
        await store.save(StoredIntegration("rows", ROWS))
        assert await store.delete("hook") is True
        assert await store.delete("hook") is False
        assert await store.delete("never") is False
        assert [item.name for item in await store.load()] == ["rows"]

    run_with(make_store(), body=body)


def test_load_orders_by_name_in_code_point_order(make_store: StoreFactory) -> None:
    names = ["b-2", "a", "b-10", "0-first", "z"]

    async def body(store: Store) -> None:
        for name in names:
            await store.save(StoredIntegration(name, {**HOOK, "name": name}))
        assert [item.name for item in await store.load()] == sorted(names)

    run_with(make_store(), body=body)


def test_a_second_store_on_the_same_data_sees_every_change(make_store: StoreFactory) -> None:
    async def body(first: Store, second: Store) -> None:
        await first.save(StoredIntegration("hook", HOOK, True, "api", 5.0))
        assert await second.load() == [StoredIntegration("hook", HOOK, True, "api", 5.0)]
        assert await second.delete("hook") is True
        assert await first.load() == []

    run_with(make_store(), make_store(), body=body)


def test_what_was_saved_is_there_after_closing_and_opening_again(make_store: StoreFactory) -> None:
    run_with(make_store(), body=lambda store: store.save(StoredIntegration("rows", ROWS, True)))

    async def body(store: Store) -> None:
        assert await store.load() == [StoredIntegration("rows", ROWS, True, "api", 0.0)]

    run_with(make_store(), body=body)


def test_a_value_without_a_json_form_is_refused_and_nothing_is_stored(
    make_store: StoreFactory,
) -> None:
    # A TOML table may hold a date: it has no JSON form.
    table = {**HOOK, "since": datetime.date(2026, 1, 1)}

    async def body(store: Store) -> None:
        with pytest.raises(IntegrationStoreError, match="no JSON form"):
            await store.save(StoredIntegration("hook", table))
        assert await store.load() == []

    run_with(make_store(), body=body)


def test_a_store_that_is_not_open_says_so(make_store: StoreFactory) -> None:
    async def body() -> None:
        with pytest.raises(IntegrationStoreError, match="not open"):
            await make_store().load()

    asyncio.run(body())


# ---------------------------------------------------------------------- the change feed


async def next_name(feed: AsyncIterator[str]) -> str:
    async with asyncio.timeout(FEED_WAIT):
        return await anext(feed)


def test_the_feed_hears_saves_and_deletes_of_another_node(make_store: StoreFactory) -> None:
    """Two stores on one location are two nodes (or the CLI beside the broker): what one
    changes, the other's feed names, and the change is visible when it is named."""

    async def body(writer: Store, watcher: Store) -> None:
        async with contextlib.aclosing(watcher.watch()) as feed:
            assert await next_name(feed) == RESYNC
            await writer.save(StoredIntegration("hook", HOOK))
            assert await next_name(feed) == "hook"
            assert [item.name for item in await watcher.load()] == ["hook"]
            await writer.save(StoredIntegration("hook", HOOK, paused=True))
            assert await next_name(feed) == "hook"
            assert (await watcher.load())[0].paused is True
            await writer.save(StoredIntegration("rows", ROWS))
            assert await next_name(feed) == "rows"
            assert await writer.delete("hook") is True
            assert await next_name(feed) == "hook"
            assert [item.name for item in await watcher.load()] == ["rows"]

    run_with(make_store(), make_store(), body=body)


def test_the_feed_names_this_stores_own_changes_too(make_store: StoreFactory) -> None:
    async def body(store: Store) -> None:
        async with contextlib.aclosing(store.watch()) as feed:
            assert await next_name(feed) == RESYNC
            await store.save(StoredIntegration("rows", ROWS))
            assert await next_name(feed) == "rows"
            await store.delete("rows")
            assert await next_name(feed) == "rows"

    run_with(make_store(), body=body)


def test_a_delete_of_nothing_is_not_a_change(make_store: StoreFactory) -> None:
    async def body(writer: Store, watcher: Store) -> None:
        async with contextlib.aclosing(watcher.watch()) as feed:
            assert await next_name(feed) == RESYNC
            assert await writer.delete("never") is False
            await writer.save(StoredIntegration("rows", ROWS))
            assert await next_name(feed) == "rows"

    run_with(make_store(), make_store(), body=body)


# ---------------------------------------------------------------------- SQLite only


def test_sqlite_keeps_the_table_in_the_credentials_file_beside_them(tmp_path: Path) -> None:
    path = tmp_path / "data" / "auth.db"

    async def body() -> None:
        auth = SqliteAuthStore(path)
        store = SqliteIntegrationStore.in_data_dir(path.parent)
        assert store.path == path
        await auth.open()
        await store.open()
        try:
            await auth.add_credential(Credential("alice", "hash"))
            await store.save(StoredIntegration("hook", HOOK, True, "config", 3.5))
            assert await auth.get_credential("alice") is not None
        finally:
            await store.close()
            await auth.close()

    asyncio.run(body())
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        rows = conn.execute("SELECT name, paused, origin, updated_at FROM integrations").fetchall()
        spec = conn.execute("SELECT spec FROM integrations").fetchone()[0]
        users = conn.execute("SELECT username FROM mqtt_client_credentials").fetchall()
    finally:
        conn.close()
    assert rows == [("hook", 1, "config", 3.5)]
    assert '"Authorization": "Bearer ${HOOK_TOKEN}"' in spec  # the table as given, as JSON
    assert '"X-Site": "Zürich ☃"' in spec
    assert users == [("alice",)]


def test_sqlite_feed_hears_a_change_made_with_plain_sqlite(tmp_path: Path) -> None:
    """Another process writing the file (here: sqlite3 itself) is heard."""
    path = tmp_path / "auth.db"

    async def body(store: Store) -> None:
        async with contextlib.aclosing(store.watch()) as feed:
            assert await next_name(feed) == RESYNC
            conn = sqlite3.connect(path)
            try:
                with conn:
                    conn.execute(
                        "INSERT INTO integrations VALUES ('outside', '{\"name\": \"outside\"}', "
                        "0, 'api', 1.0)"
                    )
            finally:
                conn.close()
            assert await next_name(feed) == "outside"

    run_with(SqliteIntegrationStore(path, poll_interval=0.02), body=body)


def test_sqlite_file_that_cannot_be_created_is_one_line_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = SqliteIntegrationStore(blocker / "auth.db")
    with pytest.raises(IntegrationStoreError, match=r"sqlite: cannot open .*file/auth\.db") as e:
        asyncio.run(store.open())
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------------- PostgreSQL only


def test_postgres_keeps_a_jsonb_row_and_notifies_on_its_channel(postgres_url: str) -> None:
    async def body(store: Store) -> None:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            await store.save(StoredIntegration("rows", ROWS, True, "config", 7.0))
            async with asyncio.timeout(FEED_WAIT):
                heard = [n async for n in conn.notifies(stop_after=1)]
            cursor = await conn.execute(
                f"SELECT name, spec, paused, origin, updated_at FROM {TABLE}"
            )
            rows = await cursor.fetchall()
        assert [(n.channel, n.payload) for n in heard] == [(CHANNEL, "rows")]
        assert rows == [("rows", ROWS, True, "config", 7.0)]

    run_with(PostgresIntegrationStore(postgres_url), body=body)


def test_postgres_feed_listens_again_after_its_connection_is_cut(postgres_url: str) -> None:
    """The listening backend is terminated: the feed reconnects and says RESYNC (what
    changed meanwhile was not heard), then names changes again."""

    async def body(writer: Store, watcher: Store) -> None:
        async with contextlib.aclosing(watcher.watch()) as feed:
            assert await next_name(feed) == RESYNC
            async with await psycopg.AsyncConnection.connect(
                postgres_url, autocommit=True
            ) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE query = %s AND pid <> pg_backend_pid()",
                    (f"LISTEN {CHANNEL}",),
                )
            assert await next_name(feed) == RESYNC
            await writer.save(StoredIntegration("hook", HOOK))
            assert await next_name(feed) == "hook"

    run_with(
        PostgresIntegrationStore(postgres_url), PostgresIntegrationStore(postgres_url), body=body
    )


def test_postgres_unreachable_is_one_line_without_the_password() -> None:
    url = f"postgresql://writer:hunter2@127.0.0.1:{free_port()}/mqttq"
    store = PostgresIntegrationStore(url)
    with pytest.raises(IntegrationStoreError, match=r"cannot connect to 127\.0\.0\.1") as e:
        asyncio.run(store.open())
    assert "hunter2" not in str(e.value)
    assert "\n" not in str(e.value)
