"""`mqttq report traffic --lake DIR`: what the fleet published in a time window.

From the lake's message rows in [since, until): per tenant (the billing usage), per topic
(cut to its first `level` levels) and per publisher: messages, payload bytes, the QoS mix,
retained messages and the rate per hour of the window; the top talkers; messages per hour
(the chart); and the silent devices: publishers of the previous window of the same length
[since - (until - since), since) that published nothing in this one.

Extract is `mqttq.lake.query.read_messages`; the transforms here are pure DataFrame
functions: the window is given (microseconds since the epoch, UTC), never read from the
clock. Every time is computed in UTC whatever Spark's session time zone is.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from mqttq.lake.window import Window
from mqttq.spark.reports.output import Chart, Report, Section, SectionKind
from mqttq.spark.reports.transforms import count_if, sorted_small

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["traffic_report", "traffic_rows"]

_US = 1_000_000


def _hour_label(hours: Column) -> Column:
    """Hours since the epoch as `YYYY-MM-DDTHH:00Z` (UTC, whatever the session's zone)."""
    day = F.date_from_unix_date(F.floor(hours / 24).cast("int")).cast("string")
    hour = F.lpad(F.pmod(hours, 24).cast("string"), 2, "0")
    return F.concat(day, F.lit("T"), hour, F.lit(":00Z"))


def topic_key(level: int | None) -> Column:
    """The topic, or its first `level` levels (`a/b/c` at level 2: `a/b`)."""
    if level is None:
        return F.col("topic")
    return F.concat_ws("/", F.slice(F.split(F.col("topic"), "/", -1), 1, level))


def _in_window(
    messages: DataFrame, window: Window, start: datetime, tenant: str | None
) -> DataFrame:
    first, last = window.dates(start)
    micros = F.unix_micros(F.col("created_at"))
    frame = messages.where(F.col("date").between(first, last)).where(
        (micros >= window.micros(start)) & (micros < window.micros(window.until))
    )
    return frame if tenant is None else frame.where(F.col("tenant") == tenant)


def traffic_rows(
    messages: DataFrame, window: Window, *, level: int | None, tenant: str | None = None
) -> DataFrame:
    """The window's messages grouped by (tenant, client_id, topic): messages, bytes, qos0,
    qos1, qos2, retained. Every section but the hourly one sums these (far fewer rows than
    messages; grouping by hour too would multiply them by the window's hours)."""
    return (
        _in_window(messages, window, window.since, tenant)
        .select(
            "tenant",
            "client_id",
            topic_key(level).alias("topic"),
            F.length("payload").alias("size"),
            "qos",
            "retain",
        )
        .groupBy("tenant", "client_id", "topic")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum("size").cast("long").alias("bytes"),
            count_if(F.col("qos") == 0).alias("qos0"),
            count_if(F.col("qos") == 1).alias("qos1"),
            count_if(F.col("qos") == 2).alias("qos2"),
            count_if(F.col("retain")).alias("retained"),
        )
    )


def _sums(hours: float) -> list[Column]:
    return [
        F.sum("messages").cast("long").alias("messages"),
        F.sum("bytes").cast("long").alias("payload_bytes"),
        F.sum("qos0").cast("long").alias("qos0"),
        F.sum("qos1").cast("long").alias("qos1"),
        F.sum("qos2").cast("long").alias("qos2"),
        F.sum("retained").cast("long").alias("retained"),
        F.round(F.sum("messages") / F.lit(hours), 3).alias("messages_per_hour"),
    ]


def per_tenant(rows: DataFrame, hours: float) -> DataFrame:
    """Usage per tenant (for billing): publishers, topics, then `_sums`; most first."""
    return sorted_small(
        rows.groupBy("tenant").agg(
            F.countDistinct("client_id").alias("publishers"),
            F.countDistinct("topic").alias("topics"),
            *_sums(hours),
        ),
        F.col("messages").desc(),
        "tenant",
    )


def per_topic(rows: DataFrame, hours: float) -> DataFrame:
    """Per (tenant, topic): publishers, then `_sums`; most messages first."""
    return rows.groupBy("tenant", "topic").agg(
        F.countDistinct("client_id").alias("publishers"), *_sums(hours)
    )


def per_client(rows: DataFrame, hours: float) -> DataFrame:
    """Per (tenant, client_id): topics, then `_sums`."""
    return rows.groupBy("tenant", "client_id").agg(
        F.countDistinct("topic").alias("topics"), *_sums(hours)
    )


def per_hour(messages: DataFrame, window: Window, tenant: str | None = None) -> DataFrame:
    """Messages and payload bytes per UTC hour of the window that had any, in order."""
    # Hours since the epoch: a long is cheaper to group by than a label per row.
    hour = F.floor(F.unix_seconds(F.col("created_at")) / 3_600)
    return sorted_small(
        _in_window(messages, window, window.since, tenant)
        .groupBy(hour.alias("hour"))
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum(F.length("payload")).cast("long").alias("payload_bytes"),
        ),
        "hour",
    ).select(_hour_label(F.col("hour")).alias("hour"), "messages", "payload_bytes")


