"""`mqttq migrate pg-to-redis --engine spark`: the driver's side of the run.

1. On the driver, as the local engine does: connect to PostgreSQL and Redis (one line if
   either cannot be used), stop at a finished checkpoint (--resume), and with
   --on-conflict fail refuse the run before writing anything when another session holds
   a client id (`runner.refuse_conflicts`).
2. On the executors: the source read in `--partitions` partitions by client hash
   (`migrate_source`), each partition planned and written to Redis or Redis Cluster by
   `migrate_partition` (the local engine's planner, batch writer and Lua script).
3. On the driver: the partitions' counters summed into one `MigrationReport`, their
   rejects written to --rejects, session records for the present clients (--sessions-to),
   the finished checkpoint, and --verify (the local engine's comparison).

Resume: every written client has its marker, so a run after a `kill -9` of the driver
writes each missing client once and leaves the others ("already migrated"). Each
partition also keeps its own checkpoint; --resume with the same --partitions reads each
partition only after its checkpoint, except with --sessions-to: then every client is read
again, so that the session records of clients written just before the kill are made.
"""

from __future__ import annotations

import asyncio
import pickle
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from rich.console import Console

from mqttq.migrate.options import MigrationOptions
from mqttq.migrate.plan import Planner
from mqttq.migrate.redis_writer import OnConflict, RedisWriter
from mqttq.migrate.rejects import RejectsFile
from mqttq.migrate.report import MigrationReport
from mqttq.migrate.runner import NoProgress, refuse_conflicts
from mqttq.migrate.sessions import SessionRecords
from mqttq.migrate.source import PgSource
from mqttq.migrate.state import SESSIONS_PHASE, Checkpoint, checkpoint_key
from mqttq.migrate.verify import Verifier
from mqttq.spark.migrate_partition import (
    RESULT_SCHEMA,
    PartitionJob,
    PartitionResult,
    partition_checkpoint_key,
)
from mqttq.spark.migrate_source import read_source
from mqttq.spark.progress import stage_progress
from mqttq.spark.session import SparkError, spark_error_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PARTITIONS_PER_CORE: Final = 2
"""Default partitions per executor core: a slow partition does not hold the others up."""
SESSION_CHUNK: Final = 10_000


def default_partitions(spark: SparkSession) -> int:
    """`PARTITIONS_PER_CORE` times the cores Spark has (its default parallelism)."""
    return max(1, PARTITIONS_PER_CORE * spark.sparkContext.defaultParallelism)


@dataclass(frozen=True, slots=True)
class _Start:
    checkpoint: str
    after: dict[int, str]


