"""Operations: the broker's command and query API for the admin layer (and it alone).

The admin HTTP API (mqttq.admin.broker_backend) reads and changes the broker only through
this class, never through the Hub's sessions, routers, retained indexes or its storage:
- queries: a page of sessions with filters, one session in detail, subscriptions by
  client or filter, retained messages by topic prefix, the node's limits and usage;
- commands: disconnect a client, remove a session, delete a retained message, change
  limits and quotas, change tenants and credentials (the AuthStore first, then applied
  live).

Commands take the same paths as MQTT does: deleting a retained message goes through
`Hub.delete_retained`, which tells every node of a cluster (as an empty retained PUBLISH
would), so the message cannot come back from another node or after a restart.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mqttq.auth.blocked.service import BlockedClients
from mqttq.auth.model import ClientType, Credential, Tenant
from mqttq.broker.connection.admission import chain_of
from mqttq.broker.connection.client import Client
from mqttq.codec.enums import ReasonCode
from mqttq.config.schema import node_id_of

if TYPE_CHECKING:
    from mqttq.broker.delivery.latency import HistogramSnapshot
    from mqttq.broker.server import Broker
    from mqttq.broker.sessions.session import Session
    from mqttq.limits.quota import Quota
    from mqttq.model import Message, Subscription

__all__ = [
    "NodeView",
    "Operations",
    "SessionDetail",
    "SessionFilter",
    "SessionPage",
    "SessionView",
]


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions a page holds: every given field must match (None: any).
    `user` matches the username a connected client authenticated with, `address` the
    start of its host:port; `state` is `connected` or `offline`."""

    tenant: str | None = None
    prefix: str | None = None
    user: str | None = None
    address: str | None = None
    state: str | None = None


@dataclass(frozen=True, slots=True)
class SessionView:
    """One session as a list shows it. `queued` counts the messages the session holds
    for its client: those waiting for its Receive Maximum while connected, every stored
    message while a persistent session is offline."""

    client_id: str
    tenant: str
    client_type: str
    connected: bool
    listener: str | None
    persistent: bool
    protocol_level: int
    expiry_interval: int
    subscriptions: int
    queued: int
    inflight: int
    disconnected_at: float | None
    username: str | None
    address: str | None
    keep_alive: int | None


@dataclass(frozen=True, slots=True)
class SessionPage:
    """A page of sessions ordered by client id: `next_cursor` is the client id after
    which the next page starts (None: this is the last), `total` how many match."""

    items: list[SessionView]
    next_cursor: str | None
    total: int


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """One session in detail: its view, subscriptions, the bytes waiting in its
    connection's write buffer (None offline), its APPLICATION state (topic, lag, ...;
    None for other clients or without the Kafka log) and, for a persistent session,
    the messages waiting in storage."""

    view: SessionView
    subscriptions: list[Subscription]
    write_buffer_bytes: int | None
    application: dict[str, Any] | None
    stored_messages: int | None


@dataclass(frozen=True, slots=True)
class NodeView:
    """This node at a glance."""

    node_id: str
    mode: str
    """embedded | distributed"""
    started_at: float
    listeners: dict[str, tuple[int, int]]
    """listener name -> (bound port, clients connected through it now)"""
    node_quota: Quota
    tcp_connection_rate: float
    node_usage: dict[str, int]
    default_quota: Quota
    tenant_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    """tenant -> its connections, sessions and topics (tenants seen on this node)."""


