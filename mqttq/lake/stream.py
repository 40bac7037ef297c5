"""`mqttq lake run`: Spark Structured Streaming from `<prefix>msg.all` into the lake.

Extract: Spark's Kafka source (`spark-sql-kafka-0-10`, the version of pyspark: KAFKA_PACKAGE)
with headers, from the earliest offset the first time, then from the checkpoint.
Transform: `mqttq.lake.decode.decode_records`. Load: `mqttq.lake.sink` publishes each
micro-batch exactly once across restarts (the checkpoint's offset log + idempotent
per-batch file names), messages under `DIR/messages`, foreign records under
`DIR/quarantine`. With `--format delta` both are Delta tables instead, each batch one
Delta commit made idempotent by Delta's own `txnAppId`/`txnVersion` (the batch id), so a
batch rerun after a crash is skipped by the table, not written twice.

Each finished batch is reported to `on_batch` as a plain dict (rows, messages,
quarantined, untyped, rate, duration, lag behind the log): the CLI prints it as a line on a
terminal or as JSON.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqttq.lake.decode import TypedSchema, decode_records, message_rows, quarantine_rows
from mqttq.lake.layout import (
    CHECKPOINTS,
    MESSAGES,
    PARTITIONS_DAILY,
    PARTITIONS_HOURLY,
    QUARANTINE,
    TYPED_OK_COLUMN,
    LakeError,
    LakeInfo,
    read_lake_info,
    write_lake_info,
)
from mqttq.lake.sink import STAGING, clear, lake_lock, publish_staged, staged_partitions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DELTA_PACKAGE",
    "KAFKA_PACKAGE",
    "SPARK_VERSION",
    "RunOptions",
    "RunTotals",
    "infer_schema",
    "lake_packages",
    "open_lake",
    "run_stream",
    "stream_conf",
]

SPARK_VERSION: Final = "4.2.0"
"""The pyspark this job is built for: Maven Central serves the Kafka connector at 4.2.0
(not 4.3.0), and the connector must match Spark exactly."""
KAFKA_PACKAGE: Final = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}"
DELTA_PACKAGE: Final = "io.delta:delta-spark_4.2_2.13:4.4.0"
"""Delta Lake for Spark 4.2 (delta-spark 4.4.0; 4.4.1 is on PyPI but not on Maven Central).
Only the JVM jar is needed: the job writes and reads Delta through Spark's own API."""
DELTA_APP_ID: Final = "mqttq-lake"
"""Delta's `txnAppId` of the stream's commits (the version is the micro-batch id)."""
SCHEMA_FILE: Final = "typed_schema.json"
"""Under `DIR/_checkpoints/`: the typed columns `--infer` chose, reused by later runs."""
POLL_SECONDS: Final = 0.5


@dataclass(frozen=True)
class RunOptions:
    """What `lake run` does: where, from which Kafka topic, how often, which columns."""

    lake: Path
    bootstrap_servers: str
    topic: str
    trigger_seconds: float = 30.0
    available_now: bool = False
    hourly: bool = False
    format: str = "parquet"
    schemas: tuple[TypedSchema, ...] = ()
    max_offsets_per_trigger: int | None = None


@dataclass
class RunTotals:
    """Counts over the batches this run wrote."""

    batches: int = 0
    rows: int = 0
    messages: int = 0
    quarantined: int = 0
    untyped: int = 0
    by_batch: dict[int, dict[str, Any]] = field(default_factory=dict)


def stream_conf(fmt: str = "parquet") -> tuple[tuple[str, str], ...]:
    """Spark settings the job needs (before the user's `--conf`): UTC dates, Parquet
    timestamps as microseconds every reader maps to a UTC timestamp; for `delta`, Delta's
    SQL extension and catalog (OPTIMIZE, VACUUM, `delta.` paths in SQL)."""
    conf: tuple[tuple[str, str], ...] = (
        ("spark.sql.session.timeZone", "UTC"),
        ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"),
        ("spark.sql.streaming.stopGracefullyOnShutdown", "true"),
    )
    if fmt == "delta":
        conf += delta_conf()
    return conf


def delta_conf() -> tuple[tuple[str, str], ...]:
    """The settings a session reading or writing a Delta lake needs."""
    return (
        ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"),
        ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"),
    )


def lake_packages(fmt: str = "parquet") -> tuple[str, ...]:
    """The Maven packages of `lake run` for a lake of format `fmt`."""
    return (KAFKA_PACKAGE, DELTA_PACKAGE) if fmt == "delta" else (KAFKA_PACKAGE,)


