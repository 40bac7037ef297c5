"""Closing with a reason code is graceful: after a DISCONNECT (or a refusing CONNACK) the
broker half-closes and drains what the client still sends, so a client that goes on
writing reads the reason code and then a clean end of stream, never a reset."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.conftest import BrokerFactory
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
