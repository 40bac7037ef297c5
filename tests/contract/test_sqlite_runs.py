"""SQLite's run layout (schema 6): one row per client per `enqueue` call (per RUN_LIMIT
entries of a longer one), entries gone
become null in place, the `queue` view shows the live ones; the writer's in-memory index
of packet ids, evicted and read back; the upgrade of a version 5 file."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from mqttq.storage.formats.tbmq_json import message_to_json
from mqttq.storage.ports import Storage
from mqttq.storage.sqlite.runs import RUN_LIMIT
from mqttq.storage.sqlite.schema import SCHEMA_VERSION
from mqttq.storage.sqlite.store import SqliteStorage
from tests.contract.conftest import run_with, sql_rows
from tests.contract.test_storage_contract import full_message, ids, msg, payloads


def test_a_call_writes_one_run_per_client_and_removal_nulls_in_place(tmp_path: Path) -> None:
    path = tmp_path / "mqttq.db"

    async def body(s: Storage) -> None:
        shared = [msg(n) for n in range(3)]
        await s.enqueue([(c, m) for m in shared for c in ("a", "b")])
        await s.enqueue([("a", msg(3))])
        assert sql_rows(path, "SELECT client_id, first_serial FROM runs ORDER BY 1, 2") == [
            ("a", 1),
            ("a", 4),
            ("b", 1),
        ]
        await s.remove_many([("a", 2), ("b", 1), ("b", 2), ("b", 3)])
        await s.mark_pubrel("a", 3)
        # b's run is gone; a's first run keeps its positions (serials do not move).
        assert sql_rows(
            path, "SELECT client_id, first_serial, entries FROM runs ORDER BY 1, 2"
        ) == [
            ("a", 1, "[[1,1,null,0],null,[3,3,null,1]]"),
            ("a", 4, "[[4,4,null,0]]"),
        ]
        assert sql_rows(
            path, "SELECT client_id, serial, packet_id, pubrel, message_id FROM queue"
        ) == [("a", 1, 1, 0, 1), ("a", 3, 3, 1, 3), ("a", 4, 4, 0, 4)]
        a = await s.fetch("a", 0)
        assert [(e.serial, e.packet_id, e.pubrel) for e in a] == [
            (1, 1, False),
            (3, 3, True),
            (4, 4, False),
        ]
        assert payloads(a) == [b"p0", b"p2", b"p3"]
        assert await s.fetch("b", 0) == []

    run_with(SqliteStorage(path), body)


def test_a_long_call_is_cut_into_runs_of_run_limit(tmp_path: Path) -> None:
    """A backlog acked one PUBACK at a time rewrites one bounded run per ack, not the whole
    backlog: 2 * RUN_LIMIT + 1 entries of one call are three runs."""
    path = tmp_path / "mqttq.db"
    count = 2 * RUN_LIMIT + 1

    async def body(s: Storage) -> None:
        queued = await s.enqueue([("a", msg(n)) for n in range(count)])
        assert ids(queued) == [(n, n) for n in range(1, count + 1)]
        runs = sql_rows(path, "SELECT first_serial, json_array_length(entries) FROM runs")
        assert runs == [(1, RUN_LIMIT), (RUN_LIMIT + 1, RUN_LIMIT), (2 * RUN_LIMIT + 1, 1)]
        await s.remove("a", RUN_LIMIT + 2)
        await s.remove_many([("a", n) for n in range(1, RUN_LIMIT + 1)])
        assert sql_rows(path, "SELECT first_serial FROM runs") == [(RUN_LIMIT + 1,), (count,)]
        assert [e.serial for e in await s.fetch("a", 0)] == [
            RUN_LIMIT + 1,
            *range(RUN_LIMIT + 3, count + 1),
        ]

    run_with(SqliteStorage(path, queue_limit=count), body)


def test_an_evicted_index_is_read_back_and_ids_stay_unique(tmp_path: Path) -> None:
    """With room for 2 indexed entries, every client's index is dropped and read again
    from the file: removals, PUBREL marks, trimming and id assignment stay exact."""
    path = tmp_path / "mqttq.db"

    async def body(s: Storage) -> None:
        for client in ("a", "b", "c"):
            assert ids(await s.enqueue([(client, msg(1)), (client, msg(2))])) == [
                (1, 1),
                (2, 2),
            ]
        await s.remove("a", 1)
        await s.mark_pubrel("b", 2)
        assert ids(await s.enqueue([("a", msg(3)), ("a", msg(4))])) == [(3, 3), (4, 4)]
        # a holds 2, 3, 4: the limit of 3 trims 2 for 5.
        assert ids(await s.enqueue([("a", msg(5))])) == [(5, 5)]
        assert payloads(await s.fetch("a", 0)) == [b"p3", b"p4", b"p5"]
        assert [(e.packet_id, e.pubrel) for e in await s.fetch("b", 0)] == [
            (1, False),
            (2, True),
        ]
        await s.remove_many([("c", 1), ("c", 2), ("b", 1)])
        assert await s.fetch("c", 0) == []
        assert sql_rows(path, "SELECT client_id, COUNT(*) FROM queue GROUP BY 1 ORDER BY 1") == [
            ("a", 3),
            ("b", 1),
        ]

    run_with(SqliteStorage(path, queue_limit=3, index_limit=2), body)


_V5 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (5);
CREATE TABLE sessions (client_id TEXT PRIMARY KEY, protocol_level INTEGER NOT NULL,
    session_expiry_interval INTEGER NOT NULL, disconnected_at REAL,
    client_type TEXT NOT NULL, subscriptions TEXT NOT NULL,
    tenant TEXT NOT NULL DEFAULT 'default', will TEXT,
    awaiting_pubrel TEXT NOT NULL DEFAULT '[]') WITHOUT ROWID;
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
CREATE TABLE queue (client_id TEXT NOT NULL, serial INTEGER NOT NULL,
    packet_id INTEGER NOT NULL, pubrel INTEGER NOT NULL DEFAULT 0,
    message_id INTEGER NOT NULL, expires_at REAL,
    PRIMARY KEY (client_id, serial)) WITHOUT ROWID;
CREATE UNIQUE INDEX queue_packet_id ON queue (client_id, packet_id);
CREATE TABLE counters (client_id TEXT PRIMARY KEY, last_serial INTEGER NOT NULL,
    last_packet_id INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO counters VALUES ('a', 65536, 1);
"""


