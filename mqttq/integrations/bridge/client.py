"""An asyncio MQTT 3.1.1 / 5.0 client for the bridge, on mqttq.codec.

What a bridge needs and no more: CONNECT with Clean Start 0 and a Session Expiry Interval
(the remote keeps the session while the bridge is away), username/password, TLS and client
certificates, PINGREQ keep-alive, QoS 0/1 PUBLISH out with a bounded in-flight window (the
unacknowledged ones are re-sent with DUP=1 and their packet identifiers after a reconnect,
[MQTT-4.4.0-1]), SUBSCRIBE, and PUBLISH in, each acknowledged only after the `on_message`
callback returned (in order of arrival, [MQTT-4.6.0-2]).

One `MqttClient` is one session at the remote; a `_Connection` is one TCP (or TLS)
connection of it. The session outlives connections: `connect()` again after a loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from mqttq.codec import (
    MAX_PACKET_ID,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PacketReader,
    PingreqPacket,
    Properties,
    ProtocolLevel,
    PubackPacket,
    PublishPacket,
    ReasonCode,
    SubackPacket,
    SubscribePacket,
    SubscriptionRequest,
    encode_packet,
)
from mqttq.errors import MqttqError, ProtocolError

MAX_PACKET_SIZE: Final = 268_435_460
"""The largest packet MQTT can carry (a 4-byte Remaining Length plus its header)."""

OnMessage = Callable[[PublishPacket], Awaitable[None]]


async def _wait_first(*futures: asyncio.Future[Any]) -> None:
    """Return once one of `futures` is done (each is left as it is)."""
    await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)


class ClientError(MqttqError):
    """The remote broker is unreachable, refused us or dropped the connection (one line,
    never a password in it)."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How to reach the remote broker and what session to ask for."""

    host: str
    port: int
    client_id: str
    protocol_version: int = 5
    """4 (MQTT 3.1.1) or 5 (MQTT 5.0)."""
    keep_alive: int = 60
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    """Already expanded from the environment: never printed."""
    ssl_context: ssl.SSLContext | None = None
    session_expiry_interval: int = 86_400
    """MQTT 5.0: how long the remote keeps the session after a disconnect (3.1.1 brokers keep
    a Clean Session 0 session until they decide otherwise)."""
    max_inflight: int = 100
    """Outgoing QoS 1 messages not yet acknowledged, lowered to the remote's Receive Maximum."""
    connect_timeout: float = 10.0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class Backoff:
    """Exponential backoff with full jitter: delay n is uniform in [0, min(maximum,
    initial * 2**n)] seconds; `reset()` after a success. Sans I/O: it only computes."""

    def __init__(
        self, initial: float = 0.1, maximum: float = 30.0, rng: random.Random | None = None
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.attempt = 0
        self._rng = rng if rng is not None else random.Random()

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * (2 ** min(self.attempt, 32)))
        self.attempt += 1
        return self._rng.uniform(0, ceiling)

    def reset(self) -> None:
        self.attempt = 0


