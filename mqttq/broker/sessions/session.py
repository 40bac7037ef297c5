"""Session: the state the broker keeps for one client id, and its outgoing message flow.

Outgoing QoS 1/2 messages wait in `queue` until the client's Receive Maximum leaves room
[MQTT-4.9.0-2]; sent ones sit in `inflight`, an `OutboundWindow` (protocol/outbound.py:
packet id -> entry in send order, and the table of their acknowledgements) until PUBACK /
PUBCOMP. A persistent session's entries come from storage, which assigned their
packet ids; on reconnect they are fetched again and the in-flight ones re-sent with DUP=1,
PUBREL for those that got PUBREC [MQTT-4.4.0-1]. A non-persistent session keeps all of it
in memory and allocates packet ids when it sends.

A session names what it needs, not who provides it: its connection is an `Outlet`
(broker/sessions/outlet.py, a `Client`), the broker holding it a `SessionHost`
(broker/sessions/host.py, the `Hub`), and a connected APPLICATION session's
acknowledgements go to an `ApplicationFlow` (its Kafka consumers).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable
from struct import Struct
from typing import TYPE_CHECKING, Any, Final, Protocol

from mqttq.auth.model import ClientType
from mqttq.broker.sessions.host import SessionHost
from mqttq.broker.sessions.outlet import Outlet
from mqttq.codec.packets import PubrelPacket, Will
from mqttq.errors import ProtocolError
from mqttq.model import Message
from mqttq.protocol.outbound import OutboundWindow
from mqttq.reasons import ReasonCode
from mqttq.storage.ports import QueuedMessage

if TYPE_CHECKING:
    import asyncio

    from mqttq.broker.delivery.tenants import TenantSpace

__all__ = ["ApplicationFlow", "Session"]

logger = logging.getLogger("mqttq.broker.session")

_pack_packet_id: Final = Struct("!H").pack

_NO_INFLIGHT: Final = OutboundWindow()
"""Shared by every session with nothing in flight yet (never written to: `_in_flight`
gives a session its own window before the first entry)."""


class ApplicationFlow(Protocol):
    """Where a connected persistent APPLICATION session's acknowledgements go instead of
    its own window (mqttq/broker/distributed/app_session.py `AppClient`, with the message
    log on): a Protocol, as its calls leave compiled code anyway."""

    def on_puback(self, packet_id: int) -> None: ...

    def on_pubrec(self, packet_id: int, reason_code: ReasonCode) -> bool: ...

    def pubrel_for(self, packet_id: int) -> PubrelPacket: ...

    def on_pubcomp(self, packet_id: int) -> None: ...

    def sync_shared(self) -> asyncio.Future[None] | None:
        """Follow the session's `$share` subscriptions; the future settles once the new
        ones are consumed (None when there are none)."""
        ...

    def pause_writing(self) -> None:
        """The connection's write buffer is full: stop consuming."""
        ...

    def resume_writing(self) -> None: ...

    async def stop(self) -> None:
        """The connection ended: stop consuming, save what is in flight."""
        ...