class SparkMigration:
    """One `pg-to-redis` run on Spark; `run()` returns the same report as the local engine.

    `console`: where Spark's stage progress is drawn (None: nowhere).
    """

    def __init__(
        self,
        spark: SparkSession,
        options: MigrationOptions,
        *,
        partitions: int | None = None,
        console: Console | None = None,
    ) -> None:
        options.check()
        if partitions is not None and partitions < 1:
            raise ValueError(f"--partitions {partitions}: must be at least 1")
        self.spark = spark
        self.options = options
        self.partitions = partitions or default_partitions(spark)
        self.console = console
        self.report = MigrationReport(run_id=uuid.uuid4().hex[:12], dry_run=options.dry_run)

    def run(self) -> MigrationReport:
        """The whole run (MigrateError or SparkError, one line, when it cannot be done)."""
        options, report = self.options, self.report
        started = time.monotonic()
        start = asyncio.run(self._before())
        if start is None:
            return report
        rejects = None
        if options.rejects_path is not None:
            rejects = RejectsFile(options.rejects_path)
            rejects.open()
        present: list[str] = []
        try:
            for result in self._partitions(start):
                report.merge(result.report)
                present.extend(result.present)
                if rejects is not None:
                    rejects.add(result.problems)
        finally:
            if rejects is not None:
                rejects.close()
        report.problems.sort(key=lambda problem: problem.client_id)  # as the local engine
        report.conflicts.sort()
        report.elapsed_s = time.monotonic() - started
        report.finished = True
        if options.dry_run and options.on_conflict is OnConflict.FAIL and report.conflicts_total:
            report.refused = True  # what the real run would do
        asyncio.run(self._after(start, present))
        return report

    def _partitions(self, start: _Start) -> list[PartitionResult]:
        options = self.options
        job = PartitionJob(
            options,
            self.report.run_id,
            start.checkpoint,
            self.partitions,
            collect_present=options.sessions_db is not None and not options.dry_run,
        )
        try:
            frame = read_source(
                self.spark,
                options.pg_url,
                self.partitions,
                pattern=options.clients,
                after=start.after,
            )
            console = self.console or Console(stderr=True)
            with stage_progress(self.spark, console, "migrating", enabled=self.console is not None):
                answers = frame.mapInArrow(job.arrow, RESULT_SCHEMA).collect()
        except SparkError:
            raise
        except Exception as exc:  # Py4J / PySpark errors: one line, no Java stack trace
            raise SparkError(f"the Spark migration failed: {spark_error_line(exc)}") from exc
        results: list[PartitionResult] = [pickle.loads(row["result"]) for row in answers]
        return sorted(results, key=lambda result: result.index)

    def _redis(self) -> RedisWriter:
        options = self.options
        return RedisWriter(
            options.redis_url, cluster=options.cluster, key_prefix=options.key_prefix
        )

    async def _before(self) -> _Start | None:
        """Step 1; None when there is nothing to do (finished, or refused)."""
        options, report = self.options, self.report
        async with PgSource(options.pg_url) as source, self._redis() as redis:
            key = checkpoint_key(options.key_prefix, source.identity(), options.clients)
            after: dict[int, str] = {}
            if options.resume:
                finished = await redis.load_checkpoint(key)
                if finished is not None and finished.finished:
                    report.already_finished = report.finished = True
                    return None
                if options.sessions_db is None:
                    after = await self._partition_checkpoints(redis, key)
                if after:
                    report.resumed_after = (
                        f"partition checkpoints ({len(after)} of {self.partitions} partitions)"
                    )
            async with source.snapshot():
                if await refuse_conflicts(source, redis, options, report, NoProgress()):
                    return None
        return _Start(key, after)

    async def _partition_checkpoints(self, redis: RedisWriter, key: str) -> dict[int, str]:
        after = {}
        for index in range(self.partitions):
            found = await redis.load_checkpoint(
                partition_checkpoint_key(key, self.partitions, index)
            )
            if found is not None and found.client_id is not None:
                after[index] = found.client_id
        return after

    async def _after(self, start: _Start, present: Sequence[str]) -> None:
        """Step 3: session records, the finished checkpoint, --verify."""
        options, report = self.options, self.report
        if options.sessions_db is not None and not options.dry_run:
            sessions = SessionRecords(
                options.sessions_db, session_expiry_interval=options.session_expiry_interval
            )
            await sessions.open()
            try:
                for first in range(0, len(present), SESSION_CHUNK):
                    await sessions.ensure(present[first : first + SESSION_CHUNK])
            finally:
                report.sessions_written = sessions.written
                report.sessions_kept = sessions.kept
                await sessions.close()
        if not options.dry_run or options.verify:
            async with self._redis() as redis:
                if not options.dry_run:
                    await redis.save_checkpoint(
                        start.checkpoint,
                        Checkpoint(SESSIONS_PHASE, None, finished=True, run_id=report.run_id),
                    )
                if options.verify and not (report.refused and not options.dry_run):
                    async with PgSource(options.pg_url, fetch_size=options.batch_size) as source:
                        verifier = Verifier(
                            source,
                            redis,
                            Planner(options.limit, options.default_ttl),
                            pattern=options.clients,
                            rows_read=_ignore,
                        )
                        report.verify = await verifier.run()


def _ignore(_count: int) -> None:
    pass