class _Connection(asyncio.Protocol):
    """One connection of the session: bytes in and out, PINGREQ, incoming messages in order."""

    def __init__(self, client: MqttClient) -> None:
        loop = asyncio.get_running_loop()
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.reader = PacketReader(MAX_PACKET_SIZE, client.options.protocol_version)
        self.connack: asyncio.Future[ConnackPacket] = loop.create_future()
        self.lost: asyncio.Future[str] = loop.create_future()
        """Resolves with the reason, in one line, when this connection ends."""
        self.incoming: asyncio.Queue[PublishPacket | None] = asyncio.Queue()
        """Incoming PUBLISHes in arrival order; None once the connection ended."""
        self.last_received = loop.time()
        self.tasks: list[asyncio.Task[None]] = []
        """Cancelled when the connection ends (the keep-alive)."""
        self.delivery: asyncio.Task[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._paused = False
        self._out: list[bytes] = []
        """PUBLISHes `send_soon` keeps for one write at the end of this loop iteration."""

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.end(f"connection to {self.client.options.address} lost" + (f": {exc}" if exc else ""))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.last_received = asyncio.get_running_loop().time()
        self.reader.feed(data)
        try:
            while (packet := self.reader.next_packet()) is not None:
                self.client._on_packet(self, packet)
        except ProtocolError as exc:
            self.end(f"invalid packet from {self.client.options.address}: {exc.message}")

    # -- used by the client ---------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Write `data` now, after what `send_soon` kept."""
        self.flush()
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def send_soon(self, data: bytes) -> None:
        """Write `data` with the others sent in this loop iteration, in one write when it
        ends (a batch's PUBLISHes: one write and one system call, not one each)."""
        if not self._out:
            asyncio.get_running_loop().call_soon(self.flush)
        self._out.append(data)

    def flush(self) -> None:
        """Write what `send_soon` kept."""
        out = self._out
        if not out:
            return
        self._out = []
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"".join(out))

    async def wait_writable(self) -> None:
        """Return once the transport's write buffer is below its high-water mark."""
        if self._paused and not self.lost.done():
            self._writable = asyncio.get_running_loop().create_future()
            await _wait_first(self._writable, self.lost)

    def end(self, reason: str) -> None:
        """Close the connection (if open) and record why; the first reason wins."""
        if not self.lost.done():
            self.lost.set_result(reason)
        self._out = []
        if self.transport is not None:
            self.transport.abort()
            self.transport = None
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        # The delivery task is not cancelled: a callback under way finishes; what is queued
        # behind it is dropped unacknowledged (the remote re-sends it after a reconnect).
        self.incoming.put_nowait(None)
        if not self.connack.done():
            self.connack.set_exception(ClientError(reason))
            self.connack.exception()  # retrieved: no "never retrieved" warning
        self.client._on_connection_end(self)


