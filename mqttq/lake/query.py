"""Reading a lake on Spark: `DIR/messages` and `DIR/quarantine` as DataFrames and as the SQL
views `messages` and `quarantine` (`mqttq lake query`, `mqttq report traffic --lake`).

The partition columns get the layout's types (`tenant`, `date` strings, `hour` int), never
what Spark would guess from the folder names (a tenant named `42` stays a string). Typed
columns the stream added from JSON payloads are read too (the files' schemas merged), so
an analyst queries `temperature` rather than parsing bytes. A Delta lake (`--format delta`)
is read through Delta (its log says which files are current); the session needs Delta's
package (`mqttq.lake.stream.DELTA_PACKAGE`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqttq.lake.layout import MESSAGES, QUARANTINE, LakeError, read_lake_info

DELTA_LOG = "_delta_log"

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "check_lake",
    "has_files",
    "read_messages",
    "read_quarantine",
    "register_views",
    "run_sql",
]


def has_files(table: Path) -> bool:
    """True when `table` holds at least one visible Parquet file (any depth), or is a
    Delta table (it has a `_delta_log`)."""
    if not table.is_dir():
        return False
    if (table / DELTA_LOG).is_dir():
        return True
    return any(
        not any(part[0] in "._" for part in path.relative_to(table).parts)
        for path in table.rglob("*.parquet")
    )


def check_lake(lake: Path) -> None:
    """Return when `lake` is a lake with messages; raise `LakeError` (one line) otherwise."""
    read_lake_info(lake)  # a _lake.json this version cannot read is refused here
    if not (lake / MESSAGES).is_dir():
        raise LakeError(
            f"no lake at {lake}: {lake / MESSAGES} is missing; give the --lake DIR that "
            "`mqttq lake run` or a lake integration writes"
        )
    if not has_files(lake / MESSAGES):
        raise LakeError(f"the lake {lake} holds no message yet: nothing to read")


def _partition_columns(lake: Path) -> list[tuple[str, str]]:
    info = read_lake_info(lake)
    hourly = info is not None and info.hourly
    columns = [("tenant", "string"), ("date", "string")]
    if hourly:
        columns.append(("hour", "int"))
    return columns


def read_messages(spark: SparkSession, lake: Path, *, typed: bool = True) -> DataFrame:
    """`DIR/messages` with the layout's columns (partition columns typed as the layout
    says); with `typed`, also the typed columns of JSON payloads (schemas merged)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    from mqttq.lake.layout import message_columns  # noqa: PLC0415

    info = read_lake_info(lake)
    hourly = info is not None and info.hourly
    path = str(lake / MESSAGES)
    if info is not None and info.format == "delta":
        return _read_delta_messages(spark, path, hourly=hourly, typed=typed)
    if not typed:
        from mqttq.lake.layout import spark_message_schema  # noqa: PLC0415

        return spark.read.schema(spark_message_schema(hourly)).parquet(path)
    # Partition values read as strings, then cast to the layout's types.
    reader = spark.read.option("mergeSchema", "true")
    previous = spark.conf.get("spark.sql.sources.partitionColumnTypeInference.enabled")
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    try:
        frame = reader.parquet(path)
    finally:
        spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", previous or "true")
    layout = [name for name, _, _ in message_columns(hourly)]
    extra = [name for name in frame.columns if name not in layout]
    columns: list[Any] = []
    for name in layout:
        if name == "hour":
            columns.append(F.col("hour").cast("int").alias("hour"))
        elif name in frame.columns:
            columns.append(F.col(name))
    return frame.select(*columns, *extra)


def _read_delta_messages(spark: SparkSession, path: str, *, hourly: bool, typed: bool) -> DataFrame:
    """The Delta table of messages, columns in the layout's order (typed ones after)."""
    from mqttq.lake.layout import message_columns  # noqa: PLC0415

    frame = spark.read.format("delta").load(path)
    layout = [name for name, _, _ in message_columns(hourly) if name in frame.columns]
    extra = [name for name in frame.columns if name not in layout] if typed else []
    return frame.select(*layout, *extra)


def read_quarantine(spark: SparkSession, lake: Path) -> DataFrame | None:
    """`DIR/quarantine`, or None when the lake has no quarantined record."""
    from mqttq.lake.layout import spark_quarantine_schema  # noqa: PLC0415

    if not has_files(lake / QUARANTINE):
        return None
    if (lake / QUARANTINE / DELTA_LOG).is_dir():
        return spark.read.format("delta").load(str(lake / QUARANTINE))
    return spark.read.schema(spark_quarantine_schema()).parquet(str(lake / QUARANTINE))


def register_views(spark: SparkSession, lake: Path) -> list[str]:
    """Make the views `messages` (and `quarantine` when the lake has one); their names."""
    check_lake(lake)
    read_messages(spark, lake).createOrReplaceTempView("messages")
    views = ["messages"]
    quarantine = read_quarantine(spark, lake)
    if quarantine is not None:
        quarantine.createOrReplaceTempView("quarantine")
        views.append("quarantine")
    return views


def run_sql(spark: SparkSession, lake: Path, sql: str) -> DataFrame:
    """`sql` over the lake's views. Raises `LakeError` with Spark's one-line reason when
    the statement does not parse or names what the lake does not have."""
    from pyspark.errors import PySparkException  # noqa: PLC0415

    from mqttq.spark.session import spark_error_line  # noqa: PLC0415

    register_views(spark, lake)
    quiet_sql_errors()
    try:
        return spark.sql(sql)
    except PySparkException as exc:
        raise LakeError(f"bad SQL: {spark_error_line(exc)}") from None


def quiet_sql_errors() -> None:
    """Keep PySpark from logging a failed statement's whole Java stack on stderr (its
    `SQLQueryContextLogger`): the CLI prints the one line that matters."""
    from pyspark.logger import PySparkLogger  # noqa: PLC0415

    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    logger.disabled = True
