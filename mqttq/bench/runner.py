"""The worker side of a run: one event loop driving a slice of the plan's clients.

A worker walks the phases the parent commands through a small shared integer array
(`Link`): connect and subscribe -> READY; on GO publish -> PUBLISHED; for the persistent
scenario, on RECONNECT bring the subscribers back -> RECONNECTED; on STOP disconnect
everything and return a WorkerResult. Every wait is bounded, so a worker always ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import sys
import time
from collections.abc import Awaitable, Callable, MutableSequence
from functools import partial
from typing import TypeVar

from mqttq.bench.client import BenchClient, Counters
from mqttq.bench.options import BenchError, BenchOptions, ConnectFailed
from mqttq.bench.payload import PayloadBuilder
from mqttq.bench.results import PublisherResult, WorkerResult
from mqttq.bench.scenarios import Plan, PublisherSpec
from mqttq.bench.stats import LatencyHistogram
from mqttq.bench.subscriber import Subscriber
from mqttq.heap import settled_heap

# Commands (parent -> workers), increasing: a worker waiting for one also wakes on a later.
GO = 1
RECONNECT = 2
STOP = 3
ABORT = 4
# Phases (worker -> parent).
READY = 1
PUBLISHED = 2
RECONNECTED = 3
FAILED = 9

CONTROL_SLOTS = 2
"""Slot 0: command; slot 1: its argument (the persistent backlog per subscriber)."""
WORKER_SLOTS = 8
SLOT_PHASE, SLOT_PUBLISHED, SLOT_ACKED, SLOT_RECEIVED, SLOT_DUPLICATES, SLOT_DISCONNECTS = range(6)

CONNECT_CONCURRENCY = 50
_POLL = 0.005
_PROGRESS_EVERY = 0.1
_BATCH = 64
"""Full-speed publishers write this many messages per flush before yielding."""
TIMER_TICK = 0.001
"""uvloop's clock and timers count whole milliseconds."""

T = TypeVar("T")


def delay_until(due: float, now: float) -> float:
    """Seconds to sleep before a send due at `due`: 0 when it is less than half a timer
    tick away. On uvloop a shorter sleep wakes on the same millisecond, sees the same
    `loop.time()` and sleeps again: the publisher would spin until the clock ticks (at
    100 publishers a millisecond apart, the tool's core was busy all the time)."""
    delay = due - now
    return delay if delay >= TIMER_TICK / 2 else 0.0


class Link:
    """A worker's view of the shared array (mp.Array or array.array of int64)."""

    __slots__ = ("_base", "_buf")

    def __init__(self, buf: MutableSequence[int], worker: int) -> None:
        self._buf = buf
        self._base = CONTROL_SLOTS + worker * WORKER_SLOTS

    @property
    def command(self) -> int:
        return self._buf[0]

    @property
    def argument(self) -> int:
        return self._buf[1]

    def report(self, counters: Counters, phase: int | None = None) -> None:
        """Publish the counters, then (if given) the phase, so the parent reading the phase
        always sees the counters that go with it."""
        buf, base = self._buf, self._base
        buf[base + SLOT_PUBLISHED] = counters.published
        buf[base + SLOT_ACKED] = counters.acked
        buf[base + SLOT_RECEIVED] = counters.received
        buf[base + SLOT_DUPLICATES] = counters.duplicates
        buf[base + SLOT_DISCONNECTS] = counters.disconnects
        if phase is not None:
            buf[base + SLOT_PHASE] = phase


