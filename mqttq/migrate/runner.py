"""`pg-to-redis`: the whole run, from the options to the report.

1. Connect to both sides (one clear line if either cannot be reached).
2. With --on-conflict fail (the default) and a Redis that holds any key: list every client
   id that another session holds in Redis, and stop before writing anything if there is one.
3. Stream the clients (`stream`), plan each (`plan`), and write them in batches of about
   --batch-size messages: one pipeline of one atomic script call per client
   (`redis_writer`), up to `WINDOW` batches in flight while the next ones are read.
   Batches settle in order: their counts go into the report, session records into SQLite
   (--sessions-to), and the checkpoint moves past their last client (`state`).
4. Mark the checkpoint finished; with --verify, compare the two sides (`verify`).

A dry run reads, plans and checks everything (and asks Redis which clients it holds) but
writes nothing.
"""

from __future__ import annotations

import time
import uuid
from contextlib import aclosing
from typing import Final, Protocol

from mqttq.migrate.batches import AfterBatch, BatchWriter
from mqttq.migrate.errors import MigrateError
from mqttq.migrate.options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_LIMIT,
    DEFAULT_TTL,
    MigrationOptions,
)
from mqttq.migrate.plan import Planner
from mqttq.migrate.redis_writer import OnConflict, RedisWriter
from mqttq.migrate.rejects import RejectsFile
from mqttq.migrate.report import MigrationReport
from mqttq.migrate.sessions import SessionRecords
from mqttq.migrate.source import PgSource
from mqttq.migrate.state import MESSAGES_PHASE, SESSIONS_PHASE, Checkpoint, checkpoint_key
from mqttq.migrate.stream import plans_with_messages, plans_without_messages
from mqttq.migrate.verify import Verifier

CHECK_CHUNK: Final = 1000
"""Clients per pipeline in the conflict check."""


class ProgressSink(Protocol):
    """Where a run reports progress (a progress bar, or nothing)."""

    def begin(self, description: str, total_rows: int | None) -> None: ...

    def advance(self, rows: int, clients: int) -> None: ...


class NoProgress:
    """Progress reports that go nowhere."""

    def begin(self, description: str, total_rows: int | None) -> None:
        pass

    def advance(self, rows: int, clients: int) -> None:
        pass


