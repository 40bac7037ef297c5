"""The dashboard's sampler: every `interval` seconds, one row of the broker's counters,
the last hour kept in a bounded ring (and, in distributed mode, in Redis for the others).

A row is JSON-ready: `{"t", "connections", "messages_in", "messages_out", "dropped",
"dropped_by_reason": {reason: per s}, "backlog", "inbox", "kafka_produce_ms",
"kafka_lag"}`. Rates are per second over the step before `t` (None for the first row
after a start, or when the clock jumped); `kafka_*` are None in embedded mode;
`kafka_produce_ms` is the mean produce time of the step (None when nothing was produced).

Nothing is counted here: the broker's own counters (BrokerStats, the publish inbox, the
background storage writes, the limiter's refusals, the message log) are read as they are,
which costs one pass over the sessions (for the connections) per sample. Measured in
docs/benchmarks.md ("Dashboard sampler").

Where drops come from (`dropped_by_reason` keys): `queue` (full queue, QoS 0 to an offline
client, expired), `publish_rate` and `topics` (refused by a limit), `log_produce_failed`
(the message log did not confirm), `app_expired` and `app_skipped` (APPLICATION topics).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import RedisError

from mqttq.config.schema import Settings, node_id_of

if TYPE_CHECKING:
    from mqttq.broker.server import Broker
    from mqttq.storage.redis.keys import RedisClient

__all__ = [
    "KEEP_SECONDS",
    "Counters",
    "RedisSamples",
    "Sampler",
    "broker_counters",
    "sample_row",
    "sampler_for",
]

log = logging.getLogger("mqttq.sampler")

KEEP_SECONDS: Final = 3600
"""How much history the ring (and the Redis list) keeps."""
MESSAGE_REFUSALS: Final = ("publish_rate", "topics")
"""Limiter refusal reasons that refuse a PUBLISH (the others refuse a connection)."""

Row = dict[str, Any]


@dataclass(slots=True)
class Counters:
    """The broker's cumulative counters and gauges at one moment (`at`: unix seconds)."""

    at: float
    connections: int
    messages_in: int
    messages_out: int
    drops: dict[str, int]
    backlog: int
    inbox: int
    produce: tuple[float, int] | None = None
    """(sum of produce seconds, produces) of the message log; None without one."""
    lag: int | None = None
    extra: dict[str, int] = field(default_factory=dict)


def broker_counters(broker: Broker, at: float) -> Counters:
    """Read `broker`'s counters (no await, no I/O: one pass over the sessions)."""
    hub = broker.hub
    stats = hub.stats
    connections = 0
    for session in hub.sessions.values():
        if session.client is not None:
            connections += 1
    drops = {"queue": sum(stats.dropped)}
    for reason in MESSAGE_REFUSALS:
        drops[reason] = 0
    for (_tenant, reason), count in broker.limits.refusals.items():
        if reason in drops:
            drops[reason] += count
    backlog = len(hub.tasks)
    inbox = 0
    if hub.inbox is not None:
        held = hub.inbox.statistics()
        inbox = held["inbox_held"]
        backlog += held["inbox_backlog"]
    produce: tuple[float, int] | None = None
    lag: int | None = None
    if hub.log is not None:
        drops["log_produce_failed"] = stats.log_produce_failures
        histogram = stats.storage_latency.snapshot().get("log_produce")
        produce = (0.0, 0) if histogram is None else (histogram.total, histogram.count)
        lag = hub.log.statistics()["log_consumer_lag"]
    if hub.app_log is not None:
        app = hub.app_log.statistics()
        drops["app_expired"] = app["app_expired"]
        drops["app_skipped"] = app["app_skipped"]
    return Counters(
        at=at,
        connections=connections,
        messages_in=sum(stats.messages_in),
        messages_out=sum(stats.messages_out),
        drops=drops,
        backlog=backlog,
        inbox=inbox,
        produce=produce,
        lag=lag,
    )


def _rate(now: int, before: int | None, seconds: float) -> float | None:
    if before is None or seconds <= 0 or now < before:
        return None  # the first row, a clock jump, or counters that restarted
    return round((now - before) / seconds, 3)