class MqttClient:
    """One session at a remote broker, over successive connections.

    `on_message` receives every incoming PUBLISH, one at a time in arrival order; a QoS 1
    PUBLISH is acknowledged only after it returned, and not at all when the connection ended
    meanwhile (the remote then re-sends it after the reconnect: at least once).
    """

    def __init__(self, options: ClientOptions, on_message: OnMessage | None = None) -> None:
        self.options = options
        self.on_message = on_message
        self.session_present = False
        self._level = options.protocol_version
        self._conn: _Connection | None = None
        self._inflight: dict[int, tuple[PublishPacket, asyncio.Future[ReasonCode]]] = {}
        self._window = options.max_inflight
        self._window_waiters: list[asyncio.Future[None]] = []
        self._subacks: dict[int, asyncio.Future[SubackPacket]] = {}
        self._next_packet_id = 0
        self._closed = False

    # -- connection ------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and conn.connack.done() and not conn.lost.done()

    @property
    def inflight(self) -> int:
        """Outgoing QoS 1 messages not yet acknowledged (kept across reconnects)."""
        return len(self._inflight)

    async def connect(self) -> bool:
        """Open a connection, CONNECT with Clean Start 0 and wait for CONNACK; re-send the
        unacknowledged PUBLISHes with DUP=1. Returns the CONNACK's Session Present flag.
        Raises `ClientError` (one line) when the remote cannot be reached or refuses."""
        if self._closed:
            raise ClientError("client closed")
        if self.connected:
            return self.session_present
        options = self.options
        where = options.address
        loop = asyncio.get_running_loop()
        conn = _Connection(self)
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: conn,
                    options.host,
                    options.port,
                    ssl=options.ssl_context,
                    server_hostname=options.host if options.ssl_context is not None else None,
                ),
                options.connect_timeout,
            )
        except TimeoutError:
            raise ClientError(
                f"cannot connect to {where}: timed out after {options.connect_timeout:g} s"
            ) from None
        except ssl.SSLError as exc:
            raise ClientError(f"TLS handshake with {where} failed: {exc.reason or exc}") from None
        except ConnectionRefusedError:
            raise ClientError(f"cannot connect to {where}: connection refused") from None
        except OSError as exc:
            raise ClientError(f"cannot connect to {where}: {exc.strerror or exc}") from None
        self._conn = conn
        properties = Properties()
        if self._level == 5:
            properties.session_expiry_interval = options.session_expiry_interval
        conn.send(
            encode_packet(
                ConnectPacket(
                    options.client_id,
                    ProtocolLevel(self._level),
                    False,
                    options.keep_alive,
                    options.username,
                    options.password.encode() if options.password is not None else None,
                    None,
                    properties,
                ),
                self._level,
            )
        )
        try:
            connack = await asyncio.wait_for(asyncio.shield(conn.connack), options.connect_timeout)
        except TimeoutError:
            conn.end(f"no CONNACK from {where} within {options.connect_timeout:g} s")
            raise ClientError(
                f"no CONNACK from {where} within {options.connect_timeout:g} s"
            ) from None
        if connack.reason_code >= 0x80:
            reason = f"{where} refused the connection: {connack.reason_code.name}"
            conn.end(reason)
            raise ClientError(reason)
        self.session_present = connack.session_present
        props = connack.properties
        self._window = options.max_inflight
        if props.receive_maximum is not None:
            self._window = min(self._window, props.receive_maximum)
        keep_alive = (
            props.server_keep_alive if props.server_keep_alive is not None else options.keep_alive
        )
        conn.delivery = asyncio.create_task(self._deliver_incoming(conn))
        if keep_alive:
            conn.tasks.append(asyncio.create_task(self._keep_alive(conn, keep_alive)))
        # Re-send what the previous connections left unacknowledged, in order, with the same
        # packet identifiers and DUP=1 [MQTT-4.4.0-1].
        for packet, _ in self._inflight.values():
            packet.dup = True
            conn.send(encode_packet(packet, self._level))
        return connack.session_present

    async def wait_lost(self) -> str:
        """Wait until the current connection ends; its reason in one line."""
        conn = self._require()
        return await asyncio.shield(conn.lost)

    async def disconnect(self) -> None:
        """Send DISCONNECT (the remote keeps the session) and close the connection."""
        conn = self._conn
        if conn is None or conn.lost.done():
            return
        conn.send(encode_packet(DisconnectPacket(ReasonCode.NORMAL_DISCONNECTION), self._level))
        transport = conn.transport
        if transport is not None:
            transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(conn.lost), 2.0)
        conn.end(f"disconnected from {self.options.address}")

    async def close(self) -> None:
        """Disconnect and fail whatever still waits for an acknowledgement; idempotent."""
        await self.disconnect()
        self._closed = True
        failure = ClientError("client closed")
        for _, future in self._inflight.values():
            if not future.done():
                future.set_exception(failure)
                future.exception()
        self._inflight.clear()

    # -- outgoing ----------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> asyncio.Future[ReasonCode] | None:
        """Send one PUBLISH; for QoS 1 wait for room in the window first and return the
        future of its PUBACK's reason code (SUCCESS from a 3.1.1 remote). Raises
        `ClientError` when the connection is down or ends while waiting."""
        conn = self._require()
        props = properties if properties is not None and self._level == 5 else Properties()
        if qos == 0:
            conn.send(
                encode_packet(
                    PublishPacket(topic, payload, 0, retain, False, None, props), self._level
                )
            )
            await conn.wait_writable()
            return None
        while len(self._inflight) >= self._window:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._window_waiters.append(waiter)
            await _wait_first(waiter, conn.lost)
            if conn.lost.done():
                raise ClientError(conn.lost.result())
        packet_id = self._allocate_packet_id()
        packet = PublishPacket(topic, payload, 1, retain, False, packet_id, props)
        future: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
        self._inflight[packet_id] = (packet, future)
        conn.send_soon(encode_packet(packet, self._level))
        await conn.wait_writable()
        return future

    async def wait_acks(self, futures: Sequence[asyncio.Future[ReasonCode]]) -> list[ReasonCode]:
        """The reason codes of the PUBACKs of `futures`, in order, once all have come.
        Raises `ClientError` when the connection ends first (they stay in flight: the next
        `connect()` re-sends them)."""
        pending = [future for future in futures if not future.done()]
        if pending:
            conn = self._require()
            all_done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            remaining = len(pending)

            def one_done(_: asyncio.Future[ReasonCode]) -> None:
                nonlocal remaining
                remaining -= 1
                if remaining == 0 and not all_done.done():
                    all_done.set_result(None)

            for future in pending:
                future.add_done_callback(one_done)
            await _wait_first(all_done, conn.lost)
            if not all_done.done():
                for future in pending:
                    future.remove_done_callback(one_done)
                raise ClientError(conn.lost.result())
        return [future.result() for future in futures]

    async def subscribe(self, filters: Sequence[str], qos: int) -> list[ReasonCode]:
        """SUBSCRIBE to `filters` at `qos`; the SUBACK's reason codes, one per filter."""
        conn = self._require()
        packet_id = self._allocate_packet_id()
        waiter: asyncio.Future[SubackPacket] = asyncio.get_running_loop().create_future()
        self._subacks[packet_id] = waiter
        requests = [SubscriptionRequest(topic_filter, qos) for topic_filter in filters]
        conn.send(encode_packet(SubscribePacket(packet_id, requests), self._level))
        try:
            await _wait_first(waiter, conn.lost)
        finally:
            self._subacks.pop(packet_id, None)
        if not waiter.done():
            raise ClientError(conn.lost.result())
        return [ReasonCode(code) for code in waiter.result().reason_codes]

    # -- incoming ----------------------------------------------------------------------

    def _on_packet(self, conn: _Connection, packet: Packet) -> None:
        if type(packet) is PublishPacket:
            if packet.qos > 1:
                # Subscriptions ask for QoS 1 at most: the remote may not send QoS 2 [MQTT-3.8.4-8].
                conn.end(f"{self.options.address} sent a QoS 2 PUBLISH to a QoS 1 subscription")
                return
            conn.incoming.put_nowait(packet)
        elif type(packet) is PubackPacket:
            entry = self._inflight.pop(packet.packet_id, None)
            if entry is not None and not entry[1].done():
                entry[1].set_result(packet.reason_code)
            self._wake_window()
        elif type(packet) is ConnackPacket:
            if not conn.connack.done():
                conn.connack.set_result(packet)
        elif type(packet) is SubackPacket:
            waiter = self._subacks.get(packet.packet_id)
            if waiter is not None and not waiter.done():
                waiter.set_result(packet)
        elif type(packet) is DisconnectPacket:
            conn.end(f"{self.options.address} sent DISCONNECT {packet.reason_code.name}")
        # PINGRESP: `last_received` is enough. Nothing else is expected from a server.

    async def _deliver_incoming(self, conn: _Connection) -> None:
        on_message = self.on_message
        while True:
            packet = await conn.incoming.get()
            if packet is None or conn.lost.done():
                return
            if on_message is not None:
                try:
                    await on_message(packet)
                except Exception as exc:  # any failure: left unacknowledged, re-sent
                    conn.end(f"message on {packet.topic!r} not taken: {exc}")
                    return
            if packet.qos == 1 and packet.packet_id is not None and not conn.lost.done():
                conn.send(encode_packet(PubackPacket(packet.packet_id), self._level))

    async def _keep_alive(self, conn: _Connection, keep_alive: int) -> None:
        # A PINGREQ every half interval keeps the remote's timer from firing [MQTT-3.1.2-23];
        # silence from the remote for 1.5 intervals means the connection is dead.
        loop = asyncio.get_running_loop()
        ping = encode_packet(PingreqPacket(), self._level)
        while not conn.lost.done():
            await asyncio.sleep(keep_alive / 2)
            if loop.time() - conn.last_received > keep_alive * 1.5:
                conn.end(f"no answer from {self.options.address} for {keep_alive * 1.5:g} s")
                return
            conn.send(ping)

    # -- internals ---------------------------------------------------------------------

    def _on_connection_end(self, conn: _Connection) -> None:
        if conn is self._conn:
            self._wake_window()

    def _wake_window(self) -> None:
        waiters, self._window_waiters = self._window_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _require(self) -> _Connection:
        conn = self._conn
        if conn is None or not conn.connack.done() or conn.lost.done():
            reason = conn.lost.result() if conn is not None and conn.lost.done() else None
            raise ClientError(reason or f"not connected to {self.options.address}")
        return conn

    def _allocate_packet_id(self) -> int:
        packet_id = self._next_packet_id
        for _ in range(MAX_PACKET_ID):
            packet_id = packet_id % MAX_PACKET_ID + 1
            if packet_id not in self._inflight and packet_id not in self._subacks:
                self._next_packet_id = packet_id
                return packet_id
        raise ClientError("no free packet identifier")  # the window keeps far below 65535
