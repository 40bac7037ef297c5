"""The cluster as the node registry in Redis shows it: every node seen in the last
`INDEX_RETENTION_MS`, alive, stale or gone, with its clients, consumer lag and last
heartbeat. Behind `mqttq cluster status` and `/api/v1/cluster`."""

from __future__ import annotations

import time
from typing import Any

from redis.exceptions import RedisError

from mqttq.cluster.keys import ClusterKeys
from mqttq.cluster.nodes import NodeRecord, NodeState, decode_counts
from mqttq.errors import MqttqError
from mqttq.storage.redis.keys import RedisClient, connect, redacted

__all__ = ["ClusterStatusError", "cluster_status", "read_cluster_status"]

JSON = dict[str, Any]


class ClusterStatusError(MqttqError):
    """Redis cannot be reached or refused a command; the message is one line for the user."""


async def cluster_status(client: RedisClient, key_prefix: str, now: float | None = None) -> JSON:
    """`{"nodes": [...], "alive": n, "stale": n, "gone": n}`: every node of the index,
    ordered by node id; a gone node shows only its id and its last heartbeat. Raises
    RedisError/OSError as the client does."""
    now = time.time() if now is None else now
    keys = ClusterKeys(key_prefix)
    index: list[Any] = await client.zrange(keys.nodes, 0, -1, withscores=True)
    ids = sorted((member.decode(), float(score)) for member, score in index)
    replies: list[Any] = []
    if ids:
        async with client.pipeline(transaction=False) as pipe:
            for node_id, _ in ids:
                pipe.hgetall(keys.node(node_id))
                pipe.hgetall(keys.tenants(node_id))
            replies = await pipe.execute()
    nodes: list[JSON] = []
    for position, (node_id, score) in enumerate(ids):
        raw_node, raw_tenants = replies[2 * position], replies[2 * position + 1]
        tenants = {}
        for tenant, raw in raw_tenants.items():
            counts = decode_counts(raw)
            if counts is not None:
                tenants[tenant.decode()] = counts
        record = NodeRecord.from_hash(raw_node, tenants) if raw_node else None
        if record is None:
            nodes.append(
                {
                    "node_id": node_id,
                    "state": NodeState.GONE.value,
                    "heartbeat_at": score / 1000,
                    "heartbeat_age_s": round(max(0.0, now - score / 1000), 3),
                }
            )
        else:
            nodes.append(record.to_json(now))
    summary: JSON = {"nodes": nodes}
    for state in NodeState:
        summary[state.value] = sum(1 for node in nodes if node["state"] == state.value)
    return summary


async def read_cluster_status(url: str, *, cluster: bool, key_prefix: str) -> JSON:
    """`cluster_status` on a client of its own; ClusterStatusError (one line) when Redis
    cannot be reached or refuses."""
    client = connect(url, cluster=cluster)
    try:
        return await cluster_status(client, key_prefix)
    except (RedisError, OSError) as exc:
        kind = "Redis Cluster" if cluster else "Redis"
        raise ClusterStatusError(
            f"cannot read the cluster from {kind} at {redacted(url)}: {exc}"
        ) from exc
    finally:
        await client.aclose()
