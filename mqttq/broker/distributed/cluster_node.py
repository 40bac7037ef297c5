"""ClusterNode: the broker's side of the cluster (mqttq.cluster; ARCHITECTURE.md section 5).

What this node knows of the others, and what it tells them:

- `directory`: every client of the cluster (the `client.session` replica): the node it is
  connected to (or none), the node it last was on, persistence, type and tenant. A client
  with a `Session` in `hub.sessions` is this node's own; any other is remote.
- The tenants' routers hold every client's subscriptions, remote ones included (the
  `client.subscriptions` replica), and `retained` every retained message (`msg.retained`):
  one trie walk per message finds local and remote subscribers alike.
- `deliver`: the Hub's route for a subscriber without a local session. Connected to another
  node: non-persistent deliveries go to that node's basic downlink; persistent DEVICE ones
  are queued in Redis first and the queued entry (serial, packet id) goes to its persisted
  downlink, so the owning node sends it with that packet id and removes it from Redis on
  PUBACK. Offline persistent DEVICE: Redis only. Persistent APPLICATION: its own Kafka
  topic. The returned future is what the log commit waits for.
- `claim`: a CONNECT writes a connect event and waits to read it back; events taking over
  a connection of this node disconnect it (0x8E) and leave the session to the new node
  (takeover.py has the ordering rule).
- `orphans` / `take_orphan`: the sessions of a gone node (dead_nodes.py); the node that
  cleans up removes a non-persistent one at once and takes a persistent one as its own,
  offline since the gone node's last heartbeat, for the lifecycle to expire as usual.
  Its records keep the epoch of the dead connection, so a newer CONNECT elsewhere wins.

Known limits: while a client moves, nodes learn its new place from topics read
independently (connect events, session records): for a moment a node may route by a
stale location. A persistent DEVICE entry still reaches the client: Redis reports, with
every write, the node its presence marker names, which a resuming node sets before it
fetches the queue. A non-persistent delivery in that moment can be dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mqttq.auth.model import ClientType
from mqttq.cluster.dead_nodes import Orphan, orphans
from mqttq.cluster.records import Downlinked, SessionInfo
from mqttq.cluster.takeover import ConnectOrder, Verdict
from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.routing.router import Delivery
from mqttq.storage.ports import QueuedMessage

if TYPE_CHECKING:
    from mqttq.broker.delivery.hub import Hub
    from mqttq.broker.sessions.session import Session
    from mqttq.cluster.link import ClusterLink

__all__ = ["ClusterNode"]

logger = logging.getLogger("mqttq.broker.cluster")

_APP: Final = ClientType.APPLICATION
_CLIENT_TYPES: Final = {member.value: member for member in ClientType}
CLAIM_TIMEOUT: Final = 10.0
"""Seconds a CONNECT waits for its connect event to come back at most."""


class ClusterNode:
    """This node's view of the cluster and its hooks for the Hub and the Lifecycle."""

    def __init__(self, hub: Hub, link: ClusterLink) -> None:
        self.hub = hub
        self.link = link
        self.node_id = link.node_id
        self.directory: dict[str, SessionInfo] = {}
        self._tenant_of_subscriptions: dict[str, str] = {}
        self._order = ConnectOrder()
        self._latest: dict[str, str] = {}
        """client id -> request id of the last connect event read for it (any node)."""
        self._claims: dict[str, asyncio.Future[None]] = {}
        self._attaching: dict[str, str] = {}
        """client id -> request of this node's CONNECT of it not done yet (one at a time per
        client: the lifecycle serializes a client's CONNECTs on a node)."""
        self._reaped: dict[str, str] = {}
        """client id -> epoch of the dead connection, for the sessions of gone nodes this
        node took as its own (their records carry that epoch)."""
        self._superseded: dict[str, bool] = {}
        """Requests of this node whose connection a later event took over, perhaps
        before the CONNECT finished attaching (`settled` tells the lifecycle)."""
        self.taken_over: Callable[[str, bool], None] = lambda _client_id, _ends: None
        """Set by the lifecycle: disconnect this node's connection of a client (0x8E) and
        let its session go to the node it moved to; True: the new connection started a
        new session (the old one ended)."""
        self.downlinked = 0
        """Deliveries sent to other nodes."""
        self.received = 0
        """Deliveries other nodes sent to this one."""

    async def open(self) -> None:
        """Read the replicated topics to their end, then listen (ClusterLink.open)."""
        await self.link.open(self)

    # ------------------------------------------------------------------ replicas in

    def on_session(self, client_id: str, info: SessionInfo | None) -> None:
        """Another process wrote `client_id`'s session record."""
        if (info is None or info.node is None) and self._reassert(client_id):
            return
        if info is None:
            self.directory.pop(client_id, None)
            return
        known = self.directory.get(client_id)
        reaped = self._reaped.get(client_id)
        if (
            reaped is not None
            and info.node is None
            and info.epoch == reaped
            and info.last_node > self.node_id
        ):
            # Two nodes cleaned up after the same gone node: the smaller id keeps it.
            local = self.hub.sessions.get(client_id)
            if local is not None and local.client is None and not local.ended:
                self.hub.save_session(local)
                return
        latest = self._latest.get(client_id)
        if known is not None and latest is not None and info.epoch and info.epoch != latest:
            # Written for another connection than the last one announced (a node saving
            # a disconnect while the client already connected elsewhere, read late):
            # where the client is stays as the connect events say.
            info = dataclasses.replace(
                info,
                node=known.node,
                last_node=known.last_node,
                disconnected_at=known.disconnected_at,
            )
        self.directory[client_id] = info
        local = self.hub.sessions.get(client_id)
        if (
            local is not None
            and local.client is None
            and info.last_node != self.node_id
            and not local.ended
            and client_id not in self._attaching
        ):
            # The client resumed on another node: this node's offline copy is stale. (Not
            # while a CONNECT of it is attaching here: the connect events' order decides
            # which connection keeps the session; forgetting the copy under the attaching
            # connection would leave it on a session no longer in the hub.)
            self.taken_over(client_id, False)

    def on_subscriptions(
        self, client_id: str, tenant: str | None, subscriptions: list[Subscription]
    ) -> None:
        """Another process wrote `client_id`'s whole subscription set: it replaces the
        one in the router (none: removed)."""
        if tenant is None and self._reassert(client_id):
            return
        previous = self._tenant_of_subscriptions.pop(client_id, None)
        if previous is not None:
            self.hub.space(previous).remove_client(client_id)
        if tenant is None or not subscriptions:
            return
        space = self.hub.space(tenant)
        space.remove_client(client_id)
        for subscription in subscriptions:
            space.router.subscribe(client_id, subscription)
            space.add_topic_ref(space.topic_of(subscription.topic_filter), force=True)
        self._tenant_of_subscriptions[client_id] = tenant

    def on_retained(self, tenant: str, topic: str, message: Message | None) -> None:
        """Another process set or cleared a retained message."""
        space = self.hub.space(tenant)
        had = space.retained.get(topic) is not None
        if message is not None and not had:
            space.add_topic_ref(topic, force=True)
        elif message is None and had:
            space.drop_topic_ref(topic)
        space.retained.set(topic, message)

    def _reassert(self, client_id: str) -> bool:
        """A record of another process says `client_id` is offline or gone while its
        confirmed connection is here: a late write about an older connection (a node
        cleaning up after a gone node, an old node saving a disconnect). This node writes
        its records again, so that the topic ends with them. True when it did."""
        local = self.hub.sessions.get(client_id)
        if (
            local is None
            or local.client is None
            or local.ended
            or self._order.holds(client_id) is None
        ):
            return False
        self.hub.save_session(local)
        return True

    # ------------------------------------------------------------------ replicas out

    def publish_session(self, session: Session) -> asyncio.Future[Any]:
        """Tell every node where `session` lives and what it subscribes to."""
        client_id = session.client_id
        info = SessionInfo(
            self.node_id if session.client is not None else None,
            self.node_id,
            session.protocol_level,
            session.expiry_interval,
            session.client_type,
            session.space.name,
            session.disconnected_at,
            self._order.request_of(client_id) or self._reaped.get(client_id, ""),
            session.will,
        )
        self.directory[client_id] = info
        self._tenant_of_subscriptions.pop(client_id, None)
        subscriptions = session.space.router.subscriptions_of(client_id)
        return asyncio.gather(
            self.link.put_session(client_id, info),
            self.link.put_subscriptions(client_id, session.space.name, subscriptions),
        )

    def session_ended(self, session: Session) -> None:
        """`session` is over on this node: its records are deleted, unless the client
        moved to another node (whose records they are now)."""
        client_id = session.client_id
        if client_id not in self._attaching:
            self._order.forget(client_id)  # no connection of it here any more
        self._reaped.pop(client_id, None)
        info = self.directory.get(client_id)
        if info is not None and info.last_node != self.node_id:
            return
        self.directory.pop(client_id, None)
        for future in (
            self.link.put_session(client_id, None),
            self.link.put_subscriptions(client_id, session.space.name, []),
        ):
            self.hub.tasks.track(future, "cluster_session", client_id)

    def set_retained(self, tenant: str, topic: str, message: Message | None) -> asyncio.Future[Any]:
        """Set (None: clear) a retained message for every node."""
        return self.link.put_retained(tenant, topic, message)

    # ------------------------------------------------------------------ sessions

    def is_connected(self, client_id: str) -> bool:
        """True when the client is connected to some node (for `$share` picks)."""
        info = self.directory.get(client_id)
        return info is not None and info.node is not None

    def adopt(self, client_id: str) -> Session | None:
        """A CONNECT of `client_id` on this node, which holds no session for it: the
        session another node left (persistent, not expired) becomes this node's, offline,
        with its subscriptions; anything else of it is dropped. None when there is none."""
        info = self.directory.get(client_id)
        if info is None:
            return None
        now = time.time()
        gone_at = info.disconnected_at or now
        if not info.persistent or now - gone_at >= info.expiry:
            self.hub.space(info.tenant).remove_client(client_id)
            self._tenant_of_subscriptions.pop(client_id, None)
            return None
        return self._own_offline(client_id, info, gone_at)

    def _own_offline(self, client_id: str, info: SessionInfo, disconnected_at: float) -> Session:
        """The persistent session `info` of another node becomes this node's, offline since
        `disconnected_at`, with the subscriptions the router holds for it."""
        from mqttq.broker.sessions.session import Session  # noqa: PLC0415 (session imports hub)

        hub = self.hub
        session = Session(
            hub,
            client_id,
            info.protocol_level,
            info.expiry,
            hub.space(info.tenant),
            # A record from another node: an unknown type acts as DEVICE, as it did.
            _CLIENT_TYPES.get(info.client_type, ClientType.DEVICE),
        )
        session.restored = True  # which stored entries were sent before is unknown
        session.disconnected_at = disconnected_at
        hub.sessions[client_id] = session
        hub.limits.acquire_session(info.tenant, force=True)
        self._tenant_of_subscriptions.pop(client_id, None)  # this node's own now
        return session

    def keep_as_remote(self, client_id: str, tenant: str) -> None:
        """A session of this node moved to another node: its subscriptions in the router
        are that node's now (until its own subscriptions record replaces them)."""
        self._reaped.pop(client_id, None)
        self._tenant_of_subscriptions[client_id] = tenant

    def orphans(self, gone: dict[str, float]) -> list[Orphan]:
        """The sessions of the `gone` nodes (node id -> last heartbeat)."""
        return orphans(self.directory, gone)

    def take_orphan(self, orphan: Orphan) -> Session | None:
        """Clean up after a session of a gone node. Non-persistent: removed for every
        node at once (tombstones), None. Persistent: this node's own from now on,
        offline since `orphan.disconnected_at`, with its subscriptions; the caller saves
        it (every node sees it offline) and lets it expire as usual."""
        client_id, info = orphan.client_id, orphan.info
        if not info.persistent:
            self.hub.space(info.tenant).remove_client(client_id)
            self._tenant_of_subscriptions.pop(client_id, None)
            self.directory.pop(client_id, None)
            for future in (
                self.link.put_session(client_id, None),
                self.link.put_subscriptions(client_id, info.tenant, []),
            ):
                self.hub.tasks.track(future, "cluster_session", client_id)
            return None
        self._reaped[client_id] = info.epoch
        self.directory[client_id] = dataclasses.replace(
            info, node=None, last_node=self.node_id, disconnected_at=orphan.disconnected_at
        )
        return self._own_offline(client_id, info, orphan.disconnected_at)

    def owns_stored(self, client_id: str) -> bool | None:
        """For a session this node stored before it (re)started: True when it is still
        this node's, False when another node has it now, None when the cluster forgot it."""
        info = self.directory.get(client_id)
        if info is None:
            return None
        return info.last_node == self.node_id

    def adopt_restored(self, client_id: str) -> None:
        """A stored session of this node is back: its replicated subscriptions are the
        local ones now (restore subscribes them again)."""
        tenant = self._tenant_of_subscriptions.pop(client_id, None)
        if tenant is not None:
            self.hub.space(tenant).remove_client(client_id)

    async def claim(self, client_id: str, clean_start: bool) -> str:
        """Write a connect event for `client_id` and wait until it is read back, so every
        earlier connection of the client (on any node) is taken over; the request id (give
        it to `settled` once the CONNECT is done). When Kafka does not confirm in time the
        CONNECT goes on, logged: this node's own takeover still works."""
        request = uuid.uuid4().hex
        self._attaching[client_id] = request
        self._order.register(client_id, request)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._claims[request] = waiter
        try:
            async with asyncio.timeout(CLAIM_TIMEOUT):
                await self.link.connect_event(client_id, request, clean_start)
                await waiter
        except (StorageError, TimeoutError) as exc:
            logger.warning("client %r: connect event not confirmed: %s", client_id, exc)
        finally:
            self._claims.pop(request, None)
        return request

    def settled(self, client_id: str, request: str) -> bool | None:
        """The CONNECT of `request` is done: None, or when a later connect event took its
        connection over meanwhile (the caller disconnects it), whether that event started
        a new session."""
        if self._attaching.get(client_id) == request:
            del self._attaching[client_id]
        return self._superseded.pop(request, None)

    def on_connect_event(
        self, client_id: str, node_id: str, request: str, clean_start: bool
    ) -> None:
        """A connect event, in the order of the client's partition."""
        self._latest[client_id] = request
        held = self._order.holds(client_id)
        verdict = self._order.read(client_id, request)
        if verdict is Verdict.OWN:
            waiter = self._claims.get(request)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        if node_id == self.node_id:
            return
        info = self.directory.get(client_id)
        if info is not None:  # routed to the new node from now on
            self.directory[client_id] = dataclasses.replace(
                info, node=node_id, last_node=node_id, disconnected_at=None
            )
        if verdict is Verdict.TAKEN_OVER:
            logger.info("client %r taken over by node %s", client_id, node_id)
            if held is not None and self._attaching.get(client_id) == held:
                # Its CONNACK is not out yet: the lifecycle hands it over right after.
                self._superseded[held] = clean_start
            else:
                self.taken_over(client_id, clean_start)

    # ------------------------------------------------------------------ delivery

    def deliver(
        self, tenant: str, delivery: Delivery, message: Message
    ) -> asyncio.Future[Any] | None:
        """Route one delivery for a client without a session on this node (see the module
        docstring); None when nothing is to be done (unknown or gone client)."""
        client_id = delivery.client_id
        info = self.directory.get(client_id)
        if info is None:
            return None
        out = message.for_subscriber(
            delivery.qos, delivery.retain, delivery.subscription_identifiers
        )
        hub = self.hub
        node = info.node
        if node == self.node_id:
            node = None  # its session here is gone: what is persistent waits in storage
        if info.persistent:
            app_log = hub.app_log
            if info.client_type == _APP and app_log is not None:
                return app_log.produce(tenant, client_id, out, delivery.share)
            if out.qos or (node is None and hub.settings.queue_qos0):
                queued = hub.enqueue_stored([(client_id, out)])
                return self._hand_over_when_stored(queued, client_id, tenant)
        if node is None:
            return None
        self.downlinked += 1
        return self.link.send_downlink(node, client_id, tenant, out)

    def _hand_over_when_stored(
        self, queued: asyncio.Future[list[Any]], client_id: str, tenant: str
    ) -> asyncio.Future[Any]:
        """Once `queued` holds the entry, hand it to the client where it is connected
        then (not where it was when the message was routed: it may have just moved, and
        its new node may have fetched its queue already): this node's session, or its
        node's persisted downlink. Offline: the entry waits in storage.

        Where it is connected then: the node Redis named when it stored the entry (the
        presence marker, which a resuming node sets before it fetches the queue, read in
        the same script), else the directory's, which may lag behind a move."""
        done: asyncio.Future[Any] = queued.get_loop().create_future()

        def sent(produced: asyncio.Future[Any]) -> None:
            if produced.cancelled() or produced.exception() is not None:
                # The entry is in Redis: the client gets it on its next connection.
                logger.warning("persisted downlink for %r failed: %s", client_id, produced)
            if not done.done():
                done.set_result(None)

        def stored(entries: asyncio.Future[list[Any]]) -> None:
            if entries.cancelled() or entries.exception() is not None:
                done.set_exception(StorageError(f"queueing for {client_id!r} failed"))
                return
            entry: QueuedMessage | None = entries.result()[0]
            session = self.hub.sessions.get(client_id)
            info = self.directory.get(client_id)
            node = None if info is None else info.node
            if entry is not None and entry.holder:
                node = entry.holder
            if entry is not None and session is not None and not session.ended:
                if session.persistent:
                    session.deliver_stored(entry)  # the client came to this node
            elif entry is not None and node is not None and node != self.node_id:
                self.downlinked += 1
                self.link.send_downlink(
                    node, client_id, tenant, entry.message, entry
                ).add_done_callback(sent)
                return
            done.set_result(None)

        queued.add_done_callback(stored)
        return done

    def on_downlink(self, delivery: Downlinked) -> None:
        """A delivery another node routed to a client connected here."""
        self.received += 1
        session = self.hub.sessions.get(delivery.client_id)
        if session is None or session.ended:
            return  # gone meanwhile: what was persistent is in storage
        if delivery.entry is not None:
            if session.persistent:
                session.deliver_stored(delivery.entry)
            return
        session.deliver_now(delivery.message)

    def statistics(self) -> dict[str, int]:
        """`cluster_clients` known, `cluster_downlinked` / `cluster_downlink_received`."""
        return {
            "cluster_clients": len(self.directory),
            "cluster_downlinked": self.downlinked,
            "cluster_downlink_received": self.received,
        }