class Session:
    """One MQTT session [MQTT-4.1], online (with a `client`) or offline."""

    __slots__ = (
        "app",
        "awaiting_pubrel",
        "client",
        "client_id",
        "client_type",
        "disconnected_at",
        "ended",
        "expiry_handle",
        "expiry_interval",
        "feed",
        "fetched_serial",
        "hub",
        "inflight",
        "protocol_level",
        "queue",
        "ready",
        "resend_ids",
        "restored",
        "space",
        "waiting_live",
        "will",
    )

    def __init__(  # noqa: PLR0917 (what one session is made of)
        self,
        hub: SessionHost,
        client_id: str,
        protocol_level: int,
        expiry_interval: int,
        space: TenantSpace,
        client_type: ClientType = ClientType.DEVICE,
    ) -> None:
        self.hub = hub
        self.client_id = client_id
        self.space = space
        """The tenant namespace the session's subscriptions live in (fixed for its life)."""
        self.client_type = client_type
        self.protocol_level = protocol_level
        self.expiry_interval = expiry_interval
        """Seconds the session outlives its connection; 0 = not persistent."""
        self.client: Outlet | None = None
        self.ready = False
        """True once the online client got its CONNACK and re-sent messages."""
        self.ended = False
        """Set when the session is discarded; late deliveries to it are dropped."""
        self.queue: deque[QueuedMessage] | None = None
        """Created with the first message that has to wait (an idle session has none)."""
        self.inflight: OutboundWindow = _NO_INFLIGHT
        """QoS 1/2 deliveries awaiting their acknowledgement, by packet id; the shared
        empty window until the first one (an idle session holds none)."""
        self.awaiting_pubrel: set[int] | None = None
        """Inbound QoS 2 ids awaiting PUBREL [MQTT-4.3.3-10]: handed to each connection of
        the session, which creates it on the first QoS 2 PUBLISH, and taken back when the
        connection ends (`Lifecycle._release`)."""
        self.resend_ids: set[int] | None = None
        """Packet ids sent on an earlier connection: re-sent with DUP=1 [MQTT-3.3.1-1]."""
        self.restored = False
        """Loaded from storage at start: which entries were in flight is unknown."""
        self.fetched_serial = 0
        """Highest serial fetched on attach; live hand-offs at or below it are duplicates."""
        self.waiting_live: list[QueuedMessage] | None = None
        self.disconnected_at: float | None = None
        self.expiry_handle: asyncio.TimerHandle | None = None
        self.will: Will | None = None
        self.feed: Callable[[QueuedMessage], None] | None = None
        """For an integration's session (never online): hears of each entry stored for it,
        and makes QoS 0 messages stored too (mqttq/broker/integrations.py)."""
        self.app: ApplicationFlow | None = None
        """The Kafka consumers of a connected persistent APPLICATION session (with the
        message log on): its acknowledgements go to them."""

    @property
    def persistent(self) -> bool:
        """Stored (and outliving the connection) when the expiry interval is > 0."""
        return self.expiry_interval > 0

    def __repr__(self) -> str:
        state = "online" if self.client is not None else "offline"
        return f"<Session {self.client_id!r} {state} expiry={self.expiry_interval}>"

    # ------------------------------------------------------------------ delivery

    def deliver_now(self, message: Message) -> bool:
        """Deliver a message that is not stored: QoS 0, or any QoS to a non-persistent
        session. False when the queue is full under reject_new."""
        client = self.client
        stats = self.hub.stats
        if message.qos == 0:
            if client is not None and self.ready and client.writable:
                self.send_publish(client, message, 0, None, False)
            else:
                # Offline, still connecting or paused: QoS 0 is dropped, not buffered.
                stats.dropped[0] += 1
            return True
        if client is None:
            return True
        queue = self.queue
        if (
            not queue
            and self.ready
            and client.writable
            # The window's dict, not the window: len() of a dict is a field read under
            # mypyc, of a class a call to its __len__ (this runs for every message).
            and len(self.inflight.entries) < client.conn.client_receive_maximum
            and message.expires_at is None
        ):
            # Nothing waits before it and the window is open: what `pump` would do at once.
            self._send_entry(client, QueuedMessage(0, 0, message))
            return True
        if queue is None:
            queue = self.queue = deque()
        elif len(queue) >= self.hub.max_queued_messages:
            stats.dropped[message.qos] += 1
            if self.hub.reject_when_full:
                return False
            queue.popleft()
        queue.append(QueuedMessage(0, 0, message))
        self.pump()
        return True

    def deliver_stored(self, entry: QueuedMessage) -> None:
        """Hand over an entry storage just committed for this (persistent) session."""
        if self.ended or entry.serial <= self.fetched_serial:
            return  # the attach already fetched it
        if self.client is None:
            feed = self.feed
            if feed is not None:
                feed(entry)  # an integration's backlog
            return  # offline: it waits in storage
        if not self.ready:
            if self.waiting_live is None:
                self.waiting_live = []
            self.waiting_live.append(entry)
            return
        queue = self.queue
        if queue is None:
            queue = self.queue = deque()
        elif len(queue) >= self.hub.max_queued_messages and not self.hub.reject_when_full:
            queue.popleft()  # storage trimmed the same oldest entry
            self.hub.stats.dropped[entry.message.qos] += 1
        queue.append(entry)
        self.pump()

    def pump(self) -> None:
        """Send queued messages while the client's Receive Maximum allows [MQTT-4.9.0-2]."""
        queue = self.queue
        client = self.client
        if not queue or client is None or not self.ready or not client.writable:
            return
        in_flight = self._in_flight().entries  # the dict `_send_entry` adds to (see above)
        window = client.conn.client_receive_maximum
        now = 0.0
        while queue and len(in_flight) < window:
            entry = queue.popleft()
            message = entry.message
            if message.expires_at is not None:
                now = now or self.hub.clock()
                if message.is_expired(now):
                    self._finish(entry)  # never delivered once expired [MQTT-3.3.2-5]
                    continue
            self._send_entry(client, entry)
            if not client.writable:
                break

    def _send_entry(self, client: Outlet, entry: QueuedMessage) -> None:
        """Send one entry the window has room for; QoS 1/2 ones stay in flight."""
        message = entry.message
        if message.qos == 0:
            # Stored while offline (queue_qos0): sent once and forgotten.
            self.send_publish(client, message, 0, None, False)
            self._finish(entry)
            return
        inflight = self._in_flight()
        if not entry.packet_id:
            entry.packet_id = inflight.allocate()
        packet_id = entry.packet_id
        resend = self.resend_ids
        dup = False
        if resend is not None and packet_id in resend:
            dup = True
            resend.discard(packet_id)
        # An entry fetched at attach: the backlog it belongs to is often the same messages
        # for many sessions (storage hands them the same objects), so it shares encodings.
        shared = 0 < entry.serial <= self.fetched_serial
        if self.send_publish(client, message, message.qos, packet_id, dup, shared):
            inflight.sent(entry)
        else:
            logger.debug(
                "%s: message on %r larger than the client's Maximum Packet Size, "
                "discarded as delivered",
                self.client_id,
                message.topic,
            )
            self._finish(entry)  # [MQTT-3.1.2-25]

    def _in_flight(self) -> OutboundWindow:
        """`inflight`, made the session's own window first if it is still the shared one."""
        inflight = self.inflight
        if inflight is _NO_INFLIGHT:
            inflight = self.inflight = OutboundWindow()
        return inflight

    def send_publish(  # noqa: PLR0917 (the PUBLISH's fields, and how to encode it)
        self,
        client: Outlet,
        message: Message,
        qos: int,
        packet_id: int | None,
        dup: bool,
        shared: bool = False,
    ) -> bool:
        """Write one PUBLISH of `message`, the expiry rewritten as the time remaining
        [MQTT-3.3.2-6]; False when it exceeds the client's Maximum Packet Size. `shared`:
        other sessions are likely to send the same message object (QoS 0 always counts
        as shared: a fan-out's deliveries are made at once)."""
        props = message.properties
        rewrite = self.protocol_level == 5 and (
            message.expires_at is not None or message.subscription_identifiers
        )
        if (
            (shared or not qos)
            and not rewrite
            and not dup
            and qos == message.qos
            and client.conn.takes_shared_encoding
        ):
            # Encoded once per protocol family for every session sending it; the
            # session adds its packet id. (A message sent once would pay for the cut.)
            head, tail = self.hub.encoded.template(message, self.protocol_level)
            data = head + _pack_packet_id(packet_id) + tail if qos else head
            sent = client.send_encoded_publish(data)
            if sent:
                self.hub.stats.messages_out[qos] += 1
            return sent
        if rewrite:
            expiry = props.message_expiry_interval
            if message.expires_at is not None:
                expiry = message.remaining_expiry(self.hub.clock())  # [MQTT-3.3.2-6]
            props = dataclasses.replace(
                props,
                message_expiry_interval=expiry,
                subscription_identifiers=list(message.subscription_identifiers),
            )
        sent = client.send_message(
            message.topic, message.payload, qos, message.retain, dup, packet_id, props
        )
        if sent:
            self.hub.stats.messages_out[qos] += 1
        return sent

    def _finish(self, entry: QueuedMessage) -> None:
        """The flow of `entry` is over (acknowledged, expired or discarded)."""
        if self.persistent and entry.serial:
            self.hub.forget(self.client_id, entry.packet_id)

    # ------------------------------------------------------------------ acknowledgements

    def on_puback(self, packet_id: int) -> None:
        """PUBACK from the client: a QoS 1 delivery is done [MQTT-4.3.2]."""
        if self.app is not None:
            self.app.on_puback(packet_id)
            return
        try:
            entry = self.inflight.puback_received(packet_id)
        except ProtocolError as error:
            self._ignored(error)
            return
        self._finish(entry)
        self.pump()

    def on_pubrec(self, packet_id: int, reason_code: ReasonCode) -> asyncio.Future[Any] | None:
        """PUBREC: returns the storage write to wait for before PUBREL, if any.

        An error PUBREC ends the flow (no PUBREL) [MQTT-4.4.0-2]. The caller sends the
        PUBREL (via `pubrel_for`) once the future settles, in arrival order.
        """
        if self.app is not None:
            self.app.on_pubrec(packet_id, reason_code)
            return None
        try:
            entry = self.inflight.pubrec_received(packet_id, reason_code)
        except ProtocolError as error:
            self._ignored(error)
            return None
        if reason_code >= 0x80:
            self._finish(entry)
            self.pump()
            return None
        if self.persistent and entry.serial:
            return self.hub.mark_pubrel(self.client_id, packet_id)
        return None

    def pubrel_for(self, packet_id: int) -> PubrelPacket:
        """The PUBREL answering a PUBREC: 0x92 when the id is not in flight [MQTT-4.3.3]."""
        if self.app is not None:
            return self.app.pubrel_for(packet_id)
        if not self.inflight.awaiting_pubcomp(packet_id):
            return PubrelPacket(packet_id, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND)
        return PubrelPacket(packet_id)

    def on_pubcomp(self, packet_id: int) -> None:
        """PUBCOMP: a QoS 2 delivery is done [MQTT-4.3.3]."""
        if self.app is not None:
            self.app.on_pubcomp(packet_id)
            return
        try:
            entry = self.inflight.pubcomp_received(packet_id)
        except ProtocolError as error:
            self._ignored(error)
            return
        self._finish(entry)
        self.pump()

    def _ignored(self, error: ProtocolError) -> None:
        """An acknowledgement the outbound window refused (unknown packet id, or not the
        one its delivery awaits): logged and ignored, the connection stays."""
        logger.debug("%s: %s, ignored", self.client_id, error.message)

    # ------------------------------------------------------------------ connection changes

    def resume(self, entries: list[QueuedMessage]) -> None:
        """Start sending on a new connection: PUBRELs and re-sends first, in serial order,
        then whatever arrived while attaching [MQTT-4.4.0-1]."""
        client = self.client
        assert client is not None
        self.ready = True
        unacked = {entry.packet_id for entry in entries if not entry.pubrel}
        if self.restored:
            # After a restart any stored entry may have been sent before: mark them all DUP.
            self.restored = False
            self.resend_ids = unacked or None
        elif self.resend_ids is not None:
            self.resend_ids = (self.resend_ids & unacked) or None
        queue = self.queue
        for entry in entries:
            if entry.pubrel:
                self._in_flight().sent(entry)
                client.send(PubrelPacket(entry.packet_id))
            else:
                if queue is None:
                    queue = self.queue = deque()
                queue.append(entry)
        waiting = self.waiting_live
        self.waiting_live = None
        for entry in waiting or ():
            self.deliver_stored(entry)
        self.pump()

    def detach(self) -> None:
        """The connection closed. A persistent session keeps its queue in storage only."""
        self.client = None
        self.ready = False
        if self.persistent:
            sent = self.inflight.unacknowledged()
            if sent:
                if self.resend_ids is None:
                    self.resend_ids = sent
                else:
                    self.resend_ids |= sent
            self.queue = None
            self.inflight.clear()
            self.waiting_live = None
