"""Planned clients -> Redis in batches, settled in order (both engines write through here).

`BatchWriter` is step 3 of `runner`'s run: clients are batched to about --batch-size
messages, each batch is one pipeline of one atomic script call per client (`redis_writer`),
up to `WINDOW` batches are in flight while the next clients are planned, and batches settle
in order: counts into the report, session records for the clients now present, and the
checkpoint past the batch's last client. A Spark partition runs one `BatchWriter` of its own
(`mqttq.spark.migrate_job`), with a checkpoint per partition.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from mqttq.migrate.options import MigrationOptions
from mqttq.migrate.plan import ClientPlan
from mqttq.migrate.redis_writer import OnConflict, RedisClientState, RedisWriter, WriteStatus
from mqttq.migrate.report import MigrationReport
from mqttq.migrate.state import MESSAGES_PHASE, Checkpoint

WINDOW: Final = 2
"""Batches written to Redis while the next one is read and planned."""

AfterBatch = Callable[[MigrationReport], None]
"""Called once a batch is in Redis, before its session records and checkpoint are written
(tests use it to simulate a crash at the worst moment)."""


class SessionSink(Protocol):
    """Where the ids of clients now present in Redis go (the broker's session records)."""

    async def ensure(self, client_ids: Sequence[str]) -> None: ...


class BatchWriter:
    """Plans -> Redis in batches of about `options.batch_size` messages, settled in order.

    Up to `WINDOW` batches are in flight while the caller plans the next clients. When a
    batch settles, its counts go into `report`, its present clients to `sessions`, and the
    checkpoint at `checkpoint` moves past its last client. Rejected plans are counted (and
    given to `rejected`) and never written.
    """

    def __init__(
        self,
        options: MigrationOptions,
        redis: RedisWriter,
        *,
        report: MigrationReport,
        sessions: SessionSink | None,
        checkpoint: str,
        after_batch: AfterBatch | None,
        rejected: Callable[[ClientPlan], None] | None = None,
    ) -> None:
        self.options = options
        self.redis = redis
        self.report = report
        self.sessions = sessions
        self.checkpoint = checkpoint
        self.after_batch = after_batch
        self.rejected = rejected
        self.phase = MESSAGES_PHASE
        self.batch: list[ClientPlan] = []
        self.batch_size = 0
        self._in_flight: deque[
            tuple[asyncio.Task[list[tuple[WriteStatus, int]]] | None, list[ClientPlan], str]
        ] = deque()

    async def add(self, plan: ClientPlan) -> None:
        """Count `plan` and batch it; a full batch goes to Redis."""
        report = self.report
        report.clients_seen += 1
        report.messages_expired += plan.expired
        report.messages_trimmed += plan.trimmed
        self.batch.append(plan)
        self.batch_size += plan.count + 1
        if self.batch_size >= self.options.batch_size:
            await self.flush()

    async def flush(self) -> None:
        """Send what is batched (without waiting for it unless the window is full)."""
        batch, self.batch, self.batch_size = self.batch, [], 0
        if not batch:
            return
        to_write = []
        for plan in batch:
            if plan.rejected:
                self.report.add_problems(plan.problems)
                self.report.messages_not_written += plan.count
                if self.rejected is not None:
                    self.rejected(plan)
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
