"""Client: the asyncio.Protocol shell around one MqttConnection.

Bytes in -> `MqttConnection` -> packets -> the hub and the session lifecycle; everything
sent is encoded into the connection's one buffer. It is written when the read that caused
it has been handled (what other callbacks send: at the end of the event-loop iteration),
or at once past 64 KiB. Write pressure pauses deliveries to this client (`writable`); a
publisher's acks and deliveries run through `steps` in arrival order.

`Client` is what the code it serves names: an `Outlet` to its session, a `Publisher` to the
intake, a `ClientLink` to its packet handlers (its base classes, each extending the one
before). Of the session lifecycle that opens, attaches and closes it, it names what it
needs, a `ClientHost` (below, which `Lifecycle` satisfies).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from mqttq.broker.connection.dispatch import HANDLERS, on_puback, on_publish
from mqttq.broker.connection.link import ClientLink
from mqttq.broker.net.listeners import TCP, ListenerKind
from mqttq.broker.sessions.end_reasons import error_reason, kick_reason
from mqttq.codec.packets import (
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PubackPacket,
    PublishPacket,
)
from mqttq.errors import ProtocolError
from mqttq.protocol.connection import MqttConnection
from mqttq.protocol.state import ConnState
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.broker.connection.timers import TimerWheel
    from mqttq.broker.delivery.hub import Hub
    from mqttq.broker.sessions.session import Session
    from mqttq.protocol.connection import ConnectionLimits

__all__ = ["Client", "ClientHost"]

logger = logging.getLogger("mqttq.broker.client")

FLUSH_AT: Final = 64 * 1024
"""Bytes buffered before a write happens without waiting for the end of the iteration."""
WRITE_HIGH_WATER = 1280 * 1024
WRITE_LOW_WATER = 640 * 1024
"""Transport buffer limits: above high, deliveries to this client pause (TBMQ's values)."""
MAX_PENDING_STEPS: Final = 4096
"""Answers waiting for storage before the client's socket stops being read."""
CLOSE_LINGER = 2.0
"""Seconds a closing connection keeps reading (and discarding) after its last packet."""


class ClientHost(Protocol):
    """What a connection needs of the session lifecycle around it (`Lifecycle`): the loop,
    the hub, the connection limits and the shared timer wheel, the connections to write
    once a read was handled (`writes`), and the steps of a connection's life."""

    writes: list[Client] | None
    """While a client's received bytes are handled: the connections that buffered
    something to send, written when that handling ends (`Client.data_received`)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def hub(self) -> Hub: ...

    @property
    def limits(self) -> ConnectionLimits: ...

    @property
    def timers(self) -> TimerWheel: ...

    def client_opened(self, client: Client) -> float | None:
        """A connection was accepted: None refuses it, else the seconds to wait before
        reading from it."""
        ...

    def connect(self, client: Client, packet: ConnectPacket) -> Coroutine[Any, Any, None]:
        """Answer a CONNECT: refuse it, or attach the client to a session."""
        ...

    def disconnect_received(self, client: Client, packet: DisconnectPacket) -> None:
        """The client sent DISCONNECT (before its connection closes)."""
        ...

    def client_closed(self, client: Client) -> None:
        """The connection is over for MQTT: release its session."""
        ...


class Client(ClientLink):
    """One network connection of a client (see the module docstring)."""

    __slots__ = (
        "_auth_waiter",
        "_blocked",
        "_deferred",
        "_draining",
        "_flush_pending",
        "_reading_paused",
        "_timer_slot",
        "counted",
        "life",
    )

    def __init__(self, life: ClientHost, listener: ListenerKind = TCP) -> None:
        self.life = life
        self.hub = life.hub
        self.listener = listener
        """The listener the connection came through (tcp, tls, ws, wss)."""
        self.loop = life.loop
        self.conn = MqttConnection(life.limits, self.loop.time())
        self.transport: asyncio.Transport | None = None
        self.session = None
        self.client_id = ""
        self._steps = None
        self.writable = True
        self.closed = False
        self.normal_disconnect = False
        """DISCONNECT 0x00 received: the will is discarded [MQTT-3.14.4-3]."""
        self.end_reason = ""
        self.end_code = -1
        self.identity = None
        self.space = None
        self.counted = False
        """The connection holds a slot in the connection count limits."""
        self.enhanced = None
        self._auth_waiter: asyncio.Future[Packet | None] | None = None
        self._blocked = False
        self._deferred = False
        self._draining = False
        self._flush_pending = False
        self._reading_paused = False
        self._timer_slot: int | None = None
        """Index of this connection's deadline in the lifecycle's TimerWheel."""

    def __repr__(self) -> str:
        return f"<Client {self.client_id!r} {self.peer}>"

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        wait = self.life.client_opened(self)
        if wait is None:  # over the new-connection rate: dropped before any parsing
            self.closed = True
            transport.abort()
            return
        transport.set_write_buffer_limits(WRITE_HIGH_WATER, WRITE_LOW_WATER)
        if wait > 0:
            transport.pause_reading()
            self.loop.call_later(wait, self._resume_after_wait)
        self._arm_timer()

    def _resume_after_wait(self) -> None:
        if not self.closed and not self._reading_paused and self.transport is not None:
            self.transport.resume_reading()

    def local_is_loopback(self) -> bool:
        """True when the client reached the broker on a loopback address (127.0.0.0/8,
        ::1): the listener `auth.anonymous = "loopback"` lets in without credentials."""
        transport = self.transport
        if transport is None:
            return False
        known = transport.get_extra_info("loopback")  # plain TCP: from its listener
        if known is not None:
            return bool(known)
        sockname = transport.get_extra_info("sockname")
        if not sockname or not isinstance(sockname, tuple) or not isinstance(sockname[0], str):
            return False
        host = sockname[0]
        if host.startswith("127.") or host == "::1":  # the forms the socket API gives
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def data_received(self, data: bytes) -> None:
        if self._draining:
            return  # the connection is closing: what the client still sends is dropped
        self.conn.receive_data(data, self.loop.time())
        if self._blocked:
            if self._auth_waiter is not None:
                self._answer_waiter()
            return
        life = self.life
        # What the packets of this read make other connections send (a forwarded PUBLISH,
        # this client's acks) is written when they are handled, not on the next loop
        # iteration: the message's way out waits for no other callback.
        writes: list[Client] = []
        life.writes = writes
        try:
            self._process()
        finally:
            life.writes = None
            for client in writes:
                try:
                    client._flush()
                except Exception as error:  # as from a loop callback: reported; others written
                    self.loop.call_exception_handler(
                        {"message": "writing to a client failed", "exception": error}
                    )

    def eof_received(self) -> bool | None:
        return None  # close the transport (also ends the drain of a graceful close)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._auth_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self.conn.close()
        self._cancel_timer()
        self.life.client_closed(self)

    def pause_writing(self) -> None:
        self.writable = False
        session = self.session
        if session is not None and session.app is not None:
            session.app.pause_writing()

    def resume_writing(self) -> None:
        self.writable = True
        session = self.session
        if session is not None:
            if session.app is not None:
                session.app.resume_writing()
            session.pump()
        self.flush_soon()

    # ------------------------------------------------------------------ sending

    # send, send_message, send_encoded_publish, send_publish_ack: Outlet's.

    def send_publish(self, packet: PublishPacket) -> bool:
        sent = self.conn.send_publish(packet)
        self.flush_soon()
        return sent

    def flush_now(self) -> None:
        """Write what is buffered to the transport now (not at the end of the iteration)."""
        if self.conn.pending_bytes:
            self._flush()

    def flush_soon(self) -> None:
        pending = self.conn.pending_bytes
        if pending >= FLUSH_AT:
            self._flush()
        elif pending and not self._flush_pending:
            self._flush_pending = True
            writes = self.life.writes
            if writes is not None:
                writes.append(self)
            else:
                self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        data = self.conn.data_to_send()
        transport = self.transport
        if transport is None or transport.is_closing() or self._draining:
            return
        if data:
            transport.write(data)
        if self.conn.state is ConnState.CLOSED:
            self._close_transport(transport)

    def close(self) -> None:
        """Flush what is queued (an error CONNACK/DISCONNECT) and close the transport."""
        self.conn.close()
        self._flush()
        if self.transport is not None and not self.transport.is_closing():
            self._close_transport(self.transport)

    def _close_transport(self, transport: asyncio.Transport) -> None:
        """A graceful close: where the transport can half-close (plain TCP), send what is
        buffered and a FIN, then go on reading and discarding for up to CLOSE_LINGER
        seconds before the full close. A client still writing (PUBRELs, a burst of
        PUBLISHes) thus reads the reason code (the CONNACK or DISCONNECT just sent)
        instead of a reset: closing a socket with unread bytes makes the kernel answer
        with RST. TLS and WebSocket transports close with their own closing handshake."""
        if self._draining:
            return
        if not transport.can_write_eof():
            transport.close()
            return
        self._draining = True
        self.closed = True
        transport.write_eof()
        self._cancel_timer()
        self.life.client_closed(self)  # for MQTT the connection is over now
        transport.resume_reading()  # possibly paused by a rate limit or a full pipeline
        self.loop.call_later(CLOSE_LINGER, self._linger_over, transport)

    @staticmethod
    def _linger_over(transport: asyncio.Transport) -> None:
        if not transport.is_closing():
            transport.close()

    def kick(
        self, reason_code: ReasonCode, reason_string: str | None = None, why: str = ""
    ) -> None:
        """Server-initiated close: DISCONNECT (5.0) with `reason_code`, then close; the
        session is released at once (the will follows the abnormal-close rules). `why`
        names the end reason when the code does not (end_reasons.kick_reason)."""
        if not self.end_reason:
            self.end_reason = why or kick_reason(reason_code)
            self.end_code = reason_code
        self.conn.disconnect(reason_code, reason_string)
        self.close()
        self.life.client_closed(self)

    def disconnected(self, packet: DisconnectPacket) -> None:
        """The client's DISCONNECT: the lifecycle notes it, then the connection closes."""
        self.life.disconnect_received(self, packet)
        self.close()
        self.life.client_closed(self)

    def fail(self, error: ProtocolError) -> None:
        """Answer a client fault with what the spec names and close; one log line."""
        self.hub.stats.protocol_errors += 1
        if error.reason_code == ReasonCode.RECEIVE_MAXIMUM_EXCEEDED and self.space is not None:
            self.hub.limits.count_refusal(self.space.name, "receive_maximum")
        logger.info(
            "client %r (%s): %s (0x%02X), closing",
            self.client_id,
            self.peer,
            error.message,
            error.reason_code,
        )
        if not self.end_reason:
            self.end_reason = error_reason(error.reason_code)
            self.end_code = error.reason_code
        self.conn.fail(error)
        self.close()
        self.life.client_closed(self)

    # ------------------------------------------------------------------ timers

    def _arm_timer(self) -> None:
        deadline = self.conn.get_timer()
        if deadline is not None and not self.closed:
            self._timer_slot = self.life.timers.schedule(self, deadline)

    def _cancel_timer(self) -> None:
        if self._timer_slot is not None:
            self.life.timers.cancel(self, self._timer_slot)
            self._timer_slot = None

    def on_timer(self) -> None:
        """The connect timeout or keep alive deadline this connection was filed under is
        due (the TimerWheel calls this); the connection checks its current deadline."""
        self._timer_slot = None
        try:
            self.conn.handle_timer(self.loop.time())
        except ProtocolError as error:
            self.fail(error)
            return
        self._arm_timer()

    # ------------------------------------------------------------------ inbound packets

    def _process(self) -> None:
        conn = self.conn
        handlers = HANDLERS
        try:
            while not self._blocked:
                packet = conn.next_packet()
                if packet is None:
                    break
                # The two packets of every QoS 1 message by a direct (native) call; the
                # table's handlers are Python calls, with their arguments parsed.
                if type(packet) is PublishPacket:
                    on_publish(self, packet)
                elif type(packet) is PubackPacket:
                    on_puback(self, packet)
                else:
                    handler = handlers.get(type(packet))
                    if handler is not None:
                        handler(self, packet)
        except ProtocolError as error:
            self.fail(error)
            return
        self.flush_soon()

    def defer(self, delay: float, then: Callable[[], None]) -> None:
        """Handle nothing more from this client for `delay` seconds (a rate limit's
        bounded wait; the token is already taken), then run `then` and carry on."""
        self._blocked = True
        self._deferred = True
        transport = self.transport
        if transport is not None and not self._reading_paused:
            transport.pause_reading()
        self.loop.call_later(delay, self._deferred_done, then)

    def _deferred_done(self, then: Callable[[], None]) -> None:
        self._deferred = False
        if self.closed:
            return
        self._blocked = False
        if self.transport is not None and not self._reading_paused:
            self.transport.resume_reading()
        try:
            then()
        except ProtocolError as error:
            self.fail(error)
            return
        self._process()

    def start_connect(self, packet: ConnectPacket) -> None:
        """CONNECT is answered asynchronously; nothing more is read until it is."""
        self._blocked = True
        task = self.loop.create_task(self.life.connect(self, packet))
        task.add_done_callback(self._connect_done)
        self._cancel_timer()  # the keep alive applies once CONNECT is answered

    def wait_packet(self) -> asyncio.Future[Packet | None]:
        """While CONNECT is answered (reading is blocked): the client's next packet, None
        when the connection closes first; a ProtocolError when its bytes are not one.
        For the enhanced authentication's exchange (broker/connection/enhanced.py)."""
        waiter: asyncio.Future[Packet | None] = self.loop.create_future()
        self._auth_waiter = waiter
        if self.closed:
            waiter.set_result(None)
        else:
            self._answer_waiter()  # the packet may be buffered already
        return waiter

    def _answer_waiter(self) -> None:
        waiter = self._auth_waiter
        if waiter is None or waiter.done():
            self._auth_waiter = None
            return
        try:
            packet = self.conn.next_packet()
        except ProtocolError as error:
            self._auth_waiter = None
            waiter.set_exception(error)
            return
        if packet is not None:
            self._auth_waiter = None
            waiter.set_result(packet)

    def _connect_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or (error := task.exception()) is not None:
            if not task.cancelled():
                logger.error("connect of %r failed", self.client_id, exc_info=error)
            self.close()
            self.life.client_closed(self)
            return
        self._blocked = False
        if self.closed or self.conn.state is ConnState.CLOSED:
            self._flush()
            return
        self._arm_timer()
        self._process()

    def accepted(self, session: Session, connack: ConnackPacket, keep_alive: int) -> None:
        """The CONNECT was accepted for `session`: send CONNACK."""
        self.session = session
        self.client_id = session.client_id
        if session.awaiting_pubrel is not None:  # else the window makes its own on use
            self.conn.inbound.awaiting_pubrel = session.awaiting_pubrel
        if self.enhanced is not None:
            self.enhanced.connack_properties(connack.properties)
        self.conn.accept(connack, keep_alive)
        self.flush_soon()

    def refuse(self, reason_code: ReasonCode, message: str) -> None:
        """Refuse the CONNECT with an error CONNACK (3.x: its return code) and close."""
        logger.info("client %r (%s) refused: %s", self.client_id, self.peer, message)
        self.conn.refuse(reason_code, message if self.conn.is_v5 else None)
        self.close()

    # ------------------------------------------------------------------ flow control

    def pause_reading_if_behind(self) -> None:
        """Stop reading while too many answers wait for storage (a fast publisher)."""
        steps = self._steps
        if steps is not None and steps.waiting > MAX_PENDING_STEPS and not self._reading_paused:
            self._reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()

    def _steps_advanced(self) -> None:
        if self._reading_paused and self.steps.waiting < MAX_PENDING_STEPS // 2:
            self._reading_paused = False
            if self.transport is not None and not self.closed and not self._deferred:
                self.transport.resume_reading()
