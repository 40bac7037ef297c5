"""Extract: TBMQ 1.x's two tables in PostgreSQL as DataFrames, read over JDBC.

The message table is read in `partitions` JDBC queries split by a hash of client_id
(the migration's own `migrate_source.predicates`), so every client's rows are in one
partition and the executors read in parallel. Payloads never leave PostgreSQL: the query
sends their lengths (and those of the other variable columns) instead, which is all the
reports need.

Before Spark is asked, the driver checks with psycopg that the database answers and has
both tables, and that the source holds something: these fail with one clear line, not with
a JDBC stack trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import psycopg

from mqttq.migrate.schema import MESSAGE_TABLE, SESSION_TABLE
from mqttq.spark.reports import ReportError
from mqttq.storage.redis.keys import redacted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MESSAGE_COLUMNS: Final = """client_id, serial_number, time, packet_id, packet_type, qos,
    msg_expiry_interval,
    octet_length(payload)::bigint AS payload_bytes,
    octet_length(topic)::bigint AS topic_bytes,
    (coalesce(octet_length(user_properties) + 20, 0)
     + coalesce(octet_length(content_type) + 16, 0)
     + coalesce(octet_length(response_topic) + 18, 0)
     + coalesce(ceil(octet_length(correlation_data) / 3.0)::int * 4 + 20, 0)
     + CASE WHEN msg_expiry_interval IS NULL THEN 0 ELSE 50 END
     + CASE WHEN payload_format_indicator IS NULL THEN 0 ELSE 27 END)::bigint AS mqtt5_bytes"""
"""What the reports read of a message row. `mqtt5_bytes`: the JSON the optional MQTT 5
columns add to the entry in Redis (values and field names, approximately)."""

SESSION_COLUMNS: Final = "client_id, last_serial_number, last_packet_id"


def check_source(url: str) -> None:
    """Raise ReportError (one line) when PostgreSQL at `url` cannot be reached, lacks one of
    TBMQ 1.x's tables, or has no row in either."""
    where = redacted(url)
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            for table in (SESSION_TABLE, MESSAGE_TABLE):
                found = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
                if found is None or found[0] is None:
                    raise ReportError(
                        f"PostgreSQL at {where} has no table {table}: is it TBMQ 1.x's database?"
                    )
            has_rows = conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM {MESSAGE_TABLE}) "
                f"OR EXISTS (SELECT 1 FROM {SESSION_TABLE})"
            ).fetchone()
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ReportError(f"cannot read PostgreSQL at {where}: {detail}") from exc
    except ValueError as exc:  # psycopg refuses a malformed connection string
        raise ReportError(f"bad PostgreSQL URL {where!r}: {exc}") from exc
    if not has_rows or not has_rows[0]:
        raise ReportError(f"PostgreSQL at {where}: {MESSAGE_TABLE} and {SESSION_TABLE} are empty")


def _read(spark: SparkSession, url: str, columns: str, table: str, partitions: int) -> DataFrame:
    from mqttq.spark.migrate_source import FETCH_SIZE, predicates  # noqa: PLC0415
    from mqttq.spark.session import jdbc_options  # noqa: PLC0415

    options = jdbc_options(url)
    jdbc_url = options.pop("url")
    options["fetchsize"] = str(FETCH_SIZE)
    query = f"(SELECT {columns} FROM {table}) AS t"
    return spark.read.jdbc(jdbc_url, query, predicates=predicates(partitions), properties=options)


def read_messages(spark: SparkSession, url: str, partitions: int) -> DataFrame:
    """device_publish_msg without payloads: client_id, serial_number, time, packet_id,
    packet_type, qos, msg_expiry_interval, payload_bytes, topic_bytes, mqtt5_bytes."""
    return _read(spark, url, MESSAGE_COLUMNS, MESSAGE_TABLE, partitions)


def read_sessions(spark: SparkSession, url: str, partitions: int) -> DataFrame:
    """device_session_ctx: client_id, last_serial_number, last_packet_id."""
    return _read(spark, url, SESSION_COLUMNS, SESSION_TABLE, partitions)
