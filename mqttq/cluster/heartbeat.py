"""NodeHeartbeat: every `[cluster] heartbeat_interval_ms`, this node writes its record and
its counts per tenant to Redis (keys in `mqttq.cluster.keys`, TTL three intervals), then
reads the other live nodes' counts, so that the tenant limits count cluster-wide, and
which nodes are gone (dead_nodes.py), so that their sessions are cleaned up.

On when the node runs distributed (`storage.log = "kafka"`), on the `[redis]` of the
settings. Redis trouble never stops the broker: the first failure is logged as a warning
(the next ones at debug level until a beat succeeds again), and the other nodes' counts
are forgotten once they are older than the keys' TTL (their keys have expired by then).
A clean stop deletes the node's keys and its index entry; a killed node's keys expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from redis.exceptions import RedisError

from mqttq.cluster.dead_nodes import gone_candidates
from mqttq.cluster.keys import INDEX_RETENTION_MS, ClusterKeys
from mqttq.cluster.nodes import (
    TTL_INTERVALS,
    NodeRecord,
    decode_counts,
    encode_counts,
    sum_counts,
)
from mqttq.storage.redis.keys import RedisClient, redacted

__all__ = ["NodeHeartbeat"]

logger = logging.getLogger("mqttq.cluster")

TenantCounts = dict[str, dict[str, int]]
NodesSeen = Callable[[set[str], dict[str, float]], None]
"""Called after every read with (live node ids, this one included; gone node id -> its
last heartbeat in seconds since the epoch)."""

STOP_TIMEOUT = 5.0
"""Longest a clean stop waits for the beat in progress, then for the delete (seconds)."""


class NodeHeartbeat:
    """Writes this node's heartbeat; reports the other nodes' tenant counts.

    `snapshot(now)` builds the record to write (now: seconds since the epoch);
    `tenant_counts()` gives this node's exact counts per tenant; `on_cluster_usage(counts)`
    receives, after every read, what the other live nodes hold per tenant;
    `on_nodes(alive, gone)` (optional) which nodes beat and which are gone.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        url: str,
        key_prefix: str,
        node_id: str,
        interval_ms: int,
        snapshot: Callable[[float], NodeRecord],
        tenant_counts: Callable[[], Mapping[str, Mapping[str, int]]],
        on_cluster_usage: Callable[[TenantCounts], None],
        on_nodes: NodesSeen | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.keys = ClusterKeys(key_prefix)
        self.node_id = node_id
        self.interval = interval_ms / 1000
        self.ttl_ms = TTL_INTERVALS * interval_ms
        self._snapshot = snapshot
        self._tenant_counts = tenant_counts
        self._on_usage = on_cluster_usage
        self._on_nodes = on_nodes
        self.interval_ms = interval_ms
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._failing = False
        self._last_read = 0.0
        self.beats = 0
        """Heartbeats written so far."""

    async def start(self) -> None:
        """Beat once now (a failure is logged, not raised), then every interval."""
        await self.beat()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        # Never cancelled in the middle of a beat: a Redis command cut off by a
        # cancellation can leave its connection unusable for the last command, the delete.
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)
            if not self._stop.is_set():
                await self.beat()

    async def beat(self) -> bool:
        """Write the record and counts, read the others' counts; False when Redis failed."""
        try:
            # A beat longer than the keys' TTL is a failed beat (Redis hung, not down).
            async with asyncio.timeout(self.ttl_ms / 1000):
                await self._write(time.time())
                usage = await self._read_others()
                seen = await self._read_nodes() if self._on_nodes is not None else None
        except (RedisError, OSError, TimeoutError) as exc:
            level = logging.DEBUG if self._failing else logging.WARNING
            logger.log(level, "cluster heartbeat to %s failed: %r", redacted(self.url), exc)
            self._failing = True
            if time.monotonic() - self._last_read > self.ttl_ms / 1000:
                self._on_usage({})  # the others' keys have expired by now anyway
            return False
        if self._failing:
            logger.warning("cluster heartbeat to %s works again", redacted(self.url))
            self._failing = False
        self._last_read = time.monotonic()
        self._on_usage(usage)
        if seen is not None and self._on_nodes is not None:
            self._on_nodes(*seen)
        self.beats += 1
        return True

    async def _write(self, now: float) -> None:
        record = self._snapshot(now)
        counts = {
            tenant: encode_counts(values)
            for tenant, values in self._tenant_counts().items()
            if any(values.values())
        }
        node_key, tenants_key = self.keys.node(self.node_id), self.keys.tenants(self.node_id)
        # One slot (hash tag {node}): the record and the counts change together.
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(node_key, mapping=record.to_hash())  # type: ignore[arg-type]
            pipe.pexpire(node_key, self.ttl_ms)
            pipe.delete(tenants_key)
            if counts:
                pipe.hset(tenants_key, mapping=counts)  # type: ignore[arg-type]
                pipe.pexpire(tenants_key, self.ttl_ms)
            await pipe.execute()
        now_ms = int(now * 1000)
        await self.client.zadd(self.keys.nodes, {self.node_id: now_ms})
        await self.client.zremrangebyscore(self.keys.nodes, "-inf", now_ms - INDEX_RETENTION_MS)

    async def _read_others(self) -> TenantCounts:
        since = int(time.time() * 1000) - self.ttl_ms
        members: list[Any] = await self.client.zrangebyscore(self.keys.nodes, since, "+inf")
        others = [m.decode() for m in members if m.decode() != self.node_id]
        if not others:
            return {}
        async with self.client.pipeline(transaction=False) as pipe:
            for node_id in others:
                pipe.hgetall(self.keys.tenants(node_id))
            replies = await pipe.execute()
        nodes = []
        for node_id, reply in zip(others, replies, strict=True):
            tenants = {}
            for raw_tenant, raw_counts in reply.items():
                counts = decode_counts(raw_counts)
                if counts is not None:
                    tenants[raw_tenant.decode()] = counts
            nodes.append((node_id, tenants))
        return sum_counts(nodes, exclude=self.node_id)

    async def _read_nodes(self) -> tuple[set[str], dict[str, float]]:
        """(alive, gone): a node is gone when its last beat is past the TTL and its record
        key has expired (a clean stop removes it from the index: it is neither)."""
        index: list[Any] = await self.client.zrange(self.keys.nodes, 0, -1, withscores=True)
        alive, candidates = gone_candidates(
            ((m.decode(), float(score) / 1000) for m, score in index),
            self.interval_ms,
            time.time(),
            own=self.node_id,
        )
        if not candidates:
            return alive, {}
        async with self.client.pipeline(transaction=False) as pipe:
            for node_id in candidates:
                pipe.exists(self.keys.node(node_id))
            replies = await pipe.execute()
        gone = {}
        for (node_id, last_beat), exists in zip(candidates.items(), replies, strict=True):
            if exists:
                alive.add(node_id)  # beating on a slower clock or interval: not gone
            else:
                gone[node_id] = last_beat
        return alive, gone

    async def stop(self) -> None:
        """Stop beating and delete this node's keys and index entry (a clean stop), then
        close the client; a Redis failure here is logged (the keys expire anyway).

        The loop ends between beats; a beat still running after STOP_TIMEOUT is cancelled,
        and the delete is bounded by STOP_TIMEOUT too, so a stop never hangs on Redis."""
        self._stop.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=STOP_TIMEOUT)
            if not done:
                self._task.cancel()
                done, _ = await asyncio.wait({self._task}, timeout=STOP_TIMEOUT)
            if not done:
                logger.warning("cluster: the heartbeat did not stop; its keys will expire")
            self._task = None
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                node_keys = (self.keys.node(self.node_id), self.keys.tenants(self.node_id))
                await self.client.delete(*node_keys)
                await self.client.zrem(self.keys.nodes, self.node_id)
        except (RedisError, OSError, TimeoutError) as exc:
            logger.warning("cluster: could not remove this node's heartbeat: %r", exc)
        finally:
            with contextlib.suppress(RedisError, OSError, TimeoutError):
                async with asyncio.timeout(STOP_TIMEOUT):
                    await self.client.aclose()
