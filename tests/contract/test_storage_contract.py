"""The storage contract (mqttq.storage.ports), run on every adapter: in memory, SQLite,
and SQLite with its queues in Redis (standalone and a 3-master cluster). The cases that
take `make_storage` run once per backend (tests/contract/conftest.py); the SQLite-only
ones below them take a path.

Times in messages are whole milliseconds: that is the precision the JSON form keeps.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mqttq.codec.packets import Will
from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import QueuedMessage, QueueFullPolicy, SessionRecord, Storage
from mqttq.storage.sqlite.schema import SCHEMA_VERSION
from mqttq.storage.sqlite.store import SqliteStorage
from mqttq.storage.sqlite.writer import SqliteWriter
from tests.contract.conftest import StorageFactory, run_with

BACKENDS = ("memory", "sqlite", "redis", "redis-cluster")


def msg(n: int, *, topic: str = "t/x", expires_at: float | None = None) -> Message:
    return Message(
        topic=topic, payload=b"p%d" % n, qos=1, created_at=1_700_000_000.125, expires_at=expires_at
    )


def full_message() -> Message:
    return Message(
        topic="a/b",
        payload=bytes(range(256)),
        qos=2,
        retain=True,
        properties=Properties(
            payload_format_indicator=1,
            message_expiry_interval=3600,
            content_type="application/json",
            response_topic="reply/here",
            correlation_data=b"\x00\x01corr",
            user_properties=[("k", "v"), ("k", "v2"), ("ünï", "cødé")],
        ),
        created_at=1_700_000_000.5,
        expires_at=1_700_003_600.5,
        publisher_id="pub-1",
        subscription_identifiers=(7, 268435455),
    )


def ids(entries: Sequence[QueuedMessage | None]) -> list[tuple[int, int] | None]:
    return [None if e is None else (e.serial, e.packet_id) for e in entries]


def payloads(entries: list[QueuedMessage]) -> list[bytes]:
    return [e.message.payload for e in entries]


def record(client_id: str, *filters: str) -> SessionRecord:
    return SessionRecord(
        client_id=client_id,
        protocol_level=5,
        session_expiry_interval=0xFFFFFFFF,
        subscriptions=[
            Subscription(f, qos=1, no_local=True, retain_handling=2, subscription_identifier=9)
            for f in filters
        ],
        disconnected_at=1_700_000_001.25,
    )


def test_adapters_satisfy_the_port(tmp_path: Path) -> None:
    adapters: list[Storage] = [MemoryStorage(), SqliteStorage(tmp_path / "x.db")]
    assert len(adapters) == 2


@pytest.mark.parametrize("limit", [0, 65536])
def test_queue_limit_out_of_range_is_refused(limit: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="queue_limit"):
        MemoryStorage(queue_limit=limit)
    with pytest.raises(ValueError, match="queue_limit"):
        SqliteStorage(tmp_path / "x.db", queue_limit=limit)


def test_sessions_save_load_replace_delete(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        a, b = record("a", "x/+", "$share/g/y/#"), record("b")
        await s.save_session(a)
        await s.save_session(b)
        a.subscriptions.append(Subscription("mutated/after/save"))
        loaded = {r.client_id: r for r in await s.load_sessions()}
        assert loaded == {"a": record("a", "x/+", "$share/g/y/#"), "b": b}

        replaced = replace(record("a", "z"), disconnected_at=None, client_type="APPLICATION")
        await s.save_session(replaced)
        await s.enqueue([("b", msg(1))])
        await s.delete_session("b")
        assert await s.load_sessions() == [replaced]
        assert await s.fetch("b", 0) == []
        assert ids(await s.enqueue([("b", msg(2))])) == [(1, 1)]

    run_with(make_storage(), body)


def test_enqueue_assigns_serials_and_packet_ids_per_client(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        first = await s.enqueue([("a", msg(1)), ("b", msg(2)), ("a", msg(3))])
        second = await s.enqueue([("b", msg(4)), ("a", msg(5))])
        assert ids(first) == [(1, 1), (1, 1), (2, 2)]
        assert ids(second) == [(2, 2), (3, 3)]
        assert [e.message for e in first if e] == [msg(1), msg(2), msg(3)]
        fetched = await s.fetch("a", 0)
        assert ids(fetched) == [(1, 1), (2, 2), (3, 3)]
        assert [e.message for e in fetched] == [msg(1), msg(3), msg(5)]
        assert not any(e.pubrel for e in fetched)
        assert payloads(await s.fetch("b", 0)) == [b"p2", b"p4"]
        assert await s.enqueue([]) == []

    run_with(make_storage(), body)


def test_every_message_field_survives(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        await s.enqueue([("a", full_message())])
        (entry,) = await s.fetch("a", 0)
        assert entry.message == full_message()

    run_with(make_storage(), body)


def test_packet_id_wraps_while_serial_grows(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        # DROP_OLDEST keeps only the newest 10, so the counter reaches 65534 cheaply.
        for start in range(0, 65534, 16384):
            count = min(16384, 65534 - start)
            await s.enqueue([("a", msg(0))] * count)
        tail = await s.enqueue([("a", msg(65535)), ("a", msg(65536)), ("a", msg(65537))])
        assert ids(tail) == [(65535, 65535), (65536, 1), (65537, 2)]
        fetched = await s.fetch("a", 0)
        assert [e.serial for e in fetched] == list(range(65528, 65538))
        assert [e.packet_id for e in fetched] == [*range(65528, 65536), 1, 2]
        await s.remove("a", 1)
        fetched = await s.fetch("a", 0)
        assert ids(fetched[-2:]) == [(65535, 65535), (65537, 2)]
        assert payloads(fetched[-2:]) == [b"p65535", b"p65537"]

    run_with(make_storage(queue_limit=10), body)


def test_drop_oldest_keeps_the_newest(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        for n in range(1, 5):
            await s.enqueue([("a", msg(n))])
        batch = await s.enqueue([("a", msg(n)) for n in range(5, 9)] + [("b", msg(100))])
        assert all(e is not None for e in batch)
        fetched = await s.fetch("a", 0)
        assert ids(fetched) == [(6, 6), (7, 7), (8, 8)]
        assert payloads(fetched) == [b"p6", b"p7", b"p8"]
        assert payloads(await s.fetch("b", 0)) == [b"p100"]

    run_with(make_storage(queue_limit=3), body)


def test_reject_new_refuses_beyond_the_limit(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        result = await s.enqueue([("a", msg(n)) for n in range(1, 6)] + [("b", msg(9))])
        assert [e is not None for e in result] == [True, True, True, False, False, True]
        assert payloads(await s.fetch("a", 0)) == [b"p1", b"p2", b"p3"]
        assert await s.enqueue([("a", msg(6))]) == [None]
        await s.remove("a", 2)
        (entry,) = await s.enqueue([("a", msg(7))])
        assert entry is not None
        assert (entry.serial, entry.packet_id) == (4, 4)
        assert payloads(await s.fetch("a", 0)) == [b"p1", b"p3", b"p7"]

    run_with(make_storage(queue_limit=3, queue_full_policy=QueueFullPolicy.REJECT_NEW), body)


def test_remove_deletes_only_that_entry(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(n)) for n in range(1, 4)] + [("b", msg(4))])
        await s.remove("a", 2)
        await s.remove("a", 99)
        await s.remove("nobody", 1)
        assert ids(await s.fetch("a", 0)) == [(1, 1), (3, 3)]
        assert ids(await s.fetch("b", 0)) == [(1, 1)]
        await s.remove("a", 1)
        await s.remove("a", 3)
        assert await s.fetch("a", 0) == []
        # An emptied queue keeps its counters: ids continue, they are not reused.
        assert ids(await s.enqueue([("a", msg(5))])) == [(4, 4)]

    run_with(make_storage(), body)


def test_remove_many_deletes_exactly_those_entries(make_storage: StorageFactory) -> None:
    """The PUBACKs of many sessions in one call; unknown entries and an empty call are
    ignored, and the queue limit counts the removals (room for new entries again)."""

    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(n)) for n in range(1, 5)] + [("b", msg(n)) for n in (5, 6)])
        await s.remove_many([])
        await s.remove_many([("a", 1), ("b", 2), ("a", 3), ("a", 99), ("nobody", 1)])
        assert ids(await s.fetch("a", 0)) == [(2, 2), (4, 4)]
        assert ids(await s.fetch("b", 0)) == [(1, 1)]
        assert payloads(await s.fetch("a", 0)) == [b"p2", b"p4"]
        entries = await s.enqueue([("a", msg(7)), ("a", msg(8))])
        assert [e is not None for e in entries] == [True, True]  # 4 of 4 held again
        assert payloads(await s.fetch("a", 0)) == [b"p2", b"p4", b"p7", b"p8"]

    run_with(make_storage(queue_limit=4, queue_full_policy=QueueFullPolicy.REJECT_NEW), body)


def test_remove_many_of_a_large_batch(make_storage: StorageFactory) -> None:
    """More entries of one client than one statement or script call takes (the adapters
    split them), in one call with another client's: exactly those go, the count too."""

    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(n)) for n in range(1, 1301)] + [("b", msg(1))])
        await s.remove_many([("a", n) for n in range(1, 1201)] + [("b", 1), ("a", 1300)])
        assert ids(await s.fetch("a", 0)) == [(n, n) for n in range(1201, 1300)]
        assert await s.fetch("b", 0) == []
        entries = await s.enqueue([("a", msg(n)) for n in range(1301, 2601)])
        assert sum(e is not None for e in entries) == 1201  # 99 held: room for 1,201
        assert len(await s.fetch("a", 0)) == 1300

    run_with(make_storage(queue_limit=1300, queue_full_policy=QueueFullPolicy.REJECT_NEW), body)


