"""Session lifecycle: CONNECT (new, resumed, taken over), DISCONNECT, connection loss,
session expiry, restoring sessions at start and releasing them at shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from mqttq.auth.authenticator import Authenticator
from mqttq.broker.admission import admit
from mqttq.broker.client import Client
from mqttq.broker.hub import Hub
from mqttq.broker.session import Session
from mqttq.broker.timers import TimerWheel
from mqttq.broker.will import WillScheduler
from mqttq.cluster.dead_nodes import reaper
from mqttq.codec.enums import SESSION_EXPIRY_NEVER, ProtocolLevel, ReasonCode
from mqttq.codec.packets import ConnackPacket, ConnectPacket, DisconnectPacket, Will
from mqttq.config import MqttSettings
from mqttq.errors import ProtocolError, StorageError
from mqttq.limits.limiter import Refused
from mqttq.model import Message
from mqttq.protocol.connect import ConnectDecision, ConnectPolicy, negotiate
from mqttq.protocol.connection import ConnectionLimits
from mqttq.routing.topics import validate_topic_name
from mqttq.storage.ports import PresenceMarker, QueuedMessage

__all__ = ["Lifecycle", "connect_policy", "connection_limits"]

logger = logging.getLogger("mqttq.broker.session")

_APP = "APPLICATION"


def connection_limits(mqtt: MqttSettings) -> ConnectionLimits:
    return ConnectionLimits(
        max_packet_size=mqtt.max_packet_size,
        receive_maximum=mqtt.receive_maximum,
        topic_alias_maximum=mqtt.topic_alias_maximum,
        maximum_qos=mqtt.maximum_qos,
        retain_available=mqtt.retain_available,
        connect_timeout=mqtt.connect_timeout,
    )


def connect_policy(mqtt: MqttSettings) -> ConnectPolicy:
    return ConnectPolicy(
        max_keep_alive=mqtt.max_keep_alive,
        max_session_expiry_interval=mqtt.max_session_expiry_interval,
        max_client_id_length=mqtt.max_client_id_length,
        allow_empty_client_id=mqtt.allow_empty_client_id,
        receive_maximum=mqtt.receive_maximum,
        max_packet_size=mqtt.max_packet_size,
        topic_alias_maximum=mqtt.topic_alias_maximum,
        maximum_qos=mqtt.maximum_qos,
        retain_available=mqtt.retain_available,
        wildcard_subscription_available=mqtt.wildcard_subscription_available,
        subscription_identifier_available=mqtt.subscription_identifier_available,
        shared_subscription_available=mqtt.shared_subscription_available,
    )


class Lifecycle:
    """Attaches clients to sessions and decides when sessions and wills end."""

    def __init__(
        self, hub: Hub, loop: asyncio.AbstractEventLoop, authenticator: Authenticator
    ) -> None:
        self.hub = hub
        self.loop = loop
        self.authenticator = authenticator
        self.limits = connection_limits(hub.settings)
        self.policy = connect_policy(hub.settings)
        self.wills = WillScheduler(loop, self._publish_will)
        self.timers = TimerWheel(loop)
        """Connect timeout and keep alive deadlines of every connection."""
        self.connecting: set[Client] = set()
        """Open connections not attached to a session (before or during CONNECT, or
        refused); an attached one is its session's `client` (see `connections`), so an
        established connection costs no entry here."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}

    # ------------------------------------------------------------------ connections

    def client_opened(self, client: Client) -> float | None:
        """A TCP connection was accepted: None refuses it (new-connection rate, before
        any MQTT parsing), else the seconds to wait before reading from it."""
        limits = self.hub.limits
        admitted = limits.admit_tcp(self.loop.time())
        if isinstance(admitted, Refused):
            return None
        self.connecting.add(client)
        self.hub.stats.connections_total += 1
        return admitted

    def _new_client_id(self) -> str:
        while True:
            client_id = f"mqttq-{uuid.uuid4().hex}"
            if client_id not in self.hub.sessions:  # unique [MQTT-3.2.2-16]
                return client_id

    async def connect(self, client: Client, packet: ConnectPacket) -> None:
        """Answer a CONNECT: refuse it, or attach the client to a new or resumed session.

        CONNECTs for one client id are handled one at a time, in arrival order.
        """
        try:
            decision = negotiate(packet, self.policy, self._new_client_id)
        except ProtocolError as error:
            client.client_id = packet.client_id
            client.refuse(error.reason_code, error.message)
            return
        client.client_id = decision.client_id
        if packet.will is not None:
            try:
                validate_topic_name(packet.will.topic)
            except ProtocolError as error:
                client.fail(error)
                return
        identity = await admit(
            client, packet, decision.client_id, self.authenticator, self.hub.limits
        )
        if identity is None or client.closed:
            return
        client.identity = identity
        client.space = self.hub.space(identity.tenant)
        client_id = decision.client_id
        lock = self._locks.get(client_id)
        if lock is None:
            lock = self._locks[client_id] = asyncio.Lock()
        self._lock_users[client_id] = self._lock_users.get(client_id, 0) + 1
        try:
            async with lock:
                cluster = self.hub.cluster
                if cluster is None:
                    if not client.closed:
                        await self._attach(client, packet, decision)
                else:
                    # Every earlier connection of this id, on any node, is taken over.
                    request = await cluster.claim(client_id, decision.clean_start)
                    try:
                        if not client.closed:
                            await self._attach(client, packet, decision)
                    finally:
                        ends = cluster.settled(client_id, request)
                        if ends is not None:  # a newer CONNECT elsewhere
                            self._superseded(client, ends)
        finally:
            users = self._lock_users[client_id] - 1
            if users:
                self._lock_users[client_id] = users
            else:
                del self._lock_users[client_id]
                del self._locks[client_id]

    def _superseded(self, client: Client, session_ends: bool) -> None:
        """A connect event of another node, later than this CONNECT's, was read while it
        attached: the connection is taken over, whatever became of its session here."""
        session = client.session
        if session is not None and self.hub.sessions.get(session.client_id) is session:
            self.moved_away(session.client_id, session_ends)
        elif not client.closed:
            client.kick(ReasonCode.SESSION_TAKEN_OVER)

    async def _attach(
        self, client: Client, packet: ConnectPacket, decision: ConnectDecision
    ) -> None:
        hub = self.hub
        limits = hub.limits
        client_id = decision.client_id
        identity = client.identity
        assert identity is not None
        tenant = identity.tenant
        old = hub.sessions.get(client_id)
        if old is None and hub.cluster is not None:
            old = hub.cluster.adopt(client_id)  # a session another node left
        if old is not None and old.space.name != tenant:
            # Client ids are unique across tenants; one tenant never takes over (or
            # resumes) another tenant's session.
            limits.count_refusal(tenant, "client_id_taken")
            client.refuse(
                ReasonCode.CLIENT_IDENTIFIER_NOT_VALID, "client id in use by another tenant"
            )
            return
        if old is not None and old.client is not None:
            # Session taken over [MQTT-3.1.4-3]; the old connection's will follows the
            # usual rules, and is cancelled below when the session continues.
            logger.info("client %r taken over by %s", client_id, client.peer)
            old.client.kick(ReasonCode.SESSION_TAKEN_OVER)
            old = hub.sessions.get(client_id)
        refused = limits.acquire_connection(tenant)
        if refused is not None:
            client.refuse(ReasonCode.QUOTA_EXCEEDED, f"{refused.layer} connection limit reached")
            return
        client.counted = True
        resume = old is not None and not decision.clean_start
        app_log = hub.app_log
        if app_log is not None and decision.persistent and identity.client_type == _APP:
            try:
                await app_log.ensure_client_topic(client_id)  # created on first connect
            except StorageError as error:
                logger.warning("client %r: Kafka topic not available: %s", client_id, error)
                client.refuse(ReasonCode.SERVER_UNAVAILABLE, "message log unavailable")
                self._release_connection(client)
                return
        if resume:
            self.wills.cancel(client_id)  # [MQTT-3.1.3-9]
        else:
            self.wills.session_ended(client_id)
        try:
            if old is not None or decision.persistent:
                await hub.tasks.barrier(client_id)  # earlier writes for this client settled
            if old is not None and resume:
                session = old
                entries = await self._resume(session, client, packet, decision)
            else:
                stored_old = old is not None and old.persistent
                if old is not None:
                    # The old session's slot passes straight to the new one: no await
                    # between giving it back and taking it, so no other CONNECT can take
                    # it meanwhile and leave this client refused at the session limit.
                    self._forget(old)
                refused = limits.acquire_session(tenant)
                if refused is not None:
                    client.refuse(
                        ReasonCode.QUOTA_EXCEEDED, f"{refused.layer} session limit reached"
                    )
                    self._release_connection(client)
                    return
                if stored_old:
                    try:
                        await hub.storage.delete_session(client_id)  # [MQTT-3.1.2-4]
                    except BaseException:
                        limits.release_session(tenant)
                        raise
                session = Session(
                    hub,
                    client_id,
                    packet.protocol_level,
                    decision.session_expiry_interval,
                    hub.space(tenant),
                    identity.client_type,
                )
                if app_log is not None and session.persistent and session.client_type == _APP:
                    await hub.tasks.barrier(client_id)  # the old context is deleted
                    try:
                        await app_log.reset(client_id)
                    except BaseException:
                        limits.release_session(tenant)
                        raise
                hub.sessions[client_id] = session
                session.client = client
                self.connecting.discard(client)
                session.will = packet.will
                if session.persistent:
                    if old is None:
                        # Entries of an earlier session of this id may have landed after
                        # it was deleted; the new session starts empty. (Writes are
                        # applied in order, so this needs no wait.)
                        hub.tasks.spawn(
                            hub.storage.delete_session(client_id), "delete_session", client_id
                        )
                    hub.save_session(session)
                elif hub.cluster is not None:
                    hub.save_session(session)  # where it is, for the other nodes
                entries = []
        except (StorageError, OSError) as error:
            logger.warning("client %r: storage failed during CONNECT: %s", client_id, error)
            client.refuse(ReasonCode.SERVER_UNAVAILABLE, "storage unavailable")
            self._release_connection(client)
            return
        if client.closed:
            self._release(client, session)
            return
        session.will = packet.will
        logger.debug(
            "client %r connected from %s (level %d, session present %s, expiry %d)",
            client_id,
            client.peer,
            packet.protocol_level,
            resume,
            session.expiry_interval,
        )
        connack = ConnackPacket(resume, ReasonCode.SUCCESS, decision.connack_properties)
        client.accepted(session, connack, decision.keep_alive)
        session.resume(entries)
        if app_log is not None and session.persistent and session.client_type == _APP:
            app_log.attach(session, client)

    async def _resume(
        self, session: Session, client: Client, packet: ConnectPacket, decision: ConnectDecision
    ) -> list[QueuedMessage]:
        """Attach `client` to its stored session [MQTT-3.1.2-5] and fetch the queue.

        The client is attached before the fetch so that an entry committed after the fetch
        is handed over live (and one committed before it is skipped by serial).
        """
        hub = self.hub
        session.client = client
        self.connecting.discard(client)
        session.ready = False
        handle = session.expiry_handle
        try:
            storage = hub.storage
            if hub.cluster is not None and isinstance(storage, PresenceMarker):
                # Marked before the fetch: an entry written after it, which the fetch may
                # miss, is handed here by the node that wrote it (ClusterNode.deliver),
                # even while that node's records still place the client elsewhere.
                await storage.mark_connected(session.client_id, True)
            entries = await storage.fetch(session.client_id, time.time())
        except BaseException:
            if session.client is client:
                session.client = None
                session.waiting_live = None
            if not client.closed:
                self.connecting.add(client)
            raise
        if handle is not None:
            handle.cancel()
            session.expiry_handle = None
        session.fetched_serial = max((entry.serial for entry in entries), default=0)
        session.protocol_level = packet.protocol_level
        session.client_type = client.identity.client_type if client.identity else "DEVICE"
        session.disconnected_at = None
        session.expiry_interval = decision.session_expiry_interval
        session.will = packet.will
        if session.persistent:
            hub.save_session(session)
        else:
            client_id = session.client_id
            hub.tasks.spawn(hub.storage.delete_session(client_id), "delete_session", client_id)
            if hub.cluster is not None:
                hub.save_session(session)
        return entries

    def disconnect_received(self, client: Client, packet: DisconnectPacket) -> None:
        """DISCONNECT from the client: 0x00 discards the will [MQTT-3.14.4-3]; a new
        Session Expiry Interval applies, but not from 0 to non-zero [MQTT-3.14.2-2]."""
        session = client.session
        client.normal_disconnect = packet.reason_code == ReasonCode.NORMAL_DISCONNECTION
        if session is None or session.client is not client:
            return
        asked = packet.properties.session_expiry_interval
        if asked is None or client.conn.protocol_level != ProtocolLevel.MQTT_5:
            return
        if session.expiry_interval == 0 and asked != 0:
            client.normal_disconnect = False
            raise ProtocolError(
                ReasonCode.PROTOCOL_ERROR,
                "DISCONNECT sets a session expiry after CONNECT had 0 [MQTT-3.14.2-2]",
            )
        new = min(asked, self.policy.max_session_expiry_interval)
        if session.persistent and new == 0:
            client_id = session.client_id
            self.hub.tasks.spawn(
                self.hub.storage.delete_session(client_id), "delete_session", client_id
            )
        session.expiry_interval = new

    def connections(self) -> list[Client]:
        """Every open connection: those still connecting and the sessions' clients."""
        attached = [s.client for s in self.hub.sessions.values() if s.client is not None]
        return [*self.connecting, *attached]

    def client_closed(self, client: Client) -> None:
        """The network connection is gone (any reason); idempotent."""
        self.connecting.discard(client)
        self._release_connection(client)
        session = client.session
        if session is None or session.client is not client:
            return
        self._release(client, session)

    def _release(self, client: Client, session: Session) -> None:
        hub = self.hub
        will = None if client.normal_disconnect else session.will
        session.will = will  # still due: stored with the session until it is published
        # A re-sent QoS 2 PUBLISH on the next connection is still a duplicate.
        session.awaiting_pubrel = client.conn.inbound.awaiting_pubrel
        if session.app is not None:
            # Saves what is in flight; the next CONNECT of this id waits for it (barrier).
            hub.tasks.spawn(session.app.stop(), "app_context", session.client_id)
        session.detach()
        if session.ended:
            return
        if session.persistent:
            session.disconnected_at = time.time()
            hub.save_session(session)
            self._schedule_expiry(session, session.expiry_interval)
            if will is not None:
                delay = will.properties.will_delay_interval or 0
                self.wills.connection_closed(
                    session.client_id,
                    will,
                    min(delay, session.expiry_interval),
                    session.space.name,
                )
        else:
            self._forget(session)
            if will is not None:
                self.wills.connection_closed(session.client_id, will, 0, session.space.name)

    def _publish_will(self, client_id: str, tenant: str, message: Message) -> None:
        """A will is due: publish it, and forget it in the stored session (so that a
        restart does not publish it again)."""
        self.hub.publish_detached(tenant, message)
        session = self.hub.sessions.get(client_id)
        if session is not None and session.client is None and session.will is not None:
            session.will = None
            if session.persistent and not session.ended:
                self.hub.save_session(session)

    def _release_connection(self, client: Client) -> None:
        """Give back the connection the client held in the count limits (once)."""
        if client.counted:
            client.counted = False
            space = client.space
            assert space is not None
            self.hub.limits.release_connection(space.name)

    # ------------------------------------------------------------------ expiry

    def _schedule_expiry(self, session: Session, remaining: float) -> None:
        if session.expiry_interval >= SESSION_EXPIRY_NEVER:
            return
        session.expiry_handle = self.loop.call_later(remaining, self._expire, session)

    def _expire(self, session: Session) -> None:
        """The session outlived its expiry interval offline [MQTT-4.1.0-2]."""
        session.expiry_handle = None
        if session.client is not None or self.hub.sessions.get(session.client_id) is not session:
            return
        logger.debug("session %r expired", session.client_id)
        self._forget(session)
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
        cluster = self.hub.cluster
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
                self._expire(session)
            else:
                self.hub.save_session(session)
                self._schedule_expiry(session, remaining)
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
        self._forget(session, moved=True)
        if client is not None:
            client.kick(ReasonCode.SESSION_TAKEN_OVER)
        if not session_ends:
            self.wills.cancel(client_id)
            return
        if will is not None:
            self.wills.connection_closed(client_id, will, 0, session.space.name)
        self.wills.session_ended(client_id)

    def _forget(self, session: Session, *, moved: bool = False) -> None:
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
                if hub.cluster is not None:
                    hub.cluster.keep_as_remote(session.client_id, session.space.name)
            return
        if hub.cluster is not None:
            hub.cluster.session_ended(session)
        app_log = self.hub.app_log
        if app_log is not None and session.client_type == _APP:
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
            self._forget(session)
            if was_persistent:
                await self.hub.storage.delete_session(session.client_id)

    # ------------------------------------------------------------------ start / stop

    async def restore(self) -> int:
        """Load stored sessions (offline) with their subscriptions and restart their
        expiry clocks; a session stored as connected counts as disconnected now. Stored
        wills are due again: at the end of their Will Delay Interval from the disconnect,
        or now when the session ended while the broker was down [MQTT-3.1.2-8]."""
        hub = self.hub
        now = time.time()
        records = await hub.storage.load_sessions()
        due: list[tuple[str, Will, str, float]] = []
        cluster = hub.cluster
        for record in records:
            if cluster is not None:
                if cluster.owns_stored(record.client_id) is False:
                    continue  # another node has it now
                cluster.adopt_restored(record.client_id)
            expiry = min(record.session_expiry_interval, self.policy.max_session_expiry_interval)
            disconnected_at = record.disconnected_at
            elapsed = 0.0 if disconnected_at is None else max(0.0, now - disconnected_at)
            if expiry == 0 or (expiry < SESSION_EXPIRY_NEVER and elapsed >= expiry):
                if record.will is not None:
                    due.append((record.client_id, record.will, record.tenant, 0.0))
                hub.tasks.spawn(
                    hub.storage.delete_session(record.client_id), "delete_session", record.client_id
                )
                continue
            space = hub.space(record.tenant)
            session = Session(
                hub,
                record.client_id,
                record.protocol_level,
                expiry,
                space,
                record.client_type,
            )
            session.restored = True
            session.disconnected_at = now if disconnected_at is None else disconnected_at
            session.awaiting_pubrel = set(record.awaiting_pubrel) or None
            if record.will is not None:
                session.will = record.will
                will_delay = record.will.properties.will_delay_interval or 0
                remaining = min(will_delay - elapsed, expiry - elapsed)
                due.append((record.client_id, record.will, record.tenant, remaining))
            hub.sessions[record.client_id] = session
            # What was stored before a limit was lowered still counts: past the limit.
            hub.limits.acquire_session(record.tenant, force=True)
            for subscription in record.subscriptions:
                space.router.subscribe(record.client_id, subscription)
                space.add_topic_ref(space.topic_of(subscription.topic_filter), force=True)
            if (
                disconnected_at is None
                or expiry != record.session_expiry_interval
                or cluster is not None
            ):
                hub.save_session(session)
            self._schedule_expiry(session, expiry - elapsed)
        stored_retained = [] if cluster is not None else await hub.storage.load_retained(now)
        for tenant, message in stored_retained:  # in a cluster: replicated already
            space = hub.space(tenant)
            if space.retained.get(message.topic) is None:
                space.add_topic_ref(message.topic, force=True)
            space.retained.set(message.topic, message)
        for client_id, will, tenant, delay in due:  # sessions and retained are all back
            self.wills.connection_closed(client_id, will, delay, tenant)
        return len(hub.sessions)

    async def shutdown(self) -> None:
        """Disconnect every client (0x8B on 5.0), record disconnect times, publish the
        wills that are due, and wait for every storage write to settle."""
        for client in self.connections():
            client.kick(ReasonCode.SERVER_SHUTTING_DOWN)
        self.wills.drop_all()
        self.timers.close()
        for session in self.hub.sessions.values():
            if session.expiry_handle is not None:
                session.expiry_handle.cancel()
                session.expiry_handle = None
        await self.hub.tasks.barrier()
