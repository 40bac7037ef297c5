"""The part of `mqttq serve` that joins the node to its cluster: the heartbeat in Redis
(distributed mode only, `storage.log = "kafka"`) whose readings make the tenant limits
count cluster-wide and let the sessions of gone nodes end. Like serve.py, a composition
root: it knows the broker and Redis."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mqttq.config import Settings
from mqttq.config.schema import node_id_of

if TYPE_CHECKING:
    from mqttq.broker.server import Broker
    from mqttq.cli.serve_admin import AdminHandle
    from mqttq.cluster.heartbeat import NodeHeartbeat
    from mqttq.cluster.nodes import NodeRecord

__all__ = ["heartbeats_on", "start_heartbeat"]


def heartbeats_on(settings: Settings) -> bool:
    """Whether this node beats in Redis: exactly when it runs distributed."""
    return settings.storage.log == "kafka"


REPLICATED_COUNTS = frozenset({"topics"})
"""Counts every node already holds whole: each node's tries hold every client's
subscriptions and every retained message (the compacted topics), so its own topic count is
the cluster's; adding the other nodes' would count each topic once per node."""


def _not_replicated(usage: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """The other nodes' counts this node must add to its own: connections and sessions."""
    return {
        tenant: {name: n for name, n in counts.items() if name not in REPLICATED_COUNTS}
        for tenant, counts in usage.items()
    }


async def start_heartbeat(
    broker: Broker, settings: Settings, admin: AdminHandle | None
) -> NodeHeartbeat | None:
    """Start beating (after the first beat) when `heartbeats_on`; else None."""
    if not heartbeats_on(settings):
        return None
    from mqttq.cluster.heartbeat import NodeHeartbeat  # noqa: PLC0415
    from mqttq.cluster.nodes import NodeRecord  # noqa: PLC0415
    from mqttq.storage.redis.keys import connect  # noqa: PLC0415

    node_id = node_id_of(settings)
    interval_ms = settings.cluster.heartbeat_interval_ms
    limits = broker.limits
    admin_url = admin.server.url if admin is not None else ""
    pid = os.getpid()

    def snapshot(now: float) -> NodeRecord:
        usage = limits.node_usage()
        app_log = broker.hub.app_log
        log_stats = broker.log.statistics() if broker.log is not None else {}
        return NodeRecord(
            node_id=node_id,
            host=settings.listener.host,
            ports=broker.ports,
            pid=pid,
            started_at=broker.started_at,
            heartbeat_at=now,
            interval_ms=interval_ms,
            connections=usage["connections"],
            sessions=usage["sessions"],
            log_consumer_lag=int(log_stats.get("log_consumer_lag", 0)),
            app_consumer_lag=sum(app_log.lag.values()) if app_log is not None else 0,
            admin_url=admin_url,
        )

    def nodes_seen(alive: set[str], gone: dict[str, float]) -> None:
        life = broker.lifecycle
        if life is not None:
            life.endings.clean_up_gone_nodes(alive, gone)

    redis = settings.redis
    heartbeat = NodeHeartbeat(
        connect(redis.url, cluster=redis.cluster),
        url=redis.url,
        key_prefix=redis.key_prefix,
        node_id=node_id,
        interval_ms=interval_ms,
        snapshot=snapshot,
        tenant_counts=lambda: {tenant: limits.usage(tenant) for tenant in limits.tenants()},
        on_cluster_usage=lambda usage: limits.set_cluster_usage(_not_replicated(usage)),
        on_nodes=nodes_seen if broker.hub.cluster is not None else None,
    )
    await heartbeat.start()
    return heartbeat
