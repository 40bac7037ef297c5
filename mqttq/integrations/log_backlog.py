"""`LogBacklog`: the `Backlog` a worker drains from an integration's `IntegrationLog`.

Records are taken from the log's memory (`recent`) while the worker keeps up, and read from
its segments after a restart or once the worker fell behind what memory holds. A batch
settled commits the log's position past it (and past the records taken with it that were
not delivered: expired, or refused by the payload filter). A new `LogBacklog` over the same
log starts at the committed position: what was taken and not settled is taken again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Final

from mqttq.errors import StorageError
from mqttq.integrations.append_log import READ_BYTES, IntegrationLog
from mqttq.integrations.log_records import decode_body, decode_plain
from mqttq.integrations.record import Delivery, delivery_of, plain_delivery
from mqttq.integrations.spec import IntegrationSpec
from mqttq.model import Message

__all__ = ["LogBacklog"]

log = logging.getLogger(__name__)

_READ_SLACK: Final = 16 << 10
"""Bytes read past a batch's expected size (records vary in size)."""

_Taken = tuple[int, int, Message | bytes]
"""A record taken: (start, end, its message from memory or its body read from the file)."""


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
        self._record_bytes = 512
        """The size of the records last read from the file (on average), to read a batch's
        worth at a time."""

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

    def _records(self, wanted: int) -> list[_Taken]:
        """Up to `wanted` records from `position`: from the file up to where memory begins,
        then from memory (a worker catching up crosses over within one batch, without
        waiting for a linger between the two). From the file their bodies, not decoded."""
        log = self.log
        log.forget_recent(self.position)
        recent = log.recent
        out: list[_Taken] = []
        while len(out) < wanted and self.position < log.durable:
            if recent and recent[0][0] == self.position:
                taken = log.take_recent(wanted - len(out))
                self.position = taken[-1][1]
                out.extend(taken)
                break
            memory_from = recent[0][0] if recent else log.durable
            if memory_from <= self.position:
                break  # not reached: memory never starts before `position` once forgotten
            most = wanted - len(out)
            # About what `most` records take (a batch's worth, not READ_BYTES each time: a
            # read that falls short is followed by another in this loop).
            limit = min(READ_BYTES, most * self._record_bytes + _READ_SLACK)
            records, after = log.read_bodies(self.position, limit, most=most)
            if records:
                self._record_bytes = max(1, (records[-1][1] - records[0][0]) // len(records))
            take = [r for r in records[: wanted - len(out)] if r[0] < memory_from]
            out.extend(take)
            if len(take) == len(records):
                self.position = min(after, memory_from) if records else after
            else:
                self.position = take[-1][1]
        return out

    def _deliveries(self, records: list[_Taken]) -> list[Delivery]:
        """The deliveries of `records`, but for those expired or the payload filter refuses
        (counted). A record without MQTT 5 properties nor expiry (most) becomes its
        `Delivery` here (`plain_delivery`, as `delivery_of` would make it: a test holds the
        two together), without a `Message` when it was read from the file."""
        now = time.time()
        keep = self.spec.payload_filter
        tenant = self.spec.tenant
        batch: list[Delivery] = []
        for start, _end, item in records:
            self._uncommitted += 1
            if isinstance(item, Message):
                message = item
                # Without properties nor expiry, as `decode_plain` finds a record in the file.
                if message.expires_at is None and message.properties.empty_for_publish():
                    if keep is not None and not keep.matches(message.payload):
                        self.skipped += 1
                        continue
                    batch.append(
                        plain_delivery(
                            message.topic,
                            message.payload,
                            message.qos,
                            message.retain,
                            message.publisher_id,
                            tenant,
                            message.created_at,
                            start,
                        )
                    )
                    continue
            else:
                plain = decode_plain(item)
                if plain is not None and plain[5] is None:
                    topic, payload, qos, retain, created, _, publisher = plain
                    if keep is not None and not keep.matches(payload):
                        self.skipped += 1
                        continue
                    batch.append(
                        plain_delivery(
                            topic, payload, qos, retain, publisher, tenant, created, start
                        )
                    )
                    continue
                try:
                    _, message = decode_body(item)
                except StorageError as exc:
                    log.warning(
                        "integration log %s: record at %d: %s", self.log.directory, start, exc
                    )
                    self.log.dropped += 1
                    continue
            if message.expires_at is not None and message.is_expired(now):
                self.log.dropped += 1  # [MQTT-3.3.2-5]: never delivered once expired
                continue
            if keep is not None and not keep.matches(message.payload):
                self.skipped += 1
                continue
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
