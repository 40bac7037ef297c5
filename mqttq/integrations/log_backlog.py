"""`LogBacklog`: the `Backlog` a worker drains from an integration's `IntegrationLog`.

Records are taken from the log's memory (`recent`) while the worker keeps up, and read from
its segments after a restart or once the worker fell behind what memory holds. A batch
settled commits the log's position past it (and past the records taken with it that were
not delivered: expired, or refused by the payload filter). A new `LogBacklog` over the same
log starts at the committed position: what was taken and not settled is taken again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from mqttq.integrations.append_log import READ_BYTES, IntegrationLog, LogRecord
from mqttq.integrations.record import Delivery, delivery_of
from mqttq.integrations.spec import IntegrationSpec

__all__ = ["LogBacklog"]


class LogBacklog:
    """See the module docstring. `seq` of a delivery is its record's position in the log."""

    def __init__(self, log: IntegrationLog, spec: IntegrationSpec) -> None:
        self.log = log
        self.spec = spec
        self.skipped = 0
        """Records the payload filter refused (taken, never delivered)."""
        self.position = log.committed
        """The next record to take."""
        self._ends: dict[int, tuple[int, int]] = {}
        """Last seq of a batch taken -> (position after it, records it covered)."""
        self._uncommitted = 0
        """Records taken without a delivery since the last batch (covered by the next)."""

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        log = self.log
        while True:
            while self.position >= log.durable:
                log.grown.clear()
                await log.grown.wait()
            records = self._records(max_items)
            if len(records) < max_items and linger > 0:
                await asyncio.sleep(linger)
                records.extend(self._records(max_items - len(records)))
            batch = self._deliveries(records)
            if batch:
                self._ends[batch[-1].seq] = (self.position, self._uncommitted)
                self._uncommitted = 0
                return batch
            if not self._ends and self._uncommitted:
                log.commit(self.position, self._uncommitted)
                self._uncommitted = 0

    def _records(self, wanted: int) -> list[LogRecord]:
        """Up to `wanted` records from `position`: from the file up to where memory begins,
        then from memory (a worker catching up crosses over within one batch, without
        waiting for a linger between the two)."""
        log = self.log
        log.forget_recent(self.position)
        recent = log.recent
        out: list[LogRecord] = []
        while len(out) < wanted and self.position < log.durable:
            if recent and recent[0][0] == self.position:
                taken = log.take_recent(wanted - len(out))
                self.position = taken[-1][1]
                if not out:
                    return taken
                out.extend(taken)
                break
            memory_from = recent[0][0] if recent else log.durable
            if memory_from <= self.position:
                break  # not reached: memory never starts before `position` once forgotten
            records, after = log.read(self.position, READ_BYTES, most=wanted - len(out))
            take = [r for r in records[: wanted - len(out)] if r[0] < memory_from]
            out.extend(take)
            if len(take) == len(records):
                self.position = min(after, memory_from) if records else after
            else:
                self.position = take[-1][1]
        return out

    def _deliveries(self, records: list[LogRecord]) -> list[Delivery]:
        now = time.time()
        keep = self.spec.payload_filter
        tenant = self.spec.tenant
        batch: list[Delivery] = []
        for start, _end, message in records:
            if message.expires_at is not None and message.is_expired(now):
                self.log.dropped += 1  # [MQTT-3.3.2-5]: never delivered once expired
                self._uncommitted += 1
                continue
            if keep is not None and not keep.matches(message.payload):
                self.skipped += 1
                self._uncommitted += 1
                continue
            self._uncommitted += 1
            batch.append(delivery_of(message, tenant, start, now))
        return batch

    async def settle(self, batch: Sequence[Delivery]) -> None:
        """Commit the log's position past `batch` (the oldest batch taken)."""
        if not batch:
            return
        done = self._ends.pop(batch[-1].seq, None)
        if done is not None:
            self.log.commit(*done)

    def lag(self) -> int:
        """Records durable and not committed."""
        return self.log.records

    def dropped(self) -> int:
        return self.log.dropped
