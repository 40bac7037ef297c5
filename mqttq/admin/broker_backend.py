"""BrokerAdmin: the AdminBackend port implemented on a running Broker.

Reads come from the broker's memory (sessions, routers, retained indexes, limits);
changes to tenants and credentials go to the AuthStore first and are then applied live
(a stored quota reaches the tenant's limiters at once; a changed or removed credential
drops its cached password check).
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

from mqttq import __version__
from mqttq.admin.backend import MetricsSnapshot
from mqttq.auth.model import ClientType, Credential, Tenant
from mqttq.codec.enums import ReasonCode
from mqttq.limits.quota import Quota

if TYPE_CHECKING:
    from mqttq.broker.server import Broker
    from mqttq.broker.sessions.session import Session
    from mqttq.model import Message, Subscription

__all__ = ["BrokerAdmin"]

JSON = dict[str, Any]


class BrokerAdmin:
    """The admin API's view of `broker` (see mqttq.admin.backend.AdminBackend)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.hub = broker.hub
        self.store = broker.auth_store

    def health(self) -> JSON:
        return {
            "status": "ok",
            "version": __version__,
            "uptime_seconds": round(time.time() - self.broker.started_at, 3),
            "mqtt_port": self.broker.port,
            # For `mqttq credentials` and `mqttq tenant` run elsewhere: where the token file
            # is (readable by its owner only, so this shows the way, not the token).
            "data_dir": str(self.broker.settings.storage.data_dir.resolve()),
        }

    def metrics(self) -> MetricsSnapshot:
        limits = self.broker.limits
        tenants = {name: limits.usage(name) for name in limits.tenants()}
        return MetricsSnapshot(
            counters=self.broker.statistics(),
            refusals=dict(limits.refusals),
            tenants=tenants,
            storage_latency=self.hub.stats.storage_latency.snapshot(),
            app_lag={} if self.hub.app_log is None else dict(self.hub.app_log.lag),
            listeners=self.broker.listener_connections(),
        )

    async def cluster_status(self) -> JSON:
        settings = self.broker.settings
        if settings.storage.log != "kafka":
            return {"distributed": False, "nodes": [], "alive": 0, "stale": 0, "gone": 0}
        from mqttq.cluster.status import read_cluster_status  # noqa: PLC0415

        redis = settings.redis
        status = await read_cluster_status(
            redis.url, cluster=redis.cluster, key_prefix=redis.key_prefix
        )
        return {"distributed": True, **status}

    # ------------------------------------------------------------------ sessions

    async def list_sessions(self, tenant: str | None, prefix: str | None, limit: int) -> list[JSON]:
        selected: list[JSON] = []
        now = time.time()
        for client_id in sorted(self.hub.sessions):
            if prefix and not client_id.startswith(prefix):
                continue
            session = self.hub.sessions[client_id]
            if tenant is not None and session.space.name != tenant:
                continue
            summary = _session_summary(session)
            if session.client is None and session.persistent:
                # Offline, its messages are in storage only (session.queue is None then).
                summary["queued"] = len(await self.hub.storage.fetch(client_id, now))
            selected.append(summary)
            if len(selected) >= limit:
                break
        return selected

    async def get_session(self, client_id: str) -> JSON | None:
        session = self.hub.sessions.get(client_id)
        if session is None:
            return None
        view = _session_summary(session)
        view["subscriptions"] = [
            _subscription_view(client_id, session.space.name, subscription)
            for subscription in session.space.router.subscriptions_of(client_id)
        ]
        client = session.client
        view["peer"] = None if client is None else client.peer
        transport = None if client is None else client.transport
        view["write_buffer_bytes"] = (
            None if transport is None else transport.get_write_buffer_size()
        )
        app_log = self.hub.app_log
        if (
            app_log is not None
            and session.client_type == ClientType.APPLICATION
            and session.persistent
        ):
            app = await app_log.describe(client_id)
            view["application"] = None if app is None else app.to_json()
        if session.persistent:
            stored = await self.hub.storage.fetch(client_id, time.time())
            view["stored_messages"] = len(stored)
        return view

    def disconnect_session(self, client_id: str) -> bool:
        session = self.hub.sessions.get(client_id)
        if session is None or session.client is None:
            return False
        session.client.kick(ReasonCode.ADMINISTRATIVE_ACTION, "disconnected by an administrator")
        return True

    async def remove_session(self, client_id: str) -> bool:
        session = self.hub.sessions.get(client_id)
        life = self.broker.lifecycle
        if session is None or life is None:
            return False
        await life.endings.remove_session(session)
        return True

    def list_subscriptions(
        self, tenant: str | None, client_id: str | None, limit: int
    ) -> list[JSON]:
        views: list[JSON] = []
        if client_id is not None:
            session = self.hub.sessions.get(client_id)
            sessions = [] if session is None else [session]
        else:
            sessions = [self.hub.sessions[c] for c in sorted(self.hub.sessions)]
        for session in sessions:
            space = session.space
            if tenant is not None and space.name != tenant:
                continue
            for subscription in space.router.subscriptions_of(session.client_id):
                views.append(_subscription_view(session.client_id, space.name, subscription))
                if len(views) >= limit:
                    return views
        return views

    # ------------------------------------------------------------------ retained

    def list_retained(self, tenant: str | None, limit: int) -> list[JSON]:
        views: list[JSON] = []
        now = time.time()
        for name in sorted(self.hub.spaces):
            if tenant is not None and name != tenant:
                continue
            for message in sorted(self.hub.spaces[name].retained.all(), key=_by_topic):
                if message.is_expired(now):
                    continue
                views.append(_retained_view(name, message))
                if len(views) >= limit:
                    return views
        return views

    async def delete_retained(self, tenant: str, topic: str) -> bool:
        space = self.hub.spaces.get(tenant)
        if space is None or not space.drop_retained(topic):
            return False
        await self.hub.storage.set_retained(tenant, topic, None)
        return True

    # ------------------------------------------------------------------ tenants

    async def list_tenants(self) -> list[Tenant]:
        return await self.store.list_tenants()

    async def get_tenant(self, name: str) -> Tenant | None:
        return await self.store.get_tenant(name)

    def tenant_usage(self, name: str) -> JSON:
        return dict(self.broker.limits.usage(name))

    def default_tenant_quota(self) -> Quota:
        return self.broker.limits.default_quota

    async def put_tenant(self, name: str, quota: Quota) -> Tenant:
        now = time.time()
        existing = await self.store.get_tenant(name)
        created = existing.created_at if existing is not None else now
        tenant = Tenant(name, quota, created, now)
        await self.store.put_tenant(tenant)
        self.broker.set_tenant_quota(name, quota)
        return (await self.store.get_tenant(name)) or tenant

    async def delete_tenant(self, name: str) -> bool:
        removed = await self.store.delete_tenant(name)
        if removed:
            self.broker.set_tenant_quota(name, None)
        return removed

    def node_limits(self) -> Quota:
        return self.broker.limits.node_quota

    def set_node_limits(self, quota: Quota) -> Quota:
        self.broker.set_node_limits(quota)
        return self.broker.limits.node_quota

    def tcp_connection_rate(self) -> float:
        return self.broker.limits.tcp_rate

    def set_tcp_connection_rate(self, rate: float) -> float:
        self.broker.set_tcp_connection_rate(rate)
        return self.broker.limits.tcp_rate

    # ------------------------------------------------------------------ credentials

    async def list_credentials(self, tenant: str | None) -> list[Credential]:
        return await self.store.list_credentials(tenant)

    async def get_credential(self, username: str) -> Credential | None:
        return await self.store.get_credential(username)

    async def add_credential(self, credential: Credential) -> None:
        await self.store.add_credential(credential)
        self.broker.authenticator.invalidate(credential.username)

    async def put_credential(self, credential: Credential) -> None:
        await self.store.put_credential(credential)
        self.broker.authenticator.invalidate(credential.username)

    async def delete_credential(self, username: str) -> bool:
        removed = await self.store.delete_credential(username)
        self.broker.authenticator.invalidate(username)
        return removed


def _session_summary(session: Session) -> JSON:
    inflight = len(session.inflight)
    return {
        "client_id": session.client_id,
        "tenant": session.space.name,
        "client_type": session.client_type,
        "connected": session.client is not None,
        "listener": None if session.client is None else session.client.listener.name,
        "persistent": session.persistent,
        "protocol_level": session.protocol_level,
        "expiry_interval": session.expiry_interval,
        "subscriptions": len(session.space.router.subscriptions_of(session.client_id)),
        "queued": len(session.queue) if session.queue is not None else 0,
        "inflight": inflight,
        "disconnected_at": session.disconnected_at,
    }


def _subscription_view(client_id: str, tenant: str, subscription: Subscription) -> JSON:
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


def _retained_view(tenant: str, message: Message) -> JSON:
    return {
        "tenant": tenant,
        "topic": message.topic,
        "qos": message.qos,
        "payload_size": len(message.payload),
        "payload": base64.b64encode(message.payload).decode("ascii"),
        "created_at": message.created_at,
        "expires_at": message.expires_at,
    }


def _by_topic(message: Message) -> str:
    return message.topic