def reader_extras(lake: Path) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The Maven packages and Spark settings a session reading `lake` needs beyond the
    defaults: Delta's for a Delta lake, none for Parquet (or a lake not made yet)."""
    info = read_lake_info(lake)
    if info is not None and info.format == "delta":
        return (DELTA_PACKAGE,), delta_conf()
    return (), ()


def open_lake(lake: Path, *, hourly: bool, fmt: str) -> LakeInfo:
    """The lake's settings: `_lake.json` when it exists (and agrees with `hourly` and
    `fmt`), else written now. `LakeError` when they disagree."""
    wanted = LakeInfo(PARTITIONS_HOURLY if hourly else PARTITIONS_DAILY, fmt)
    found = read_lake_info(lake)
    if found is None:
        write_lake_info(lake, wanted)
        return wanted
    if found.partitioning != wanted.partitioning or found.format != wanted.format:
        raise LakeError(
            f"{lake} was created with partitioning {list(found.partitioning)} and format "
            f"{found.format}; run with the same settings (--hourly, --format) or a new --lake"
        )
    return found


def check_kafka(bootstrap_servers: str, topic: str, timeout: float = 10.0) -> int:
    """The number of partitions of `topic` (0 when it does not exist yet: the stream waits
    for it); `LakeError` naming the servers when Kafka does not answer within `timeout`
    (Spark's Kafka source would retry without end)."""
    from confluent_kafka import KafkaException  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        why = error.str() if hasattr(error, "str") else str(error)
        raise LakeError(
            f"Kafka at {bootstrap_servers} did not answer in {timeout:g} s ({why}); "
            "check --bootstrap-servers or [kafka] bootstrap_servers"
        ) from None
    found = metadata.topics.get(topic)
    return len(found.partitions) if found is not None else 0


def _kafka_reader(spark: SparkSession, options: RunOptions, *, stream: bool) -> Any:
    source = spark.readStream if stream else spark.read
    reader = (
        source.format("kafka")
        .option("kafka.bootstrap.servers", options.bootstrap_servers)
        .option("subscribe", options.topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        # Records gone to retention before the job read them are skipped, not fatal.
        .option("failOnDataLoss", "false")
    )
    if stream and options.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_offsets_per_trigger))
    return reader.load()


def infer_schema(spark: SparkSession, options: RunOptions, sample: int = 10_000) -> TypedSchema:
    """Typed columns for every topic (`#`) from the top-level scalar keys of up to `sample`
    JSON object payloads at the start of the log: each key gets the type most of its
    values have (`schema_of_variant` per payload, counted), so a few payloads of another
    shape do not take a column away (they are the ones `payload_typed_ok` flags)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    decoded = decode_records(_kafka_reader(spark, options, stream=False))
    rows = message_rows(decoded).where(F.col("payload_text").isNotNull()).limit(sample)
    shapes = (
        rows.select(F.expr("schema_of_variant(try_parse_json(payload_text))").alias("s"))
        .where(F.col("s").startswith("OBJECT<"))
        .groupBy("s")
        .count()
        .collect()
    )
    return TypedSchema("#", tuple(majority_fields([(r["s"], int(r["count"])) for r in shapes])))


def majority_fields(shapes: list[tuple[str, int]]) -> list[tuple[str, str]]:
    """From (variant schema, payloads of that shape): each scalar key with the type most
    payloads gave it (bigint and double together count as double), in first-seen order."""
    votes: dict[str, dict[str, int]] = {}
    for shape, count in shapes:
        for name, kind in _object_fields(shape):
            kinds = votes.setdefault(name, {})
            kinds[kind] = kinds.get(kind, 0) + count
    fields: list[tuple[str, str]] = []
    for name, kinds in votes.items():
        if "double" in kinds and "bigint" in kinds:
            kinds["double"] += kinds.pop("bigint")
        fields.append((name, max(kinds, key=lambda kind: kinds[kind])))
    return fields


_SCALARS: Final = {
    "BIGINT": "bigint",
    "INT": "bigint",
    "DOUBLE": "double",
    "FLOAT": "double",
    "STRING": "string",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
}


def _object_fields(schema: str) -> list[tuple[str, str]]:
    """The scalar fields of a variant schema `OBJECT<a: BIGINT, b: DECIMAL(3,1), ...>`."""
    from mqttq.lake.decode import _NAME, _RESERVED  # noqa: PLC0415

    match = re.fullmatch(r"OBJECT<(.*)>", schema.strip())
    if not match:
        return []
    fields: list[tuple[str, str]] = []
    parts: list[str] = []
    depth, start, body = 0, 0, match.group(1)
    for index, char in enumerate(body):  # split on the commas between top-level fields
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:index])
            start = index + 1
    parts.append(body[start:])
    for part in parts:
        name, _, kind = part.strip().partition(":")
        name, kind = name.strip().strip("`"), kind.strip().upper()
        scalar = "double" if kind.startswith("DECIMAL") else _SCALARS.get(kind)
        if scalar and _NAME.match(name) and name not in _RESERVED:
            fields.append((name, scalar))
    return fields


def load_inferred(lake: Path) -> TypedSchema | None:
    """The typed columns an earlier `--infer` chose for this lake, if any."""
    path = lake / CHECKPOINTS / SCHEMA_FILE
    try:
        document = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    return TypedSchema(document["filter"], tuple((n, k) for n, k in document["columns"]))


def save_inferred(lake: Path, schema: TypedSchema) -> None:
    """Keep `schema` for later runs (a lake's columns do not change on restart)."""
    path = lake / CHECKPOINTS / SCHEMA_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"filter": schema.topic_filter, "columns": list(schema.columns)}), "utf-8"
    )