class Operations:
    """The command and query API of `broker` (see the module docstring)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._hub = broker.hub
        self._store = broker.auth_store

    # ------------------------------------------------------------------ node

    @property
    def started_at(self) -> float:
        """When the broker started (seconds since the epoch)."""
        return self._broker.started_at

    @property
    def mqtt_port(self) -> int:
        """The bound MQTT TCP port."""
        return self._broker.port

    @property
    def data_dir(self) -> str:
        """The broker's data dir, absolute."""
        return str(self._broker.settings.storage.data_dir.resolve())

    def blocked_clients(self) -> BlockedClients | None:
        """The blocked-client list at the head of the authentication chain (None: the
        broker was composed without one)."""
        provider = chain_of(self._broker.authenticator).provider("blocked")
        return provider if isinstance(provider, BlockedClients) else None

    @property
    def distributed(self) -> bool:
        """The broker runs with the Kafka message log (a cluster node)."""
        return self._broker.settings.storage.log == "kafka"

    def node(self) -> NodeView:
        """Mode, listeners, limits and usage of this node."""
        broker = self._broker
        limits = broker.limits
        connections = broker.listener_connections()
        ports = broker.ports
        return NodeView(
            node_id=node_id_of(broker.settings),
            mode="distributed" if self.distributed else "embedded",
            started_at=broker.started_at,
            listeners={name: (port, connections.get(name, 0)) for name, port in ports.items()},
            node_quota=limits.node_quota,
            tcp_connection_rate=limits.tcp_rate,
            node_usage=dict(limits.node_usage()),
            default_quota=limits.default_quota,
            tenant_usage={name: dict(limits.usage(name)) for name in limits.tenants()},
        )

    def statistics(self) -> dict[str, int]:
        """The broker's counters (Broker.statistics)."""
        return self._broker.statistics()

    def refusals(self) -> dict[tuple[str, str], int]:
        """(tenant, reason) -> operations refused by the limits."""
        return dict(self._broker.limits.refusals)

    def storage_latency(self) -> dict[str, HistogramSnapshot]:
        """Storage operation -> its latency histogram."""
        return self._hub.stats.storage_latency.snapshot()

    def app_lag(self) -> dict[str, int]:
        """APPLICATION client id -> records of its Kafka topic not consumed yet."""
        app_log = self._hub.app_log
        return {} if app_log is None else dict(app_log.lag)

    def listener_connections(self) -> dict[str, int]:
        """Clients connected now, by listener."""
        return self._broker.listener_connections()

    # ------------------------------------------------------------------ sessions

    async def sessions_page(
        self, where: SessionFilter, limit: int, after: str | None = None
    ) -> SessionPage:
        """At most `limit` sessions matching `where`, ordered by client id, after the
        client id `after`. Only the page's sessions are described (and only they, when
        persistent and offline, read their stored count)."""
        sessions = self._hub.sessions
        prefix = where.prefix
        if where == SessionFilter(prefix=prefix):  # by client id only: no session is read
            matching = [c for c in sessions if prefix is None or c.startswith(prefix)]
        else:
            tenant = where.tenant
            connected = None if where.state is None else where.state == "connected"
            by_client = where.user is not None or where.address is not None
            matching = [
                client_id
                for client_id, session in sessions.items()
                if (prefix is None or client_id.startswith(prefix))
                and (connected is None or (session.client is not None) is connected)
                and (tenant is None or session.space.name == tenant)
                and (not by_client or _client_matches(session, where))
            ]
        later = matching if after is None else [c for c in matching if c > after]
        # The page's ids only are sorted (n log limit), not every session's.
        chosen = heapq.nsmallest(limit + 1, later)
        more = len(chosen) > limit
        chosen = chosen[:limit]
        items = [await self._view(sessions[client_id]) for client_id in chosen]
        return SessionPage(items, chosen[-1] if more else None, len(matching))

    async def session(self, client_id: str) -> SessionDetail | None:
        """One session in detail (None: no such session)."""
        session = self._hub.sessions.get(client_id)
        if session is None:
            return None
        view = _view(session)
        client = session.client
        transport = None if client is None else client.transport
        application: dict[str, Any] | None = None
        app_log = self._hub.app_log
        if (
            app_log is not None
            and session.client_type == ClientType.APPLICATION
            and session.persistent
        ):
            app = await app_log.describe(client_id)
            application = None if app is None else app.to_json()
        stored: int | None = None
        if session.persistent:
            stored = len(await self._hub.storage.fetch(client_id, time.time()))
        return SessionDetail(
            view,
            session.space.router.subscriptions_of(client_id),
            None if transport is None else transport.get_write_buffer_size(),
            application,
            stored,
        )

    def disconnect(self, client_id: str) -> bool:
        """Close the client's connection (5.0: DISCONNECT 0x98 Administrative action); the
        session stays. False when the client is not connected."""
        session = self._hub.sessions.get(client_id)
        if session is None or session.client is None:
            return False
        session.client.kick(ReasonCode.ADMINISTRATIVE_ACTION, "disconnected by an administrator")
        return True

    def has_session(self, client_id: str) -> bool:
        """A session with this client id exists on this node."""
        return client_id in self._hub.sessions

    async def remove_session(self, client_id: str) -> bool:
        """Disconnect the client if connected and delete its session and queue; False
        when there is no such session."""
        session = self._hub.sessions.get(client_id)
        life = self._broker.lifecycle
        if session is None or life is None:
            return False
        await life.endings.remove_session(session)
        return True

    def subscriptions(
        self,
        tenant: str | None,
        client_id: str | None,
        topic_filter: str | None,
        filter_prefix: str | None,
        limit: int,
    ) -> list[tuple[str, str, Subscription]]:
        """At most `limit` (client id, tenant, subscription) ordered by client id, of one
        tenant and client when given, with exactly `topic_filter` or a filter starting
        with `filter_prefix` when given."""
        found: list[tuple[str, str, Subscription]] = []
        sessions = self._hub.sessions
        if client_id is not None:
            ids = [client_id] if client_id in sessions else []
        else:
            ids = sorted(sessions)
        for cid in ids:
            space = sessions[cid].space
            if tenant is not None and space.name != tenant:
                continue
            for subscription in space.router.subscriptions_of(cid):
                name = subscription.topic_filter
                if topic_filter is not None and name != topic_filter:
                    continue
                if filter_prefix is not None and not name.startswith(filter_prefix):
                    continue
                found.append((cid, space.name, subscription))
                if len(found) >= limit:
                    return found
        return found

    # ------------------------------------------------------------------ retained

    def retained(
        self, tenant: str | None, prefix: str | None, limit: int
    ) -> list[tuple[str, Message]]:
        """At most `limit` (tenant, message) retained and not expired, ordered by tenant
        and topic, of one tenant and under one topic prefix when given."""
        found: list[tuple[str, Message]] = []
        now = time.time()
        spaces = self._hub.spaces
        for name in sorted(spaces):
            if tenant is not None and name != tenant:
                continue
            messages = [
                message
                for message in spaces[name].retained.all()
                if (prefix is None or message.topic.startswith(prefix))
                and not message.is_expired(now)
            ]
            for message in sorted(messages, key=_by_topic):
                found.append((name, message))
                if len(found) >= limit:
                    return found
        return found

    async def delete_retained(self, tenant: str, topic: str) -> bool:
        """Delete the retained message of `topic`, on every node of a cluster, and give
        back the topic it held; False when there is none."""
        stored = self._hub.delete_retained(tenant, topic)
        if stored is None:
            return False
        await stored
        return True

    # ------------------------------------------------------------------ limits

    def tenant_usage(self, name: str) -> dict[str, int]:
        """`name`'s connections, sessions and topics on this node."""
        return dict(self._broker.limits.usage(name))

    def default_tenant_quota(self) -> Quota:
        """The quota of tenants without a row."""
        return self._broker.limits.default_quota

    def node_limits(self) -> Quota:
        """The node layer's quota."""
        return self._broker.limits.node_quota

    def set_node_limits(self, quota: Quota) -> Quota:
        """Apply new node limits at once; the limits now."""
        self._broker.set_node_limits(quota)
        return self._broker.limits.node_quota

    def tcp_connection_rate(self) -> float:
        """New TCP connections per second the node accepts."""
        return self._broker.limits.tcp_rate

    def set_tcp_connection_rate(self, rate: float) -> float:
        """Apply a new TCP connection rate at once; the rate now."""
        self._broker.set_tcp_connection_rate(rate)
        return self._broker.limits.tcp_rate

    # ------------------------------------------------------------------ tenants

    async def list_tenants(self) -> list[Tenant]:
        """Every stored tenant."""
        return await self._store.list_tenants()

    async def get_tenant(self, name: str) -> Tenant | None:
        """The tenant's row (None: it has none)."""
        return await self._store.get_tenant(name)

    async def put_tenant(self, name: str, quota: Quota) -> Tenant:
        """Store the tenant's quota, then apply it at once; the row as stored."""
        now = time.time()
        existing = await self._store.get_tenant(name)
        created = existing.created_at if existing is not None else now
        tenant = Tenant(name, quota, created, now)
        await self._store.put_tenant(tenant)
        self._broker.set_tenant_quota(name, quota)
        return (await self._store.get_tenant(name)) or tenant

    async def delete_tenant(self, name: str) -> bool:
        """Remove the row; its clients fall back to the default quota at once."""
        removed = await self._store.delete_tenant(name)
        if removed:
            self._broker.set_tenant_quota(name, None)
        return removed

    # ------------------------------------------------------------------ credentials

    async def list_credentials(self, tenant: str | None) -> list[Credential]:
        """Credentials, of one tenant when given."""
        return await self._store.list_credentials(tenant)

    async def get_credential(self, username: str) -> Credential | None:
        """One credential (None: no such username)."""
        return await self._store.get_credential(username)

    async def add_credential(self, credential: Credential) -> None:
        """Store a new credential (CredentialExists when taken)."""
        await self._store.add_credential(credential)
        self._broker.authenticator.invalidate(credential.username)

    async def put_credential(self, credential: Credential) -> None:
        """Replace a credential; its cached password check is dropped."""
        await self._store.put_credential(credential)
        self._broker.authenticator.invalidate(credential.username)

    async def delete_credential(self, username: str) -> bool:
        """Remove a credential; its cached password check is dropped."""
        removed = await self._store.delete_credential(username)
        self._broker.authenticator.invalidate(username)
        return removed

    # ------------------------------------------------------------------ views

    async def _view(self, session: Session) -> SessionView:
        view = _view(session)
        if session.client is None and session.persistent:
            # Offline, its messages are in storage only (session.queue is None then).
            stored = await self._hub.storage.fetch(session.client_id, time.time())
            return _with_queued(view, len(stored))
        return view


