"""A minimal asyncio MQTT 3.1.1 / 5.0 client for load generation, built on mqttq.codec.

It does only what the bench needs, fast: CONNECT (clean or persistent session), SUBSCRIBE,
PUBLISH at QoS 0/1/2 in both directions with a bounded in-flight window, PINGREQ and
DISCONNECT. Outgoing bytes are buffered and written once per batch (`flush`), so a burst of
acknowledgements or publishes costs one `transport.write`, not one syscall each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, cast

from mqttq.bench.options import BenchError, ConnectFailed
from mqttq.bench.stats import LatencyHistogram
from mqttq.codec import (
    MAX_PACKET_ID,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    PacketReader,
    PingreqPacket,
    Properties,
    ProtocolLevel,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    ReasonCode,
    SubackPacket,
    SubscribePacket,
    SubscriptionRequest,
    encode_packet,
)
from mqttq.errors import ProtocolError

_MAX_PACKET_SIZE: Final = 268_435_460
_NO_PROPERTIES: Final = Properties()
"""Shared, never mutated: saves one Properties allocation per acknowledgement."""
_RECEIVE_MAXIMUM: Final = 65535


class Counters:
    """Message counters shared by every client of one worker (read by the progress task)."""

    __slots__ = (
        "acked",
        "acked_measured",
        "disconnects",
        "duplicates",
        "last_received_ns",
        "published",
        "published_measured",
        "received",
        "received_measured",
        "rejected",
    )

    def __init__(self) -> None:
        self.published = 0
        self.published_measured = 0
        self.acked = 0
        self.acked_measured = 0
        self.rejected = 0
        self.received = 0
        """Unique messages received (first arrival of each publisher sequence)."""
        self.received_measured = 0
        self.duplicates = 0
        self.disconnects = 0
        self.last_received_ns = 0
        """time.time_ns() of the latest measured (post warm-up) arrival."""


class BenchClient(asyncio.Protocol):
    """One MQTT connection. Not reusable after `connection_lost`; make a new one to reconnect.

    `on_payload` is called with the payload of every application message delivered to this
    client; a QoS 2 message is delivered once, on its first PUBLISH [MQTT-4.3.3].
    """

    def __init__(
        self,
        client_id: str,
        protocol_level: int,
        counters: Counters,
        *,
        ack_histogram: LatencyHistogram | None = None,
        on_payload: Callable[[bytes], None] | None = None,
        window: int = 100,
    ) -> None:
        self.client_id = client_id
        self.protocol_level = protocol_level
        self.counters = counters
        self.ack_histogram = ack_histogram if ack_histogram is not None else LatencyHistogram()
        self.on_payload = on_payload
        self.window = window
        """In-flight limit for outgoing QoS 1/2, lowered to the broker's Receive Maximum."""
        self.keep_alive = 0
        self.acked = 0
        self.rejected = 0
        self.measure_from_ns = 0
        """PUBACK/PUBCOMP latency is recorded only for messages sent at or after this
        `time.perf_counter_ns()` value (the end of the warm-up)."""
        self.error: str | None = None
        self._reader = PacketReader(_MAX_PACKET_SIZE, protocol_level)
        self._transport: asyncio.Transport | None = None
        self._out: list[bytes] = []
        self._closing = False
        self._paused = False
        self._writable: asyncio.Future[None] | None = None
        self._connack: asyncio.Future[ConnackPacket] | None = None
        self._subacks: dict[int, asyncio.Future[SubackPacket]] = {}
        self._closed: asyncio.Future[None] | None = None
        self._inflight: dict[int, int] = {}
        self._window_waiter: asyncio.Future[None] | None = None
        self._next_packet_id = 0
        self._awaiting_pubrel: set[int] = set()

    # -- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if not self._closing:
            self.counters.disconnects += 1
            reason = f": {exc}" if exc else ""
            self.error = self.error or f"{self.client_id}: connection closed by the broker{reason}"
        failure = ConnectFailed(self.error or f"{self.client_id}: connection closed")
        for future in (self._connack, self._window_waiter, self._writable, *self._subacks.values()):
            if future is not None and not future.done():
                future.set_exception(failure)
                # Retrieved or not, a failed waiter must not log "exception never retrieved".
                future.exception()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        try:
            while (packet := reader.next_packet()) is not None:
                if type(packet) is PublishPacket:
                    self._on_publish(packet)
                elif type(packet) is PubackPacket:
                    self._on_ack(packet.packet_id, packet.reason_code)
                elif type(packet) is PubrecPacket:
                    self._on_pubrec(packet)
                elif type(packet) is PubcompPacket:
                    self._on_ack(packet.packet_id, packet.reason_code)
                elif type(packet) is PubrelPacket:
                    self._awaiting_pubrel.discard(packet.packet_id)
                    self._out.append(
                        encode_packet(
                            PubcompPacket(packet.packet_id, ReasonCode.SUCCESS, _NO_PROPERTIES),
                            self.protocol_level,
                        )
                    )
                elif type(packet) is ConnackPacket:
                    if self._connack is not None and not self._connack.done():
                        self._connack.set_result(packet)
                elif type(packet) is SubackPacket:
                    waiter = self._subacks.pop(packet.packet_id, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(packet)
                elif type(packet) is DisconnectPacket:
                    self.error = (
                        f"{self.client_id}: broker sent DISCONNECT {packet.reason_code.name}"
                    )
                # PINGRESP, UNSUBACK and AUTH need no action.
        except ProtocolError as exc:
            self.error = f"{self.client_id}: invalid packet from the broker: {exc.message}"
            self.counters.disconnects += 1
            self.abort()
            return
        self.flush()

    # -- incoming application messages ------------------------------------------------

    def _on_publish(self, packet: PublishPacket) -> None:
        qos = packet.qos
        packet_id = packet.packet_id
        if qos == 1 and packet_id is not None:
            self._out.append(
                encode_packet(
                    PubackPacket(packet_id, ReasonCode.SUCCESS, _NO_PROPERTIES),
                    self.protocol_level,
                )
            )
        elif qos == 2 and packet_id is not None:
            self._out.append(
                encode_packet(
                    PubrecPacket(packet_id, ReasonCode.SUCCESS, _NO_PROPERTIES),
                    self.protocol_level,
                )
            )
            # A re-sent PUBLISH before PUBREL is the same message: acknowledge, do not
            # deliver again [MQTT-4.3.3-9].
            if packet_id in self._awaiting_pubrel:
                return
            self._awaiting_pubrel.add(packet_id)
        if self.on_payload is not None:
            self.on_payload(packet.payload)

    # -- outgoing QoS flows -------------------------------------------------------------

    def _on_ack(self, packet_id: int, reason_code: ReasonCode) -> None:
        sent = self._inflight.pop(packet_id, None)
        if sent is None:
            return
        if reason_code >= 0x80:
            self.rejected += 1
            self.counters.rejected += 1
        else:
            self.acked += 1
            counters = self.counters
            counters.acked += 1
            if sent >= self.measure_from_ns:
                counters.acked_measured += 1
                self.ack_histogram.record((time.perf_counter_ns() - sent) // 1000)
        waiter = self._window_waiter
        if waiter is not None and not waiter.done() and len(self._inflight) < self.window:
            waiter.set_result(None)

    def _on_pubrec(self, packet: PubrecPacket) -> None:
        if packet.packet_id not in self._inflight:
            return
        if packet.reason_code >= 0x80:
            # A failed PUBREC ends the exchange: no PUBREL follows [MQTT-4.3.3].
            self._on_ack(packet.packet_id, packet.reason_code)
            return
        self._out.append(
            encode_packet(
                PubrelPacket(packet.packet_id, ReasonCode.SUCCESS, _NO_PROPERTIES),
                self.protocol_level,
            )
        )

    # -- public operations ----------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._closing

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def window_full(self) -> bool:
        return len(self._inflight) >= self.window

    async def connect(
        self,
        host: str,
        port: int,
        *,
        clean_start: bool = True,
        session_expiry: int = 0,
        keep_alive: int = 60,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
    ) -> ConnackPacket:
        """Open the TCP connection, send CONNECT and wait for a successful CONNACK.

        `session_expiry` is the MQTT 5.0 Session Expiry Interval [MQTT-3.1.2-11.2]; for
        3.1.1 a persistent session is asked for with `clean_start=False` alone.
        Raises ConnectFailed with a one-line message on any failure.
        """
        loop = asyncio.get_running_loop()
        where = f"{host}:{port}"
        try:
            await asyncio.wait_for(loop.create_connection(lambda: self, host, port), timeout)
        except ConnectionRefusedError:
            raise ConnectFailed(f"cannot connect to {where}: is a broker running?") from None
        except TimeoutError:
            raise ConnectFailed(
                f"cannot connect to {where}: timed out after {timeout:g} s"
            ) from None
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {where}: {exc.strerror or exc}") from None
        self._closed = loop.create_future()
        self._connack = loop.create_future()
        properties = Properties()
        if self.protocol_level == 5:
            properties.receive_maximum = _RECEIVE_MAXIMUM
            if session_expiry:
                properties.session_expiry_interval = session_expiry
        self._out.append(
            encode_packet(
                ConnectPacket(
                    self.client_id,
                    ProtocolLevel(self.protocol_level),
                    clean_start,
                    keep_alive,
                    username,
                    password.encode() if password is not None else None,
                    None,
                    properties,
                ),
                self.protocol_level,
            )
        )
        self.flush()
        try:
            connack = await asyncio.wait_for(self._connack, timeout)
        except TimeoutError:
            self.abort()
            raise ConnectFailed(f"no CONNACK from {where} within {timeout:g} s") from None
        if connack.reason_code >= 0x80:
            self._closing = True
            self.abort()
            raise ConnectFailed(
                f"broker at {where} refused client {self.client_id}: {connack.reason_code.name}"
            )
        props = connack.properties
        if props.receive_maximum is not None:
            self.window = min(self.window, props.receive_maximum)
        self.keep_alive = (
            props.server_keep_alive if props.server_keep_alive is not None else keep_alive
        )
        return connack

    async def subscribe(
        self, filters: list[tuple[str, int]], *, timeout: float = 10.0
    ) -> list[ReasonCode]:
        """Subscribe and wait for SUBACK; raise BenchError if any filter was refused."""
        packet_id = self._allocate_packet_id()
        waiter: asyncio.Future[SubackPacket] = asyncio.get_running_loop().create_future()
        self._subacks[packet_id] = waiter
        requests = [SubscriptionRequest(topic_filter, qos) for topic_filter, qos in filters]
        self._out.append(encode_packet(SubscribePacket(packet_id, requests), self.protocol_level))
        self.flush()
        try:
            suback = await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            raise BenchError(f"{self.client_id}: no SUBACK within {timeout:g} s") from None
        for (topic_filter, _), code in zip(filters, suback.reason_codes, strict=False):
            if code >= 0x80:
                raise BenchError(
                    f"broker refused subscription {topic_filter!r}: {ReasonCode(code).name}"
                )
        return suback.reason_codes

    def publish(self, topic: str, payload: bytes, qos: int) -> None:
        """Queue one PUBLISH (sent on the next `flush`); the caller keeps to the window."""
        if qos:
            packet_id = self._allocate_packet_id()
            self._inflight[packet_id] = time.perf_counter_ns()
            packet = PublishPacket(topic, payload, qos, False, False, packet_id, _NO_PROPERTIES)
        else:
            packet = PublishPacket(topic, payload, 0, False, False, None, _NO_PROPERTIES)
        self._out.append(encode_packet(packet, self.protocol_level))

    def flush(self) -> None:
        """Write every queued packet in one call."""
        out = self._out
        if not out:
            return
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()

    async def wait_window(self, timeout: float) -> None:
        """Return once fewer than `window` QoS 1/2 messages are unacknowledged."""
        while len(self._inflight) >= self.window:
            if self._transport is None:
                raise ConnectFailed(self.error or f"{self.client_id}: connection closed")
            self._window_waiter = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._window_waiter, timeout)
            except TimeoutError:
                raise BenchError(
                    f"{self.client_id}: no acknowledgement from the broker for {timeout:g} s "
                    f"({len(self._inflight)} in flight)"
                ) from None
            finally:
                self._window_waiter = None

    async def wait_writable(self) -> None:
        """Return once the transport's write buffer is below its high-water mark."""
        if self._paused and self._transport is not None:
            self._writable = asyncio.get_running_loop().create_future()
            try:
                await self._writable
            finally:
                self._writable = None

    @property
    def paused(self) -> bool:
        return self._paused

    async def wait_inflight_empty(self, timeout: float) -> bool:
        """Wait until every outgoing QoS 1/2 message is acknowledged; False on timeout."""
        deadline = time.monotonic() + timeout
        saved = self.window
        self.window = 1  # wake on every acknowledgement
        try:
            while self._inflight and self._transport is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                try:
                    await self.wait_window(remaining)
                except BenchError:
                    return False
        finally:
            self.window = saved
        return not self._inflight

    def ping(self) -> None:
        """Send PINGREQ so the broker's keep-alive timer does not fire [MQTT-3.1.2-22]."""
        if self.connected:
            self._out.append(encode_packet(PingreqPacket(), self.protocol_level))
            self.flush()

    async def disconnect(self, *, session_expiry: int | None = None, timeout: float = 2.0) -> None:
        """Send DISCONNECT and close the connection [MQTT-3.14].

        With MQTT 5.0 `session_expiry` updates the Session Expiry Interval; 0 tells the broker
        to discard a persistent session now [MQTT-3.14.2.2.2].
        """
        transport = self._transport
        if transport is None or self._closing:
            return
        properties = _NO_PROPERTIES
        if session_expiry is not None and self.protocol_level == 5:
            properties = Properties(session_expiry_interval=session_expiry)
        self._out.append(
            encode_packet(
                DisconnectPacket(ReasonCode.NORMAL_DISCONNECTION, properties),
                self.protocol_level,
            )
        )
        self.flush()
        self._closing = True
        transport.close()
        if self._closed is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._closed), timeout)
            except TimeoutError:
                transport.abort()

    def abort(self) -> None:
        """Drop the connection without DISCONNECT."""
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def _allocate_packet_id(self) -> int:
        packet_id = self._next_packet_id
        inflight = self._inflight
        while True:
            packet_id = packet_id % MAX_PACKET_ID + 1
            if packet_id not in inflight and packet_id not in self._subacks:
                break
        self._next_packet_id = packet_id
        return packet_id