def silent_devices(
    messages: DataFrame, rows: DataFrame, window: Window, tenant: str | None = None
) -> DataFrame:
    """Publishers of the previous window that published nothing in this one: tenant,
    client_id, previous_messages, last_seen (UTC, ISO 8601); by tenant then client."""
    previous = (
        _in_window(messages, window, window.previous_since, tenant)
        .where(F.unix_micros(F.col("created_at")) < window.micros(window.since))
        .groupBy("tenant", "client_id")
        .agg(
            F.count(F.lit(1)).alias("previous_messages"),
            F.max(F.unix_micros(F.col("created_at"))).alias("last_us"),
        )
    )
    current = rows.select("tenant", "client_id").distinct()
    seconds = F.floor(F.col("last_us") / _US)
    last_seen = F.concat(
        F.date_from_unix_date(F.floor(seconds / 86_400).cast("int")).cast("string"),
        F.lit("T"),
        F.lpad(F.floor(F.pmod(seconds, 86_400) / 3_600).cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad(F.floor(F.pmod(seconds, 3_600) / 60).cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad(F.pmod(seconds, 60).cast("string"), 2, "0"),
        F.lit("Z"),
    )
    return sorted_small(
        previous.join(current, ["tenant", "client_id"], "left_anti").select(
            "tenant", "client_id", "previous_messages", last_seen.alias("last_seen")
        ),
        "tenant",
        "client_id",
    )


def summary(rows: DataFrame, silent: DataFrame, window: Window) -> DataFrame:
    """One row: the window, tenants, publishers, topics, then `_sums`, silent devices."""
    totals = rows.agg(
        F.countDistinct("tenant").alias("tenants"),
        F.countDistinct("tenant", "client_id").alias("publishers"),
        F.countDistinct("tenant", "topic").alias("topics"),
        *_sums(window.hours),
    )
    return totals.select(
        F.lit(window.since.strftime("%Y-%m-%dT%H:%M:%SZ")).alias("since"),
        F.lit(window.until.strftime("%Y-%m-%dT%H:%M:%SZ")).alias("until"),
        F.lit(round(window.hours, 3)).alias("window_hours"),
        "tenants",
        "publishers",
        "topics",
        F.coalesce("messages", F.lit(0).cast("long")).alias("messages"),
        F.coalesce("payload_bytes", F.lit(0).cast("long")).alias("payload_bytes"),
        F.coalesce("qos0", F.lit(0).cast("long")).alias("qos0"),
        F.coalesce("qos1", F.lit(0).cast("long")).alias("qos1"),
        F.coalesce("qos2", F.lit(0).cast("long")).alias("qos2"),
        F.coalesce("retained", F.lit(0).cast("long")).alias("retained"),
        F.coalesce("messages_per_hour", F.lit(0.0)).alias("messages_per_hour"),
    ).crossJoin(silent.agg(F.count(F.lit(1)).alias("silent_devices")))


def traffic_report(
    messages: DataFrame,
    window: Window,
    *,
    level: int | None = None,
    tenant: str | None = None,
    top: int = 10,
    source: str = "",
) -> Report:
    """The report's sections (the grouped rows computed once and cached: every section
    derives from them)."""
    rows = traffic_rows(messages, window, level=level, tenant=tenant).cache()
    # Materialized once, here: the first section's job reads `rows` from two branches (the
    # totals and the silent devices' anti join), and would compute it in both.
    rows.count()
    hours = window.hours
    silent = silent_devices(messages, rows, window, tenant).cache()
    clients = per_client(rows, hours)
    topics = per_topic(rows, hours)
    by = f" (topics cut at level {level})" if level is not None else ""
    sections = [
        Section("summary", f"traffic{by}", summary(rows, silent, window), SectionKind.SUMMARY),
        Section("tenants", "per tenant (usage)", per_tenant(rows, hours)),
        Section(
            "top_topics",
            f"the {top} busiest topics",
            topics.orderBy(F.col("messages").desc(), "tenant", "topic").limit(top),
        ),
        Section(
            "top_talkers",
            f"the {top} top talkers",
            clients.orderBy(F.col("messages").desc(), "tenant", "client_id").limit(top),
        ),
        Section("hourly", "messages per hour (UTC)", per_hour(messages, window, tenant), shown=48),
        Section("silent", "silent devices (published in the previous window only)", silent),
        Section("topics", "per topic", topics.orderBy("tenant", "topic"), SectionKind.DATA),
        Section("clients", "per client", clients.orderBy("tenant", "client_id"), SectionKind.DATA),
    ]
    return Report(
        name="traffic",
        title=f"traffic in {source}" if source else "traffic",
        sections=sections,
        chart=Chart("hourly", "hour", "messages", "Messages per hour", "hour (UTC)", "messages"),
    )
