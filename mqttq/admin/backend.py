"""AdminBackend: what the admin HTTP API asks of a running broker.

The HTTP layer (mqttq.admin.server) parses and validates requests, checks the token and the
per-URI rate, and turns results into JSON; everything it reads or changes goes through this
port, implemented on a running broker by mqttq.admin.broker_backend.BrokerAdmin (here, not
in mqttq/broker, so that imports point down: admin -> broker), which reads and changes
the broker only through its command and query API (mqttq.broker.operations). Values returned
are JSON-ready (str, int, float, bool, None, lists and dicts of those).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mqttq.auth.model import Credential, Tenant
from mqttq.broker.delivery.latency import HistogramSnapshot
from mqttq.broker.operations import SessionFilter
from mqttq.limits.quota import Quota

__all__ = ["AdminBackend", "HistogramSnapshot", "MetricsSnapshot", "SessionFilter", "UnknownTenant"]

JSON = dict[str, Any]


class UnknownTenant(LookupError):
    """The tenant named in a request has no row (404)."""


@dataclass(slots=True)
class MetricsSnapshot:
    """Everything /metrics exposes, read at scrape time."""

    counters: dict[str, int]
    """Broker.statistics(): connections, sessions, messages_in_qos0.., dropped, ..."""
    refusals: dict[tuple[str, str], int]
    """(tenant, reason) -> refused operations; reasons: connection_rate, connections,
    sessions, topics, publish_rate, tcp_rate, not_authorized, bad_credentials, acl_publish,
    acl_subscribe, receive_maximum, queue_full, client_id_taken."""
    tenants: dict[str, dict[str, int]]
    """tenant -> {"connections": n, "sessions": n, "topics": n} (tenants seen on this node)."""
    storage_latency: dict[str, HistogramSnapshot] = field(default_factory=dict)
    """Storage operation (enqueue, fetch, remove, save_session, ...) -> latency."""
    app_lag: dict[str, int] = field(default_factory=dict)
    """APPLICATION client id -> records of its Kafka topic not consumed yet."""
    listeners: dict[str, int] = field(default_factory=dict)
    """Listener (tcp, tls, ws, wss) -> clients connected through it now."""


class AdminBackend(Protocol):
    """The broker as the admin API sees it (see module docstring)."""

    def health(self) -> JSON:
        """{"status": "ok", "version": ..., "uptime_seconds": ..., "mqtt_port": ...,
        "data_dir": ...} (the broker's data dir, absolute)."""
        ...

    def metrics(self) -> MetricsSnapshot: ...

    async def cluster_status(self) -> JSON:
        """The nodes of the cluster (mqttq.cluster.status) with `"distributed": true`, or
        `{"distributed": false, "nodes": [], ...}` for an embedded broker. Raises
        mqttq.cluster.status.ClusterStatusError (503) when Redis cannot be read."""
        ...

    def node_info(self) -> JSON:
        """This node at a glance: version, uptime_seconds, started_at, mode (embedded |
        distributed), node_id, listeners [{name, port, connections}], limits {node, usage,
        max_tcp_connection_rate}, default_quota, tenants [{name, quota, stored, usage}]
        (stored tenants and those in use here; filled in by the caller from the store)."""
        ...

    async def kafka_status(self) -> JSON:
        """Distributed mode: {"distributed": true, "topics": [...], "consumer_groups":
        [...]}; embedded: {"distributed": false, "topics": [], "consumer_groups": []}.
        Raises mqttq.broker.operations_kafka.KafkaStatusError (503) when Kafka cannot
        be read."""
        ...

    # sessions --------------------------------------------------------------------------
    async def list_sessions(
        self, where: SessionFilter, limit: int, cursor: str | None = None
    ) -> JSON:
        """A page of at most `limit` sessions (online or not) matching `where`, ordered by
        client id, after `cursor`: {"items": [...], "next_cursor": str | None, "total":
        n}. Each item: client_id, tenant, client_type, connected, listener, persistent,
        protocol_level, expiry_interval, subscriptions (count), queued, inflight,
        disconnected_at, username, address. `queued` counts the messages the session
        holds for its client: those waiting for the client's Receive Maximum while it is
        connected, every stored message (the `stored_messages` of `get_session`) while a
        persistent session is offline."""
        ...

    async def get_session(self, client_id: str) -> JSON | None:
        """One session in detail: the list fields with its subscriptions (a list), its
        peer address (None when offline), keep_alive, write_buffer_bytes, application
        (APPLICATION clients: topic, lag, ...) and, for a persistent session,
        stored_messages (messages waiting in storage)."""
        ...

    def has_session(self, client_id: str) -> bool:
        """A session with this client id exists."""
        ...

    def disconnect_session(self, client_id: str) -> bool:
        """Close the client's connection (5.0: DISCONNECT 0x98 Administrative action); the
        session stays. False when the client is not connected."""
        ...

    async def remove_session(self, client_id: str) -> bool:
        """Disconnect the client if connected and delete its session and queue."""
        ...

    def list_subscriptions(
        self,
        tenant: str | None,
        client_id: str | None,
        limit: int,
        topic_filter: str | None = None,
        filter_prefix: str | None = None,
    ) -> list[JSON]:
        """At most `limit` subscriptions ordered by client id: client_id, tenant,
        topic_filter, qos, no_local, retain_as_published, retain_handling,
        subscription_identifier."""
        ...

    # retained --------------------------------------------------------------------------
    def list_retained(
        self, tenant: str | None, limit: int, prefix: str | None = None
    ) -> list[JSON]:
        """At most `limit` retained messages ordered by tenant and topic: tenant, topic,
        qos, payload_size, payload (base64), payload_text (the payload when it is UTF-8,
        else None), created_at, expires_at."""
        ...

    async def delete_retained(self, tenant: str, topic: str) -> bool:
        """Delete the retained message on every node (memory and storage, as an empty
        retained PUBLISH would) and give back the topic it held against the tenant's
        max_topics. False when there is none."""
        ...

    # tenants and limits ----------------------------------------------------------------
    async def list_tenants(self) -> list[Tenant]: ...

    async def get_tenant(self, name: str) -> Tenant | None: ...

    def tenant_usage(self, name: str) -> JSON:
        """{"connections": n, "sessions": n, "topics": n} on this node."""
        ...

    def default_tenant_quota(self) -> Quota:
        """The quota of tenants without a row (`[mqtt_limit.tenant]`)."""
        ...

    async def put_tenant(self, name: str, quota: Quota) -> Tenant:
        """Store the tenant's quota and apply it at once to its limiters (live)."""
        ...

    async def delete_tenant(self, name: str) -> bool:
        """Remove the row; the tenant's clients fall back to the default quota at once."""
        ...

    def node_limits(self) -> Quota: ...

    def set_node_limits(self, quota: Quota) -> Quota:
        """Apply new node limits at once (not written to broker.toml)."""
        ...

    def tcp_connection_rate(self) -> float:
        """New TCP connections per second the node accepts."""
        ...

    def set_tcp_connection_rate(self, rate: float) -> float:
        """Apply a new TCP connection rate at once (a finite number >= 0, checked by the
        caller; not written to broker.toml)."""
        ...

    # credentials -----------------------------------------------------------------------
    async def list_credentials(self, tenant: str | None) -> list[Credential]: ...

    async def get_credential(self, username: str) -> Credential | None: ...

    async def add_credential(self, credential: Credential) -> None:
        """Raises mqttq.auth.ports.CredentialExists (409)."""
        ...

    async def put_credential(self, credential: Credential) -> None: ...

    async def delete_credential(self, username: str) -> bool: ...
