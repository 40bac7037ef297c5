"""The SQLite schema of the embedded store, its version, and how a connection is opened.

One file holds everything: sessions (subscriptions as JSON), the per-client outgoing queues
(runs of entries pointing at message bodies stored once, as TBMQ-form JSON, see
`codec_json` and `sqlite_runs`),
the per-client counters and the retained messages. `schema_version` records which layout
the file has, so a later mqttq can migrate it and an older one refuses to touch a newer file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from mqttq.errors import StorageError

SCHEMA_VERSION: Final = 7
"""1: the first layout; 2: sessions and retained messages carry their tenant; 3: sessions
keep their will and the inbound QoS 2 ids awaiting PUBREL; 4: application_session_ctx;
5: message-once queues (a body per message in `messages`, small `queue` rows);
6: a row per run of a client's entries (`runs`), `queue` a view of their live entries;
7: the publish inbox (`inbox`)."""

MESSAGES_TABLE: Final = """CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    body TEXT NOT NULL
)"""
"""Queued message bodies: TBMQ-form JSON (`codec_json`, `clientId` "" and `packetId` 0:
the entry's own values are in its `queue` row)."""

RUNS_TABLE: Final = """CREATE TABLE IF NOT EXISTS runs (
    client_id TEXT NOT NULL,
    first_serial INTEGER NOT NULL,
    entries TEXT NOT NULL,
    PRIMARY KEY (client_id, first_serial)
) WITHOUT ROWID"""
"""The entries one `enqueue` call queued for one client (at most
`sqlite_runs.RUN_LIMIT` of them), serials consecutive from `first_serial`: a JSON array
of `[packet_id, message_id, expires_at, pubrel]`, `null` where an entry is gone (see
`sqlite_runs`)."""

QUEUE_VIEW: Final = """CREATE VIEW IF NOT EXISTS queue AS
SELECT runs.client_id AS client_id,
    runs.first_serial + entry.key AS serial,
    json_extract(entry.value, '$[0]') AS packet_id,
    json_extract(entry.value, '$[3]') AS pubrel,
    json_extract(entry.value, '$[1]') AS message_id,
    json_extract(entry.value, '$[2]') AS expires_at
FROM runs, json_each(runs.entries) AS entry
WHERE entry.type = 'array'"""
"""Every live entry as one row, in the columns of schema 5's table: for SQL readers."""

_QUEUE_V5: Final = """CREATE TABLE IF NOT EXISTS queue (
    client_id TEXT NOT NULL,
    serial INTEGER NOT NULL,
    packet_id INTEGER NOT NULL,
    pubrel INTEGER NOT NULL DEFAULT 0,
    message_id INTEGER NOT NULL,
    expires_at REAL,
    PRIMARY KEY (client_id, serial)
) WITHOUT ROWID"""
"""Schema 5: one entry of a session's queue; `message_id` is its body in `messages`."""

_QUEUE_V4: Final = """CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY,
    client_id TEXT NOT NULL,
    serial INTEGER NOT NULL,
    packet_id INTEGER NOT NULL,
    pubrel INTEGER NOT NULL DEFAULT 0,
    message TEXT NOT NULL,
    expires_at REAL
)"""
"""The queue of versions 1 to 4: every entry carries its whole message as JSON."""

INBOX_TABLE: Final = """CREATE TABLE IF NOT EXISTS inbox (
    seq INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    publisher TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    publish BLOB NOT NULL
)"""
"""Accepted PUBLISHes not yet fanned out (`sqlite_inbox`): the publisher was acknowledged
once its row committed; the transaction that queues the message's entries deletes it, and
a row still here at start is routed again before the listeners open. `publish`: the
message as an MQTT 5 PUBLISH packet (topic, payload, QoS, retain, properties), the
broker's own fields beside it."""

APP_CONTEXT_TABLE: Final = """CREATE TABLE IF NOT EXISTS application_session_ctx (
    client_id TEXT PRIMARY KEY,
    last_updated_time REAL NOT NULL,
    pack_offset INTEGER,
    unacked TEXT NOT NULL
) WITHOUT ROWID"""
"""What a disconnected APPLICATION session's Kafka consumer leaves for its next connection
(mqttq.storage.sqlite.app_context): `unacked` is a JSON list of {offset, packetId, kind}."""

_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS sessions (
        client_id TEXT PRIMARY KEY,
        protocol_level INTEGER NOT NULL,
        session_expiry_interval INTEGER NOT NULL,
        disconnected_at REAL,
        client_type TEXT NOT NULL,
        subscriptions TEXT NOT NULL,
        tenant TEXT NOT NULL DEFAULT 'default',
        will TEXT,
        awaiting_pubrel TEXT NOT NULL DEFAULT '[]'
    ) WITHOUT ROWID""",
    # Message-once: a message queued for N sessions is one `messages` row (its TBMQ JSON,
    # written once) and N small `queue` rows pointing at it. A body no entry points at any
    # more is deleted by the writer's sweep (`SqliteStorage`), not entry by entry: deleting
    # an entry stays one B-tree operation per index. AUTOINCREMENT: an id is never
    # reused, so a reader may remember a body by its id.
    MESSAGES_TABLE,
    # serial only grows per client, across the packet-id wrap: a run's first serial orders
    # a queue, and is its key (no rowid: one B-tree to update per run). No index on packet
    # ids: the writer keeps them in memory (`sqlite_runs.QueueIndex`).
    RUNS_TABLE,
    QUEUE_VIEW,
    # Kept when the queue empties, so packet ids continue instead of restarting at 1.
    """CREATE TABLE IF NOT EXISTS counters (
        client_id TEXT PRIMARY KEY,
        last_serial INTEGER NOT NULL,
        last_packet_id INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS retained (
        tenant TEXT NOT NULL,
        topic TEXT NOT NULL,
        message TEXT NOT NULL,
        expires_at REAL,
        PRIMARY KEY (tenant, topic)
    ) WITHOUT ROWID""",
    APP_CONTEXT_TABLE,
    INBOX_TABLE,
)

_UPGRADES: Final[dict[int, tuple[str, ...]]] = {
    # 1 -> 2: every existing session and retained message belongs to the default tenant.
    1: (
        "ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'",
        "ALTER TABLE retained RENAME TO retained_v1",
        """CREATE TABLE retained (
            tenant TEXT NOT NULL,
            topic TEXT NOT NULL,
            message TEXT NOT NULL,
            expires_at REAL,
            PRIMARY KEY (tenant, topic)
        ) WITHOUT ROWID""",
        "INSERT INTO retained SELECT 'default', topic, message, expires_at FROM retained_v1",
        "DROP TABLE retained_v1",
    ),
    # 2 -> 3: no stored session has a will or QoS 2 ids yet.
    2: (
        "ALTER TABLE sessions ADD COLUMN will TEXT",
        "ALTER TABLE sessions ADD COLUMN awaiting_pubrel TEXT NOT NULL DEFAULT '[]'",
    ),
    # 3 -> 4: a new table, empty.
    3: (APP_CONTEXT_TABLE,),
    # 4 -> 5: each old entry's JSON becomes a body of its own (its clientId and packetId
    # are ignored when read: the queue row has them). A file that never
    # had a queue table gets the old one first, empty, so the same statements apply.
    4: (
        _QUEUE_V4,
        "ALTER TABLE queue RENAME TO queue_v4",
        "DROP INDEX IF EXISTS queue_serial",
        "DROP INDEX IF EXISTS queue_packet_id",
        MESSAGES_TABLE,
        _QUEUE_V5,
        "INSERT INTO messages (id, body) SELECT id, message FROM queue_v4",
        "INSERT INTO queue (client_id, serial, packet_id, pubrel, message_id, expires_at)"
        " SELECT client_id, serial, packet_id, pubrel, id, expires_at FROM queue_v4",
        "DROP TABLE queue_v4",
    ),
    # 5 -> 6: each entry becomes a run of one (runs are an optimisation of later writes;
    # the entries keep their serials, ids and state).
    5: (
        RUNS_TABLE,
        "INSERT INTO runs (client_id, first_serial, entries)"
        " SELECT client_id, serial, json_array(json_array(packet_id, message_id, expires_at,"
        " pubrel)) FROM queue",
        "DROP TABLE queue",
        QUEUE_VIEW,
    ),
    # 6 -> 7: a new table, empty.
    6: (INBOX_TABLE,),
}
"""Statements that bring a file of version N to N + 1."""


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path`, ready for the writer thread.

    WAL with synchronous=FULL: a transaction is on disk once COMMIT returns, so it survives
    a kill -9 and a power loss. Autocommit mode: the writer issues BEGIN/COMMIT itself.
    Raises StorageError when the file cannot be opened or has a newer schema.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, cached_statements=64)
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(f"cannot open SQLite database {path}: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StorageError(f"SQLite database {path} refused WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = FULL")
        _create_schema(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise StorageError(f"cannot prepare SQLite database {path}: {exc}") from exc
    except StorageError:
        conn.close()
        raise
    return conn


def _create_schema(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_TABLES[0])
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        version = row[0]
        if version is not None and version > SCHEMA_VERSION:
            raise StorageError(
                f"SQLite database {path} has schema version {version}; "
                f"this mqttq knows up to {SCHEMA_VERSION}"
            )
        if version is not None:
            while version < SCHEMA_VERSION:
                for statement in _UPGRADES[version]:
                    conn.execute(statement)
                version += 1
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        for statement in _TABLES[1:]:
            conn.execute(statement)
        if row[0] is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
