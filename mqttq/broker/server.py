"""Broker: the composition of hub, session lifecycle and listener, with its lifecycle."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from mqttq.auth.authenticator import Authenticator
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.auth.ports import AuthStore
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.distributed.log_router import LogRouter
from mqttq.broker.endpoints import Endpoints, open_endpoints
from mqttq.broker.sessions.lifecycle import Lifecycle
from mqttq.config import MqttLimitSettings, Settings
from mqttq.errors import MqttqError
from mqttq.limits.limiter import Limits
from mqttq.limits.quota import Quota
from mqttq.storage.ports import AppContextStore, MessageLog, Storage

if TYPE_CHECKING:
    from mqttq.cluster.link import ClusterLink

__all__ = ["HOUSEKEEPING_INTERVAL", "Broker", "node_limits"]

HOUSEKEEPING_INTERVAL = 30.0
"""Seconds between re-reading stored tenant quotas (another node of a PostgreSQL-backed
cluster may have changed them) and dropping idle tenants' limiters and namespaces."""

logger = logging.getLogger("mqttq.broker")


def node_limits(limit: MqttLimitSettings) -> Limits:
    """The node's and its tenants' limits as `[mqtt_limit]` sets them, from now on."""
    return Limits(
        limit.cluster,
        limit.tenant,
        rate_wait=limit.rate_wait_ms / 1000,
        burst_seconds=limit.burst_seconds,
        tcp_rate=limit.max_tcp_connection_rate,
        now=time.monotonic(),
    )


