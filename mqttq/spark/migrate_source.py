"""The migration's source read by Spark: TBMQ 1.x's two tables as one JDBC DataFrame,
split into partitions by a hash of the client id.

Why JDBC `predicates` on `mod(abs(hashtext(client_id)::bigint), n) = i`, not one read
and `repartition(n, client_id)`: each partition is its own PostgreSQL query, run by the
executor that owns it, so the read is as parallel as the partitions and no row crosses the
network twice (a single JDBC read is one task streaming every row, then a shuffle of the
whole table: at 1e9 rows that one task is the job). The price is that each query scans the
table and filters on the hash (PostgreSQL's synchronized sequential scans let concurrent
scans share the reads; the hash costs CPU on the PostgreSQL side, see docs/benchmarks.md).
`hashtext` is PostgreSQL's own, stable across versions and sessions, and the `::bigint`
keeps `abs` away from the int4 minimum. Every client's rows and its session row are in
exactly one partition; `sortWithinPartitions(client_id, kind, serial_number)` then puts
each client's session row first and its messages in serial order (Spark sorts in memory,
spilling to disk when a partition is larger than its memory: no shuffle).

Each partition's query is its own transaction, so the partitions do not share one
snapshot as the local engine's cursors do: migrate with TBMQ 1.x stopped (a migration of
a source still being written misses the new rows with either engine).

Both tables come through one query (`UNION ALL`, `kind` 0 for a session row, 1 for a
message row), so one partition holds everything its clients need and a client without a
message row is migrated like the local engine's session phase.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from mqttq.spark.session import jdbc_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KIND: Final = 17
"""Position of `kind` in a source row (after the 15 message columns and 2 session ones)."""
S_SERIAL: Final = 15
S_PACKET_ID: Final = 16
SESSION_KIND: Final = 0
MESSAGE_KIND: Final = 1
FETCH_SIZE: Final = 10_000
"""Rows per JDBC round trip (PostgreSQL's driver streams only with a fetch size)."""

_MESSAGE_COLUMNS: Final = (
    "client_id, serial_number, topic, time, packet_id, packet_type, qos, payload, "
    "user_properties, retain, msg_expiry_interval, payload_format_indicator, content_type, "
    "response_topic, correlation_data"
)
_SESSION_AS_ROW: Final = (
    "client_id, NULL::bigint, NULL::varchar, NULL::bigint, NULL::integer, NULL::varchar, "
    "NULL::integer, NULL::bytea, NULL::varchar, NULL::boolean, NULL::integer, NULL::integer, "
    "NULL::varchar, NULL::varchar, NULL::bytea"
)
SOURCE_QUERY: Final = f"""(SELECT {_MESSAGE_COLUMNS},
    NULL::bigint AS s_serial, NULL::integer AS s_packet_id, 1 AS kind
  FROM device_publish_msg
  UNION ALL
  SELECT {_SESSION_AS_ROW},
    last_serial_number, last_packet_id, 0
  FROM device_session_ctx) AS source"""


def sql_literal(text: str) -> str:
    """`text` as a PostgreSQL string literal (standard_conforming_strings: quotes doubled)."""
    if "\0" in text:
        raise ValueError("a PostgreSQL string cannot hold NUL")
    return "'" + text.replace("'", "''") + "'"


def partition_predicate(index: int, partitions: int) -> str:
    """The WHERE condition of partition `index` of `partitions`."""
    return f"mod(abs(hashtext(client_id)::bigint), {partitions}) = {index}"


def predicates(
    partitions: int, pattern: str | None = None, after: Mapping[int, str] | None = None
) -> list[str]:
    """One WHERE condition per partition: its hash bucket, the --clients LIKE pattern, and
    for a resumed partition only the client ids after its checkpoint."""
    if partitions < 1:
        raise ValueError(f"--partitions {partitions}: must be at least 1")
    where = []
    for index in range(partitions):
        conditions = [partition_predicate(index, partitions)]
        if pattern is not None:
            conditions.append(f"client_id LIKE {sql_literal(pattern)} ESCAPE '\\'")
        if after and index in after:
            conditions.append(f"client_id > {sql_literal(after[index])}")
        where.append(" AND ".join(conditions))
    return where


def read_source(
    spark: SparkSession,
    postgres_url: str,
    partitions: int,
    *,
    pattern: str | None = None,
    after: Mapping[int, str] | None = None,
) -> DataFrame:
    """The source rows in `partitions` partitions by client hash, each sorted by
    (client_id, kind, serial_number)."""
    options = jdbc_options(postgres_url)
    url = options.pop("url")
    options["fetchsize"] = str(FETCH_SIZE)
    frame = spark.read.jdbc(
        url, SOURCE_QUERY, predicates=predicates(partitions, pattern, after), properties=options
    )
    return frame.sortWithinPartitions("client_id", "kind", "serial_number")
