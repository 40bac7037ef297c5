"""Transforms more than one report uses: which source rows a migration writes, a histogram
of queue lengths, the largest clients. Pure DataFrame -> DataFrame functions; "now" is a
parameter, never read from the clock here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

BUCKETS: Final = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)
"""Lower bounds of the histogram's buckets (1-2-5 steps; the last one is open)."""


def bucket_labels() -> list[str]:
    """ "0", "1", "2-4", ..., "50000+": one label per bucket of BUCKETS."""
    labels = []
    for i, low in enumerate(BUCKETS):
        high = BUCKETS[i + 1] - 1 if i + 1 < len(BUCKETS) else None
        labels.append(f"{low}+" if high is None else str(low) if high == low else f"{low}-{high}")
    return labels


def _bucket_of(value: Column) -> Column:
    index = F.lit(0)
    for i, low in enumerate(BUCKETS[1:], start=1):
        index = F.when(value >= low, F.lit(i)).otherwise(index)
    return index


def histogram(per_client: DataFrame, column: str) -> DataFrame:
    """Clients per bucket of `column` (a count per client), with the sum of `column` in the
    bucket: rows (bucket, low, clients, messages) in bucket order, from the first non-empty
    bucket to the last, the empty ones between them included (a chart shows the gaps)."""
    spark = per_client.sparkSession
    schema = StructType(
        [
            StructField("index", IntegerType(), False),
            StructField("bucket", StringType(), False),
            StructField("low", LongType(), False),
        ]
    )
    buckets = spark.createDataFrame(
        [
            (i, label, low)
            for i, (label, low) in enumerate(zip(bucket_labels(), BUCKETS, strict=True))
        ],
        schema,
    )
    counts = per_client.groupBy(_bucket_of(F.col(column)).alias("index")).agg(
        F.count(F.lit(1)).alias("clients"), F.sum(column).cast("long").alias("messages")
    )
    whole = Window.partitionBy()  # a dozen rows: one partition is right
    seen = F.when(F.col("clients").isNotNull(), F.col("index"))
    return sorted_small(
        buckets.join(counts, "index", "left")
        .withColumn("first", F.min(seen).over(whole))
        .withColumn("last", F.max(seen).over(whole))
        .where(F.col("index").between(F.col("first"), F.col("last")))
        .select(
            "index",
            "bucket",
            "low",
            F.coalesce("clients", F.lit(0)).cast("long").alias("clients"),
            F.coalesce("messages", F.lit(0)).cast("long").alias("messages"),
        ),
        "index",
    ).drop("index")


def sorted_small(frame: DataFrame, *columns: str | Column) -> DataFrame:
    """`frame` in one partition, sorted by `columns`: for results small enough for one
    task, it spares the sampling job of a global sort."""
    return frame.coalesce(1).sortWithinPartitions(*columns)


def largest(per_client: DataFrame, column: str, n: int) -> DataFrame:
    """The `n` clients with the most `column`, most first (ties by client id)."""
    return per_client.orderBy(F.col(column).desc(), F.col("client_id")).limit(n)


def mark_kept(messages: DataFrame, limit: int, default_ttl_s: int, now_ms: int) -> DataFrame:
    """TBMQ 1.x rows with what the migration does with each (mqttq.migrate.plan's rule):
    `trimmed` when beyond the client's newest `limit` rows by serial_number; else `expired`
    when its deadline (time + msg_expiry_interval, else + `default_ttl_s`) is not after
    `now_ms`; else `kept` (written). Adds `deadline_ms`, `trimmed`, `expired`, `kept`.

    Needs columns client_id, serial_number, time, msg_expiry_interval."""
    newest_first = Window.partitionBy("client_id").orderBy(F.col("serial_number").desc())
    ttl_s = F.coalesce(F.col("msg_expiry_interval").cast("long"), F.lit(default_ttl_s))
    return (
        messages.withColumn("deadline_ms", F.col("time") + ttl_s * 1000)
        .withColumn("trimmed", F.row_number().over(newest_first) > limit)
        .withColumn("expired", ~F.col("trimmed") & (F.col("deadline_ms") <= now_ms))
        .withColumn("kept", ~F.col("trimmed") & ~F.col("expired"))
    )


def count_if(condition: Column) -> Column:
    """How many rows of a group meet `condition` (a long, 0 when none)."""
    return F.count(F.when(condition, F.lit(1)))
