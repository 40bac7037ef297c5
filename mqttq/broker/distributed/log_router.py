"""The broker's side of the message log: routing what it reads back (distributed mode).

`LogRouter` reads batches from the log, routes each message with the Hub as if it had just
been published (trie, retained messages, tenants, queue limits) and delivers it. A batch
is marked done in the log only once the stored deliveries it triggered are durable (their
enqueue futures settled) and the waiting deliveries were made, in batch order: a broker
killed in between reads the batch again after its restart, so nothing acknowledged to a
publisher is lost (delivery is at least once).

Reading and completing overlap: while batch N waits for its storage writes, batch N+1 is
already read and routed (at most MAX_BATCHES_AHEAD batches wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final

from mqttq.broker.delivery.hub import Fanout, Hub
from mqttq.errors import MqttqError
from mqttq.reasons import ReasonCode
from mqttq.storage.ports import LogBatch, MessageLog

__all__ = ["LogRouter"]

logger = logging.getLogger("mqttq.broker.log")

MAX_BATCHES_AHEAD: Final = 8
"""Batches routed but not yet completed, at most (bounds memory when storage is slow)."""
RETRY_PAUSE: Final = 1.0
"""Seconds between reads after the log failed to read."""

_Pending = tuple[list[Fanout], list["asyncio.Future[Any]"], object]


class LogRouter:
    """Reads `log` and routes every message through `hub` until `stop()`."""

    def __init__(self, hub: Hub, log: MessageLog) -> None:
        self.hub = hub
        self.log = log
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(MAX_BATCHES_AHEAD)
        self._tasks: list[asyncio.Task[None]] = []
        self._stalled = False
        """A storage write of a batch failed: nothing more is marked done (so the records
        are read again after a restart) and the operator is told."""

    def start(self) -> None:
        """Start reading and completing."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read_loop()), loop.create_task(self._complete_loop())]

    async def stop(self) -> None:
        """Stop reading; batches not completed yet are read again after a restart."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _read_loop(self) -> None:
        hub = self.hub
        log = self.log
        # The next read runs (on the log's thread) while this batch is routed.
        reading = asyncio.ensure_future(log.read())
        try:
            while True:
                try:
                    batch = await reading
                except MqttqError as exc:
                    logger.warning("message log read failed (retrying): %s", exc)
                    await asyncio.sleep(RETRY_PAUSE)
                    batch = None
                reading = asyncio.ensure_future(log.read())
                if batch is not None:
                    await self._route(hub, batch)
        finally:
            reading.cancel()

    async def _route(self, hub: Hub, batch: LogBatch) -> None:
        fans: list[Fanout] = []
        futures: list[asyncio.Future[Any]] = []
        for tenant, message in batch.messages:
            fan = hub.route_logged(tenant, message)
            if isinstance(fan, Fanout):
                fans.append(fan)
                # One wait for the whole batch, not a gather per message (the deliveries
                # to other nodes of a batch share one future).
                futures.extend(fan.waits())
        await self._queue.put((fans, futures, batch.position))

    async def _complete_loop(self) -> None:
        hub = self.hub
        while True:
            fans, futures, position = await self._queue.get()
            if futures:
                await asyncio.wait(futures)
            failed = False
            for fan in fans:
                failed |= hub.complete(fan) == ReasonCode.UNSPECIFIED_ERROR
            if failed and not self._stalled:
                self._stalled = True
                logger.error(
                    "a storage write for messages read from the log failed: the log "
                    "position is no longer committed, so they are read again after a restart"
                )
            if not self._stalled:
                self.log.done(position)