class _BatchWriter:
    """The foreachBatch function: decode, stage, publish (see mqttq.lake.sink)."""

    def __init__(self, options: RunOptions, info: LakeInfo, totals: RunTotals) -> None:
        self.options = options
        self.info = info
        self.totals = totals
        self.lock = threading.Lock()
        self.failure: BaseException | None = None
        """What the last batch failed with (a Python error, clearer than Spark's wrapper)."""

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self._write(batch, batch_id)
        except BaseException as exc:
            self.failure = exc
            raise

    def _write(self, batch: DataFrame, batch_id: int) -> None:
        if self.info.format == "delta":
            self._write_delta(batch, batch_id)
            return
        started = time.monotonic()
        lake = self.options.lake
        hourly = self.info.hourly
        staging = lake / STAGING / f"{batch_id:012d}"
        clear(staging)
        # Cached: the messages and the quarantine are two writes of one decoding.
        decoded = decode_records(batch, hourly=hourly, schemas=self.options.schemas).persist()
        try:
            parallelism = max(1, batch.sparkSession.sparkContext.defaultParallelism)
            (
                message_rows(decoded, hourly=hourly)
                .coalesce(parallelism)
                .write.partitionBy(*self.info.partitioning)
                .parquet(str(staging / MESSAGES))
            )
            (
                quarantine_rows(decoded)
                .coalesce(1)
                .write.partitionBy("date")
                .parquet(str(staging / QUARANTINE))
            )
        finally:
            decoded.unpersist()
        # Counted from the staged files' footers (and one column): no third Spark job.
        messages, untyped = staged_counts(staging / MESSAGES, TYPED_OK_COLUMN)
        quarantined, _ = staged_counts(staging / QUARANTINE, None)
        rows = messages + quarantined
        with lake_lock(lake):
            files = publish_staged(staging / MESSAGES, lake / MESSAGES, batch_id)
            files += publish_staged(staging / QUARANTINE, lake / QUARANTINE, batch_id)
        clear(staging)
        self._count(batch_id, rows, quarantined, untyped, files=files, started=started)

    def _write_delta(self, batch: DataFrame, batch_id: int) -> None:
        """One Delta commit per table and batch, skipped by Delta when this batch id was
        committed before (the rerun of a batch after a crash)."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        started = time.monotonic()
        lake = self.options.lake
        hourly = self.info.hourly
        decoded = decode_records(batch, hourly=hourly, schemas=self.options.schemas).persist()
        try:
            messages = message_rows(decoded, hourly=hourly)
            quarantine = quarantine_rows(decoded)
            counts = {
                "messages": messages.count(),
                "quarantined": quarantine.count(),
                "untyped": 0,
            }
            if TYPED_OK_COLUMN in messages.columns:
                fits = F.coalesce(F.col(TYPED_OK_COLUMN), F.lit(True))
                counts["untyped"] = messages.where(~fits).count()
            tables = 0
            for frame, table, partitioning in (
                (messages, MESSAGES, self.info.partitioning),
                (quarantine, QUARANTINE, ("date",)),
            ):
                if not counts["messages" if table == MESSAGES else "quarantined"]:
                    continue
                (
                    frame.write.format("delta")
                    .mode("append")
                    .option("txnAppId", DELTA_APP_ID)
                    .option("txnVersion", str(batch_id))
                    .option("mergeSchema", "true")
                    .partitionBy(*partitioning)
                    .save(str(lake / table))
                )
                tables += 1
        finally:
            decoded.unpersist()
        rows = counts["messages"] + counts["quarantined"]
        self._count(
            batch_id, rows, counts["quarantined"], counts["untyped"], files=tables, started=started
        )

    def _count(
        self,
        batch_id: int,
        rows: int,
        quarantined: int,
        untyped: int,
        *,
        files: int,
        started: float,
    ) -> None:
        report = {
            "rows": rows,
            "messages": rows - quarantined,
            "quarantined": quarantined,
            "untyped": untyped,
            "files": files,
            "write_seconds": round(time.monotonic() - started, 3),
        }
        with self.lock:
            totals = self.totals
            totals.by_batch[batch_id] = report
            totals.batches += 1
            totals.rows += rows
            totals.messages += rows - quarantined
            totals.quarantined += quarantined
            totals.untyped += untyped


def staged_counts(staged: Path, typed_ok: str | None) -> tuple[int, int]:
    """(rows, rows whose `typed_ok` column is false) of the Parquet files under `staged`."""
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    rows = untyped = 0
    for _relative, files in staged_partitions(staged):
        for path in files:
            parquet = pq.ParquetFile(path)
            rows += parquet.metadata.num_rows
            if typed_ok is not None and typed_ok in parquet.schema_arrow.names:
                column = parquet.read(columns=[typed_ok]).column(0)
                untyped += int(pc.sum(pc.invert(column.fill_null(True))).as_py() or 0)
    return rows, untyped


def _lag(progress: dict[str, Any]) -> int | None:
    """Records the log holds beyond this batch's end, over every partition."""
    lag = 0
    for source in progress.get("sources") or ():
        try:
            latest = _offsets(source.get("latestOffset"))
            end = _offsets(source.get("endOffset"))
        except ValueError:
            return None
        for topic, partitions in latest.items():
            for partition, offset in partitions.items():
                lag += max(0, int(offset) - int(end.get(topic, {}).get(partition, 0)))
    return lag


