"""SQLite's message-once layout (schema 5): a body per message, shared by its entries and
swept once none is left, and the upgrade of a version 4 file whose entries carry their
whole message."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from pathlib import Path

from mqttq.storage.formats.tbmq_json import PUBREL, message_to_json
from mqttq.storage.ports import QueueFullPolicy, Storage
from mqttq.storage.sqlite.schema import SCHEMA_VERSION
from mqttq.storage.sqlite.store import SqliteStorage
from mqttq.storage.sqlite.writer import SqliteWriter
from tests.contract.conftest import run_with
from tests.contract.test_storage_contract import full_message, hold, ids, msg, payloads


def _bodies(path: Path) -> list[bytes]:
    """The payload of every stored body, in id order."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT json_extract(body, '$.payload') FROM messages ORDER BY id")
        payloads = [base64.b64decode(payload) for (payload,) in rows]
    conn.close()
    return payloads


def test_a_body_is_shared_by_its_entries_and_swept_after_the_last(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"
    shared = msg(1)

    async def body(s: Storage) -> None:
        expiring = msg(3, expires_at=100.0)
        await s.enqueue(
            [("a", shared), ("b", shared), ("c", shared), ("a", msg(2)), ("b", expiring)]
        )
        await s.enqueue([("d", msg(4))])
        await s.enqueue([("d", msg(5)), ("d", msg(6))])  # the limit drops p4
        await s.enqueue([("e", msg(7)), ("e", msg(8)), ("e", msg(9))])  # p7 never written
        await s.remove_many([("a", 1), ("a", 2)])
        assert payloads(await s.fetch("b", 200.0)) == [b"p1"]  # p3 expired: deleted
        await s.mark_pubrel("c", 1)
        assert [e.pubrel for e in await s.fetch("c", 0)] == [True]
        await s.clear("c")
        assert payloads(await s.fetch("d", 0)) == [b"p5", b"p6"]
        assert isinstance(s, SqliteStorage)
        assert await s.sweep() == 4  # p2, p3, p4 and p7; b still holds p1
        assert payloads(await s.fetch("b", 0)) == [b"p1"]

    run_with(SqliteStorage(path, queue_limit=2), body)
    assert _bodies(path) == [b"p1", b"p5", b"p6", b"p8", b"p9"]

    async def rejected(s: Storage) -> None:
        await s.enqueue([("a", msg(10)), ("b", msg(11)), ("b", msg(12))])
        assert isinstance(s, SqliteStorage)
        assert await s.sweep() == 1

    path = tmp_path / "reject.db"
    run_with(
        SqliteStorage(path, queue_limit=1, queue_full_policy=QueueFullPolicy.REJECT_NEW), rejected
    )
    assert _bodies(path) == [b"p10", b"p11"]


_V4 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (4);
CREATE TABLE sessions (client_id TEXT PRIMARY KEY, protocol_level INTEGER NOT NULL,
    session_expiry_interval INTEGER NOT NULL, disconnected_at REAL,
    client_type TEXT NOT NULL, subscriptions TEXT NOT NULL,
    tenant TEXT NOT NULL DEFAULT 'default', will TEXT,
    awaiting_pubrel TEXT NOT NULL DEFAULT '[]') WITHOUT ROWID;
CREATE TABLE queue (id INTEGER PRIMARY KEY, client_id TEXT NOT NULL,
    serial INTEGER NOT NULL, packet_id INTEGER NOT NULL, pubrel INTEGER NOT NULL DEFAULT 0,
    message TEXT NOT NULL, expires_at REAL);
CREATE UNIQUE INDEX queue_serial ON queue (client_id, serial);
CREATE UNIQUE INDEX queue_packet_id ON queue (client_id, packet_id);
CREATE TABLE counters (client_id TEXT PRIMARY KEY, last_serial INTEGER NOT NULL,
    last_packet_id INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO counters VALUES ('a', 7, 7), ('b', 1, 1);
"""


def test_sqlite_upgrades_a_version_4_queue(tmp_path: Path) -> None:
    """Entries written by the layout before message-once are found, in order, with their
    PUBREL state; ids continue; a removed entry's body goes with it."""
    path = tmp_path / "mqttq.db"
    old = [
        (
            "a",
            6,
            6,
            1,
            message_to_json(full_message(), client_id="a", packet_id=6, packet_type=PUBREL),
        ),
        ("a", 7, 7, 0, message_to_json(msg(7), client_id="a", packet_id=7)),
        ("b", 1, 1, 0, message_to_json(msg(1), client_id="b", packet_id=1)),
    ]
    with sqlite3.connect(path) as conn:
        conn.executescript(_V4)
        conn.executemany(
            "INSERT INTO queue (client_id, serial, packet_id, pubrel, message)"
            " VALUES (?, ?, ?, ?, ?)",
            old,
        )
    conn.close()

    async def check(s: Storage) -> None:
        a = await s.fetch("a", 0)
        assert [(e.serial, e.packet_id, e.pubrel) for e in a] == [(6, 6, True), (7, 7, False)]
        assert a[0].message == full_message()
        assert payloads(await s.fetch("b", 0)) == [b"p1"]
        assert ids(await s.enqueue([("a", msg(8))])) == [(8, 8)]
        await s.remove("a", 6)
        assert payloads(await s.fetch("a", 0)) == [b"p7", b"p8"]
        assert isinstance(s, SqliteStorage)
        await s.sweep()

    run_with(SqliteStorage(path), check)
    assert _bodies(path) == [b"p7", b"p1", b"p8"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    conn.close()


def test_the_writer_sweeps_bodies_on_its_own_once_enough_entries_went(tmp_path: Path) -> None:
    """Without `sweep()`: after 4,096 deletions the idle writer sweeps by itself."""
    path = tmp_path / "mqttq.db"

    async def body(s: Storage) -> None:
        entries = await s.enqueue([("a", msg(n)) for n in range(4096)] + [("b", msg(-1))])
        await s.remove_many([("a", e.packet_id) for e in entries[:4096] if e is not None])
        for _ in range(500):  # the sweep follows the removal's commit
            if len(_bodies(path)) == 1:
                break
            await asyncio.sleep(0.01)
        assert _bodies(path) == [b"p-1"]

    run_with(SqliteStorage(path, queue_limit=65535), body)


def test_a_heavy_job_commits_without_the_jobs_queued_after_it(tmp_path: Path) -> None:
    """`max_weight`: a job weighing that much ends its batch; the light ones after it
    share the next commit."""

    async def body() -> int:
        writer = SqliteWriter(tmp_path / "w.db", commit_interval=0.05, max_weight=10)
        await writer.open()
        try:
            release, held = await hold(writer)
            before = writer.statistics().commits
            jobs = [writer.submit(_nothing, weight=10)]
            jobs += [writer.submit(_nothing) for _ in range(3)]
            release.set()
            await asyncio.gather(held, *jobs)
            return writer.statistics().commits - before
        finally:
            await writer.close()

    # The held job's batch, then the heavy job alone, then the three light ones.
    assert asyncio.run(body()) == 3


def _nothing(conn: sqlite3.Connection) -> None:
    conn.execute("SELECT 1")


def _idle_runs(
    tmp_path: Path, *, idle_after: float, idle_within: float, jobs: int, wait_for_one: bool
) -> list[bool]:
    """Run `jobs` jobs one after another on a writer with an idle hook; then, with
    `wait_for_one`, poll until the hook ran. Each run of the hook is recorded as whether
    a transaction was open."""
    runs: list[bool] = []

    def on_idle(conn: sqlite3.Connection) -> None:
        runs.append(conn.in_transaction)

    async def body() -> None:
        writer = SqliteWriter(
            tmp_path / "w.db",
            commit_interval=0,
            on_idle=on_idle,
            idle_after=idle_after,
            idle_within=idle_within,
        )
        await writer.open()
        try:
            for _ in range(jobs):
                await writer.submit(_nothing)
            for _ in range(500):
                if runs or not wait_for_one:
                    break
                await asyncio.sleep(0.01)
        finally:
            await writer.close()

    asyncio.run(body())
    return runs


def test_the_idle_hook_waits_for_a_quiet_writer(tmp_path: Path) -> None:
    """Jobs closer together than `idle_after` (an hour here) never let the hook run
    before `idle_within` (an hour too): a burst does not share its core with it."""
    assert (
        _idle_runs(tmp_path, idle_after=3600, idle_within=3600, jobs=20, wait_for_one=False) == []
    )


def test_the_idle_hook_runs_once_the_writer_was_quiet(tmp_path: Path) -> None:
    runs = _idle_runs(tmp_path, idle_after=0.01, idle_within=3600, jobs=3, wait_for_one=True)
    assert runs  # (more than once only if the test itself paused 10 ms between two jobs)
    assert not any(runs)  # outside any transaction


def test_the_idle_hook_runs_without_a_pause_once_idle_within_went_by(tmp_path: Path) -> None:
    """A load that never pauses for `idle_after` still gets the hook, at the first moment
    no job waits after `idle_within` (0 here: right after the first batch)."""
    runs = _idle_runs(tmp_path, idle_after=3600, idle_within=0, jobs=1, wait_for_one=True)
    assert runs == [False]
