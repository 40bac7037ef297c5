"""How sessions end: expiry offline [MQTT-4.1.0-2], wills [MQTT-3.1.2-8], a takeover by
another node, the sessions of gone nodes, and removal by an administrator.

In a cluster, the endings ask the `ClusterNode` itself (`cluster`, set by
`Lifecycle.attach_cluster`) what the hub does not route: the sessions of gone nodes, a
session kept as another node's, a session's end told to every node."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from mqttq.auth.model import ClientType
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.sessions.session import Session
from mqttq.broker.sessions.will import WillScheduler, will_message
from mqttq.cluster.dead_nodes import reaper
from mqttq.codec.enums import SESSION_EXPIRY_NEVER
from mqttq.codec.packets import Will
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.broker.distributed.cluster_node import ClusterNode

__all__ = ["SessionEndings"]

logger = logging.getLogger("mqttq.broker.session")


class SessionEndings:
    """Ends sessions, and publishes the wills that are due, for the Lifecycle."""

    def __init__(self, hub: Hub, loop: asyncio.AbstractEventLoop) -> None:
        self.hub = hub
        self.loop = loop
        self.wills = WillScheduler(loop, self._publish_will)
        self.cluster: ClusterNode | None = None
        """This node's side of the cluster (`Lifecycle.attach_cluster`); None on a broker
        of its own."""

    def _publish_will(self, client_id: str, tenant: str, will: Will) -> None:
        """A will is due: publish it (made at the hub's clock, which its Message Expiry
        Interval counts from), and forget it in the stored session (so that a restart
        does not publish it again)."""
        self.hub.publish_detached(tenant, will_message(will, client_id, self.hub.clock()))
        session = self.hub.sessions.get(client_id)
        if session is not None and session.client is None and session.will is not None:
            session.will = None
            if session.persistent and not session.ended:
                self.hub.save_session(session)

    def schedule_expiry(self, session: Session, remaining: float) -> None:
        if session.expiry_interval >= SESSION_EXPIRY_NEVER:
            return
        session.expiry_handle = self.loop.call_later(remaining, self.expire, session)

    def expire(self, session: Session) -> None:
        """The session outlived its expiry interval offline [MQTT-4.1.0-2]."""
        session.expiry_handle = None
        if session.client is not None or self.hub.sessions.get(session.client_id) is not session:
            return
        logger.debug("session %r expired", session.client_id)
        self.hub.events.emit("session_expired", session.space.name, session.client_id)
        self.forget(session)
        client_id = session.client_id
        self.hub.tasks.spawn(
            self.hub.storage.delete_session(client_id), "delete_session", client_id
        )
        self.wills.session_ended(session.client_id)

    def clean_up_gone_nodes(self, alive: set[str], gone: dict[str, float]) -> int:
        """The heartbeat saw which nodes are `alive` and which are `gone` (node id -> last
        heartbeat). On the node that cleans up (dead_nodes.reaper), the gone nodes'
        sessions end as disconnected at that time: non-persistent ones at once,
        persistent ones when their expiry interval has passed [MQTT-4.1.0-2], like this
        node's own (their queue is deleted then). Returns how many were cleaned up."""
        cluster = self.cluster
        if cluster is None or not gone or reaper(alive) != cluster.node_id:
            return 0
        now = time.time()
        found = cluster.orphans(gone)
        for orphan in found:
            client_id = orphan.client_id
            if client_id in self.hub.sessions:
                continue  # here already (a CONNECT in progress): this node's as usual
            will = orphan.info.will
            session = cluster.take_orphan(orphan)
            if session is None:
                if will is not None:  # the connection died with its node [MQTT-3.1.2-8]
                    self.wills.connection_closed(client_id, will, 0, orphan.info.tenant)
                continue
            logger.info("session %r of a gone node is offline", client_id)
            since = now - orphan.disconnected_at
            remaining = session.expiry_interval - since
            if will is not None:
                # Due after its delay (capped by the session's expiry), counted from the
                # disconnect; published at once if the session expires first.
                session.will = will
                delay = min(will.properties.will_delay_interval or 0, session.expiry_interval)
                self.wills.connection_closed(client_id, will, delay - since, session.space.name)
            if remaining <= 0:
                self.expire(session)
            else:
                self.hub.save_session(session)
                self.schedule_expiry(session, remaining)
        return len(found)

    def moved_away(self, client_id: str, session_ends: bool = False) -> None:
        """The client connected to another node (a later connect event): this node's
        connection of it gets DISCONNECT 0x8E Session taken over [MQTT-3.1.4-3], and its
        session is left to that node (records, subscriptions and queue stay). When the
        session ends there (`session_ends`: the new connection has clean start; or it was
        not persistent) the old connection's will is published now [MQTT-3.1.2-8]; else it
        is cancelled [MQTT-3.1.3-9]."""
        session = self.hub.sessions.get(client_id)
        if session is None:
            return
        session_ends = session_ends or not session.persistent
        client = session.client
        will = session.will if client is not None and not client.normal_disconnect else None
        self.forget(session, moved=True)
        if client is not None:
            client.kick(ReasonCode.SESSION_TAKEN_OVER)
        if not session_ends:
            self.wills.cancel(client_id)
            return
        if will is not None:
            self.wills.connection_closed(client_id, will, 0, session.space.name)
        self.wills.session_ended(client_id)

    def forget(self, session: Session, *, moved: bool = False) -> None:
        """Drop a session from memory: no more deliveries, no subscriptions. `moved`: the
        session lives on on another node; its subscriptions stay in the router, as that
        node's, and nothing stored is deleted."""
        session.ended = True
        hub = self.hub
        if moved:
            if session.expiry_handle is not None:
                session.expiry_handle.cancel()
                session.expiry_handle = None
            if hub.sessions.get(session.client_id) is session:
                del hub.sessions[session.client_id]
                hub.limits.release_session(session.space.name)
                if self.cluster is not None:
                    self.cluster.keep_as_remote(session.client_id, session.space.name)
            return
        if self.cluster is not None:
            self.cluster.session_ended(session)
        app_log = self.hub.app_log
        if app_log is not None and session.client_type == ClientType.APPLICATION:
            client_id = session.client_id
            self.hub.tasks.spawn(app_log.forget(client_id), "app_context", client_id)
        if session.expiry_handle is not None:
            session.expiry_handle.cancel()
            session.expiry_handle = None
        if self.hub.sessions.get(session.client_id) is session:
            del self.hub.sessions[session.client_id]
            session.space.remove_client(session.client_id)
            self.hub.limits.release_session(session.space.name)

    async def remove_session(self, session: Session) -> None:
        """An administrator removes the session: its client (if connected) gets
        DISCONNECT 0x98 without its will being published, then the session, its
        subscriptions and its stored queue are deleted."""
        client = session.client
        if client is not None:
            client.normal_disconnect = True  # an administrative removal sends no will
            client.kick(ReasonCode.ADMINISTRATIVE_ACTION, "session removed by an administrator")
        self.wills.cancel(session.client_id)
        if not session.ended:
            await self.hub.tasks.barrier(session.client_id)
            was_persistent = session.persistent
            self.forget(session)
            if was_persistent:
                await self.hub.storage.delete_session(session.client_id)
