"""`mqttq report sessions`: the DEVICE queues as they are, in Redis or in the embedded
SQLite database.

From the entry rows (`redis_source` or `sqlite_source`): per client its backlog (entries
whose message is still there), the references whose message expired, the bytes of its
messages, the age of its oldest message, how many messages expire within the warning
window, the smallest TTL, and the entries waiting on a PUBREL (QoS 2: PUBREC came, PUBCOMP
not yet); then the totals, the largest queues, a histogram of backlog per client (the
chart) and, where the tenant is known (SQLite keeps it per session), the same per tenant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pyspark.sql import functions as F

from mqttq.spark.reports.output import Chart, Report, Section, SectionKind
from mqttq.spark.reports.transforms import count_if, histogram, largest, sorted_small
from mqttq.storage.formats.tbmq_json import PUBREL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

EXPIRING_WITHIN_S: Final = 3600
"""Default warning window: messages whose TTL ends within an hour."""


def session_clients(
    entries: DataFrame, tenants: DataFrame | None, *, now_ms: int, expiring_within_s: int
) -> DataFrame:
    """One row per client: client_id, tenant (None when unknown), backlog, gone, bytes,
    oldest_age_s, expiring, min_ttl_s, pubrel. With `tenants` (client_id, tenant), every
    session in it is a row, those without a queue with a backlog of 0."""
    present = F.col("present")
    per_client = entries.groupBy("client_id").agg(
        count_if(present).alias("backlog"),
        count_if(~present).alias("gone"),
        F.sum(F.when(present, F.col("bytes"))).cast("long").alias("bytes"),
        F.min(F.when(present, F.col("time_ms"))).alias("oldest_ms"),
        count_if(present & (F.col("ttl_ms") <= expiring_within_s * 1000)).alias("expiring"),
        F.min(F.when(present, F.col("ttl_ms"))).alias("min_ttl_ms"),
        count_if(present & (F.col("packet_type") == PUBREL)).alias("pubrel"),
    )
    if tenants is None:
        per_client = per_client.withColumn("tenant", F.lit(None).cast("string"))
    else:
        per_client = tenants.join(per_client, "client_id", "full_outer")
    zero = F.lit(0).cast("long")
    return per_client.select(
        "client_id",
        "tenant",
        F.coalesce("backlog", zero).alias("backlog"),
        F.coalesce("gone", zero).alias("gone"),
        F.coalesce("bytes", zero).alias("bytes"),
        F.floor((F.lit(now_ms) - F.col("oldest_ms")) / 1000).cast("long").alias("oldest_age_s"),
        F.coalesce("expiring", zero).alias("expiring"),
        F.floor(F.col("min_ttl_ms") / 1000).cast("long").alias("min_ttl_s"),
        F.coalesce("pubrel", zero).alias("pubrel"),
    )


def sessions_summary(per_client: DataFrame) -> DataFrame:
    """One row of totals over `session_clients`."""
    return per_client.agg(
        F.count(F.lit(1)).alias("sessions"),
        count_if(F.col("backlog") > 0).alias("sessions_with_messages"),
        F.sum("backlog").cast("long").alias("messages"),
        F.sum("bytes").cast("long").alias("message_bytes"),
        F.max("oldest_age_s").alias("oldest_message_age_s"),
        F.sum("gone").cast("long").alias("expired_references"),
        count_if(F.col("expiring") > 0).alias("sessions_expiring_soon"),
        F.sum("expiring").cast("long").alias("messages_expiring_soon"),
        count_if(F.col("pubrel") > 0).alias("sessions_waiting_on_pubrel"),
        F.max("backlog").alias("largest_backlog"),
    )


def tenant_summary(per_client: DataFrame) -> DataFrame:
    """Per tenant (clients of unknown tenant left out): sessions, messages, message_bytes,
    oldest_message_age_s, messages_expiring_soon, sessions_waiting_on_pubrel; most
    messages first."""
    return (
        per_client.where(F.col("tenant").isNotNull())
        .groupBy("tenant")
        .agg(
            F.count(F.lit(1)).alias("sessions"),
            F.sum("backlog").cast("long").alias("messages"),
            F.sum("bytes").cast("long").alias("message_bytes"),
            F.max("oldest_age_s").alias("oldest_message_age_s"),
            F.sum("expiring").cast("long").alias("messages_expiring_soon"),
            count_if(F.col("pubrel") > 0).alias("sessions_waiting_on_pubrel"),
        )
        .transform(lambda frame: sorted_small(frame, F.col("messages").desc(), "tenant"))
    )


def sessions_report(
    entries: DataFrame,
    tenants: DataFrame | None,
    *,
    now_ms: int,
    expiring_within_s: int = EXPIRING_WITHIN_S,
    top: int = 10,
    source: str = "",
    empty: str = "no DEVICE session or queue",
) -> Report:
    """The report's sections (`per_client` cached: everything derives from it)."""
    per_client = session_clients(
        entries, tenants, now_ms=now_ms, expiring_within_s=expiring_within_s
    ).cache()
    columns = ["client_id", "backlog", "bytes", "oldest_age_s", "min_ttl_s", "pubrel", "gone"]
    if tenants is not None:
        columns.insert(1, "tenant")
    sections = [
        Section(
            "summary",
            f"totals (expiring soon: within {expiring_within_s:,} s)",
            sessions_summary(per_client),
            SectionKind.SUMMARY,
        ),
        Section(
            "largest",
            f"the {top} largest queues",
            largest(per_client, "backlog", top).select(*columns),
        ),
        Section("histogram", "sessions by backlog", histogram(per_client, "backlog")),
    ]
    if tenants is not None:
        sections.append(Section("tenants", "per tenant", tenant_summary(per_client)))
    sections.append(
        Section("clients", "per client", per_client.orderBy("client_id"), SectionKind.DATA)
    )
    return Report(
        name="sessions",
        title=f"sessions in {source}" if source else "sessions",
        sections=sections,
        empty=("sessions", empty),
        chart=Chart(
            "histogram",
            "bucket",
            "clients",
            "Sessions by backlog (messages queued)",
            "messages queued per session",
            "sessions",
        ),
    )
