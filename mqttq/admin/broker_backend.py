"""BrokerAdmin: the AdminBackend port implemented on a running Broker.

Everything goes through the broker's command and query API (mqttq.broker.operations):
this module only turns its typed answers into the API's JSON shapes. It never reads the
Hub's sessions, routers or retained indexes, and never writes storage itself.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

from mqttq import __version__
from mqttq.admin.backend import MetricsSnapshot
from mqttq.auth.blocked.service import BlockedClients
from mqttq.broker.operations import Operations, SessionFilter, SessionView
from mqttq.broker.operations_kafka import KafkaStatusReader

if TYPE_CHECKING:
    from mqttq.auth.model import Credential, Tenant
    from mqttq.broker.server import Broker
    from mqttq.limits.quota import Quota
    from mqttq.model import Message, Subscription

__all__ = ["BrokerAdmin"]

JSON = dict[str, Any]


class BrokerAdmin:
    """The admin API's view of `broker` (see mqttq.admin.backend.AdminBackend)."""

    def __init__(self, broker: Broker) -> None:
        self.operations = Operations(broker)
        self._settings = broker.settings
        self._kafka = KafkaStatusReader(broker.settings)

    def blocked_clients(self) -> BlockedClients | None:
        """The broker's blocked-client list (the /api/v1/blocked routes' backend)."""
        return self.operations.blocked_clients()

    def health(self) -> JSON:
        ops = self.operations
        return {
            "status": "ok",
            "version": __version__,
            "uptime_seconds": round(time.time() - ops.started_at, 3),
            "mqtt_port": ops.mqtt_port,
            # For `mqttq credentials` and `mqttq tenant` run elsewhere: where the token file
            # is (readable by its owner only, so this shows the way, not the token).
            "data_dir": ops.data_dir,
        }

    def metrics(self) -> MetricsSnapshot:
        ops = self.operations
        node = ops.node()
        return MetricsSnapshot(
            counters=ops.statistics(),
            refusals=ops.refusals(),
            tenants=node.tenant_usage,
            storage_latency=ops.storage_latency(),
            app_lag=ops.app_lag(),
            listeners=ops.listener_connections(),
        )

    def node_info(self) -> JSON:
        node = self.operations.node()
        return {
            "version": __version__,
            "uptime_seconds": round(time.time() - node.started_at, 3),
            "started_at": node.started_at,
            "mode": node.mode,
            "node_id": node.node_id,
            "listeners": [
                {"name": name, "port": port, "connections": connections}
                for name, (port, connections) in sorted(node.listeners.items())
            ],
            "limits": {
                "node": node.node_quota.to_dict(),
                "max_tcp_connection_rate": node.tcp_connection_rate,
                "usage": node.node_usage,
            },
            "default_quota": node.default_quota.to_dict(),
            "tenants": [
                {"name": name, "usage": usage} for name, usage in sorted(node.tenant_usage.items())
            ],
        }

    async def kafka_status(self) -> JSON:
        return await self._kafka.read()

    async def cluster_status(self) -> JSON:
        settings = self._settings
        if settings.storage.log != "kafka":
            return {"distributed": False, "nodes": [], "alive": 0, "stale": 0, "gone": 0}
        from mqttq.cluster.status import read_cluster_status  # noqa: PLC0415

        redis = settings.redis
        status = await read_cluster_status(
            redis.url, cluster=redis.cluster, key_prefix=redis.key_prefix
        )
        return {"distributed": True, **status}

    # ------------------------------------------------------------------ sessions

    async def list_sessions(
        self, where: SessionFilter, limit: int, cursor: str | None = None
    ) -> JSON:
        page = await self.operations.sessions_page(where, limit, cursor)
        return {
            "items": [_session_json(view) for view in page.items],
            "next_cursor": page.next_cursor,
            "total": page.total,
        }

    async def get_session(self, client_id: str) -> JSON | None:
        detail = await self.operations.session(client_id)
        if detail is None:
            return None
        view = detail.view
        answer = _session_json(view)
        answer["subscriptions"] = [
            _subscription_json(client_id, view.tenant, subscription)
            for subscription in detail.subscriptions
        ]
        answer["peer"] = view.address
        answer["keep_alive"] = view.keep_alive
        answer["write_buffer_bytes"] = detail.write_buffer_bytes
        if detail.application is not None:
            answer["application"] = detail.application
        if detail.stored_messages is not None:
            answer["stored_messages"] = detail.stored_messages
        return answer

    def has_session(self, client_id: str) -> bool:
        return self.operations.has_session(client_id)

    def disconnect_session(self, client_id: str) -> bool:
        return self.operations.disconnect(client_id)

    async def remove_session(self, client_id: str) -> bool:
        return await self.operations.remove_session(client_id)

    def list_subscriptions(
        self,
        tenant: str | None,
        client_id: str | None,
        limit: int,
        topic_filter: str | None = None,
        filter_prefix: str | None = None,
    ) -> list[JSON]:
        found = self.operations.subscriptions(tenant, client_id, topic_filter, filter_prefix, limit)
        return [_subscription_json(cid, name, subscription) for cid, name, subscription in found]

    # ------------------------------------------------------------------ retained

    def list_retained(
        self, tenant: str | None, limit: int, prefix: str | None = None
    ) -> list[JSON]:
        found = self.operations.retained(tenant, prefix, limit)
        return [_retained_json(name, message) for name, message in found]

    async def delete_retained(self, tenant: str, topic: str) -> bool:
        return await self.operations.delete_retained(tenant, topic)

    # ------------------------------------------------------------------ tenants

    async def list_tenants(self) -> list[Tenant]:
        return await self.operations.list_tenants()

    async def get_tenant(self, name: str) -> Tenant | None:
        return await self.operations.get_tenant(name)

    def tenant_usage(self, name: str) -> JSON:
        return self.operations.tenant_usage(name)

    def default_tenant_quota(self) -> Quota:
        return self.operations.default_tenant_quota()

    async def put_tenant(self, name: str, quota: Quota) -> Tenant:
        return await self.operations.put_tenant(name, quota)

    async def delete_tenant(self, name: str) -> bool:
        return await self.operations.delete_tenant(name)

    def node_limits(self) -> Quota:
        return self.operations.node_limits()

    def set_node_limits(self, quota: Quota) -> Quota:
        return self.operations.set_node_limits(quota)

    def tcp_connection_rate(self) -> float:
        return self.operations.tcp_connection_rate()

    def set_tcp_connection_rate(self, rate: float) -> float:
        return self.operations.set_tcp_connection_rate(rate)

    # ------------------------------------------------------------------ credentials

    async def list_credentials(self, tenant: str | None) -> list[Credential]:
        return await self.operations.list_credentials(tenant)

    async def get_credential(self, username: str) -> Credential | None:
        return await self.operations.get_credential(username)

    async def add_credential(self, credential: Credential) -> None:
        await self.operations.add_credential(credential)

    async def put_credential(self, credential: Credential) -> None:
        await self.operations.put_credential(credential)

    async def delete_credential(self, username: str) -> bool:
        return await self.operations.delete_credential(username)