def test_sqlite_upgrades_a_version_5_queue(tmp_path: Path) -> None:
    """Each entry of the one-row-per-entry layout becomes a run of one, with its serial,
    packet id, PUBREL state and expiry; ids continue past the wrap without reusing one
    still queued."""
    path = tmp_path / "mqttq.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_V5)
        conn.executemany(
            "INSERT INTO messages (id, body) VALUES (?, ?)",
            [
                (1, message_to_json(full_message(), client_id="", packet_id=0)),
                (2, message_to_json(msg(2), client_id="", packet_id=0)),
            ],
        )
        conn.executemany(
            "INSERT INTO queue VALUES (?, ?, ?, ?, ?, ?)",
            [("a", 65535, 65535, 1, 1, None), ("a", 65536, 1, 0, 2, 4e9)],
        )
    conn.close()

    async def check(s: Storage) -> None:
        a = await s.fetch("a", 0)
        assert [(e.serial, e.packet_id, e.pubrel) for e in a] == [
            (65535, 65535, True),
            (65536, 1, False),
        ]
        assert a[0].message == full_message()
        assert ids(await s.enqueue([("a", msg(3))])) == [(65537, 2)]
        await s.remove("a", 65535)
        assert payloads(await s.fetch("a", 0)) == [b"p2", b"p3"]

    run_with(SqliteStorage(path), check)
    assert sql_rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert sql_rows(path, "SELECT serial, packet_id, expires_at FROM queue") == [
        (65536, 1, 4e9),
        (65537, 2, None),
    ]


def test_fetches_of_one_loop_iteration_each_get_their_own_queue(tmp_path: Path) -> None:
    """A burst of reconnects reads its queues in one reader job; every caller still gets
    exactly its own entries, and only the queue with an expired entry loses it."""
    path = tmp_path / "mqttq.db"

    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(1)), ("b", msg(2)), ("b", msg(3, expires_at=50.0))])
        await s.enqueue([("c", msg(4)), ("a", msg(5))])
        a, b, c, none = await asyncio.gather(
            s.fetch("a", 100.0), s.fetch("b", 100.0), s.fetch("c", 100.0), s.fetch("x", 100.0)
        )
        assert (payloads(a), payloads(b), payloads(c), none) == (
            [b"p1", b"p5"],
            [b"p2"],
            [b"p4"],
            [],
        )
        assert sql_rows(path, "SELECT client_id, serial FROM queue ORDER BY 1, 2") == [
            ("a", 1),
            ("a", 2),
            ("b", 1),
            ("c", 1),
        ]

    run_with(SqliteStorage(path), body)


def test_removal_nulls_any_number_of_a_runs_entries_and_keeps_the_rest_verbatim(
    tmp_path: Path,
) -> None:
    """A run of RUN_LIMIT entries loses 1, 3, 17, 2 and then 40 of them (one UPDATE each,
    its list of paths padded to a fixed length); what is left is byte for byte what was
    written, the expiry's float text included, until the last removal deletes the run."""
    path = tmp_path / "mqttq.db"
    expiry = 1795726008.3066318

    def element(n: int) -> str:
        return f"[{n},{n},{expiry!r},0]"

    async def body(s: Storage) -> None:
        await s.enqueue([("a", msg(n, expires_at=expiry)) for n in range(RUN_LIMIT)])
        gone: set[int] = set()
        for count in (1, 3, 17, 2):
            batch = [n for n in range(1, RUN_LIMIT + 1) if n not in gone][:count]
            gone.update(batch)
            await s.remove_many([("a", n) for n in batch])
            expected = ",".join(
                "null" if n in gone else element(n) for n in range(1, RUN_LIMIT + 1)
            )
            assert sql_rows(path, "SELECT entries FROM runs") == [(f"[{expected}]",)]
        left = [n for n in range(1, RUN_LIMIT + 1) if n not in gone]
        await s.remove_many([("a", n) for n in left[:40]])
        assert [e.packet_id for e in await s.fetch("a", 0)] == left[40:]
        await s.remove_many([("a", n) for n in left[40:]])
        assert sql_rows(path, "SELECT COUNT(*) FROM runs") == [(0,)]

    run_with(SqliteStorage(path, queue_limit=65535), body)
