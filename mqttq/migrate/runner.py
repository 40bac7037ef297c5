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

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from mqttq.codec.enums import SESSION_EXPIRY_NEVER
from mqttq.migrate.errors import MigrateError
from mqttq.migrate.plan import ClientPlan, Planner
from mqttq.migrate.redis_writer import OnConflict, RedisClientState, RedisWriter, WriteStatus
from mqttq.migrate.report import MigrationReport
from mqttq.migrate.sessions import SessionRecords
from mqttq.migrate.source import PgSource
from mqttq.migrate.state import MESSAGES_PHASE, SESSIONS_PHASE, Checkpoint, checkpoint_key
from mqttq.migrate.stream import plans_with_messages, plans_without_messages
from mqttq.migrate.validate import MAX_PACKET_ID
from mqttq.migrate.verify import Verifier

DEFAULT_LIMIT: Final = 10_000
"""TBMQ's and mqttq's default per-client queue limit (mqtt.max_queued_messages)."""
DEFAULT_TTL: Final = 604_800
"""Seconds a message without an expiry interval lives (TBMQ's default, 7 days)."""
DEFAULT_BATCH_SIZE: Final = 10_000
WINDOW: Final = 2
"""Batches written to Redis while the next one is read and planned."""
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


AfterBatch = Callable[[MigrationReport], None]
"""Called once a batch is in Redis, before its session records and checkpoint are written
(tests use it to simulate a crash at the worst moment)."""


@dataclass(frozen=True, slots=True)
class MigrationOptions:
    """Everything `mqttq migrate pg-to-redis` can be told."""

    pg_url: str
    redis_url: str
    cluster: bool = False
    key_prefix: str = ""
    limit: int = DEFAULT_LIMIT
    default_ttl: int = DEFAULT_TTL
    clients: str | None = None
    """SQL LIKE pattern on client ids (`%` any run, `_` one character, `\\` escapes)."""
    batch_size: int = DEFAULT_BATCH_SIZE
    on_conflict: OnConflict = OnConflict.FAIL
    dry_run: bool = False
    verify: bool = False
    resume: bool = False
    sessions_db: Path | None = None
    """The broker's SQLite file to add session records to (None: none)."""
    session_expiry_interval: int = SESSION_EXPIRY_NEVER

    def check(self) -> None:
        """ValueError naming the option that is out of range."""
        if not 1 <= self.limit <= MAX_PACKET_ID:
            raise ValueError(
                f"--limit {self.limit}: the persisted messages limit must be 1..65535 "
                "(one queue holds each MQTT packet id at most once)"
            )
        if self.default_ttl < 1:
            raise ValueError(f"--default-ttl {self.default_ttl}: must be at least 1 second")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size {self.batch_size}: must be at least 1")
        if not 0 <= self.session_expiry_interval <= SESSION_EXPIRY_NEVER:
            raise ValueError(
                f"--session-expiry {self.session_expiry_interval}: must be 0..4294967295"
            )