async def _bounded(jobs: list[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run the jobs with at most `limit` at a time; the first failure cancels the rest."""
    semaphore = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await job()

    tasks = [asyncio.ensure_future(one(job)) for job in jobs]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _raise_fd_limit() -> None:
    # Thousands of connections need thousands of descriptors; the hard limit is allowed.
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Worker:
    """Runs one slice of a plan; `run()` returns its WorkerResult and never raises BenchError."""

    def __init__(
        self, plan: Plan, options: BenchOptions, worker: int, workers: int, link: Link
    ) -> None:
        self.plan = plan
        self.options = options
        self.link = link
        self.counters = Counters()
        self.result = WorkerResult(worker)
        publishers, subscribers = plan.slice(worker, workers)
        self.publisher_specs = publishers
        self.subscribers = [
            Subscriber(spec, self.counters, self.result.e2e) for spec in subscribers
        ]
        self.publishers: list[tuple[PublisherSpec, BenchClient]] = []
        self.stopping = False

    # -- connections --------------------------------------------------------------------

    def _new_client(
        self,
        client_id: str,
        *,
        on_payload: Callable[[bytes], None] | None = None,
        ack_histogram: LatencyHistogram | None = None,
    ) -> BenchClient:
        return BenchClient(
            client_id,
            self.options.protocol,
            self.counters,
            ack_histogram=ack_histogram,
            on_payload=on_payload,
            window=self.options.window(),
        )

    async def _connect(
        self, client: BenchClient, *, clean_start: bool, session_expiry: int = 0, port: int = 0
    ) -> bool:
        """Connect (to `port`, else `--port`) and check what the broker allows; returns
        CONNACK Session Present."""
        o = self.options
        connack = await client.connect(
            o.host,
            port or o.port,
            clean_start=clean_start,
            session_expiry=session_expiry,
            keep_alive=o.keep_alive,
            username=o.username,
            password=o.password,
            timeout=o.connect_timeout,
        )
        props = connack.properties
        if props.maximum_qos is not None and props.maximum_qos < o.qos:
            raise BenchError(f"the broker supports at most QoS {props.maximum_qos}")
        if props.maximum_packet_size is not None and o.payload + 64 > props.maximum_packet_size:
            raise BenchError(
                f"--payload {o.payload} exceeds the broker's Maximum Packet Size "
                f"({props.maximum_packet_size} bytes)"
            )
        return connack.session_present

    async def _connect_subscriber(self, sub: Subscriber, *, first: bool) -> None:
        o = self.options
        persistent = self.plan.persistent
        client = self._new_client(sub.spec.client_id, on_payload=sub.on_payload)
        sub.client = client
        port = o.port_for(sub.spec.index, subscriber=True)
        if not persistent:
            await self._connect(client, clean_start=True, port=port)
        elif first:
            # A fresh session that outlives the connection [MQTT-3.1.2-4, MQTT-3.1.2-5]:
            # 5.0 starts clean with an expiry; 3.1.1 uses a never-seen client id (the run id)
            # with Clean Session 0.
            await self._connect(
                client, clean_start=o.protocol == 5, session_expiry=o.session_expiry, port=port
            )
        else:
            sub.result.session_present = await self._connect(
                client, clean_start=False, session_expiry=o.session_expiry, port=port
            )
            return
        await client.subscribe([(sub.spec.topic_filter, o.qos)], timeout=o.connect_timeout)

    async def _connect_publisher(self, spec: PublisherSpec) -> None:
        client = self._new_client(spec.client_id, ack_histogram=self.result.puback)
        self.publishers.append((spec, client))
        port = self.options.port_for(spec.index, subscriber=False)
        await self._connect(client, clean_start=True, port=port)

    # -- phases -------------------------------------------------------------------------

    async def _wait_command(self, command: int) -> int:
        link = self.link
        parent = os.getppid()
        polls = 0
        while link.command < command:
            await asyncio.sleep(_POLL)
            polls += 1
            # A worker process whose parent died would wait for ever: it is re-parented.
            if polls % 200 == 0 and os.getppid() != parent:
                raise BenchError("the bench parent process is gone")
        return link.command

    async def _progress(self) -> None:
        while True:
            self.link.report(self.counters)
            if self.link.command >= STOP:
                self.stopping = True
            await asyncio.sleep(_PROGRESS_EVERY)

    async def _pinger(self) -> None:
        # The broker may have asked for a shorter keep-alive (Server Keep Alive, 5.0).
        clients = [client for _, client in self.publishers]
        clients += [sub.client for sub in self.subscribers if sub.client is not None]
        keep_alive = min(
            (c.keep_alive for c in clients if c.keep_alive > 0), default=self.options.keep_alive
        )
        if keep_alive <= 0:
            return
        interval = max(0.5, keep_alive / 2)
        while True:
            await asyncio.sleep(interval)
            for sub in self.subscribers:
                if sub.client is not None:
                    sub.client.ping()
            for _, client in self.publishers:
                client.ping()

    def _set_phase(self, phase: int) -> None:
        self.link.report(self.counters, phase)

    async def _publish(self, spec: PublisherSpec, client: BenchClient, start: float) -> None:
        """Publish until the duration or count is reached (or STOP), keeping to the rate
        and the in-flight window; then wait for the outstanding acknowledgements."""
        o = self.options
        qos = o.qos
        topic = spec.topic
        counters = self.counters
        builder = PayloadBuilder(spec.index, o.payload)
        result = PublisherResult(spec.index)
        self.result.publishers.append(result)
        loop = asyncio.get_running_loop()
        warmup_end = start + o.warmup
        end = warmup_end + o.duration if o.duration is not None else None
        limit = o.count
        interval = 1.0 / o.rate if o.rate else 0.0
        # Spread the publishers' schedules over one interval so that P publishers at rate r
        # make a steady P*r stream, not a burst of P messages every 1/r seconds.
        next_send = start + interval * spec.index / len(self.plan.publishers)
        client.measure_from_ns = time.perf_counter_ns() + int(o.warmup * 1e9)
        sequence = 0
        measured = 0
        batch = 0
        sent_ns = 0
        try:
            while not self.stopping and client.connected:
                now = loop.time()
                warm = now < warmup_end
                if not warm and (
                    (end is not None and now >= end) or (limit is not None and measured >= limit)
                ):
                    break
                if interval:
                    delay = delay_until(next_send, now)
                    if delay:
                        if end is not None and next_send >= end:
                            break  # the next slot is past the end: do not sleep into it
                        client.flush()
                        await asyncio.sleep(delay)
                        continue
                    # Far behind schedule (a stall): catch up at most a second's worth.
                    next_send = max(next_send + interval, now - 1.0)
                if qos and client.window_full:
                    client.flush()
                    await client.wait_window(o.drain_timeout)
                    continue
                sent_ns = time.time_ns()
                client.publish(topic, builder.build(sequence, sent_ns, warm), qos)
                sequence += 1
                counters.published += 1
                if not warm:
                    measured += 1
                    counters.published_measured += 1
                if interval:
                    client.flush()
                else:
                    batch += 1
                    if batch >= _BATCH:
                        batch = 0
                        client.flush()
                        if client.paused:
                            await client.wait_writable()
                        else:
                            await asyncio.sleep(0)
            client.flush()
        except BenchError as exc:
            self.result.errors.append(str(exc))
        finally:
            result.published = sequence
            result.published_measured = measured
            self.result.publish_end_ns = max(self.result.publish_end_ns, sent_ns)
        if qos:
            if not await client.wait_inflight_empty(o.drain_timeout):
                when = (
                    f"after {o.drain_timeout:g} s"
                    if client.connected
                    else "when the connection closed"
                )
                self.result.errors.append(
                    f"{spec.client_id}: {client.inflight} publishes unacknowledged {when}"
                )
            self.result.ack_end_ns = max(self.result.ack_end_ns, time.time_ns())
        result.acked = client.acked
        result.rejected = client.rejected

    async def _check_host(self) -> None:
        """Resolve the broker's name once, so that a typo fails with one clear line rather
        than once per client."""
        o = self.options
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(
                loop.getaddrinfo(o.host, o.port, type=socket.SOCK_STREAM), o.connect_timeout
            )
        except socket.gaierror as exc:
            raise ConnectFailed(f"cannot connect to {o.host}:{o.port}: {exc.strerror}") from None
        except TimeoutError:
            raise ConnectFailed(
                f"cannot connect to {o.host}:{o.port}: name lookup timed out"
            ) from None

    async def _setup(self) -> None:
        await self._check_host()
        await _bounded(
            [partial(self._connect_subscriber, sub, first=True) for sub in self.subscribers],
            CONNECT_CONCURRENCY,
        )
        if self.plan.persistent:
            await asyncio.gather(
                *(sub.client.disconnect() for sub in self.subscribers if sub.client is not None)
            )
        await _bounded(
            [partial(self._connect_publisher, spec) for spec in self.publisher_specs],
            CONNECT_CONCURRENCY,
        )

    async def _reconnect(self) -> None:
        backlog = self.link.argument
        for sub in self.subscribers:
            sub.backlog = backlog
            if backlog == 0:
                sub.result.drained_ns = time.time_ns()
        self.result.reconnect_ns = time.time_ns()
        await _bounded(
            [partial(self._connect_subscriber, sub, first=False) for sub in self.subscribers],
            CONNECT_CONCURRENCY,
        )

    async def _cleanup(self) -> None:
        o = self.options
        clients = [client for _, client in self.publishers]
        jobs: list[Awaitable[None]] = [client.disconnect() for client in clients]
        wipe: list[str] = []
        for sub in self.subscribers:
            client = sub.client
            if client is None:
                continue
            clients.append(client)
            if not self.plan.persistent:
                jobs.append(client.disconnect())
            elif o.protocol == 5 and client.connected:
                # Session Expiry Interval 0 on DISCONNECT discards the session now
                # [MQTT-3.14.2.2.2].
                jobs.append(client.disconnect(session_expiry=0))
            else:
                jobs.append(client.disconnect())
                wipe.append(sub.spec.client_id)
        await asyncio.gather(*jobs, return_exceptions=True)
        reported = set(self.result.errors)
        for client in clients:
            if client.error and client.error not in reported:
                reported.add(client.error)
                self.result.errors.append(client.error)
        # A session left offline (3.1.1 never expires one) is discarded by connecting once
        # with Clean Start 1 [MQTT-3.1.2-4].
        await _bounded([partial(self._wipe_session, cid) for cid in wipe], CONNECT_CONCURRENCY)

    async def _wipe_session(self, client_id: str) -> None:
        client = self._new_client(client_id)
        with contextlib.suppress(BenchError):
            await self._connect(client, clean_start=True)
            await client.disconnect()

    async def run(self) -> WorkerResult:
        """Walk the phases; a BenchError becomes `result.fatal` and phase FAILED."""
        _raise_fd_limit()
        result = self.result
        progress = asyncio.ensure_future(self._progress())
        pinger: asyncio.Future[None] | None = None
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        heap = contextlib.ExitStack()
        try:
            await self._setup()
            # The clients are connected: what the run allocates from here is per message.
            heap.enter_context(settled_heap())
            self._set_phase(READY)
            if await self._wait_command(GO) < STOP:
                cpu0 = time.process_time()
                wall0 = time.perf_counter()
                pinger = asyncio.ensure_future(self._pinger())
                start = asyncio.get_running_loop().time()
                result.measure_start_ns = time.time_ns() + int(self.options.warmup * 1e9)
                await asyncio.gather(
                    *(self._publish(spec, client, start) for spec, client in self.publishers)
                )
                self._set_phase(PUBLISHED)
                if self.plan.persistent and await self._wait_command(RECONNECT) < STOP:
                    await self._reconnect()
                    self._set_phase(RECONNECTED)
                await self._wait_command(STOP)
        except BenchError as exc:
            result.fatal = str(exc)
            self._set_phase(FAILED)
        finally:
            heap.close()
            result.cpu_s = time.process_time() - cpu0
            result.wall_s = time.perf_counter() - wall0
            progress.cancel()
            if pinger is not None:
                pinger.cancel()
            await self._cleanup()
            self.link.report(self.counters)
        result.disconnects = self.counters.disconnects
        result.last_received_ns = self.counters.last_received_ns
        result.subscribers = [sub.result for sub in self.subscribers]
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # ru_maxrss is KiB on Linux, bytes on macOS.
        result.max_rss_mb = rss / (1024 * 1024 if sys.platform == "darwin" else 1024)
        return result
