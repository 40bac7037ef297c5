"""Extract: the embedded broker's SQLite database (`sqlite_schema`) as the same entry rows
as the Redis extract, plus each session's tenant.

Read with Python's sqlite3 on the driver, read-only, then handed to Spark: the file lives
on the broker's host (its --data-dir), which a cluster's executors do not see, and an
embedded broker is one node's worth of data. A JDBC read (org.xerial:sqlite-jdbc) would
need one more jar and the same file path on every executor for no gain. SQLite itself
takes the fields out of each message's JSON (`json_extract`), so Python only moves tuples.

An entry whose `expires_at` has passed is still in the file until the broker next fetches
the queue: it is a row with `present` false, as a Redis reference whose string expired.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqttq.spark.reports import ReportError
from mqttq.spark.reports.redis_source import entry_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENTRIES: Final = """SELECT client_id, serial, packet_id,
    CASE WHEN pubrel THEN 'PUBREL' ELSE 'PUBLISH' END,
    json_extract(body, '$.time'), length(CAST(body AS BLOB)), queue.expires_at
FROM queue JOIN messages ON messages.id = queue.message_id"""
"""Schema 5 on (message-once): the entry's body is a `messages` row, shared."""
ENTRIES_V4: Final = """SELECT client_id, serial, packet_id,
    CASE WHEN pubrel THEN 'PUBREL' ELSE 'PUBLISH' END,
    json_extract(message, '$.time'), length(CAST(message AS BLOB)), expires_at
FROM queue"""
"""Schema 4 and before (a file not yet opened by a newer broker): the JSON in the row."""
TENANTS: Final = "SELECT client_id, tenant FROM sessions"


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise ReportError(f"no SQLite database at {path} (the broker's is DATA_DIR/mqttq.sqlite3)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error as exc:
        raise ReportError(f"cannot read the SQLite database {path}: {exc}") from exc
    missing = {"queue", "sessions"} - tables
    if missing:
        conn.close()
        raise ReportError(f"{path} is not an mqttq database: no table {', '.join(sorted(missing))}")
    return conn


def _entry(row: tuple[Any, ...], now_ms: int) -> tuple[Any, ...]:
    client_id, serial, packet_id, packet_type, time_ms, size, expires_at = row
    ttl_ms = None if expires_at is None else round(expires_at * 1000) - now_ms
    present = ttl_ms is None or ttl_ms > 0
    return (
        client_id,
        serial,
        packet_id,
        packet_type,
        time_ms if isinstance(time_ms, int) else None,
        size,
        ttl_ms if present else None,
        present,
    )


def read_sqlite(spark: SparkSession, path: Path, now_ms: int) -> tuple[DataFrame, DataFrame]:
    """(entries, tenants) of the database at `path`: the entry rows of `read_entries`, and
    (client_id, tenant) of every stored session. ReportError (one line) when the file is
    missing, not an mqttq database, or holds no session and no queue."""
    from pyspark.sql.types import StringType, StructField, StructType  # noqa: PLC0415

    conn = _connect(path)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        query = ENTRIES if "messages" in tables else ENTRIES_V4
        entries = [_entry(row, now_ms) for row in conn.execute(query)]
        tenants = conn.execute(TENANTS).fetchall()
    except sqlite3.Error as exc:
        raise ReportError(f"cannot read the SQLite database {path}: {exc}") from exc
    finally:
        conn.close()
    if not entries and not tenants:
        raise ReportError(f"the SQLite database {path} holds no session and no queued message")
    tenant_schema = StructType(
        [StructField("client_id", StringType(), False), StructField("tenant", StringType(), True)]
    )
    return (
        spark.createDataFrame(entries, entry_schema()),
        spark.createDataFrame(tenants, tenant_schema),
    )