class Broker:
    """An MQTT broker bound to one TCP listener, backed by one storage adapter and one
    credential store (`auth_store`; without one, no credentials or tenant rows exist).

    `start()` opens the stores, loads tenant quotas, restores persistent sessions and
    retained messages, and binds the listener; `shutdown()` stops accepting, disconnects
    every client (0x8B on 5.0), flushes and closes the stores. Limits (node layer from
    `[mqtt_limit.cluster]`, tenants' quotas) change live through `set_node_limits`,
    `set_default_quota` and `reload_tenants`.
    """

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        auth_store: AuthStore | None = None,
        log: MessageLog | None = None,
        app_contexts: AppContextStore | None = None,
        *,
        cluster: ClusterLink | None = None,
    ) -> None:
        """`app_contexts`: where APPLICATION clients' consumer contexts live; given when
        `storage.log = "kafka"`, which turns on their Kafka topics (`Hub.app_log`).
        `cluster`: this node's link to the other nodes of the cluster (mqttq.cluster)."""
        self.settings = settings
        self.storage = storage
        self.app_contexts = app_contexts
        self.auth_store: AuthStore = auth_store if auth_store is not None else EmptyAuthStore()
        self.limits = node_limits(settings.mqtt_limit)
        self.authenticator = Authenticator(
            self.auth_store,
            anonymous=settings.auth.anonymous,
            anonymous_acl=settings.auth.anonymous_acl,
        )
        self.hub = Hub(settings.mqtt, storage, self.limits)
        self.log = log
        self.cluster_link = cluster
        self._log_router: LogRouter | None = None
        self.started_at = time.time()
        self._life: Lifecycle | None = None
        self._endpoints = Endpoints()
        self._stopped: asyncio.Event | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._tenant_quotas: dict[str, Quota] = {}
        self._housekeeping: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound MQTT TCP port (after `start`)."""
        return self._endpoints.ports.get("tcp", 0)

    @property
    def ports(self) -> dict[str, int]:
        """Bound port of every listener by name: tcp, and tls, ws, wss when configured."""
        return dict(self._endpoints.ports)

    @property
    def proxy_connections(self) -> dict[str, int]:
        """Connections through the PROXY protocol listeners so far, by outcome: accepted,
        local (the balancer's own), untrusted, malformed, timeouts, blocked."""
        return self._endpoints.proxy.as_dict()

    def reload_certificates(self) -> bool:
        """Re-read the TLS listeners' certificate, key and CA files (SIGHUP): new
        connections get the new ones, connected clients stay. True when every listener
        reloaded; a listener whose files are now bad keeps its old ones (logged)."""
        return self._endpoints.reload_certificates()

    def listener_connections(self) -> dict[str, int]:
        """Clients connected now, by the listener they came through."""
        counts = dict.fromkeys(self._endpoints.ports, 0)
        for client in self._life.connections() if self._life is not None else ():
            name = client.listener.name
            counts[name] = counts.get(name, 0) + 1
        return counts

    async def start(self) -> None:
        """Load state, then bind the listener (settings.listener.port may be 0)."""
        loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        await self.auth_store.open()
        await self.reload_tenants()
        await self.storage.open()
        if self.app_contexts is not None:
            # Imported here: confluent_kafka is loaded only when the log is on.
            from mqttq.broker.distributed.app_log import AppLog  # noqa: PLC0415

            app_log = AppLog(self.settings.kafka, self.app_contexts)
            await app_log.open()
            self.hub.app_log = app_log
        life = self._life = Lifecycle(self.hub, loop, self.authenticator)
        if self.cluster_link is not None:
            # Imported here: confluent_kafka is loaded only when the log is on.
            from mqttq.broker.distributed.cluster_node import ClusterNode  # noqa: PLC0415

            node = ClusterNode(self.hub, self.cluster_link)
            node.taken_over = life.endings.moved_away
            await node.open()  # every node's sessions, subscriptions, retained messages
            life.attach_cluster(node)
        restored = await life.restore()
        if self.hub.inbox is not None:  # accepted messages the last run did not fan out
            await self.hub.inbox.replay()
            if self.hub.app_log is not None or self.log is not None:
                # Records for Kafka topics are not part of the inbox's one commit.
                self.hub.inbox = None
        if self.log is not None:
            await self.log.open()
            self.hub.log = self.log
            self._log_router = LogRouter(self.hub, self.log)
            self._log_router.start()
        self.hub.choose_intake()  # the log and the inbox are settled: one intake from now on
        listener = self.settings.listener
        self._endpoints = await open_endpoints(
            loop,
            life,
            listener,
            handshake_timeout=self.settings.mqtt.connect_timeout,
            max_packet_size=self.settings.mqtt.max_packet_size,
        )
        self._housekeeping = loop.create_task(self._keep_house())
        logger.debug(
            "listening on %s %s (%d stored sessions, %d retained messages)",
            listener.host,
            self._endpoints.ports,
            restored,
            self.hub.statistics()["retained"],
        )

    async def serve_forever(self) -> None:
        """Return once `shutdown()` has completed."""
        if self._stopped is None:
            raise RuntimeError("Broker.start() was not called")
        await self._stopped.wait()

    async def shutdown(self) -> None:
        """Stop accepting, disconnect clients, flush and close storage; idempotent."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._shutdown_task)

    async def _keep_house(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            try:
                await self.reload_tenants()
            except MqttqError as error:
                logger.warning("tenant quotas not reloaded: %s", error)
            self.hub.purge_expired_retained(self.hub.clock())
            self.drop_idle_tenants()

    def drop_idle_tenants(self) -> int:
        """Forget the namespaces and limiters of tenants with nothing on this node (no
        session, subscription or retained message; full buckets), so that clients naming
        ever new tenants cannot grow memory without bound. Returns how many were dropped."""
        used = {session.space.name for session in self.hub.sessions.values()}
        spaces = self.hub.spaces
        idle = [name for name, space in spaces.items() if not space.topic_refs and name not in used]
        for name in idle:
            del spaces[name]
        for client in self._life.connecting if self._life is not None else ():
            if client.space is not None and client.space.name in idle:
                spaces[client.space.name] = client.space  # connecting right now: keep it
        self.limits.prune(time.monotonic())
        return len(idle)

    async def _shutdown(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        self._endpoints.close()
        try:
            if self._life is not None:
                await self._life.shutdown()
        finally:
            try:
                await self._close_log()
                if self.cluster_link is not None:
                    await self.cluster_link.close()
                if self.hub.app_log is not None:
                    await self.hub.app_log.close()
                await self.storage.close()
            finally:
                try:
                    await self.auth_store.close()
                finally:
                    if self._stopped is not None:
                        self._stopped.set()
                    logger.debug("stopped")

    async def _close_log(self) -> None:
        """Stop routing from the log, then close it (wills due at shutdown were appended
        already; batches not completed are read again at the next start)."""
        if self._log_router is not None:
            await self._log_router.stop()
            self._log_router = None
        if self.log is not None:
            await self.log.close()
            await self.hub.tasks.barrier()

    def statistics(self) -> dict[str, int]:
        """Counters: connections, sessions, messages in/out/dropped per QoS, retained."""
        return self.hub.statistics()

    @property
    def lifecycle(self) -> Lifecycle | None:
        """The session lifecycle (after `start`): connected clients, session removal."""
        return self._life

    # ------------------------------------------------------------------ live limits

    def set_node_limits(self, quota: Quota) -> None:
        """New node-layer limits, effective at once for every client."""
        self.limits.set_node_quota(quota, time.monotonic())

    def set_rate_timing(self, rate_wait: float, burst_seconds: float) -> None:
        """New bounded wait for a token and new burst for every rate limit, at once."""
        self.limits.set_timing(rate_wait, burst_seconds, time.monotonic())

    def set_tcp_connection_rate(self, rate: float) -> None:
        """New node rate of TCP connections per second, effective at once."""
        self.limits.set_tcp_rate(rate, time.monotonic())

    def set_default_quota(self, quota: Quota) -> None:
        """New quota for tenants without their own, effective at once."""
        self.limits.set_default_quota(quota, time.monotonic())

    async def reload_tenants(self) -> int:
        """Apply every stored tenant quota (and drop quotas of tenants whose row is
        gone); returns the number of stored tenants."""
        tenants = await self.auth_store.list_tenants()
        stored = {tenant.name: tenant.quota for tenant in tenants}
        for name in list(self._tenant_quotas):
            if name not in stored:
                self.set_tenant_quota(name, None)
        for name, quota in stored.items():
            self.set_tenant_quota(name, quota)
        return len(stored)

    def set_tenant_quota(self, name: str, quota: Quota | None) -> None:
        """Apply `name`'s quota at once (None: back to the default quota)."""
        self.limits.set_tenant_quota(name, quota, time.monotonic())
        if quota is None:
            self._tenant_quotas.pop(name, None)
        else:
            self._tenant_quotas[name] = quota