class Migration:
    """One `pg-to-redis` run; `run()` returns its report (MigrateError when a side fails)."""

    def __init__(
        self,
        options: MigrationOptions,
        progress: ProgressSink | None = None,
        after_batch: AfterBatch | None = None,
    ) -> None:
        options.check()
        self.options = options
        self.progress: ProgressSink = progress or NoProgress()
        self.after_batch = after_batch
        self.planner = Planner(options.limit, options.default_ttl)
        self.report = MigrationReport(run_id=uuid.uuid4().hex[:12], dry_run=options.dry_run)

    async def run(self) -> MigrationReport:
        options = self.options
        started = time.monotonic()
        source = PgSource(options.pg_url, fetch_size=options.batch_size)
        redis = RedisWriter(
            options.redis_url, cluster=options.cluster, key_prefix=options.key_prefix
        )
        await source.open()
        try:
            await redis.open()
            try:
                await self._run(source, redis)
                self.report.elapsed_s = time.monotonic() - started
                if options.verify and not (self.report.refused and not options.dry_run):
                    self.progress.begin("verifying", await source.estimate_rows())
                    verifier = Verifier(
                        source,
                        redis,
                        self.planner,
                        pattern=options.clients,
                        rows_read=self._rows_verified,
                        clients_read=self._clients_verified,
                    )
                    self.report.verify = await verifier.run()
            finally:
                await redis.close()
        finally:
            await source.close()
        return self.report

    def _rows_read(self, rows: int) -> None:
        self.report.rows_read += rows
        self.progress.advance(rows, 0)

    def _rows_verified(self, rows: int) -> None:
        self.progress.advance(rows, 0)

    def _clients_verified(self, clients: int) -> None:
        self.progress.advance(0, clients)

    async def _run(self, source: PgSource, redis: RedisWriter) -> None:
        options, report = self.options, self.report
        key = checkpoint_key(options.key_prefix, source.identity(), options.clients)
        start: Checkpoint | None = None
        if options.resume:
            start = await redis.load_checkpoint(key)
            if start is not None and start.finished:
                report.already_finished = True
                report.finished = True
                return
            if start is not None and start.client_id is not None:
                report.resumed_after = f"{start.phase}:{start.client_id}"
        rejects = None
        if options.rejects_path is not None:
            rejects = RejectsFile(options.rejects_path)
            rejects.open()
        sessions = None
        if options.sessions_db is not None and not options.dry_run:
            sessions = SessionRecords(
                options.sessions_db, session_expiry_interval=options.session_expiry_interval
            )
            await sessions.open()
        writer = BatchWriter(
            options,
            redis,
            report=report,
            sessions=sessions,
            checkpoint=key,
            after_batch=self.after_batch,
            rejected=None if rejects is None else (lambda plan: rejects.add(plan.problems)),
        )
        try:
            async with source.snapshot():
                if await refuse_conflicts(source, redis, options, report, self.progress):
                    return
                total = None if options.clients or start else await source.estimate_rows()
                self.progress.begin("migrating", total)
                if start is None or start.phase == MESSAGES_PHASE:
                    after = None if start is None else start.client_id
                    with_messages = plans_with_messages(
                        source, self.planner, options.clients, after, rows_read=self._rows_read
                    )
                    async with aclosing(with_messages) as plans:
                        async for plan in plans:
                            await writer.add(plan)
                            self.progress.advance(0, 1)
                    await writer.drain()
                    after = None
                else:
                    after = start.client_id
                writer.phase = SESSIONS_PHASE
                without = plans_without_messages(source, self.planner, options.clients, after)
                async with aclosing(without) as plans:
                    async for plan in plans:
                        await writer.add(plan)
                        self.progress.advance(0, 1)
                await writer.drain()
        except BaseException:
            await writer.cancel()
            raise
        finally:
            if rejects is not None:
                rejects.close()
            if sessions is not None:
                report.sessions_written = sessions.written
                report.sessions_kept = sessions.kept
                await sessions.close()
        report.finished = True
        if options.dry_run and options.on_conflict is OnConflict.FAIL and report.conflicts_total:
            report.refused = True  # what the real run would do
        if not options.dry_run:
            await redis.save_checkpoint(
                key, Checkpoint(SESSIONS_PHASE, None, finished=True, run_id=report.run_id)
            )


async def refuse_conflicts(
    source: PgSource,
    redis: RedisWriter,
    options: MigrationOptions,
    report: MigrationReport,
    progress: ProgressSink,
) -> bool:
    """With --on-conflict fail, before writing: True (and `report` lists them) when any
    client id to migrate is held in Redis by a session no migration wrote."""
    if options.dry_run or options.on_conflict is not OnConflict.FAIL:
        return False
    if await redis.is_empty():
        return False
    progress.begin("checking Redis for existing sessions", None)
    async with aclosing(source.client_ids(options.clients, None)) as batches:
        async for client_ids in batches:
            for start in range(0, len(client_ids), CHECK_CHUNK):
                chunk = client_ids[start : start + CHECK_CHUNK]
                for state in await redis.read(chunk, entries=False):
                    if state.marker is None and state.existing:
                        report.add_conflict(state.client_id)
            progress.advance(0, len(client_ids))
    if report.conflicts_total:
        report.refused = True
        report.conflicts.sort()
        return True
    return False


async def migrate(
    options: MigrationOptions,
    progress: ProgressSink | None = None,
    after_batch: AfterBatch | None = None,
) -> MigrationReport:
    """Run `mqttq migrate pg-to-redis` with `options`; see `Migration`."""
    return await Migration(options, progress, after_batch).run()


async def init_source(pg_url: str) -> str:
    """Create TBMQ 1.x's tables (kept when present); the database's description."""
    async with PgSource(pg_url) as source:
        await source.create_tables()
        return source.describe()


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LIMIT",
    "DEFAULT_TTL",
    "MigrateError",
    "Migration",
    "MigrationOptions",
    "MigrationReport",
    "NoProgress",
    "OnConflict",
    "ProgressSink",
    "init_source",
    "migrate",
]