def _client_matches(session: Session, where: SessionFilter) -> bool:
    """The session's connected client has the username and address `where` asks for."""
    client = session.client
    if client is None:
        return False
    if where.user is not None:
        identity = client.identity if isinstance(client, Client) else None
        if identity is None or identity.username != where.user:
            return False
    return where.address is None or client.peer.startswith(where.address)


def _view(session: Session) -> SessionView:
    client = session.client
    identity = client.identity if isinstance(client, Client) else None
    return SessionView(
        client_id=session.client_id,
        tenant=session.space.name,
        client_type=session.client_type,
        connected=client is not None,
        listener=None if client is None else client.listener.name,
        persistent=session.persistent,
        protocol_level=session.protocol_level,
        expiry_interval=session.expiry_interval,
        subscriptions=len(session.space.router.subscriptions_of(session.client_id)),
        queued=len(session.queue) if session.queue is not None else 0,
        inflight=len(session.inflight),
        disconnected_at=session.disconnected_at,
        username=None if identity is None else identity.username,
        address=None if client is None else client.peer,
        keep_alive=None if client is None else client.conn.keep_alive,
    )


def _with_queued(view: SessionView, queued: int) -> SessionView:
    return replace(view, queued=queued)


def _by_topic(message: Message) -> str:
    return message.topic
