"""`mqttq report migration-plan`: what `mqttq migrate pg-to-redis` would do, before it runs.

From TBMQ 1.x's tables (`pg_source`): per client its rows, payload bytes, the rows the
migration would skip (expired) or trim (beyond the newest `limit`, mqttq.migrate.plan's
rule), its PUBREL rows, whether its serials passed 65535 (its packet ids wrapped back to 1,
so the Redis scores are no longer the packet ids), and the Redis memory its entries would
take; then the totals, the estimated migration time at a measured rate, the largest
clients and a histogram of rows per client.

The memory estimate per written entry: its JSON (the fixed fields, the client id, the
topic, the payload in base64, the MQTT 5 fields), the key name twice (the string's own and
the ZSET member) and ENTRY_OVERHEAD for Redis's per-key, expiry and ZSET bookkeeping;
per client CLIENT_OVERHEAD for the ZSET and the counter keys. Both constants were measured
on Redis 7.0 (docs/benchmarks.md, section "Reports on Spark").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pyspark.sql import functions as F

from mqttq.migrate.validate import MAX_PACKET_ID
from mqttq.spark.reports.output import Chart, Report, Section, SectionKind
from mqttq.spark.reports.transforms import count_if, histogram, largest, mark_kept
from mqttq.storage.formats.tbmq_json import PUBREL

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

JSON_FIXED: Final = 129
"""Length of an entry's JSON without client id, topic and payload (13-digit time, 5-digit
packet id, PUBLISH)."""
KEY_FIXED: Final = len("{}_messages_12345")
ENTRY_OVERHEAD: Final = 190
"""Bytes Redis spends per entry beyond the JSON and the two key names."""
CLIENT_OVERHEAD: Final = 400
"""Bytes Redis spends per client: the ZSET's own key and the counter and marker keys."""
DEFAULT_RATE: Final = 100_000
"""Rows per second of `mqttq migrate pg-to-redis` on one host (docs/benchmarks.md)."""


LARGEST_COLUMNS: Final = (
    "client_id",
    "rows",
    "to_migrate",
    "expired",
    "trimmed",
    "pubrel",
    "wraps",
    "payload_bytes",
    "redis_bytes",
)


def entry_bytes(key_prefix_length: int) -> Column:
    """Estimated Redis memory of the entry a message row becomes (see the module doc)."""
    client = F.octet_length("client_id").cast("long")
    base64_payload = F.ceil(F.col("payload_bytes") / 3).cast("long") * 4
    json = F.lit(JSON_FIXED) + client + F.col("topic_bytes") + base64_payload + F.col("mqtt5_bytes")
    return json + (client + (KEY_FIXED + key_prefix_length)) * 2 + ENTRY_OVERHEAD


def plan_clients(
    messages: DataFrame,
    sessions: DataFrame,
    *,
    limit: int,
    default_ttl_s: int,
    now_ms: int,
    key_prefix_length: int = 0,
) -> DataFrame:
    """One row per client with a session row or a message row: client_id, rows,
    payload_bytes, to_migrate, expired, trimmed, pubrel, last_serial (the larger of the
    session's and the rows'), wraps (last_serial > 65535), over_limit (rows > limit),
    has_session, redis_bytes (estimated, the client's keys included)."""
    marked = mark_kept(messages, limit, default_ttl_s, now_ms)
    per_client = marked.groupBy("client_id").agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum("payload_bytes").cast("long").alias("payload_bytes"),
        count_if(F.col("kept")).alias("to_migrate"),
        count_if(F.col("expired")).alias("expired"),
        count_if(F.col("trimmed")).alias("trimmed"),
        count_if(F.col("packet_type") == PUBREL).alias("pubrel"),
        F.max("serial_number").alias("max_serial"),
        F.sum(F.when(F.col("kept"), entry_bytes(key_prefix_length))).alias("entries_bytes"),
    )
    session_serials = sessions.select(
        "client_id", F.col("last_serial_number").alias("session_serial"), F.lit(True).alias("s")
    )
    zero = F.lit(0).cast("long")
    last_serial = F.greatest("max_serial", "session_serial")
    return per_client.join(session_serials, "client_id", "full_outer").select(
        "client_id",
        F.coalesce("rows", zero).alias("rows"),
        F.coalesce("payload_bytes", zero).alias("payload_bytes"),
        F.coalesce("to_migrate", zero).alias("to_migrate"),
        F.coalesce("expired", zero).alias("expired"),
        F.coalesce("trimmed", zero).alias("trimmed"),
        F.coalesce("pubrel", zero).alias("pubrel"),
        last_serial.alias("last_serial"),
        F.coalesce(last_serial > MAX_PACKET_ID, F.lit(False)).alias("wraps"),
        F.coalesce(F.col("rows") > limit, F.lit(False)).alias("over_limit"),
        F.col("s").isNotNull().alias("has_session"),
        (F.coalesce("entries_bytes", zero) + CLIENT_OVERHEAD).cast("long").alias("redis_bytes"),
    )


def plan_summary(per_client: DataFrame, rows_per_s: int) -> DataFrame:
    """One row of totals over `plan_clients`, with the migration's estimated duration in
    seconds (every row is read, so: rows / `rows_per_s`)."""
    return per_client.agg(
        F.count(F.lit(1)).alias("clients"),
        count_if(F.col("rows") > 0).alias("clients_with_messages"),
        count_if(F.col("has_session") & (F.col("rows") == 0)).alias("sessions_without_messages"),
        F.sum("rows").cast("long").alias("rows"),
        F.sum("payload_bytes").cast("long").alias("payload_bytes"),
        F.sum("expired").cast("long").alias("expired_rows"),
        F.sum("trimmed").cast("long").alias("trimmed_rows"),
        F.sum("pubrel").cast("long").alias("pubrel_rows"),
        F.sum("to_migrate").cast("long").alias("rows_to_migrate"),
        count_if(F.col("wraps")).alias("clients_wrapped_past_65535"),
        count_if(F.col("over_limit")).alias("clients_over_limit"),
        F.sum("redis_bytes").cast("long").alias("redis_estimate_bytes"),
        (F.sum("rows") / F.lit(rows_per_s)).alias("migration_estimate_s"),
    )


def migration_plan_report(
    messages: DataFrame,
    sessions: DataFrame,
    *,
    limit: int,
    default_ttl_s: int,
    now_ms: int,
    rows_per_s: int = DEFAULT_RATE,
    key_prefix_length: int = 0,
    top: int = 10,
) -> Report:
    """The report's sections over the extracted tables (`per_client` is cached: the
    summary, the largest clients, the histogram and --out all derive from it)."""
    per_client = plan_clients(
        messages,
        sessions,
        limit=limit,
        default_ttl_s=default_ttl_s,
        now_ms=now_ms,
        key_prefix_length=key_prefix_length,
    ).cache()
    title = (
        f"migration plan (per-client limit {limit:,}, default TTL {default_ttl_s:,} s, "
        f"at {rows_per_s:,} rows/s)"
    )
    return Report(
        name="migration-plan",
        title=title,
        sections=[
            Section("summary", "totals", plan_summary(per_client, rows_per_s), SectionKind.SUMMARY),
            Section(
                "largest",
                f"the {top} largest clients",
                largest(per_client, "rows", top).select(*LARGEST_COLUMNS),
            ),
            Section("histogram", "clients by rows", histogram(per_client, "rows")),
            Section("clients", "per client", per_client.orderBy("client_id"), SectionKind.DATA),
        ],
        chart=Chart(
            "histogram",
            "bucket",
            "clients",
            "Clients by rows in PostgreSQL",
            "rows per client",
            "clients",
        ),
    )
