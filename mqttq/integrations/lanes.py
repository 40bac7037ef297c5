"""Delivery in lanes: a worker keeps up to `lanes` sends in flight at once, each publisher's
deliveries in one lane, so that a sink whose sends travel on separate connections (HTTP)
still sees each publisher's messages in order.

Why: under load each turn of the broker's event loop is long, and one send costs a few
turns (the request out, the answer in); one send at a time bounds the delivered rate by the
loop, not by the CPU. Lanes run side by side and a lane sends its next batch as soon as its
last one was accepted, without waiting for the others.

The promises of `IntegrationWorker` hold:
- at least once: a batch taken from the backlog is settled only once every delivery of it
  was accepted by the sink (or refused for good and dead-lettered), and batches are settled
  in the order taken, so the committed position never passes a delivery not yet accepted;
- in order per publisher: a publisher stays in its lane while the lane holds any of its
  deliveries, and a lane sends one batch at a time, in the backlog's order;
- a lane the sink fails is retried with the worker's backoff while the others go on (their
  publishers are others); at most `max_in_flight` deliveries are taken and not settled.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected

if TYPE_CHECKING:
    from mqttq.integrations.worker import IntegrationWorker

__all__ = ["run_in_lanes"]


@dataclass(slots=True, eq=False)
class _Taken:
    """One batch as the backlog handed it out: settled once `waiting` reached 0."""

    batch: Sequence[Delivery]
    waiting: int
    """Its deliveries not yet accepted (nor refused for good)."""
    rejected: list[Rejected] = field(default_factory=list)


_Run = tuple[_Taken, list[Delivery]]
"""Deliveries of one taken batch, queued on one lane, in the backlog's order."""


@dataclass(slots=True, eq=False)
class _Lane:
    """What one lane has to send: runs of deliveries, each of one taken batch."""

    queue: deque[_Run] = field(default_factory=deque)
    queued: int = 0
    """Deliveries in `queue` and in the send in progress."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)


async def run_in_lanes(worker: IntegrationWorker, lanes: int) -> None:
    """Deliver `worker`'s backlog in up to `lanes` lanes until cancelled (module docstring)."""
    await _Lanes(worker, lanes).run()


class _Lanes:
    def __init__(self, worker: IntegrationWorker, lanes: int) -> None:
        self.worker = worker
        self.size = worker.delivery.batch_size
        self.room = max(worker.delivery.max_in_flight, self.size)
        self.lanes = [_Lane() for _ in range(lanes)]
        self.lane_of: dict[str, int] = {}
        """Publisher -> its lane; forgotten whenever every lane is empty."""
        self.unsettled: deque[_Taken] = deque()
        self.in_flight = 0
        """Deliveries taken and not settled."""
        self.room_freed = asyncio.Event()
        self.idle = asyncio.Event()
        """Set when no lane holds anything (sent and not accepted, or queued)."""
        self.settling = asyncio.Lock()

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tasks:
                for lane in self.lanes:
                    tasks.create_task(self._send(lane))
                tasks.create_task(self._take())
        except BaseExceptionGroup as group:  # the others were cancelled: the first failure
            raise group.exceptions[0] from None

    async def _take(self) -> None:
        worker = self.worker
        size = self.size
        linger = worker.delivery.linger_ms / 1000
        most = size * len(self.lanes)
        while True:
            await worker._running.wait()
            if worker._phase == "starting":
                worker._phase = "running"
            while self.room - self.in_flight < size:
                self.room_freed.clear()
                await self.room_freed.wait()
            batch = await worker.backlog.take(min(most, self.room - self.in_flight), linger)
            await worker._running.wait()  # paused while waiting: what was taken waits too
            if not batch:
                continue
            taken = _Taken(batch, len(batch))
            self.unsettled.append(taken)
            self.in_flight += len(batch)
            if len(batch) <= size:
                # One send's worth: the worker keeps up. It goes alone once the sends out
                # were accepted, so that a worker keeping up sends in the backlog's order.
                while any(lane.queued for lane in self.lanes):
                    self.idle.clear()
                    await self.idle.wait()
            self._share(taken)

    def _share(self, taken: _Taken) -> None:
        """Queue `taken`'s deliveries on the lanes of their publishers. A publisher new to
        the lanes goes to the one with the fewest queued among as many lanes as the batch
        fills sends (600 deliveries in sends of 500: two), so that a worker a little behind
        sends two full requests, not four small ones (each request costs the loop the same
        whatever its size). When every lane is empty and it fits one send, all of it on
        the first lane."""
        lanes = self.lanes
        lane_of = self.lane_of
        size = self.size
        if not any(lane.queued for lane in lanes):
            lane_of.clear()
            if len(taken.batch) <= size:  # one send: no need to split it
                for delivery in taken.batch:  # its publishers stay in lane 0 while it holds them
                    lane_of[delivery.client_id] = 0
                self._queue(lanes[0], taken, list(taken.batch))
                return
        used = min(len(lanes), (len(taken.batch) + size - 1) // size)
        parts: list[list[Delivery]] = [[] for _ in lanes]
        for delivery in taken.batch:
            publisher = delivery.client_id
            index = lane_of.get(publisher)
            if index is None:
                index = 0
                least = lanes[0].queued + len(parts[0])
                for other in range(1, used):
                    load = lanes[other].queued + len(parts[other])
                    if load < least:
                        index, least = other, load
                lane_of[publisher] = index
            parts[index].append(delivery)
        for lane, part in zip(lanes, parts, strict=True):
            if part:
                self._queue(lane, taken, part)

    @staticmethod
    def _queue(lane: _Lane, taken: _Taken, part: list[Delivery]) -> None:
        lane.queue.append((taken, part))
        lane.queued += len(part)
        lane.ready.set()

    async def _send(self, lane: _Lane) -> None:
        worker = self.worker
        while True:
            while not lane.queue:
                lane.ready.clear()
                await lane.ready.wait()
            await worker._running.wait()
            runs, batch = self._next_batch(lane)
            rejected = await worker._send_until_taken(batch)
            if rejected:
                self._blame(runs, rejected)
            for taken, part in runs:
                taken.waiting -= len(part)
            lane.queued -= len(batch)
            if not any(other.queued for other in self.lanes):
                self.idle.set()
            await self._settle()

    def _next_batch(self, lane: _Lane) -> tuple[list[_Run], list[Delivery]]:
        """The lane's oldest deliveries, at most `batch_size`, and the runs they come from."""
        runs: list[_Run] = []
        batch: list[Delivery] = []
        queue = lane.queue
        while queue and len(batch) < self.size:
            taken, part = queue[0]
            room = self.size - len(batch)
            if len(part) > room:
                queue[0] = (taken, part[room:])
                part = part[:room]
            else:
                queue.popleft()
            runs.append((taken, part))
            batch.extend(part)
        return runs, batch

    @staticmethod
    def _blame(runs: list[_Run], rejected: Sequence[Rejected]) -> None:
        """Each refused delivery to the taken batch it came from (dead-lettered at its
        settling, in the order taken)."""
        owner = {id(delivery): taken for taken, part in runs for delivery in part}
        for item in rejected:
            owner.get(id(item.delivery), runs[0][0]).rejected.append(item)

    async def _settle(self) -> None:
        """Settle the oldest taken batches whose deliveries were all accepted, in order."""
        async with self.settling:
            unsettled = self.unsettled
            while unsettled and unsettled[0].waiting == 0:
                taken = unsettled.popleft()
                await self.worker._accepted(taken.batch, taken.rejected)
                self.in_flight -= len(taken.batch)
                self.room_freed.set()
