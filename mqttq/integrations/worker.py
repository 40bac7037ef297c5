"""The worker: takes batches from an integration's backlog and gets them into its sink.

Delivery is at least once and in backlog order (per publisher, for a sink with lanes: see
`mqttq.integrations.lanes`). A batch is settled (removed from the backlog for good) only
after the sink accepted it or its refused deliveries went to the dead-letter place; while
the sink is unavailable the same batch is retried after a backoff that doubles up to a
ceiling, with full jitter, so a fleet of workers does not hammer a sink that comes back.
Every outcome is counted (`IntegrationStats`); nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mqttq.errors import ConfigError
from mqttq.integrations.lanes import run_in_lanes
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected, Sink, SinkRejected, SinkUnavailable
from mqttq.integrations.spec import DeliverySettings

log = logging.getLogger(__name__)

_timestamp_ms: Final = operator.attrgetter("timestamp_ms")

LATENCY_BUCKETS_S: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0)
"""Upper bounds of the delivery latency histogram (accepted at - accepted by the broker)."""


class Backlog(Protocol):
    """The durable queue of one integration (a persistent session's queue in SQLite, a
    Kafka consumer group, ...)."""

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        """Wait for at least one delivery, then up to `linger` seconds for more, and return
        at most `max_items` of the oldest not yet taken, in order."""
        ...

    async def settle(self, batch: Sequence[Delivery]) -> None:
        """`batch` (the oldest taken and not settled) is done: remove it for good."""
        ...

    def lag(self) -> int:
        """Deliveries waiting, taken or not (an estimate where the backlog is remote)."""
        ...

    def dropped(self) -> int:
        """Messages that left the backlog undelivered: expired before their turn, or
        pushed out by a full backlog (counted, never silent)."""
        ...


class DeadLetters(Protocol):
    """Where deliveries the sink refused for good go (see docs: `$integrations/<name>/dead`)."""

    async def put(self, integration: str, rejected: Sequence[Rejected]) -> None: ...


@dataclass(slots=True)
class IntegrationStats:
    """What one integration's worker did since the broker started."""

    delivered: int = 0
    """Deliveries the sink accepted."""
    failed: int = 0
    """Batches the sink did not take (each then retried)."""
    retried: int = 0
    """Deliveries sent again after a failed attempt."""
    dead_lettered: int = 0
    last_error: str = ""
    last_error_at: float = 0.0
    """Unix time of `last_error`; 0 when there was none."""
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    latency_sum: float = 0.0

    def observe_latency(self, seconds: float, count: int) -> None:
        for index, bound in enumerate(LATENCY_BUCKETS_S):
            if seconds <= bound:
                self.latency_counts[index] += count
                break
        else:
            self.latency_counts[-1] += count
        self.latency_sum += seconds * count


class Backoff:
    """Exponential backoff with full jitter: the n-th wait is uniform in
    [0, min(ceiling, initial * 2**n)] (AWS's "full jitter"), never below 1 ms."""

    def __init__(
        self, initial: float, ceiling: float, rand: Callable[[], float] = random.random
    ) -> None:
        self.initial = initial
        self.ceiling = ceiling
        self.rand = rand
        self.attempt = 0

    def next(self) -> float:
        cap = min(self.ceiling, self.initial * 2.0 ** min(self.attempt, 32))
        self.attempt += 1
        return max(0.001, cap * self.rand())

    def reset(self) -> None:
        self.attempt = 0