def test_fetch_sees_every_awaited_write_while_others_run(make_storage: StorageFactory) -> None:
    """A fetch gives what the awaited enqueues and removals left, in serial order with
    their packet ids, also while another client's large enqueue is still being written."""

    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(n)) for n in range(1, 201)])
        await s.remove_many([("a", n) for n in range(1, 101, 2)])
        other = asyncio.ensure_future(s.enqueue([("b", msg(n)) for n in range(5000)]))
        fetched = await s.fetch("a", 0)
        assert ids(fetched) == [(n, n) for n in range(2, 101, 2)] + [
            (n, n) for n in range(101, 201)
        ]
        assert payloads(fetched)[:2] == [b"p2", b"p4"]
        assert len(await other) == 5000
        assert len(await s.fetch("b", 0)) == 5000

    run_with(make_storage(), body)


def test_mark_pubrel_keeps_message_and_packet_id(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        await s.enqueue([("a", full_message()), ("a", msg(2))])
        await s.mark_pubrel("a", 1)
        await s.mark_pubrel("a", 42)
        first, second = await s.fetch("a", 0)
        assert (first.serial, first.packet_id, first.pubrel) == (1, 1, True)
        assert first.message == full_message()
        assert (second.packet_id, second.pubrel) == (2, False)
        await s.remove("a", 1)
        assert ids(await s.fetch("a", 0)) == [(2, 2)]

    run_with(make_storage(), body)


def test_clear_empties_the_queue_and_resets_counters(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(n)) for n in range(5)] + [("b", msg(9))])
        await s.clear("a")
        await s.clear("nobody")
        assert await s.fetch("a", 0) == []
        assert ids(await s.enqueue([("a", msg(7))])) == [(1, 1)]
        assert payloads(await s.fetch("b", 0)) == [b"p9"]

    run_with(make_storage(), body)


