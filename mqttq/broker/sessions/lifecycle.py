"""Session lifecycle: CONNECT (new, resumed, taken over), DISCONNECT, connection loss and
shutdown. How sessions end is `endings.py`; loading them at start, `restore.py`.

The lifecycle is the `ClientHost` its connections name (broker/connection/client.py): it
opens, attaches and closes them."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from mqttq.auth.authenticator import Authenticator
from mqttq.auth.model import ClientType
from mqttq.broker.connection.admission import address_refused, admit
from mqttq.broker.connection.client import Client
from mqttq.broker.connection.timers import TimerWheel
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.sessions.end_reasons import CONNECTION_LOST, client_disconnect_reason
from mqttq.broker.sessions.endings import SessionEndings
from mqttq.broker.sessions.outlet import Outlet
from mqttq.broker.sessions.restore import restore_sessions
from mqttq.broker.sessions.session import Session
from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import ConnackPacket, ConnectPacket, DisconnectPacket
from mqttq.config import MqttSettings
from mqttq.errors import ProtocolError, StorageError
from mqttq.limits.limiter import Refused
from mqttq.protocol.connect import ConnectDecision, ConnectPolicy, negotiate
from mqttq.protocol.connection import ConnectionLimits
from mqttq.reasons import ReasonCode
from mqttq.routing.topics import validate_topic_name
from mqttq.storage.ports import PresenceMarker, QueuedMessage

if TYPE_CHECKING:
    from mqttq.broker.distributed.cluster_node import ClusterNode

__all__ = ["Lifecycle", "connect_policy", "connection_limits"]

logger = logging.getLogger("mqttq.broker.session")


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
        self.endings = SessionEndings(hub, loop)
        self.wills = self.endings.wills
        self.timers = TimerWheel(loop)
        """Connect timeout and keep alive deadlines of every connection."""
        self.connecting: set[Client] = set()
        """Open connections not attached to a session (before or during CONNECT, or
        refused); an attached one is its session's `client` (see `connections`), so an
        established connection costs no entry here."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self.writes: list[Client] | None = None
        """While a client's received bytes are handled: the connections that buffered
        something to send, written when that handling ends (`Client.data_received`)."""

    # ------------------------------------------------------------------ connections

    def client_opened(self, client: Client) -> float | None:
        """A TCP connection was accepted: None refuses it (new-connection rate, or a
        blocked address: before any MQTT parsing), else the seconds to wait before reading
        from it."""
        limits = self.hub.limits
        admitted = limits.admit_tcp(self.loop.time())
        if isinstance(admitted, Refused) or address_refused(client, self.authenticator):
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
                cluster = self.endings.cluster
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
            self.endings.moved_away(session.client_id, session_ends)
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
        cluster = self.endings.cluster
        if old is None and cluster is not None:
            old = cluster.adopt(client_id)  # a session another node left
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
        if (
            app_log is not None
            and decision.persistent
            and identity.client_type == ClientType.APPLICATION
        ):
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
                    self.endings.forget(old)
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
                if (
                    app_log is not None
                    and session.persistent
                    and session.client_type == ClientType.APPLICATION
                ):
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
        if logger.isEnabledFor(logging.DEBUG):  # the peer is a system call away
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
        if self.hub.events.kinds:
            identity = client.identity
            self.hub.events.emit(
                "connected",
                session.space.name,
                client_id,
                username=None if identity is None else identity.username,
                protocol_level=packet.protocol_level,
                session_present=resume,
                keep_alive=decision.keep_alive,
                listener=client.listener.name,
            )
        session.resume(entries)
        if entries:
            # A backlog's burst goes out now, not at the end of the loop iteration: when
            # many clients reconnect at once, the first ones read theirs while the broker
            # handles the next CONNECTs, instead of all waiting for the last.
            client.flush_now()
        if (
            app_log is not None
            and session.persistent
            and session.client_type == ClientType.APPLICATION
        ):
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
            entries = await storage.fetch(session.client_id, hub.clock())
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
        session.fetched_serial = entries[-1].serial if entries else 0  # in serial order
        session.protocol_level = packet.protocol_level
        session.client_type = client.identity.client_type if client.identity else ClientType.DEVICE
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
        client.end_reason = client_disconnect_reason(packet.reason_code)
        client.end_code = packet.reason_code
        if session is None or session.client is not client:
            return
        asked = packet.properties.session_expiry_interval
        if asked is None or client.conn.protocol_level != ProtocolLevel.MQTT_5:
            return
        if session.expiry_interval == 0 and asked != 0:
            client.normal_disconnect = False
            client.end_reason = ""  # the close for the ProtocolError names the end
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

    def connections(self) -> list[Outlet]:
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
        if self.hub.events.kinds:
            reason = client.end_reason or CONNECTION_LOST
            code = client.end_code
            if code < 0:
                self.hub.events.emit(
                    "disconnected", session.space.name, session.client_id, reason=reason
                )
            else:
                self.hub.events.emit(
                    "disconnected",
                    session.space.name,
                    session.client_id,
                    reason=reason,
                    reason_code=int(code),  # a plain number, whatever IntEnum noted it
                )
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
            session.disconnected_at = hub.clock()
            hub.save_session(session)
            self.endings.schedule_expiry(session, session.expiry_interval)
            if will is not None:
                delay = will.properties.will_delay_interval or 0
                self.wills.connection_closed(
                    session.client_id,
                    will,
                    min(delay, session.expiry_interval),
                    session.space.name,
                )
        else:
            self.endings.forget(session)
            if will is not None:
                self.wills.connection_closed(session.client_id, will, 0, session.space.name)

    def _release_connection(self, client: Client) -> None:
        """Give back the connection the client held in the count limits (once)."""
        if client.counted:
            client.counted = False
            space = client.space
            assert space is not None
            self.hub.limits.release_connection(space.name)

    # ------------------------------------------------------------------ start / stop

    def attach_cluster(self, node: ClusterNode) -> None:
        """Run as one node of a cluster from now on: the hub routes through it
        (`Hub.attach_cluster`), and CONNECTs claim their client id from it and the
        session endings tell it theirs (`SessionEndings.cluster`)."""
        self.hub.attach_cluster(node)
        self.endings.cluster = node

    async def restore(self) -> int:
        """Load the stored sessions at start (`restore_sessions`); returns how many."""
        return await restore_sessions(self.endings, self.policy.max_session_expiry_interval)

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