class IntegrationWorker:
    """Runs one integration: `run()` until cancelled; `pause()`/`resume()` between batches."""

    def __init__(
        self,
        name: str,
        sink: Sink,
        backlog: Backlog,
        dead_letters: DeadLetters,
        delivery: DeliverySettings,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] = asyncio.sleep,
    ) -> None:
        self.name = name
        self.sink = sink
        self.backlog = backlog
        self.dead_letters = dead_letters
        self.delivery = delivery
        self.stats = IntegrationStats()
        self._phase = "starting"
        self._clock = clock
        self._sleep = sleep
        self._running = asyncio.Event()
        self._running.set()
        self._backoff = Backoff(delivery.retry_initial_ms / 1000, delivery.retry_max_ms / 1000)

    @property
    def state(self) -> str:
        """starting, running, retrying (the sink is unavailable), paused, failed (the
        sink cannot work as configured: see `stats.last_error`) or stopped."""
        if not self._running.is_set() and self._phase not in ("failed", "stopped"):
            return "paused"
        return self._phase

    def pause(self) -> None:
        """Send nothing after the batch in progress (the backlog keeps filling)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    async def run(self) -> None:
        """Deliver until cancelled. The sink is closed on the way out.

        A sink that cannot work as configured (an unset `${NAME}`, an unreadable CA file)
        ends the run with state "failed" and the reason in `stats.last_error`; the backlog
        keeps what arrives until the integration is changed or resumed.
        """
        try:
            try:
                await self._open()
            except ConfigError as exc:
                self._error(str(exc))
                log.error("integration %s: cannot start: %s", self.name, exc)
                self._phase = "failed"
                return
            depth = self.batches_in_flight
            lanes = self.lanes
            if depth > 1:
                await self._run_pipelined(depth)  # until cancelled
            elif lanes > 1:
                await run_in_lanes(self, lanes)  # until cancelled
            else:
                await self._run_one_at_a_time()  # until cancelled
        finally:
            if self._phase != "failed":
                self._phase = "stopped"
            await self.sink.close()

    async def _run_one_at_a_time(self) -> None:
        """Take a batch, deliver it (retrying until the sink takes it), settle it; again."""
        while True:
            await self._running.wait()
            if self._phase == "starting":
                self._phase = "running"
            batch = await self.backlog.take(
                self.delivery.batch_size, self.delivery.linger_ms / 1000
            )
            await self._running.wait()  # paused while waiting: the batch waits too
            if batch:
                await self._deliver(batch)

    @property
    def lanes(self) -> int:
        """Sends in flight at once, each with its own publishers (`mqttq.integrations.lanes`):
        the sink's `lanes` (1 when it has none: one `send` at a time), at most
        `max_in_flight // batch_size`."""
        wanted = getattr(self.sink, "lanes", 1)
        fits = self.delivery.max_in_flight // max(1, self.delivery.batch_size)
        return max(1, min(int(wanted), fits))

    @property
    def batches_in_flight(self) -> int:
        """Batches taken and not yet settled at once: the sink's `batches_in_flight` (1
        when it has none: one `send` at a time), within `max_in_flight` deliveries."""
        wanted = getattr(self.sink, "batches_in_flight", 1)
        fits = self.delivery.max_in_flight // max(1, self.delivery.batch_size)
        return max(1, min(int(wanted), fits))

    async def _run_pipelined(self, depth: int) -> None:
        """Deliver with up to `depth` batches taken and not settled: the next batch is
        taken and sent while the sink still confirms the earlier ones (a Kafka producer
        writes them in order, as one larger batch).

        Batches are settled strictly in the order taken, each only once it and every
        batch before it were accepted. When a batch fails (`SinkUnavailable`), the batches
        sent after it are waited for and their outcome ignored; then it and they are sent
        again, one at a time and in order, with the usual backoff: a delivery the sink
        may have written after the failed one is written again after it (at least once,
        each publisher's order kept), and nothing past the failure is settled before it.
        """
        sending: deque[tuple[Sequence[Delivery], asyncio.Future[Sequence[Rejected]]]] = deque()
        taking: asyncio.Future[Sequence[Delivery]] | None = None
        ready: Sequence[Delivery] | None = None
        try:
            while True:
                while sending and sending[0][1].done():
                    await self._finish_oldest(sending)
                running = self._running.is_set()
                if running and self._phase == "starting":
                    self._phase = "running"
                if ready is not None and running:
                    sending.append((ready, asyncio.ensure_future(self.sink.send(ready))))
                    ready = None
                if taking is None and ready is None and running and len(sending) < depth:
                    taking = asyncio.ensure_future(
                        self.backlog.take(self.delivery.batch_size, self.delivery.linger_ms / 1000)
                    )
                waits: set[asyncio.Future[Any]] = set()
                if taking is not None:
                    waits.add(taking)
                if sending:
                    waits.add(sending[0][1])
                if not waits:  # paused, nothing in flight: the batch taken waits too
                    await self._running.wait()
                    continue
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if taking is not None and taking.done():
                    batch = taking.result()
                    taking = None
                    if batch:
                        ready = batch
        finally:
            left: list[asyncio.Future[Any]] = [future for _, future in sending]
            if taking is not None:
                left.append(taking)
            for future in left:
                future.cancel()
            if left:
                await asyncio.wait(left)
                for future in left:
                    if not future.cancelled():
                        future.exception()  # retrieved: the run is ending anyway

    async def _finish_oldest(
        self, sending: deque[tuple[Sequence[Delivery], asyncio.Future[Sequence[Rejected]]]]
    ) -> None:
        """Settle the oldest batch sent (done), or send it and every later one again."""
        batch, future = sending.popleft()
        try:
            rejected: Sequence[Rejected] = future.result()
        except SinkRejected as exc:
            rejected = [Rejected(delivery, str(exc)) for delivery in batch]
        except SinkUnavailable as exc:
            later = list(sending)
            sending.clear()
            if later:
                await asyncio.wait([pending for _, pending in later])
            for _, pending in later:
                if not pending.cancelled() and isinstance(pending.exception(), SinkUnavailable):
                    self.stats.failed += 1
            await self._failed(str(exc))
            await self._deliver(batch, sent_before=True)
            for again, _ in later:
                await self._deliver(again, sent_before=True)
            return
        await self._accepted(batch, rejected)

    async def _open(self) -> None:
        while True:
            try:
                await self.sink.open()
            except SinkUnavailable as exc:
                await self._failed(str(exc))
                continue
            self._backoff.reset()
            return

    async def _deliver(self, batch: Sequence[Delivery], *, sent_before: bool = False) -> None:
        """Send `batch` until the sink takes it (retrying with backoff), then settle it.
        `sent_before`: an earlier attempt failed (the first one here counts as a retry)."""
        rejected = await self._send_until_taken(batch, sent_before=sent_before)
        await self._accepted(batch, rejected)

    async def _send_until_taken(
        self, batch: Sequence[Delivery], *, sent_before: bool = False
    ) -> Sequence[Rejected]:
        """Send `batch` until the sink takes it (retrying with backoff); what it refused."""
        attempts = 1 if sent_before else 0
        while True:
            attempts += 1
            if attempts > 1:
                self.stats.retried += len(batch)
            try:
                rejected: Sequence[Rejected] = await self.sink.send(batch)
            except SinkUnavailable as exc:
                await self._failed(str(exc))
                continue
            except SinkRejected as exc:
                rejected = [Rejected(delivery, str(exc)) for delivery in batch]
            return rejected

    async def _accepted(self, batch: Sequence[Delivery], rejected: Sequence[Rejected]) -> None:
        """The sink took `batch` except `rejected`: dead-letter those, count, settle."""
        self._backoff.reset()
        if self._phase == "retrying":
            log.warning("integration %s: sink available again", self.name)
        self._phase = "running"
        if rejected:
            await self.dead_letters.put(self.name, rejected)
            self.stats.dead_lettered += len(rejected)
            self._error(rejected[0].reason)
        accepted = len(batch) - len(rejected)
        self.stats.delivered += accepted
        if accepted:
            now_ms = self._clock() * 1000
            oldest = min(map(_timestamp_ms, batch))
            self.stats.observe_latency(max(0.0, (now_ms - oldest) / 1000), accepted)
        await self.backlog.settle(batch)

    async def _failed(self, reason: str) -> None:
        self.stats.failed += 1
        delay = self._backoff.next()
        if self._phase != "retrying":  # once per outage, not once per attempt
            log.warning(
                "integration %s: sink unavailable (%s); retrying with backoff", self.name, reason
            )
        else:
            log.debug(
                "integration %s: still unavailable (%s); next try in %.2f s",
                self.name,
                reason,
                delay,
            )
        self._phase = "retrying"
        self._error(reason)
        await self._sleep(delay)  # type: ignore[misc]

    def _error(self, reason: str) -> None:
        self.stats.last_error = reason
        self.stats.last_error_at = self._clock()