def test_fetch_drops_expired_entries(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        await s.enqueue(
            [("a", msg(1, expires_at=100.0)), ("a", msg(2)), ("a", msg(3, expires_at=200.0))]
        )
        assert payloads(await s.fetch("a", 99.999)) == [b"p1", b"p2", b"p3"]
        assert payloads(await s.fetch("a", 100.0)) == [b"p2", b"p3"]
        # Dropped for good, not only hidden.
        assert payloads(await s.fetch("a", 0)) == [b"p2", b"p3"]
        assert payloads(await s.fetch("a", 500)) == [b"p2"]

    run_with(make_storage(), body)


def test_retained_set_replace_clear_and_expiry(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        a1 = replace(msg(1, topic="r/a"), retain=True)
        a2 = replace(full_message(), topic="r/a")
        b = msg(2, topic="r/b")
        c = msg(3, topic="r/c", expires_at=50.0)
        for m in (a1, b, c):
            await s.set_retained("default", m.topic, m)
        assert await retained(s, 10) == [("default", a1), ("default", b), ("default", c)]
        await s.set_retained("default", "r/a", a2)
        await s.set_retained("default", "r/b", None)
        await s.set_retained("default", "r/none", None)
        assert await retained(s, 10) == [("default", a2), ("default", c)]
        assert await retained(s, 50.0) == [("default", a2)]
        assert await retained(s, 0) == [("default", a2)]

    run_with(make_storage(), body)


def test_retained_messages_are_kept_per_tenant(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        one = msg(1, topic="t")
        two = msg(2, topic="t")
        await s.set_retained("acme", "t", one)
        await s.set_retained("globex", "t", two)
        assert await retained(s, 0) == [("acme", one), ("globex", two)]
        await s.set_retained("acme", "t", None)  # clears acme's only
        assert await retained(s, 0) == [("globex", two)]

    run_with(make_storage(), body)


def test_session_records_keep_their_tenant(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        await s.save_session(replace(record("a", "x/#"), tenant="acme"))
        await s.save_session(record("b", "y"))
        loaded = sorted(await s.load_sessions(), key=lambda r: r.client_id)
        assert [(r.client_id, r.tenant) for r in loaded] == [("a", "acme"), ("b", "default")]

    run_with(make_storage(), body)


async def retained(s: Storage, now: float) -> list[tuple[str, Message]]:
    """load_retained, ordered by (tenant, topic)."""
    return sorted(await s.load_retained(now), key=lambda item: (item[0], item[1].topic))


def test_500_concurrent_enqueues_all_succeed(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        calls = [s.enqueue([(f"c{n % 5}", msg(n))]) for n in range(500)]
        results = await asyncio.gather(*calls)
        assert all(len(r) == 1 and r[0] is not None for r in results)
        for client in range(5):
            fetched = await s.fetch(f"c{client}", 0)
            assert [e.serial for e in fetched] == list(range(1, 101))
            assert [e.packet_id for e in fetched] == list(range(1, 101))
            assert sorted(payloads(fetched)) == sorted(b"p%d" % n for n in range(client, 500, 5))

    run_with(make_storage(), body)


def test_calls_outside_open_and_close_raise(make_storage: StorageFactory) -> None:
    async def body() -> None:
        s = make_storage()
        with pytest.raises(StorageError):
            await s.fetch("a", 0)
        await s.open()
        await s.enqueue([("a", msg(1))])
        await s.close()
        await s.close()
        with pytest.raises(StorageError):
            await s.enqueue([("a", msg(2))])
        with pytest.raises(StorageError):
            await s.load_sessions()
        with pytest.raises(StorageError):
            await s.open()

    asyncio.run(body())


# --- SQLite only -------------------------------------------------------------------


def test_sqlite_state_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "data" / "mqttq.db"

    async def first(s: Storage) -> None:
        await s.save_session(record("a", "x/#"))
        await s.enqueue([("a", msg(n)) for n in range(1, 5)] + [("b", msg(9))])
        await s.remove("a", 1)
        await s.mark_pubrel("a", 2)
        await s.remove("b", 1)  # b's queue is empty now; its counters must stay
        await s.set_retained("default", "r", full_message())

    async def second(s: Storage) -> None:
        assert await s.load_sessions() == [record("a", "x/#")]
        fetched = await s.fetch("a", 0)
        assert ids(fetched) == [(2, 2), (3, 3), (4, 4)]
        assert [e.pubrel for e in fetched] == [True, False, False]
        assert payloads(fetched) == [b"p2", b"p3", b"p4"]
        assert await s.load_retained(0) == [("default", full_message())]
        more = await s.enqueue([("a", msg(5)), ("b", msg(10))])
        assert ids(more) == [(5, 5), (2, 2)]

    run_with(SqliteStorage(path), first)
    run_with(SqliteStorage(path), second)
    # A clean close leaves the WAL checkpointed or replayable: a plain connection sees it all.
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT client_id, last_packet_id FROM counters ORDER BY 1").fetchall()
    assert rows == [("a", 5), ("b", 2)]


def test_sqlite_skips_unreadable_entries(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"

    async def fill(s: Storage) -> None:
        await s.enqueue([("a", msg(1)), ("a", msg(2))])
        await s.set_retained("default", "r", msg(3, topic="r"))
        await s.set_retained("default", "q", msg(4, topic="q"))

    run_with(SqliteStorage(path), fill)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE messages SET body = '{not json'"
            " WHERE id = (SELECT message_id FROM queue WHERE serial = 1)"
        )
        conn.execute("UPDATE retained SET message = '[]' WHERE topic = 'r'")
    conn.close()

    async def check(s: Storage) -> None:
        assert payloads(await s.fetch("a", 0)) == [b"p2"]
        assert [m.topic for _, m in await s.load_retained(0)] == ["q"]
        await s.mark_pubrel("a", 1)  # a corrupt entry must not break the call

    run_with(SqliteStorage(path), check)


async def hold(writer: SqliteWriter) -> tuple[threading.Event, asyncio.Future[None]]:
    """Park the writer thread inside a job, so the next jobs queued form one batch."""
    started, release = threading.Event(), threading.Event()

    def blocker(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait()

    held = writer.submit(blocker)
    await asyncio.to_thread(started.wait)
    return release, held


def test_sqlite_writer_fails_only_the_failing_job(tmp_path: Path) -> None:
    async def body() -> None:
        writer = SqliteWriter(tmp_path / "w.db", commit_interval=0)
        await writer.open()

        def bad(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO retained VALUES ('t', 'bad', '{}', NULL)")
            raise RuntimeError("boom")

        def good(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO retained VALUES ('t', 'good', '{}', NULL)")
            return 7

        def topics(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute("SELECT topic FROM retained")]

        release, held = await hold(writer)
        jobs: list[asyncio.Future[Any]] = [
            writer.submit(good),
            writer.submit(bad),
            writer.submit(topics),
        ]
        release.set()
        await held
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        await writer.close()
        assert outcomes[0] == 7
        assert isinstance(outcomes[1], StorageError)
        assert outcomes[2] == ["good"]
        stats = writer.statistics()
        assert (stats.jobs, stats.commits, stats.largest_batch) == (4, 2, 3)

    asyncio.run(body())


def test_sqlite_failed_commit_fails_the_whole_batch(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "mqttq.db", commit_interval=0)
    writer: SqliteWriter = storage._writer

    def deny_commit(action: int, arg1: str | None, *_: str | None) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT":
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def install(conn: sqlite3.Connection) -> None:
        conn.set_authorizer(deny_commit)

    def uninstall(conn: sqlite3.Connection) -> None:
        conn.set_authorizer(None)

    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(1))])
        release, held = await hold(writer)
        doomed: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(s.enqueue([("a", msg(2))])),
            asyncio.ensure_future(s.set_retained("default", "r", msg(3, topic="r"))),
            asyncio.ensure_future(s.enqueue([("b", msg(4))])),
        ]
        await asyncio.sleep(0)  # the tasks above submit their jobs
        doomed.append(writer.submit(install))
        release.set()
        await held
        outcomes = await asyncio.gather(*doomed, return_exceptions=True)
        assert all(isinstance(o, StorageError) for o in outcomes), outcomes
        assert writer.statistics().failed_commits == 1
        await writer.submit(uninstall)
        # Nothing of the failed batch stayed, and the counters did not move.
        assert payloads(await s.fetch("a", 0)) == [b"p1"]
        assert await s.fetch("b", 0) == []
        assert await s.load_retained(0) == []
        assert ids(await s.enqueue([("a", msg(5)), ("b", msg(6))])) == [
            (2, 2),
            (1, 1),
        ]

    run_with(storage, body)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"

    async def create(s: Storage) -> None:
        assert await s.load_sessions() == []

    run_with(SqliteStorage(path), create)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 999")
    conn.close()

    async def body() -> None:
        with pytest.raises(StorageError, match="schema version 999"):
            await SqliteStorage(path).open()

    asyncio.run(body())


def test_a_packet_id_still_queued_is_skipped(make_storage: StorageFactory) -> None:
    """[MQTT-2.2.1-4]: an entry left unacknowledged while 65535 later ones passed keeps its
    packet id; the new entry that would get the same id gets the next free one."""

    async def body(s: Storage) -> None:
        (lingering,) = await s.enqueue([("a", msg(1))])
        assert lingering is not None
        await s.mark_pubrel("a", lingering.packet_id)
        for start in range(2, 65536, 4096):
            entries = await s.enqueue([("a", msg(0))] * min(4096, 65536 - start))
            # Acknowledged as a broker does, the PUBACKs of one loop turn in one call.
            await s.remove_many([("a", e.packet_id) for e in entries if e])
        tail = await s.enqueue([("a", msg(2)), ("a", msg(3))])
        assert ids(tail) == [(65536, 2), (65537, 3)]
        fetched = await s.fetch("a", 0)
        assert [(e.serial, e.packet_id, e.pubrel) for e in fetched] == [
            (1, 1, True),
            (65536, 2, False),
            (65537, 3, False),
        ]
        await s.remove("a", 1)
        assert payloads(await s.fetch("a", 0)) == [b"p2", b"p3"]

    run_with(make_storage(queue_limit=65535), body)


def test_sqlite_upgrades_a_version_1_file(tmp_path: Path) -> None:
    """A data dir written before tenants existed opens with everything in "default"."""
    path = tmp_path / "mqttq.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE schema_version (version INTEGER NOT NULL);
            INSERT INTO schema_version VALUES (1);
            CREATE TABLE sessions (client_id TEXT PRIMARY KEY, protocol_level INTEGER NOT NULL,
                session_expiry_interval INTEGER NOT NULL, disconnected_at REAL,
                client_type TEXT NOT NULL, subscriptions TEXT NOT NULL) WITHOUT ROWID;
            INSERT INTO sessions VALUES ('old', 5, 60, 12.5, 'DEVICE', '[]');
            CREATE TABLE retained (topic TEXT PRIMARY KEY, message TEXT NOT NULL,
                expires_at REAL) WITHOUT ROWID;
            """
        )
    conn.close()

    async def fill(s: Storage) -> None:  # the retained row is written the v2 way, then moved
        await s.set_retained("default", "r", msg(3, topic="r"))

    scratch = tmp_path / "scratch.db"
    run_with(SqliteStorage(scratch), fill)
    with sqlite3.connect(scratch) as src, sqlite3.connect(path) as dst:
        row = src.execute("SELECT topic, message, expires_at FROM retained").fetchone()
        dst.execute("INSERT INTO retained VALUES (?, ?, ?)", row)
    src.close()
    dst.close()

    async def check(s: Storage) -> None:
        sessions = await s.load_sessions()
        assert [(r.client_id, r.tenant, r.disconnected_at) for r in sessions] == [
            ("old", "default", 12.5)
        ]
        assert [(t, m.topic) for t, m in await s.load_retained(0)] == [("default", "r")]

    run_with(SqliteStorage(path), check)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    conn.close()


def test_session_records_keep_will_and_qos2_ids(make_storage: StorageFactory) -> None:
    will = Will(
        "status/a",
        b"\x00gone",
        qos=1,
        retain=True,
        properties=Properties(will_delay_interval=30, content_type="text/plain"),
    )

    async def body(s: Storage) -> None:
        await s.save_session(replace(record("a", "x/#"), will=will, awaiting_pubrel=[7, 3]))
        await s.save_session(record("b", "y"))
        loaded = {r.client_id: r for r in await s.load_sessions()}
        assert loaded["a"].will == will
        assert sorted(loaded["a"].awaiting_pubrel) == [3, 7]
        assert loaded["b"].will is None and loaded["b"].awaiting_pubrel == []
        await s.save_session(record("a", "x/#"))  # the will fired, the ids were released
        again = {r.client_id: r for r in await s.load_sessions()}
        assert again["a"].will is None and again["a"].awaiting_pubrel == []

    run_with(make_storage(), body)
