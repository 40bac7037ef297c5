"""The message log port: where every PUBLISH goes before it is routed (distributed mode).

With `storage.log = "kafka"` the broker appends each accepted PUBLISH to the log and
acknowledges the publisher once the log confirmed it; it routes what it reads back from
the log, and marks each batch done once the deliveries it triggered are durable. An
adapter implements `MessageLog` (storage/kafka_log.py); only `cli serve` picks one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from mqttq.model import Message

__all__ = ["LogBatch", "MessageLog"]


@dataclass(slots=True)
class LogBatch:
    """Messages read from the log, in log order, and where the batch ends."""

    messages: list[tuple[str, Message]]
    """(tenant, message) pairs; records the adapter could not decode are left out."""
    position: object
    """Opaque to the broker: what `MessageLog.done` takes to mark this batch consumed."""


class MessageLog(Protocol):
    """A durable, ordered log of published messages (per publisher order is kept)."""

    async def open(self) -> None:
        """Connect, create what is missing (the topic), start reading. Raises
        StorageError when the log is unreachable."""

    def append(self, tenant: str, message: Message) -> asyncio.Future[Any]:
        """Append `message`; the future resolves once the log stored it durably and fails
        (StorageError) when it did not. Appends of one publisher keep their order."""

    async def read(self) -> LogBatch | None:
        """The next batch, or None when nothing came within a short wait."""

    def done(self, position: object) -> None:
        """Every batch up to `position` is processed: it will not be read again after a
        restart (committed soon after, several batches at once)."""

    def statistics(self) -> dict[str, int]:
        """Counters for /metrics: at least `log_consumer_lag` (records not yet read)."""

    async def close(self) -> None:
        """Commit what `done` marked, stop reading, deliver or fail pending appends."""
