"""BackendDouble: an in-memory AdminBackend, kept only for what a real broker cannot be
made to do on demand: an unexpected failure (`broken`: the 500 path), a store that fails
(EmptyAuthStore: 503), UnknownTenant raised by the backend, and HTTP-layer details (token,
rate limit, input validation) that need no broker behind them.

Sessions, subscriptions, retained messages, usage and node limits live in plain dicts the
tests fill and inspect; credentials and tenants live in a real SqliteAuthStore (tmp_path).
What the routes do to a real broker (sessions, subscriptions, retained messages, limits)
is tested against BrokerAdmin in tests/admin/test_admin_real_broker.py, and end to end
against `mqttq serve` in tests/integration/test_admin_api.py."""

from __future__ import annotations

import copy
import time
from typing import Any

from mqttq import __version__
from mqttq.admin.backend import MetricsSnapshot, UnknownTenant
from mqttq.auth.model import Credential, Tenant
from mqttq.auth.ports import AuthStore
from mqttq.limits.quota import Quota

JSON = dict[str, Any]

NO_USAGE = {"connections": 0, "sessions": 0, "topics": 0}


class BackendDouble:
    """Implements mqttq.admin.backend.AdminBackend over dicts and `store`."""

    def __init__(self, store: AuthStore) -> None:
        self.store = store
        self.sessions: dict[str, JSON] = {}
        self.subscriptions: list[JSON] = []
        self.retained: dict[tuple[str, str], JSON] = {}
        self.usage: dict[str, JSON] = {}
        self.default_quota = Quota(max_connections_per_node=100, max_publish_rate=50.0)
        self.node = Quota()
        self.tcp_rate = 10_000.0
        self.snapshot = MetricsSnapshot(counters={}, refusals={}, tenants={})
        self.unknown_tenant_raises = False
        """delete_tenant raises UnknownTenant instead of returning False."""
        self.broken = False
        """list_sessions raises an unexpected error (the 500 path)."""
        self.disconnected: list[str] = []

    # --- filling -----------------------------------------------------------------------
    def add_session(
        self, client_id: str, tenant: str = "default", *, connected: bool = True
    ) -> None:
        self.sessions[client_id] = {
            "client_id": client_id,
            "tenant": tenant,
            "client_type": "DEVICE",
            "connected": connected,
            "persistent": not connected,
            "protocol_level": 5,
            "expiry_interval": 60,
            "subscriptions": 0,
            "queued": 0,
            "inflight": 0,
            "disconnected_at": None if connected else 1_700_000_000.0,
        }

    def add_subscription(self, client_id: str, tenant: str, topic_filter: str, qos: int) -> None:
        self.subscriptions.append(
            {
                "client_id": client_id,
                "tenant": tenant,
                "topic_filter": topic_filter,
                "qos": qos,
                "no_local": False,
                "retain_as_published": False,
                "retain_handling": 0,
                "subscription_identifier": None,
            }
        )
        self.sessions[client_id]["subscriptions"] += 1

    def add_retained(self, tenant: str, topic: str, payload: str = "aGk=") -> None:
        self.retained[(tenant, topic)] = {
            "tenant": tenant,
            "topic": topic,
            "qos": 1,
            "payload_size": 2,
            "payload": payload,
            "created_at": 1_700_000_000.0,
            "expires_at": None,
        }

    # --- AdminBackend ------------------------------------------------------------------
    def health(self) -> JSON:
        return {"status": "ok", "version": __version__, "uptime_seconds": 1.5, "mqtt_port": 1883}

    def metrics(self) -> MetricsSnapshot:
        return self.snapshot

    def list_sessions(self, tenant: str | None, prefix: str | None, limit: int) -> list[JSON]:
        if self.broken:
            raise RuntimeError("the double was told to break")
        found = [
            copy.deepcopy(self.sessions[c])
            for c in sorted(self.sessions)
            if (tenant is None or self.sessions[c]["tenant"] == tenant)
            and (prefix is None or c.startswith(prefix))
        ]
        return found[:limit]

    async def get_session(self, client_id: str) -> JSON | None:
        session = self.sessions.get(client_id)
        if session is None:
            return None
        detail = copy.deepcopy(session)
        detail["subscriptions"] = [s for s in self.subscriptions if s["client_id"] == client_id]
        detail["peer"] = "127.0.0.1:50000" if session["connected"] else None
        if detail["persistent"]:
            detail["stored_messages"] = 0
        return detail

    def disconnect_session(self, client_id: str) -> bool:
        session = self.sessions.get(client_id)
        if session is None or not session["connected"]:
            return False
        session["connected"] = False
        self.disconnected.append(client_id)
        return True

    async def remove_session(self, client_id: str) -> bool:
        if self.sessions.pop(client_id, None) is None:
            return False
        self.subscriptions = [s for s in self.subscriptions if s["client_id"] != client_id]
        return True

    def list_subscriptions(
        self, tenant: str | None, client_id: str | None, limit: int
    ) -> list[JSON]:
        found = [
            dict(s)
            for s in self.subscriptions
            if (tenant is None or s["tenant"] == tenant)
            and (client_id is None or s["client_id"] == client_id)
        ]
        return found[:limit]

    def list_retained(self, tenant: str | None, limit: int) -> list[JSON]:
        found = [dict(v) for k, v in sorted(self.retained.items()) if tenant in (None, k[0])]
        return found[:limit]

    async def delete_retained(self, tenant: str, topic: str) -> bool:
        return self.retained.pop((tenant, topic), None) is not None

    async def list_tenants(self) -> list[Tenant]:
        return await self.store.list_tenants()

    async def get_tenant(self, name: str) -> Tenant | None:
        return await self.store.get_tenant(name)

    def tenant_usage(self, name: str) -> JSON:
        return dict(self.usage.get(name, NO_USAGE))

    def default_tenant_quota(self) -> Quota:
        return self.default_quota

    async def put_tenant(self, name: str, quota: Quota) -> Tenant:
        now = time.time()
        existing = await self.store.get_tenant(name)
        created = existing.created_at if existing is not None else now
        await self.store.put_tenant(Tenant(name, quota, created, now))
        stored = await self.store.get_tenant(name)
        assert stored is not None
        return stored

    async def delete_tenant(self, name: str) -> bool:
        removed = await self.store.delete_tenant(name)
        if not removed and self.unknown_tenant_raises:
            raise UnknownTenant(f"no tenant {name!r}")
        return removed

    def node_limits(self) -> Quota:
        return self.node

    def set_node_limits(self, quota: Quota) -> Quota:
        self.node = quota
        return self.node

    def tcp_connection_rate(self) -> float:
        return self.tcp_rate

    def set_tcp_connection_rate(self, rate: float) -> float:
        self.tcp_rate = rate
        return self.tcp_rate

    async def list_credentials(self, tenant: str | None) -> list[Credential]:
        return await self.store.list_credentials(tenant)

    async def get_credential(self, username: str) -> Credential | None:
        return await self.store.get_credential(username)

    async def add_credential(self, credential: Credential) -> None:
        await self.store.add_credential(credential)

    async def put_credential(self, credential: Credential) -> None:
        await self.store.put_credential(credential)

    async def delete_credential(self, username: str) -> bool:
        return await self.store.delete_credential(username)


def populated(backend: BackendDouble) -> None:
    """Three sessions in two tenants, their subscriptions and three retained messages."""
    backend.add_session("c1", "acme")
    backend.add_session("c2", "acme", connected=False)
    backend.add_session("d1", "default")
    backend.add_subscription("c1", "acme", "a/+", 1)
    backend.add_subscription("c2", "acme", "b/#", 2)
    backend.add_subscription("d1", "default", "x", 0)
    backend.add_retained("acme", "a/1")
    backend.add_retained("default", "a/1")
    backend.add_retained("default", "z")
