"""NodeHeartbeat's view of the other nodes on a real Redis (mqttq/cluster/heartbeat.py):
a node that stopped beating without a clean stop is reported gone, with its last
heartbeat, once its keys have expired; a cleanly stopped node is not reported at all."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from mqttq.cluster.heartbeat import NodeHeartbeat
from mqttq.cluster.keys import ClusterKeys
from mqttq.cluster.nodes import NodeRecord
from mqttq.storage.redis.keys import connect
from tests.cluster_ops.nodes import INTERVAL_MS

pytestmark = pytest.mark.slow

DEADLINE = 30.0
"""Bounds a hang; never a performance bound."""


def _heartbeat(
    redis_url: str,
    prefix: str,
    node_id: str,
    seen: list[tuple[set[str], dict[str, float]]] | None = None,
) -> NodeHeartbeat:
    def snapshot(now: float) -> NodeRecord:
        return NodeRecord(node_id, "127.0.0.1", {"tcp": 1}, os.getpid(), now, now, INTERVAL_MS)

    return NodeHeartbeat(
        connect(redis_url, cluster=False),
        url=redis_url,
        key_prefix=prefix,
        node_id=node_id,
        interval_ms=INTERVAL_MS,
        snapshot=snapshot,
        tenant_counts=dict,
        on_cluster_usage=lambda _usage: None,
        on_nodes=None if seen is None else lambda alive, gone: seen.append((alive, gone)),
    )


def test_a_node_that_stops_beating_is_gone_once_its_keys_expire(redis_url: str) -> None:
    prefix = f"gone{time.monotonic_ns()}:"

    async def scenario() -> None:
        seen: list[tuple[set[str], dict[str, float]]] = []
        watcher = _heartbeat(redis_url, prefix, "node-b", seen)
        alive = _heartbeat(redis_url, prefix, "node-a")
        killed = _heartbeat(redis_url, prefix, "node-c")
        stopped = _heartbeat(redis_url, prefix, "node-d")
        for heartbeat in (alive, killed, stopped):
            assert await heartbeat.beat()
        await stopped.stop()  # a clean stop: out of the index
        await alive.start()
        await watcher.start()
        index = connect(redis_url, cluster=False)
        try:
            last_beat = await index.zscore(ClusterKeys(prefix).nodes, "node-c")
            assert last_beat is not None
            async with asyncio.timeout(DEADLINE):
                while not seen or not seen[-1][1]:
                    await asyncio.sleep(INTERVAL_MS / 1000)
            alive_ids, gone = seen[-1]
            assert alive_ids == {"node-a", "node-b"}
            assert gone == {"node-c": last_beat / 1000}
            assert await index.exists(ClusterKeys(prefix).node("node-c")) == 0
            assert all("node-d" not in a and "node-d" not in g for a, g in seen)
        finally:
            await index.aclose()
            for heartbeat in (watcher, alive):
                await heartbeat.stop()
            await killed.client.aclose()

    asyncio.run(scenario())