class _Writer:
    """Batches of plans -> Redis, settled in order (see the module docstring, step 3)."""

    def __init__(
        self,
        options: MigrationOptions,
        redis: RedisWriter,
        *,
        report: MigrationReport,
        sessions: SessionRecords | None,
        checkpoint: str,
        after_batch: AfterBatch | None,
    ) -> None:
        self.options = options
        self.redis = redis
        self.report = report
        self.sessions = sessions
        self.checkpoint = checkpoint
        self.after_batch = after_batch
        self.phase = MESSAGES_PHASE
        self.batch: list[ClientPlan] = []
        self.batch_size = 0
        self._in_flight: deque[
            tuple[asyncio.Task[list[tuple[WriteStatus, int]]] | None, list[ClientPlan], str]
        ] = deque()

    async def add(self, plan: ClientPlan) -> None:
        report = self.report
        report.clients_seen += 1
        report.messages_expired += plan.expired
        report.messages_trimmed += plan.trimmed
        self.batch.append(plan)
        self.batch_size += plan.count + 1
        if self.batch_size >= self.options.batch_size:
            await self.flush()

    async def flush(self) -> None:
        batch, self.batch, self.batch_size = self.batch, [], 0
        if not batch:
            return
        to_write = []
        for plan in batch:
            if plan.rejected:
                self.report.add_problems(plan.problems)
                self.report.messages_not_written += plan.count
            else:
                to_write.append(plan)
        task = None
        if to_write:
            if self.options.dry_run:
                task = asyncio.ensure_future(self._dry_run(to_write))
            else:
                task = asyncio.ensure_future(
                    self.redis.write(to_write, self.options.on_conflict, self.report.run_id)
                )
        self._in_flight.append((task, to_write, batch[-1].client_id))
        while len(self._in_flight) > WINDOW:
            await self._settle()

    async def _dry_run(self, plans: list[ClientPlan]) -> list[tuple[WriteStatus, int]]:
        """What the write script would answer, from what Redis holds now."""
        states = await self.redis.read([p.client_id for p in plans], entries=False)
        return [(self._would(state), plan.count) for plan, state in zip(plans, states, strict=True)]

    def _would(self, state: RedisClientState) -> WriteStatus:
        if state.marker is not None:
            return WriteStatus.ALREADY
        if not state.existing:
            return WriteStatus.MIGRATED
        return {
            OnConflict.FAIL: WriteStatus.CONFLICT,
            OnConflict.SKIP: WriteStatus.SKIPPED,
            OnConflict.REPLACE: WriteStatus.REPLACED,
        }[self.options.on_conflict]

    async def _settle(self) -> None:
        task, plans, last_client = self._in_flight.popleft()
        results = [] if task is None else await task
        report = self.report
        present = []
        for plan, (status, written) in zip(plans, results, strict=True):
            if status in (WriteStatus.MIGRATED, WriteStatus.REPLACED):
                report.clients_migrated += 1
                report.clients_replaced += status is WriteStatus.REPLACED
                report.messages_migrated += plan.count if self.options.dry_run else written
                present.append(plan.client_id)
            else:
                report.messages_not_written += plan.count
                if status is WriteStatus.ALREADY:
                    report.clients_already += 1
                    present.append(plan.client_id)
                elif status is WriteStatus.SKIPPED:
                    report.clients_skipped += 1
                else:
                    report.add_conflict(plan.client_id)
        if self.options.dry_run:
            return
        if self.after_batch is not None:
            self.after_batch(report)
        if self.sessions is not None and present:
            await self.sessions.ensure(present)
        await self.redis.save_checkpoint(
            self.checkpoint, Checkpoint(self.phase, last_client, run_id=report.run_id)
        )

    async def drain(self) -> None:
        """Write what is batched and wait for every batch to settle."""
        await self.flush()
        while self._in_flight:
            await self._settle()

    async def cancel(self) -> None:
        """Stop waiting for batches in flight (after a failure elsewhere)."""
        for task, _plans, _last in self._in_flight:
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *(t for t, _p, _l in self._in_flight if t is not None), return_exceptions=True
        )
        self._in_flight.clear()


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
        sessions = None
        if options.sessions_db is not None and not options.dry_run:
            sessions = SessionRecords(
                options.sessions_db, session_expiry_interval=options.session_expiry_interval
            )
            await sessions.open()
        writer = _Writer(
            options,
            redis,
            report=report,
            sessions=sessions,
            checkpoint=key,
            after_batch=self.after_batch,
        )
        try:
            async with source.snapshot():
                if await self._refuse_conflicts(source, redis):
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

    async def _refuse_conflicts(self, source: PgSource, redis: RedisWriter) -> bool:
        """With --on-conflict fail, before writing: True (and the report lists them) when
        any client id to migrate is held in Redis by a session no migration wrote."""
        options = self.options
        if options.dry_run or options.on_conflict is not OnConflict.FAIL:
            return False
        if await redis.is_empty():
            return False
        self.progress.begin("checking Redis for existing sessions", None)
        async with aclosing(source.client_ids(options.clients, None)) as batches:
            async for client_ids in batches:
                for start in range(0, len(client_ids), CHECK_CHUNK):
                    chunk = client_ids[start : start + CHECK_CHUNK]
                    for state in await redis.read(chunk, entries=False):
                        if state.marker is None and state.existing:
                            self.report.add_conflict(state.client_id)
                self.progress.advance(0, len(client_ids))
        if self.report.conflicts_total:
            self.report.refused = True
            self.report.conflicts.sort()
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