def _session_json(view: SessionView) -> JSON:
    return {
        "client_id": view.client_id,
        "tenant": view.tenant,
        "client_type": view.client_type,
        "connected": view.connected,
        "listener": view.listener,
        "persistent": view.persistent,
        "protocol_level": view.protocol_level,
        "expiry_interval": view.expiry_interval,
        "subscriptions": view.subscriptions,
        "queued": view.queued,
        "inflight": view.inflight,
        "disconnected_at": view.disconnected_at,
        "username": view.username,
        "address": view.address,
    }


def _subscription_json(client_id: str, tenant: str, subscription: Subscription) -> JSON:
    return {
        "client_id": client_id,
        "tenant": tenant,
        "topic_filter": subscription.topic_filter,
        "qos": subscription.qos,
        "no_local": subscription.no_local,
        "retain_as_published": subscription.retain_as_published,
        "retain_handling": subscription.retain_handling,
        "subscription_identifier": subscription.subscription_identifier,
    }


def _retained_json(tenant: str, message: Message) -> JSON:
    try:
        text: str | None = message.payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "tenant": tenant,
        "topic": message.topic,
        "qos": message.qos,
        "payload_size": len(message.payload),
        "payload": base64.b64encode(message.payload).decode("ascii"),
        "payload_text": text,
        "created_at": message.created_at,
        "expires_at": message.expires_at,
    }