def sample_row(previous: Counters | None, current: Counters, t: float) -> Row:
    """The row at step `t` from two readings (`previous` None: no rates yet)."""
    seconds = 0.0 if previous is None else current.at - previous.at
    old_drops = {} if previous is None else previous.drops
    old_in = None if previous is None else previous.messages_in
    old_out = None if previous is None else previous.messages_out
    by_reason: dict[str, float | None] = {
        reason: _rate(count, old_drops.get(reason), seconds)
        for reason, count in current.drops.items()
    }
    known = [rate for rate in by_reason.values() if rate is not None]
    produce_ms: float | None = None
    if current.produce is not None and previous is not None and previous.produce is not None:
        total = current.produce[0] - previous.produce[0]
        count = current.produce[1] - previous.produce[1]
        if count > 0 and total >= 0:
            produce_ms = round(total / count * 1000, 3)
    return {
        "t": t,
        "connections": current.connections,
        "messages_in": _rate(current.messages_in, old_in, seconds),
        "messages_out": _rate(current.messages_out, old_out, seconds),
        "dropped": round(sum(known), 3) if previous is not None and known else None,
        "dropped_by_reason": by_reason,
        "backlog": current.backlog,
        "inbox": current.inbox,
        "kafka_produce_ms": produce_ms,
        "kafka_lag": current.lag,
    }


