"""BackendDouble: an AdminBackend for fault injection only, i.e. what a real broker cannot
be made to do on demand:
- `broken`: list_sessions raises an unexpected error (the plain 500 path);
- `unknown_tenant_raises`: delete_tenant raises UnknownTenant (404 from the backend);
- `snapshot`: a MetricsSnapshot with exact, made-up values, so that /metrics rendering is
  checked sample by sample (test_admin_metrics.py).

Everything else the admin API does, a store failure (503) included, is tested against a
real broker: tests/admin/real_broker.py (in-process) and tests/integration/test_admin_api.py
(`mqttq serve`). The double holds no sessions, subscriptions or retained messages; tenants
and credentials live in the `store` it is given.
"""

from __future__ import annotations

import time
from typing import Any

from mqttq import __version__
from mqttq.admin.backend import MetricsSnapshot, SessionFilter, UnknownTenant
from mqttq.auth.model import Credential, Tenant
from mqttq.auth.ports import AuthStore
from mqttq.limits.quota import Quota

JSON = dict[str, Any]

NO_USAGE = {"connections": 0, "sessions": 0, "topics": 0}


class BackendDouble:
    """Implements mqttq.admin.backend.AdminBackend with the fault switches above."""

    def __init__(self, store: AuthStore) -> None:
        self.store = store
        self.node = Quota()
        self.tcp_rate = 10_000.0
        self.snapshot = MetricsSnapshot(counters={}, refusals={}, tenants={})
        self.unknown_tenant_raises = False
        """delete_tenant raises UnknownTenant instead of returning False."""
        self.broken = False
        """list_sessions raises an unexpected error (the 500 path)."""

    def health(self) -> JSON:
        return {"status": "ok", "version": __version__, "uptime_seconds": 1.5, "mqtt_port": 1883}

    def metrics(self) -> MetricsSnapshot:
        return self.snapshot

    async def cluster_status(self) -> JSON:
        return {"distributed": False, "nodes": [], "alive": 0, "stale": 0, "gone": 0}

    def node_info(self) -> JSON:
        raise NotImplementedError("tested on a real broker")

    async def kafka_status(self) -> JSON:
        return {"distributed": False, "topic_prefix": None, "topics": [], "consumer_groups": []}

    async def list_sessions(
        self, where: SessionFilter, limit: int, cursor: str | None = None
    ) -> JSON:
        if self.broken:
            raise RuntimeError("the double was told to break")
        return {"items": [], "next_cursor": None, "total": 0}

    async def get_session(self, client_id: str) -> JSON | None:
        return None

    def has_session(self, client_id: str) -> bool:
        return False

    def disconnect_session(self, client_id: str) -> bool:
        return False

    async def remove_session(self, client_id: str) -> bool:
        return False

    def list_subscriptions(
        self,
        tenant: str | None,
        client_id: str | None,
        limit: int,
        topic_filter: str | None = None,
        filter_prefix: str | None = None,
    ) -> list[JSON]:
        return []

    def list_retained(
        self, tenant: str | None, limit: int, prefix: str | None = None
    ) -> list[JSON]:
        return []

    async def delete_retained(self, tenant: str, topic: str) -> bool:
        return False

    async def list_tenants(self) -> list[Tenant]:
        return await self.store.list_tenants()

    async def get_tenant(self, name: str) -> Tenant | None:
        return await self.store.get_tenant(name)

    def tenant_usage(self, name: str) -> JSON:
        return dict(NO_USAGE)

    def default_tenant_quota(self) -> Quota:
        return Quota()

    async def put_tenant(self, name: str, quota: Quota) -> Tenant:
        now = time.time()
        await self.store.put_tenant(Tenant(name, quota, now, now))
        return Tenant(name, quota, now, now)

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
