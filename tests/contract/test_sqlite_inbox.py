"""SQLite's publish inbox (schema 7, `sqlite_inbox`): rows round-trip every field of an
inbound message, survive a reopen, go away only with the commit that queues their
entries, and a version 6 file gains the table."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import cast

import pytest

from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.ports import InboxStore, Storage
from mqttq.storage.sqlite.schema import SCHEMA_VERSION
from mqttq.storage.sqlite.store import SqliteStorage
from tests.contract.conftest import run_with, sql_rows
from tests.contract.test_storage_contract import full_message, msg, payloads


def _inbound(message: Message) -> Message:
    """`message` as a client publishes it: no subscription identifiers."""
    return Message(
        message.topic,
        message.payload,
        message.qos,
        message.retain,
        message.properties,
        message.created_at,
        message.expires_at,
        message.publisher_id,
    )


def _inbox(s: Storage) -> InboxStore:
    assert isinstance(s, InboxStore)
    return s


def test_rows_keep_every_field_in_order_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"
    full = _inbound(full_message())
    stored: list[int] = []

    async def write(s: Storage) -> None:
        stored.extend(await _inbox(s).append_inbox([("default", msg(1)), ("acme", full)]))
        stored.extend(await _inbox(s).append_inbox([("default", msg(2, topic="t/y"))]))

    async def read(s: Storage) -> None:
        rows = await _inbox(s).load_inbox()
        assert [seq for seq, _tenant, _message in rows] == stored
        assert [(tenant, message) for _seq, tenant, message in rows] == [
            ("default", msg(1)),
            ("acme", full),
            ("default", msg(2, topic="t/y")),
        ]

    run_with(SqliteStorage(path), write)
    assert stored == sorted(stored) and len(set(stored)) == 3
    run_with(SqliteStorage(path), read)


def test_the_commit_that_queues_the_entries_deletes_thesql_rows(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"

    async def body(s: Storage) -> None:
        inbox = _inbox(s)
        first, second, third = await inbox.append_inbox([("default", msg(n)) for n in range(3)])
        entries = await inbox.enqueue_logged([("a", msg(0)), ("b", msg(0))], [first])
        assert [e is not None for e in entries] == [True, True]
        assert [seq for seq, _t, _m in await inbox.load_inbox()] == [second, third]
        assert payloads(await s.fetch("a", 0)) == [b"p0"]
        await inbox.inbox_done([second])
        assert [seq for seq, _t, _m in await inbox.load_inbox()] == [third]

    run_with(SqliteStorage(path), body)
    assert sql_rows(path, "SELECT COUNT(*) FROM inbox") == [(1,)]


def test_a_failed_enqueue_keeps_itssql_rows(tmp_path: Path) -> None:
    """The delete and the entries are one job: when queueing fails, the row is still there
    (and no entry was written)."""

    async def body(s: Storage) -> None:
        inbox = _inbox(s)
        (seq,) = await inbox.append_inbox([("default", msg(1))])
        broken = cast(Message, None)  # fails while the job encodes it
        with pytest.raises(StorageError):
            await inbox.enqueue_logged([("a", msg(1)), ("b", broken)], [seq])
        assert [row[0] for row in await inbox.load_inbox()] == [seq]
        assert await s.fetch("a", 0) == []

    run_with(SqliteStorage(tmp_path / "mqttq.db"), body)


def test_an_unreadable_row_is_dropped_and_the_others_kept(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"

    async def write(s: Storage) -> None:
        await _inbox(s).append_inbox([("default", msg(1)), ("default", msg(2))])

    run_with(SqliteStorage(path), write)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE inbox SET publish = x'30ff' WHERE seq = 1")
    conn.close()
    loaded: list[Message] = []

    async def read(s: Storage) -> None:
        loaded.extend(message for _seq, _tenant, message in await _inbox(s).load_inbox())

    run_with(SqliteStorage(path), read)
    assert loaded == [msg(2)]
    assert sql_rows(path, "SELECT seq FROM inbox") == [(2,)]


def test_a_version_6_file_gains_an_empty_inbox(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"

    async def write(s: Storage) -> None:
        await s.enqueue([("a", msg(1))])

    run_with(SqliteStorage(path), write)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE inbox")
        conn.execute("UPDATE schema_version SET version = 6")
    conn.close()

    async def body(s: Storage) -> None:
        assert await _inbox(s).load_inbox() == []
        assert payloads(await s.fetch("a", 0)) == [b"p1"]

    run_with(SqliteStorage(path), body)
    assert sql_rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert SCHEMA_VERSION == 7
