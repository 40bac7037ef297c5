"""The AuthStore contract, on SQLite and on a real PostgreSQL (mqttq.auth.ports)."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mqttq.auth.model import DEFAULT_TENANT, ClientType, Credential, Tenant
from mqttq.auth.ports import AuthStore, AuthStoreError, CredentialExists
from mqttq.auth.rules import AclRule
from mqttq.limits.quota import Quota
from mqttq.storage.postgres.auth import PostgresAuthStore
from mqttq.storage.sqlite.auth import SCHEMA_VERSION, SqliteAuthStore
from tests.auth.conftest import AuthStoreFactory
from tests.postgres_fixtures import PostgresServer
from tests.services import free_port

Body = Callable[[AuthStore], Awaitable[None]]


def run_with(store: AuthStore, body: Body) -> None:
    """Open `store`, run `body` on a fresh event loop, close it even when `body` fails."""

    async def main() -> None:
        await store.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def credential(username: str, **changes: Any) -> Credential:
    return dataclasses.replace(Credential(username, f"hash-of-{username}"), **changes)


def without_times(item: Credential) -> Credential:
    return dataclasses.replace(item, created_at=0.0, updated_at=0.0)


FULL = credential(
    "alice",
    password_hash="scrypt$16384$8$1$c2FsdHNhbHQ=$a2V5a2V5a2V5a2V5a2V5a2V5",
    tenant="acme",
    client_type=ClientType.APPLICATION,
    client_id_pattern="alice-*",
    publish_acl=("devices/%c/#", "public/+", "$SYS/x"),
    subscribe_acl=(),
    acl_rules=(
        AclRule("deny", "subscribe", "test/nosubscribe"),
        AclRule("allow", "all", "devices/%c/#"),
    ),
)


def test_add_then_get_round_trips_every_field(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        assert await store.get_credential("alice") is None
        await store.add_credential(FULL)
        got = await store.get_credential("alice")
        assert got is not None
        assert without_times(got) == FULL
        assert got.created_at > 0
        assert got.updated_at == got.created_at
        assert await store.get_credential("bob") is None

    run_with(make_auth_store(), body)


def test_defaults_round_trip(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await store.add_credential(credential("plain"))
        got = await store.get_credential("plain")
        assert got is not None
        assert without_times(got) == credential("plain")
        assert got.tenant == DEFAULT_TENANT
        assert got.client_type is ClientType.DEVICE
        assert got.client_id_pattern is None
        assert got.publish_acl == ("#",)

    run_with(make_auth_store(), body)


def test_add_existing_username_raises_and_keeps_the_first(
    make_auth_store: AuthStoreFactory,
) -> None:
    async def body(store: AuthStore) -> None:
        await store.add_credential(FULL)
        with pytest.raises(CredentialExists) as raised:
            await store.add_credential(credential("alice", password_hash="other"))
        assert raised.value.username == "alice"
        assert isinstance(raised.value, AuthStoreError)
        got = await store.get_credential("alice")
        assert got is not None
        assert got.password_hash == FULL.password_hash

    run_with(make_auth_store(), body)


def test_list_is_ordered_by_username_and_filters_by_tenant(
    make_auth_store: AuthStoreFactory,
) -> None:
    names = {"zed": "acme", "Bob": "other", "amy": "acme", "émile": "acme", "_x": DEFAULT_TENANT}

    async def body(store: AuthStore) -> None:
        assert await store.list_credentials() == []
        for name, tenant in names.items():
            await store.add_credential(credential(name, tenant=tenant))
        every = await store.list_credentials()
        assert [c.username for c in every] == sorted(names)  # code point order
        acme = await store.list_credentials("acme")
        assert [c.username for c in acme] == ["amy", "zed", "émile"]
        assert all(c.tenant == "acme" for c in acme)
        assert await store.list_credentials("nobody") == []
        assert await store.tenant_has_credentials("acme")
        assert await store.tenant_has_credentials(DEFAULT_TENANT)
        assert not await store.tenant_has_credentials("nobody")
        assert not await store.tenant_has_credentials("ACME")

    run_with(make_auth_store(), body)


def test_put_replaces_and_keeps_created_at(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await store.add_credential(FULL)
        first = await store.get_credential("alice")
        assert first is not None
        changed = dataclasses.replace(
            FULL,
            password_hash="new-hash",
            tenant="beta",
            client_type=ClientType.DEVICE,
            client_id_pattern=None,
            publish_acl=(),
            subscribe_acl=("a/#",),
            created_at=0.0,  # what the caller passes does not move created_at
        )
        await store.put_credential(changed)
        second = await store.get_credential("alice")
        assert second is not None
        assert without_times(second) == without_times(changed)
        assert second.created_at == first.created_at
        assert second.updated_at >= first.updated_at
        assert [c.username for c in await store.list_credentials("acme")] == []
        assert [c.username for c in await store.list_credentials("beta")] == ["alice"]

    run_with(make_auth_store(), body)


def test_put_inserts_a_new_credential(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await store.put_credential(FULL)
        got = await store.get_credential("alice")
        assert got is not None
        assert without_times(got) == FULL
        assert got.created_at > 0

    run_with(make_auth_store(), body)


def test_delete_credential(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await store.add_credential(FULL)
        await store.add_credential(credential("bob"))
        assert await store.delete_credential("alice") is True
        assert await store.delete_credential("alice") is False
        assert await store.get_credential("alice") is None
        assert [c.username for c in await store.list_credentials()] == ["bob"]
        await store.add_credential(FULL)  # the username is free again
        assert await store.get_credential("alice") is not None

    run_with(make_auth_store(), body)


EXACT_QUOTA = Quota(
    max_connections_per_node=2**62,
    max_connection_rate=0.1 + 0.2,  # not representable in decimal: must survive exactly
    max_topics=0,
    max_sessions=9_007_199_254_740_993,  # 2**53 + 1: lost if it ever passes through a float
    max_publish_rate=1e-300,
)


def test_tenants_crud_with_exact_quotas(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        assert await store.list_tenants() == []
        assert await store.get_tenant("acme") is None
        await store.put_tenant(Tenant("acme", EXACT_QUOTA))
        await store.put_tenant(Tenant("Beta"))
        got = await store.get_tenant("acme")
        assert got is not None
        assert got.quota == EXACT_QUOTA
        assert type(got.quota.max_sessions) is int
        assert type(got.quota.max_connection_rate) is float
        assert got.created_at > 0
        assert got.updated_at == got.created_at
        assert [t.name for t in await store.list_tenants()] == ["Beta", "acme"]
        beta = await store.get_tenant("Beta")
        assert beta is not None
        assert beta.quota == Quota()

        raised = EXACT_QUOTA.replace(max_topics=7, max_publish_rate=2.5)
        await store.put_tenant(Tenant("acme", raised))
        again = await store.get_tenant("acme")
        assert again is not None
        assert again.quota == raised
        assert again.created_at == got.created_at
        assert again.updated_at >= got.updated_at

        assert await store.delete_tenant("acme") is True
        assert await store.delete_tenant("acme") is False
        assert await store.get_tenant("acme") is None
        assert [t.name for t in await store.list_tenants()] == ["Beta"]

    run_with(make_auth_store(), body)


def test_data_survives_close_and_reopen(make_auth_store: AuthStoreFactory) -> None:
    async def write(store: AuthStore) -> None:
        await store.add_credential(FULL)
        await store.put_tenant(Tenant("acme", EXACT_QUOTA))

    run_with(make_auth_store(), write)
    seen: dict[str, object] = {}

    async def read(store: AuthStore) -> None:
        seen["credential"] = await store.get_credential("alice")
        seen["tenant"] = await store.get_tenant("acme")

    run_with(make_auth_store(), read)
    stored = seen["credential"]
    assert isinstance(stored, Credential)
    assert without_times(stored) == FULL
    tenant = seen["tenant"]
    assert isinstance(tenant, Tenant)
    assert tenant.quota == EXACT_QUOTA


def test_one_store_object_reopens(make_auth_store: AuthStoreFactory) -> None:
    store = make_auth_store()
    run_with(store, lambda s: s.add_credential(FULL))

    async def check(again: AuthStore) -> None:
        assert await again.get_credential("alice") is not None

    run_with(store, check)


def test_opening_twice_creates_nothing_twice(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await store.add_credential(FULL)
        second = make_auth_store()
        await second.open()  # tables exist: kept as they are
        try:
            assert await second.get_credential("alice") is not None
        finally:
            await second.close()

    run_with(make_auth_store(), body)


def test_calls_on_a_closed_store_raise(make_auth_store: AuthStoreFactory) -> None:
    async def main() -> None:
        store = make_auth_store()
        with pytest.raises(AuthStoreError):
            await store.get_credential("alice")
        await store.open()
        await store.close()
        with pytest.raises(AuthStoreError):
            await store.list_tenants()

    asyncio.run(main())


def test_concurrent_calls_share_the_store(make_auth_store: AuthStoreFactory) -> None:
    async def body(store: AuthStore) -> None:
        await asyncio.gather(*(store.add_credential(credential(f"u{i:02}")) for i in range(20)))
        found = await asyncio.gather(*(store.get_credential(f"u{i:02}") for i in range(20)))
        assert [c.username for c in found if c is not None] == [f"u{i:02}" for i in range(20)]
        results = await asyncio.gather(
            *(store.add_credential(credential("same")) for _ in range(5)), return_exceptions=True
        )
        assert sum(isinstance(r, CredentialExists) for r in results) == 4
        assert sum(r is None for r in results) == 1

    run_with(make_auth_store(), body)


# --- failures ----------------------------------------------------------------------------


def test_unreachable_postgres_is_one_line_auth_store_error() -> None:
    port = free_port()  # nothing listens there
    store = PostgresAuthStore(f"postgresql://mqttq:secret-pw@127.0.0.1:{port}/auth")
    with pytest.raises(AuthStoreError) as raised:
        asyncio.run(store.open())
    message = str(raised.value)
    assert message.startswith(f"postgres: cannot connect to 127.0.0.1:{port}/auth: ")
    assert "\n" not in message
    assert "secret-pw" not in message
    assert raised.value.__cause__ is None  # no driver exception chained into tracebacks


def test_unwritable_sqlite_path_is_auth_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for path in (blocker / "auth.db", blocker / "sub" / "auth.db", tmp_path):
        store = SqliteAuthStore(path)
        with pytest.raises(AuthStoreError) as raised:
            asyncio.run(store.open())
        message = str(raised.value)
        assert message.startswith(f"sqlite: cannot open {path}: ")
        assert "\n" not in message


def test_sqlite_file_is_wal_with_a_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    run_with(SqliteAuthStore(path), lambda store: store.put_tenant(Tenant("acme")))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    conn.close()


def test_sqlite_schema_1_gains_acl_rules_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute(
            "CREATE TABLE mqtt_client_credentials (username TEXT PRIMARY KEY, password_hash "
            "TEXT NOT NULL, tenant TEXT NOT NULL, client_type TEXT NOT NULL, client_id_pattern "
            "TEXT, publish_acl TEXT NOT NULL, subscribe_acl TEXT NOT NULL, created_at REAL NOT "
            "NULL, updated_at REAL NOT NULL)"
        )
        conn.execute(
            "INSERT INTO mqtt_client_credentials VALUES "
            "('old', 'h', 'default', 'DEVICE', NULL, '[\"a/#\"]', '[\"#\"]', 1.0, 2.0)"
        )
    conn.close()

    async def body(store: AuthStore) -> None:
        old = await store.get_credential("old")
        assert old is not None
        assert (old.publish_acl, old.acl_rules) == (("a/#",), ())
        await store.put_credential(dataclasses.replace(old, acl_rules=FULL.acl_rules))
        again = await store.get_credential("old")
        assert again is not None and again.acl_rules == FULL.acl_rules

    run_with(SqliteAuthStore(path), body)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(2,)]
    conn.close()


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    run_with(SqliteAuthStore(path), lambda store: store.put_tenant(Tenant("acme")))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(AuthStoreError, match="schema version 99"):
        asyncio.run(SqliteAuthStore(path).open())


def test_sqlite_corrupt_row_is_auth_store_error(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    run_with(SqliteAuthStore(path), lambda store: store.add_credential(FULL))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE mqtt_client_credentials SET client_type = 'ROBOT'")
    conn.close()

    async def body(store: AuthStore) -> None:
        with pytest.raises(AuthStoreError, match="ROBOT"):
            await store.get_credential("alice")

    run_with(SqliteAuthStore(path), body)


def test_postgres_reconnects_after_the_connection_breaks(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    dbname = postgres_url.rsplit("/", 1)[1]

    async def body(store: AuthStore) -> None:
        await store.add_credential(FULL)
        killed = postgres_server.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE datname = '{dbname}' AND pid <> pg_backend_pid()"
        )
        assert killed == "1"
        got = await store.get_credential("alice")  # reconnects once, then succeeds
        assert got is not None
        assert got.username == "alice"
        await store.put_tenant(Tenant("acme", EXACT_QUOTA))
        assert [t.name for t in await store.list_tenants()] == ["acme"]

    run_with(PostgresAuthStore(postgres_url), body)


def test_postgres_server_gone_is_auth_store_error(postgres_server: PostgresServer) -> None:
    # A database that is dropped under the store: the reconnect fails, the call raises
    # AuthStoreError (not a driver error), and the store keeps working once it is back.
    url = postgres_server.create_database()
    dbname = url.rsplit("/", 1)[1]

    async def body(store: AuthStore) -> None:
        await store.add_credential(FULL)
        postgres_server.psql(f"DROP DATABASE {dbname} WITH (FORCE)")
        with pytest.raises(AuthStoreError) as raised:
            await store.get_credential("alice")
        assert str(raised.value).startswith("postgres")
        assert "\n" not in str(raised.value)

    run_with(PostgresAuthStore(url), body)


def test_unparsable_postgres_url_never_shows_the_password() -> None:
    store = PostgresAuthStore("postgresql://mqttq:secret-pw@[::1/auth")
    with pytest.raises(AuthStoreError) as raised:
        asyncio.run(store.open())
    assert "not a libpq connection string" in str(raised.value)
    assert "secret-pw" not in str(raised.value)


@pytest.mark.parametrize(
    "bad",
    [
        credential("\ud800"),
        credential("alice", tenant="\udcff"),
        credential("alice", publish_acl=("a/\ud800",)),
    ],
)
def test_text_that_is_not_utf8_is_auth_store_error(
    make_auth_store: AuthStoreFactory, bad: Credential
) -> None:
    async def body(store: AuthStore) -> None:
        with pytest.raises(AuthStoreError, match="not valid UTF-8"):
            await store.put_credential(bad)
        with pytest.raises(AuthStoreError, match="not valid UTF-8"):
            await store.get_credential("\ud800")
        assert await store.list_credentials() == []
        await store.add_credential(FULL)  # the store still works
        assert await store.get_credential("alice") is not None

    run_with(make_auth_store(), body)


def test_postgres_table_of_an_older_mqttq_gains_acl_rules(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    dbname = postgres_url.rsplit("/", 1)[1]
    postgres_server.psql(
        "CREATE TABLE mqtt_client_credentials (username text PRIMARY KEY, password_hash text "
        "NOT NULL, tenant text NOT NULL, client_type text NOT NULL, client_id_pattern text, "
        "publish_acl text[] NOT NULL, subscribe_acl text[] NOT NULL, created_at double "
        "precision NOT NULL, updated_at double precision NOT NULL); "
        "INSERT INTO mqtt_client_credentials VALUES ('old', 'h', 'default', 'DEVICE', NULL, "
        "ARRAY['a/#'], ARRAY['#'], 1, 2)",
        dbname,
    )

    async def body(store: AuthStore) -> None:
        old = await store.get_credential("old")
        assert old is not None
        assert (old.publish_acl, old.acl_rules) == (("a/#",), ())
        await store.put_credential(dataclasses.replace(old, acl_rules=FULL.acl_rules))
        again = await store.get_credential("old")
        assert again is not None and again.acl_rules == FULL.acl_rules

    run_with(PostgresAuthStore(postgres_url), body)