class RedisSamples:
    """Rows of every node in Redis, for a cluster: `<prefix>mqttq:dashboard:{<node>}:samples`
    (LIST of JSON rows, capped, expiring an hour after the last write) and
    `<prefix>mqttq:dashboard:nodes` (ZSET: node id -> last write, ms since the epoch)."""

    def __init__(self, client: RedisClient, key_prefix: str, keep: int) -> None:
        self.client = client
        self.prefix = key_prefix
        self.keep = keep
        self.nodes_key = f"{key_prefix}mqttq:dashboard:nodes"

    def samples_key(self, node_id: str) -> str:
        """The LIST holding `node_id`'s rows (hash tag: one slot per node)."""
        return f"{self.prefix}mqttq:dashboard:{{{node_id}}}:samples"

    async def write(self, node_id: str, row: Row) -> None:
        """Append `row` to the node's list (capped to `keep`) and mark the node seen."""
        key = self.samples_key(node_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.rpush(key, json.dumps(row, separators=(",", ":")))
            pipe.ltrim(key, -self.keep, -1)
            pipe.expire(key, KEEP_SECONDS + 60)
            await pipe.execute()
        await self.client.zadd(self.nodes_key, {node_id: int(row["t"] * 1000)})

    async def read(self, since: float, skip: str) -> dict[str, list[Row]]:
        """Rows at or after `since` of every node seen since then but `skip`."""
        raw_nodes: list[Any] = await self.client.zrangebyscore(
            self.nodes_key, int(since * 1000), "+inf"
        )
        await self.client.zremrangebyscore(self.nodes_key, "-inf", int(since * 1000) - 1)
        result: dict[str, list[Row]] = {}
        for raw in raw_nodes:
            node_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            if node_id == skip:
                continue
            rows = []
            for item in await self.client.lrange(self.samples_key(node_id), 0, -1):
                try:
                    row = json.loads(item)
                except ValueError:
                    continue
                stamp = row.get("t") if isinstance(row, dict) else None
                if isinstance(stamp, (int, float)) and stamp >= since:
                    rows.append(row)
            result[node_id] = rows
        return result

    async def close(self) -> None:
        await self.client.aclose()


class Sampler:
    """Takes a row every `interval` seconds (aligned to multiples of it in unix time)
    from `read(at)` and keeps the last KEEP_SECONDS of them; with `shared`, each row is
    also written to Redis and `history` includes the other nodes' rows.
    `statistics()` says how many samples were taken and the CPU time they cost."""

    def __init__(
        self,
        read: Callable[[float], Counters],
        *,
        node_id: str,
        interval: float,
        shared: RedisSamples | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not (math.isfinite(interval) and interval > 0):
            raise ValueError(f"interval must be > 0, got {interval!r}")
        self.read = read
        self.node_id = node_id
        self.interval = interval
        self.shared = shared
        self.clock = clock
        self.rows: deque[Row] = deque(maxlen=math.ceil(KEEP_SECONDS / interval) + 1)
        self._previous: Counters | None = None
        self._baseline: Counters | None = None
        """What the last row was measured from (a repeated step is measured from it too)."""
        self._task: asyncio.Task[None] | None = None
        self._samples = 0
        self._cpu = 0.0
        self._shared_failing = False

    def sample_now(self, step: float | None = None) -> Row:
        """Take one row now and keep it, stamped `step` (the step the ticker woke for: an
        early wake-up must not stamp the previous step) or else the current step. A
        second row for the same step replaces the first and is measured from the same
        baseline as it was, so a repeated step never reads as a rate over a few ms."""
        started = time.thread_time()
        now = self.clock()
        current = self.read(now)
        t = math.floor(now / self.interval) * self.interval if step is None else step
        previous = self._previous
        if self.rows and self.rows[-1]["t"] >= t:
            self.rows.pop()
            previous = self._baseline
        else:
            self._baseline = previous
        row = sample_row(previous, current, t)
        self._previous = current
        self.rows.append(row)
        self._samples += 1
        self._cpu += time.thread_time() - started
        return row

    def local(self, seconds: float) -> list[Row]:
        """This node's rows of the last `seconds`."""
        since = self.clock() - seconds
        return [row for row in self.rows if row["t"] >= since]

    async def history(self, seconds: float) -> dict[str, list[Row]]:
        """Rows of the last `seconds` by node id: this node's, and with Redis every other
        node's (a Redis that fails leaves them out; logged)."""
        result = {self.node_id: self.local(seconds)}
        if self.shared is not None:
            try:
                others = await self.shared.read(self.clock() - seconds, self.node_id)
            except (RedisError, OSError) as exc:
                log.warning("dashboard history: cannot read other nodes' samples: %s", exc)
            else:
                result.update(others)
        return result

    def statistics(self) -> dict[str, float]:
        """`samples` taken, `cpu_s` spent taking them, `cpu_per_sample_ms`."""
        per = self._cpu / self._samples * 1000 if self._samples else 0.0
        return {"samples": self._samples, "cpu_s": self._cpu, "cpu_per_sample_ms": per}

    def start(self) -> None:
        """Sample in a task on the running loop until `stop`."""
        if self._task is None:
            self.sample_now()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sampler")

    async def stop(self) -> None:
        """Stop sampling and close the Redis client. Idempotent."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        shared, self.shared = self.shared, None
        if shared is not None:
            with contextlib.suppress(RedisError, OSError):
                await shared.close()

    async def _run(self) -> None:
        while True:
            now = self.clock()
            next_step = (math.floor(now / self.interval) + 1) * self.interval
            await asyncio.sleep(max(0.0, next_step - now))
            try:
                row = self.sample_now(next_step)
            except Exception:
                # A bug in reading some counter must not end the history for good.
                log.exception("dashboard sampler: a sample failed")
                continue
            if self.shared is not None:
                await self._share(row)

    async def _share(self, row: Row) -> None:
        assert self.shared is not None
        try:
            await self.shared.write(self.node_id, row)
        except (RedisError, OSError) as exc:
            if not self._shared_failing:
                log.warning("dashboard sampler: cannot write samples to Redis: %s", exc)
            self._shared_failing = True
        else:
            self._shared_failing = False


def sampler_for(broker: Broker, settings: Settings) -> Sampler:
    """The sampler of a broker started with `settings` (not started): every
    `[admin] sample_interval` seconds; in distributed mode (`storage.log = "kafka"`) its
    rows also go to `[redis]` under `key_prefix`, where every node's history endpoint reads
    them."""
    shared = None
    if settings.storage.log == "kafka":
        from mqttq.storage.redis.keys import connect  # noqa: PLC0415

        redis = settings.redis
        keep = math.ceil(KEEP_SECONDS / settings.admin.sample_interval) + 1
        shared = RedisSamples(connect(redis.url, cluster=redis.cluster), redis.key_prefix, keep)
    return Sampler(
        lambda at: broker_counters(broker, at),
        node_id=node_id_of(settings),
        interval=settings.admin.sample_interval,
        shared=shared,
    )
