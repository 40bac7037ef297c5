"""RawClient: a blocking socket client that sends hand-built bytes and reads packets back."""

from __future__ import annotations

import socket
import time
from collections import deque

from tests.integration.waiting import DEADLINE, HOST
from tests.integration.wire import (
    CONNACK,
    PINGREQ_PACKET,
    PINGRESP,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBACK,
    UNSUBACK,
    ConnectionClosed,
    Packet,
    PacketType,
    PropList,
    Will,
    ack_packet,
    connect_packet,
    disconnect_packet,
    parse_packet,
    publish_packet,
    subscribe_packet,
    unsubscribe_packet,
)


class RawClient:
    """A blocking MQTT client over a plain socket that sends exactly the bytes it is told to.

    Reads are bounded by deadlines. Packets skipped by `wait_packet` are kept and returned by
    later reads in arrival order.
    """

    def __init__(self, port: int, host: str = HOST, *, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(DEADLINE)
        try:
            self.sock.connect((host, port))
        except OSError:
            self.sock.close()
            raise
        self.v5 = True
        self._buf = bytearray()
        self._stash: deque[Packet] = deque()
        self._next_id = 0
        self._closed_by_peer = False

    # --- bytes ---

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_quietly(self, data: bytes) -> bool:
        """Send, tolerating a server that already closed (hostile tests); True if all sent."""
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Close the socket without DISCONNECT (an abnormal disconnect for the server)."""
        self.sock.close()

    def _fill(self, deadline: float) -> bool:
        if self._closed_by_peer:
            raise ConnectionClosed
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError) as exc:
            self._closed_by_peer = True
            raise ConnectionClosed from exc
        if not chunk:
            self._closed_by_peer = True
            raise ConnectionClosed
        self._buf += chunk
        return True

    def _read_packet(self, deadline: float) -> Packet | None:
        while True:
            if len(self._buf) >= 2:
                length, shift, pos = 0, 0, 1
                complete = False
                while pos < len(self._buf) and pos <= 4:
                    byte = self._buf[pos]
                    length |= (byte & 0x7F) << shift
                    shift += 7
                    pos += 1
                    if not byte & 0x80:
                        complete = True
                        break
                if complete and len(self._buf) >= pos + length:
                    header, body = self._buf[0], bytes(self._buf[pos : pos + length])
                    del self._buf[: pos + length]
                    return parse_packet(header, body, v5=self.v5)
            if not self._fill(deadline):
                return None

    # --- packets ---

    def try_recv(self, timeout: float) -> Packet | None:
        """The next packet, or None if none arrives within `timeout`."""
        if self._stash:
            return self._stash.popleft()
        return self._read_packet(time.monotonic() + timeout)

    def recv(self, timeout: float = DEADLINE) -> Packet:
        """The next packet; fails the test if none arrives in time."""
        pkt = self.try_recv(timeout)
        if pkt is None:
            raise AssertionError(f"no packet from the server within {timeout:.0f} s")
        return pkt

    def wait_packet(
        self, ptype: int, *, packet_id: int | None = None, timeout: float = DEADLINE
    ) -> Packet:
        """The first packet of `ptype` (and `packet_id`); others are kept for later reads."""
        for kept in list(self._stash):
            if kept.type == ptype and (packet_id is None or kept.packet_id == packet_id):
                self._stash.remove(kept)
                return kept
        deadline = time.monotonic() + timeout
        skipped: list[Packet] = []
        try:
            while True:
                pkt = self._read_packet(deadline)
                if pkt is None:
                    raise AssertionError(
                        f"no {PacketType(ptype).name} (id {packet_id}) within {timeout:.0f} s; "
                        f"got {skipped}"
                    )
                if pkt.type == ptype and (packet_id is None or pkt.packet_id == packet_id):
                    return pkt
                skipped.append(pkt)
        finally:
            self._stash.extend(skipped)

    def expect_silence(self, duration: float = 0.5) -> None:
        """Assert that the server sends nothing (and stays connected) for `duration` seconds."""
        assert not self._stash, f"unexpected packets: {list(self._stash)}"
        pkt = self._read_packet(time.monotonic() + duration)
        assert pkt is None, f"unexpected packet: {pkt}"

    def wait_closed(self, timeout: float = DEADLINE) -> list[Packet]:
        """Wait until the server closes the connection; return the packets sent before that."""
        packets = list(self._stash)
        self._stash.clear()
        deadline = time.monotonic() + timeout
        try:
            while True:
                pkt = self._read_packet(deadline)
                if pkt is None:
                    raise AssertionError(
                        f"server did not close the connection within {timeout:.0f} s "
                        f"(received {packets})"
                    )
                packets.append(pkt)
        except ConnectionClosed:
            return packets

    def next_packet_id(self) -> int:
        self._next_id = self._next_id % 65535 + 1
        return self._next_id

    def connect(
        self,
        client_id: str | bytes = "",
        *,
        level: int = 5,
        clean: bool = True,
        keepalive: int = 60,
        props: PropList = (),
        will: Will | None = None,
        expect_success: bool = True,
        username: str | None = None,
        password: bytes | None = None,
    ) -> Packet:
        """Send CONNECT and return the CONNACK (asserting success unless told otherwise)."""
        self.v5 = level == 5
        self.send(
            connect_packet(
                client_id,
                level=level,
                clean=clean,
                keepalive=keepalive,
                props=props,
                will=will,
                username=username,
                password=password,
            )
        )
        connack = self.recv()
        assert connack.type == CONNACK, f"expected CONNACK, got {connack}"
        if expect_success:
            assert connack.reason_code == 0, f"connection refused: {connack} {connack.props}"
        return connack

    def subscribe(
        self, *filters: tuple[str | bytes, int], props: PropList = (), packet_id: int = 0
    ) -> Packet:
        """SUBSCRIBE (filter, options) pairs and return the SUBACK."""
        packet_id = packet_id or self.next_packet_id()
        self.send(subscribe_packet(packet_id, filters, v5=self.v5, props=props))
        return self.wait_packet(SUBACK, packet_id=packet_id)

    def unsubscribe(self, *filters: str) -> Packet:
        packet_id = self.next_packet_id()
        self.send(unsubscribe_packet(packet_id, filters, v5=self.v5))
        return self.wait_packet(UNSUBACK, packet_id=packet_id)

    def publish(
        self,
        topic: str | bytes,
        payload: bytes = b"",
        *,
        qos: int = 0,
        retain: bool = False,
        props: PropList = (),
    ) -> Packet | None:
        """Publish and complete the QoS flow; return the PUBACK, the failing PUBREC or PUBCOMP."""
        packet_id = self.next_packet_id() if qos else 0
        self.send(
            publish_packet(
                topic, payload, v5=self.v5, qos=qos, retain=retain, packet_id=packet_id, props=props
            )
        )
        if qos == 0:
            return None
        if qos == 1:
            return self.wait_packet(PUBACK, packet_id=packet_id)
        pubrec = self.wait_packet(PUBREC, packet_id=packet_id)
        if pubrec.reason_code is not None and pubrec.reason_code >= 0x80:
            return pubrec
        self.send(ack_packet(PUBREL, packet_id, v5=self.v5))
        return self.wait_packet(PUBCOMP, packet_id=packet_id)

    def ack(self, pkt: Packet) -> None:
        """Acknowledge a received PUBLISH (PUBACK or PUBREC; nothing for QoS 0) or PUBREL
        (PUBCOMP)."""
        if pkt.packet_id is None:
            return
        if pkt.type == PUBREL:
            self.send(ack_packet(PUBCOMP, pkt.packet_id, v5=self.v5))
        elif pkt.qos == 1:
            self.send(ack_packet(PUBACK, pkt.packet_id, v5=self.v5))
        elif pkt.qos == 2:
            self.send(ack_packet(PUBREC, pkt.packet_id, v5=self.v5))

    def receive_messages(
        self, count: int, *, ack: bool = True, timeout: float = DEADLINE
    ) -> list[Packet]:
        """Receive `count` PUBLISH packets, completing their QoS flows when `ack` is true."""
        deadline = time.monotonic() + timeout
        messages: list[Packet] = []
        awaiting_pubrel: set[int] = set()
        while len(messages) < count or awaiting_pubrel:
            pkt = self.try_recv(max(deadline - time.monotonic(), 0))
            if pkt is None:
                raise AssertionError(
                    f"received {len(messages)} of {count} messages within {timeout:.0f} s: "
                    f"{messages}"
                )
            if pkt.type == PUBLISH:
                messages.append(pkt)
                if ack:
                    self.ack(pkt)
                    if pkt.qos == 2:
                        awaiting_pubrel.add(pkt.packet_id or 0)
            elif pkt.type == PUBREL and ack:
                self.ack(pkt)
                awaiting_pubrel.discard(pkt.packet_id or 0)
            else:
                raise AssertionError(f"unexpected packet while receiving messages: {pkt}")
        return messages

    def ping(self) -> None:
        """PINGREQ and wait for PINGRESP: proves the connection is alive and processed."""
        self.send(PINGREQ_PACKET)
        self.wait_packet(PINGRESP)

    def disconnect(self, reason: int = 0, props: PropList = ()) -> None:
        """A normal DISCONNECT (or with `reason`), then close."""
        self.send_quietly(disconnect_packet(v5=self.v5, reason=reason, props=props))
        self.sock.close()
