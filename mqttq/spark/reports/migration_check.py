"""`mqttq report migration-check`: after `mqttq migrate pg-to-redis`, PostgreSQL and Redis
compared entry by entry on Spark.

What PostgreSQL expects is the migration's rule (`transforms.mark_kept`: the newest `limit`
rows of each client that have not expired); what Redis holds are the queue entries whose
message string is still there (`redis_source`). The two are joined on (client_id, serial
number = ZSET score): an expected entry not in Redis is missing, an entry in Redis that
PostgreSQL does not expect is extra, and a pair whose packet ids differ (the message key's
suffix) is wrong. Entries that expire within `tolerance_ms` of now on either side are left
out: Redis and this clock may disagree on them by the time they are read.

Every client with a difference is listed. A client that the migration rejected for bad
rows is listed as missing: its rows are in PostgreSQL and not in Redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import functions as F

from mqttq.spark.reports.output import Report, Section, SectionKind
from mqttq.spark.reports.transforms import count_if, mark_kept, sorted_small

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TOLERANCE_MS: Final = 2000


def check_clients(
    messages: DataFrame,
    entries: DataFrame,
    *,
    limit: int,
    default_ttl_s: int,
    now_ms: int,
    tolerance_ms: int = TOLERANCE_MS,
) -> DataFrame:
    """One row per client expected in or present in Redis: client_id, expected, present,
    missing, extra, wrong_packet_id."""
    expected = (
        mark_kept(messages, limit, default_ttl_s, now_ms)
        .where("kept")
        .select(
            "client_id",
            F.col("serial_number").alias("serial"),
            F.col("packet_id").alias("expected_packet_id"),
            "deadline_ms",
            F.lit(True).alias("e"),
        )
    )
    present = entries.where("present").select(
        "client_id",
        "serial",
        F.col("packet_id").alias("present_packet_id"),
        "ttl_ms",
        F.lit(True).alias("p"),
    )
    near_expiry = F.coalesce(F.col("deadline_ms") <= now_ms + tolerance_ms, F.lit(False)) | (
        F.coalesce(F.col("ttl_ms") <= tolerance_ms, F.lit(False))
    )
    in_pg = F.col("e").isNotNull()
    in_redis = F.col("p").isNotNull()
    return (
        expected.join(present, ["client_id", "serial"], "full_outer")
        .where(~near_expiry)
        .groupBy("client_id")
        .agg(
            count_if(in_pg).alias("expected"),
            count_if(in_redis).alias("present"),
            count_if(in_pg & ~in_redis).alias("missing"),
            count_if(in_redis & ~in_pg).alias("extra"),
            count_if(
                in_pg
                & in_redis
                & ~F.col("expected_packet_id").eqNullSafe(F.col("present_packet_id"))
            ).alias("wrong_packet_id"),
        )
    )


def differences(per_client: DataFrame) -> DataFrame:
    """The clients of `check_clients` with any difference, by client id, with a
    `difference` saying what it is."""
    parts = F.concat_ws(
        ", ",
        F.when(F.col("missing") > 0, F.concat(F.col("missing").cast("string"), F.lit(" missing"))),
        F.when(F.col("extra") > 0, F.concat(F.col("extra").cast("string"), F.lit(" extra"))),
        F.when(
            F.col("wrong_packet_id") > 0,
            F.concat(F.col("wrong_packet_id").cast("string"), F.lit(" with another packet id")),
        ),
    )
    difference = (
        F.when(F.col("present") == 0, F.lit("not in Redis"))
        .when(F.col("expected") == 0, F.lit("not expected by PostgreSQL"))
        .otherwise(parts)
    )
    return (
        per_client.where((F.col("missing") + F.col("extra") + F.col("wrong_packet_id")) > 0)
        .select(
            "client_id",
            "expected",
            "present",
            "missing",
            "extra",
            "wrong_packet_id",
            difference.alias("difference"),
        )
        .transform(lambda frame: sorted_small(frame, "client_id"))
    )


def check_summary(per_client: DataFrame) -> DataFrame:
    """One row of totals over `check_clients`."""
    different = (F.col("missing") + F.col("extra") + F.col("wrong_packet_id")) > 0
    return per_client.agg(
        count_if(F.col("expected") > 0).alias("clients_expected"),
        count_if(F.col("present") > 0).alias("clients_in_redis"),
        count_if(~different).alias("clients_equal"),
        count_if(different).alias("clients_different"),
        F.sum("expected").cast("long").alias("entries_expected"),
        F.sum("present").cast("long").alias("entries_in_redis"),
        F.sum("missing").cast("long").alias("entries_missing"),
        F.sum("extra").cast("long").alias("entries_extra"),
        F.sum("wrong_packet_id").cast("long").alias("entries_wrong_packet_id"),
    )


def verdict(summary: dict[str, Any]) -> str | None:
    """The failure line when the summary counts any difference, else None."""
    different = summary.get("clients_different") or 0
    if not different:
        return None
    return f"{different:,} client(s) differ between PostgreSQL and Redis"


def migration_check_report(
    messages: DataFrame,
    entries: DataFrame,
    *,
    limit: int,
    default_ttl_s: int,
    now_ms: int,
    tolerance_ms: int = TOLERANCE_MS,
    empty: str = "Redis holds no DEVICE queue: was the migration run?",
) -> Report:
    """The report's sections; its verdict fails the run when any client differs, and a
    Redis without any queue is an error (`empty`)."""
    per_client = check_clients(
        messages,
        entries,
        limit=limit,
        default_ttl_s=default_ttl_s,
        now_ms=now_ms,
        tolerance_ms=tolerance_ms,
    ).cache()
    return Report(
        name="migration-check",
        title=f"migration check (per-client limit {limit:,}, default TTL {default_ttl_s:,} s)",
        sections=[
            Section("summary", "totals", check_summary(per_client), SectionKind.SUMMARY),
            Section("differences", "differences", differences(per_client)),
            Section("clients", "per client", per_client.orderBy("client_id"), SectionKind.DATA),
        ],
        verdict=verdict,
        empty=("clients_in_redis", empty),
    )
