"""Closing with a reason code is graceful: after a DISCONNECT (or a refusing CONNACK) the
broker half-closes and drains what the client still sends, so a client that goes on
writing reads the reason code and then a clean end of stream, never a reset."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.conftest import BrokerFactory
from tests.integration.test_tls import ports
from tests.integration.waiting import DEADLINE, HOST
from tests.integration.wire import (
    CONNACK,
    DISCONNECT,
    RC,
    connect_packet,
    parse_packet,
    publish_packet,
)

pytestmark = pytest.mark.mqttq_only


def split_packets(data: bytes) -> list[tuple[int, bytes]]:
    """(header byte, body) of every whole packet in `data`."""
    packets = []
    pos = 0
    while pos + 2 <= len(data):
        length, shift, cursor = 0, 0, pos + 1
        while True:
            byte = data[cursor]
            length |= (byte & 0x7F) << shift
            cursor += 1
            if not byte & 0x80:
                break
            shift += 7
        if cursor + length > len(data):
            break
        packets.append((data[pos], data[cursor : cursor + length]))
        pos = cursor + length
    return packets


def read_to_end(sock: socket.socket) -> tuple[bytes, BaseException | None]:
    """Everything the broker sends until its end of stream, and the error that ended the
    reading instead of a clean end of stream (None when it ended cleanly)."""
    received = b""
    deadline = time.monotonic() + DEADLINE * 2
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except OSError as error:
            return received, error
        if not chunk:
            return received, None
        received += chunk
    return received, TimeoutError("the broker never closed")


def test_receive_maximum_disconnect_is_read_by_a_client_that_keeps_writing(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(config="[mqtt]\nreceive_maximum = 2\n")
    for run in range(3):  # the issue saw a reset 3 runs of 3
        received, error, write_errors = greedy_client(broker.port, f"greedy-{run}")
        packets = split_packets(received)
        disconnects = [body for first, body in packets if first >> 4 == DISCONNECT]
        assert len(disconnects) == 1, packets
        assert parse_packet(DISCONNECT << 4, disconnects[0], v5=True).reason_code == (
            RC.RECEIVE_MAXIMUM_EXCEEDED
        )
        assert error is None, f"the stream ended with {error!r} instead of a clean close"
        assert write_errors == []


def greedy_client(port: int, client_id: str) -> tuple[bytes, BaseException | None, list[OSError]]:
    """A 5.0 client that sends QoS 2 PUBLISHes without releasing them and goes on writing
    after the third: what it read, how its reading ended, and its write errors."""
    with socket.create_connection((HOST, port), timeout=DEADLINE) as sock:
        sock.sendall(connect_packet(client_id, level=5))
        header = sock.recv(2)
        assert header[0] >> 4 == CONNACK
        sock.recv(header[1])
        write_errors: list[OSError] = []

        def keep_writing() -> None:
            try:
                for packet_id in range(1, 301):
                    packet = publish_packet("rm/t", b"x" * 512, v5=True, qos=2, packet_id=packet_id)
                    sock.sendall(packet)
                    if packet_id % 20 == 0:
                        time.sleep(0.01)
            except OSError as error:
                write_errors.append(error)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        received, error = read_to_end(sock)
        writer.join(timeout=DEADLINE * 3)
    return received, error, write_errors


def test_over_websocket_the_disconnect_is_read_and_the_close_is_clean(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(config="[mqtt]\nreceive_maximum = 2\n[listener.ws]\nport = 0\n")
    port = ports(broker)["ws"]
    with connect(f"ws://{HOST}:{port}/mqtt", subprotocols=["mqtt"]) as socket_:
        socket_.send(connect_packet("greedy-ws", level=5))
        received = socket_.recv(timeout=DEADLINE)
        assert isinstance(received, bytes) and received[0] >> 4 == CONNACK
        write_errors: list[Exception] = []

        def keep_writing() -> None:
            try:
                for packet_id in range(1, 301):
                    packet = publish_packet("rm/t", b"x" * 512, v5=True, qos=2, packet_id=packet_id)
                    socket_.send(packet)
                    if packet_id % 20 == 0:
                        time.sleep(0.01)
            except ConnectionClosed as error:
                write_errors.append(error)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        data = b""
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                message = socket_.recv(timeout=DEADLINE * 2)
                assert isinstance(message, bytes)
                data += message
        writer.join(timeout=DEADLINE * 3)
    disconnects = [body for first, body in split_packets(data) if first >> 4 == DISCONNECT]
    assert len(disconnects) == 1, split_packets(data)
    assert parse_packet(DISCONNECT << 4, disconnects[0], v5=True).reason_code == (
        RC.RECEIVE_MAXIMUM_EXCEEDED
    )
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000, closed.value
    assert all(error.rcvd is not None for error in write_errors), write_errors  # no reset