def _offsets(raw: object) -> dict[str, dict[str, int]]:
    if raw is None:
        return {}
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict):
        raise ValueError("offsets")
    return value


def run_stream(
    spark: SparkSession,
    options: RunOptions,
    info: LakeInfo,
    on_batch: Callable[[dict[str, Any]], None],
    stop: threading.Event,
) -> RunTotals:
    """Run the stream until it ends (`available_now`: the log as it is now is written) or
    `stop` is set; report each batch to `on_batch`. Raises what the query failed with."""
    totals = RunTotals()
    writer = _BatchWriter(options, info, totals)
    records = _kafka_reader(spark, options, stream=True)
    stream = (
        records.writeStream.foreachBatch(writer)
        .option("checkpointLocation", str(options.lake / CHECKPOINTS / MESSAGES))
        .queryName("mqttq_lake")
    )
    if options.available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=f"{options.trigger_seconds} seconds")
    query = stream.start()
    reported: set[int] = set()
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(POLL_SECONDS)
            _report(query.recentProgress, totals, reported, on_batch)
    finally:
        if query.isActive:
            query.stop()
    _report(query.recentProgress, totals, reported, on_batch)
    failure = query.exception()
    if failure is not None:
        raise writer.failure or failure
    return totals


def _report(
    progresses: list[Any],
    totals: RunTotals,
    reported: set[int],
    on_batch: Callable[[dict[str, Any]], None],
) -> None:
    for progress in progresses:
        raw = progress if isinstance(progress, dict) else json.loads(progress.json)
        batch_id = int(raw.get("batchId", -1))
        written = totals.by_batch.get(batch_id)
        if batch_id in reported or written is None:
            continue
        reported.add(batch_id)
        duration = (raw.get("durationMs") or {}).get("triggerExecution")
        on_batch(
            {
                "event": "batch",
                "batch": batch_id,
                **written,
                "input_rate": round(float(raw.get("inputRowsPerSecond") or 0.0), 1),
                "processed_rate": round(float(raw.get("processedRowsPerSecond") or 0.0), 1),
                "batch_seconds": round(duration / 1000, 3) if duration is not None else None,
                "lag": _lag(raw),
            }
        )
