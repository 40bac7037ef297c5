"""SocketTransport and SocketServer on real sockets, on uvloop and on asyncio's loop:
partial writes are buffered with the protocol's flow control, EOF and resets reach
the protocol, a graceful write_eof sends everything first."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Callable, Coroutine
from typing import Any, cast

import pytest
import uvloop

from mqttq.broker.net.plain_tcp import (
    SocketServer,
    SocketTransport,
    listener_locality,
    start_socket_listener,
)

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


class Recorder(asyncio.Protocol):
    """Records what the transport tells it."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.data = bytearray()
        self.events: list[str] = []
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool | None:
        self.events.append("eof")
        return None

    def pause_writing(self) -> None:
        self.events.append("pause")

    def resume_writing(self) -> None:
        self.events.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")
        self.lost.set_result(exc)


def run(loop_name: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    loop = LOOPS[loop_name]()
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 30))
    finally:
        loop.close()


def connected_pair(
    protocol_class: type[Recorder] = Recorder,
) -> tuple[Recorder, SocketTransport, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        peer = socket.socket()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # the kernel
        peer.connect(listening.getsockname())  # then takes far less than 2 MiB at once
        ours, _ = listening.accept()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    ours.setblocking(False)
    protocol = protocol_class()
    transport = SocketTransport(asyncio.get_running_loop(), ours.detach(), protocol)
    transport.start()
    return protocol, transport, peer


async def read_until_eof(peer: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    peer.setblocking(False)
    received = bytearray()
    while chunk := await loop.sock_recv(peer, 65536):
        received += chunk
    return bytes(received)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_slow_reader_pauses_writing_and_gets_every_byte_before_the_fin(loop_name: str) -> None:
    async def main() -> None:
        protocol, transport, peer = connected_pair()
        transport.set_write_buffer_limits(64 * 1024, 16 * 1024)
        payload = bytes(range(256)) * 8192  # 2 MiB: more than the kernel takes at once
        transport.write(payload[: len(payload) // 2])
        transport.write(payload[len(payload) // 2 :])
        assert protocol.events == ["pause"]
        assert transport.get_write_buffer_size() > 64 * 1024
        transport.write_eof()
        try:
            assert await read_until_eof(peer) == payload
        finally:
            peer.close()
        assert protocol.events == ["pause", "resume"]
        assert transport.get_write_buffer_size() == 0
        assert await protocol.lost is None
        assert protocol.events == ["pause", "resume", "eof", "lost"]

    run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_reset_reaches_the_protocol_and_close_drains_first(loop_name: str) -> None:
    async def main() -> None:
        protocol, transport, peer = connected_pair()
        assert transport.get_extra_info("sockname") == peer.getpeername()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()  # with SO_LINGER 0: a reset, not a FIN
        assert isinstance(await protocol.lost, ConnectionResetError)
        assert protocol.events == ["lost"]
        transport.close()  # after the loss: no second connection_lost
        await asyncio.sleep(0)
        assert protocol.events.count("lost") == 1

    run(loop_name, main)


async def serve(host: str) -> tuple[SocketServer, int, list[Recorder]]:
    """A listener on `host` (a free port), its port, and the protocols it made so far."""
    made: list[Recorder] = []

    def factory() -> Recorder:
        made.append(Recorder())
        return made[-1]

    loop = asyncio.get_running_loop()
    server = await start_socket_listener(loop, factory, host, 0, backlog=16)
    return server, server.sockets[0].getsockname()[1], made


@pytest.mark.parametrize("loop_name", LOOPS)
def test_the_server_accepts_echoes_and_stops_accepting_on_close(loop_name: str) -> None:
    async def main() -> None:
        server, port, made = await serve("127.0.0.1")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"hello")
        await writer.drain()
        while not made or made[0].data != b"hello":
            await asyncio.sleep(0.01)
        assert made[0].transport.get_extra_info("peername") == writer.get_extra_info("sockname")
        made[0].transport.write(b"back")
        made[0].transport.close()
        assert await reader.read() == b"back"
        assert await made[0].lost is None
        writer.close()
        server.close()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)

    run(loop_name, main)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_both_addresses_of_an_ipv4_or_ipv6_connection(host: str) -> None:
    async def main() -> None:
        server, port, made = await serve(host)
        _reader, writer = await asyncio.open_connection(host, port)
        while not made:
            await asyncio.sleep(0.01)
        transport = made[0].transport
        assert transport.get_extra_info("peername") == writer.get_extra_info("sockname")
        assert transport.get_extra_info("sockname") == writer.get_extra_info("peername")
        assert transport.get_extra_info("sockname")[0] == host
        writer.close()
        server.close()

    run("uvloop", main)


class Broken(Recorder):
    def data_received(self, data: bytes) -> None:
        raise ValueError(data)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_protocol_failing_on_data_is_reported_and_its_connection_closed(loop_name: str) -> None:
    async def main() -> None:
        reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: reported.append(ctx))
        protocol, _transport, peer = connected_pair(Broken)
        with peer:
            peer.send(b"boom")
            error = await protocol.lost
        assert isinstance(error, ValueError)
        assert [ctx["exception"] for ctx in reported] == [error]

    run(loop_name, main)


def test_an_accepted_connection_is_non_blocking_with_nodelay_and_keepalive() -> None:
    """The listener's TCP_NODELAY and SO_KEEPALIVE reach the connections it accepts (no
    setsockopt per connection); O_NONBLOCK is set on each."""

    async def main() -> None:
        server, port, made = await serve("127.0.0.1")
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while not made:
            await asyncio.sleep(0.01)
        fd = made[0].transport.fd
        assert not os.get_blocking(fd)
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=fd)
        try:
            assert probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            assert probe.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        finally:
            probe.detach()
        writer.close()
        server.close()

    run("uvloop", main)


@pytest.mark.parametrize(("host", "connect_to"), [("127.0.0.1", "127.0.0.1"), ("::1", "::1")])
def test_a_connection_on_a_loopback_listener_knows_it_is_local(host: str, connect_to: str) -> None:
    async def main() -> None:
        server, port, made = await serve(host)
        _reader, writer = await asyncio.open_connection(connect_to, port)
        while not made:
            await asyncio.sleep(0.01)
        assert made[0].transport.get_extra_info("loopback") is True
        writer.close()
        server.close()

    run("uvloop", main)


class _Bound:
    """Stands for a listening socket bound to `host` (only loopback ones are opened here)."""

    def __init__(self, host: str) -> None:
        self.host = host

    def getsockname(self) -> tuple[str, int]:
        return (self.host, 1883)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("10.1.2.3", False),
        ("2001:db8::5", False),
        ("0.0.0.0", None),
        ("::", None),
    ],
)
def test_what_a_listeners_address_tells_of_its_connections(
    host: str, loopback: bool | None
) -> None:
    async def main() -> None:
        local = listener_locality(cast(socket.socket, _Bound(host)))
        transport = SocketTransport(asyncio.get_running_loop(), -1, Recorder(), local=local)
        assert transport.get_extra_info("loopback") is loopback

    run("uvloop", main)
