"""What one Spark partition of the migration does, on its executor.

The partition's rows arrive sorted by (client_id, kind, serial_number)
(`migrate_source`): a client's session row, then its message rows. They are grouped per
client and planned by the local engine's `Planner` (the same validation, scores, TTLs and
JSON), then written by the local engine's `BatchWriter` through the same Lua script, with
the same markers, and a checkpoint of the partition's own (`partition_checkpoint_key`).
The partition's answer is one `PartitionResult`: its counters (a `MigrationReport`), every
rejected row's problem, and, when the driver writes session records, the clients now
present in Redis.

Nothing here imports pyspark or a PostgreSQL driver: the rows are plain tuples (a Spark
`Row` is one), so this runs, and is tested, without Spark too.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mqttq.migrate.batches import BatchWriter
from mqttq.migrate.options import MigrationOptions
from mqttq.migrate.plan import ClientPlan, ClientRows, Planner
from mqttq.migrate.redis_writer import RedisWriter
from mqttq.migrate.report import MigrationReport
from mqttq.migrate.validate import Problem
from mqttq.spark.migrate_source import KIND, MESSAGE_KIND, S_PACKET_ID, S_SERIAL

Row = Sequence[Any]

RESULT_SCHEMA: Final = "partition int, result binary"
"""What `PartitionJob.arrow` yields: one row per partition, its pickled `PartitionResult`."""


def partition_checkpoint_key(checkpoint: str, partitions: int, index: int) -> str:
    """The checkpoint of partition `index` of `partitions` under the run's checkpoint key
    (a resume with another partition count finds none and reads everything again)."""
    return f"{checkpoint}:spark:{partitions}:{index}"


@dataclass(slots=True)
class PartitionResult:
    """What a partition did: its counters, all its rejects, and the present clients."""

    index: int
    report: MigrationReport
    problems: list[Problem] = field(default_factory=list)
    present: list[str] = field(default_factory=list)


def _message(row: Row) -> tuple[Any, ...]:
    """A source row as the planner's message row (bytea arrives as bytearray)."""
    values = list(row[:15])
    for position in (7, 14):
        if isinstance(values[position], bytearray):
            values[position] = bytes(values[position])
    return tuple(values)


def plans_of(rows: Iterable[Row], planner: Planner) -> Iterator[tuple[ClientPlan, int]]:
    """One plan per client of `rows` (sorted as `migrate_source` sorts them), with the
    number of message rows it had."""
    current_id: Any = None
    session: tuple[Any, Any] | None = None
    messages: ClientRows | None = None

    def finish() -> ClientPlan:
        if messages is not None:
            return planner.plan(messages)
        counters = (None, None) if session is None else session
        return planner.plan_session((current_id, *counters))

    started = False
    for row in rows:
        client_id = row[0]
        if not started or client_id != current_id:
            if started:
                yield finish(), 0 if messages is None else messages.total
            started, current_id, session, messages = True, client_id, None, None
        if row[KIND] == MESSAGE_KIND:
            message = _message(row)
            if messages is None:
                messages = planner.rows_of(message, session)
            messages.kept.append(message)
            messages.total += 1
        else:
            session = (row[S_SERIAL], row[S_PACKET_ID])
    if started:
        yield finish(), 0 if messages is None else messages.total


def _arrow_rows(batches: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of Arrow record batches as tuples (binary columns as bytes)."""
    for batch in batches:
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


class _Present:
    """The SessionSink of a partition: the ids go back to the driver."""

    def __init__(self) -> None:
        self.client_ids: list[str] = []

    async def ensure(self, client_ids: Sequence[str]) -> None:
        self.client_ids.extend(client_ids)


@dataclass(frozen=True, slots=True)
class PartitionJob:
    """What each partition runs (`arrow`, through `DataFrame.mapInArrow`); pickled to the
    executors with its options."""

    options: MigrationOptions
    run_id: str
    checkpoint: str
    partitions: int
    collect_present: bool

    def arrow(self, batches: Iterable[Any]) -> Iterator[Any]:
        """For `DataFrame.mapInArrow`: the partition's rows come as Arrow record batches
        (columnar, ~10x cheaper to hand to Python than pickled `Row`s); the answer is one
        record of `RESULT_SCHEMA`."""
        import pyarrow as pa  # noqa: PLC0415 (on the executor)
        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        index = 0 if context is None else context.partitionId()
        result = asyncio.run(self.run(index, _arrow_rows(batches)))
        yield pa.RecordBatch.from_pydict(
            {"partition": [index], "result": [pickle.dumps(result)]},
            schema=pa.schema([("partition", pa.int32()), ("result", pa.binary())]),
        )

    async def run(self, index: int, rows: Iterable[Row]) -> PartitionResult:
        """Plan and write every client of `rows`; the partition's result."""
        options = self.options
        result = PartitionResult(index, MigrationReport(self.run_id, dry_run=options.dry_run))
        report = result.report
        planner = Planner(options.limit, options.default_ttl)
        present = _Present() if self.collect_present else None
        redis = RedisWriter(
            options.redis_url, cluster=options.cluster, key_prefix=options.key_prefix
        )
        await redis.open()
        try:
            writer = BatchWriter(
                options,
                redis,
                report=report,
                sessions=present,
                checkpoint=partition_checkpoint_key(self.checkpoint, self.partitions, index),
                after_batch=None,
                rejected=lambda plan: result.problems.extend(plan.problems),
            )
            try:
                for plan, rows_read in plans_of(rows, planner):
                    report.rows_read += rows_read
                    await writer.add(plan)
                await writer.drain()
            except BaseException:
                await writer.cancel()
                raise
        finally:
            await redis.close()
        if present is not None:
            result.present = present.client_ids
        report.finished = True
        return result
