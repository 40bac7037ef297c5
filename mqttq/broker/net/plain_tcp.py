"""Plain TCP without a transport object per connection: the listener accepts with
`loop.add_reader` on its listening sockets and each connection is a `SocketTransport`,
a small object that reads its descriptor when the loop says it is readable and writes
straight to it, buffering only what the kernel did not take (then `loop.add_writer`
until drained).

An idle connection costs its descriptor, one poll handle in the loop and this object
(a few hundred bytes less than uvloop's `TCPTransport`; docs/benchmarks.md, issue 14).
`SocketTransport` implements the part of `asyncio.Transport` that `Client` uses, with
the same flow-control contract: `pause_writing` on the protocol above the high-water
mark, `resume_writing` once at or below the low one, `pause_reading`/`resume_reading`.
TLS and WebSocket listeners keep asyncio's transports (`listeners.start_tcp_listener`).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import socket
from collections.abc import Callable
from typing import Any, Final, cast

__all__ = [
    "ProxiedSocketTransport",
    "SocketServer",
    "SocketTransport",
    "is_loopback",
    "start_socket_listener",
]

logger = logging.getLogger("mqttq.broker.plain_tcp")

READ_SIZE = 256 * 1024
"""Bytes read at most per readiness (the size of the one shared read buffer)."""
ACCEPT_RETRY = 1.0
"""Seconds the listener stops accepting after the process ran out of descriptors."""
ACCEPTS_PER_WAKEUP = 128
"""Connections accepted per readiness of a listening socket before other work runs."""
DEFAULT_HIGH_WATER = 64 * 1024
_DISCONNECTED = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ESHUTDOWN,
        errno.ETIMEDOUT,
        errno.ENOTCONN,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
    }
)
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

# Final: the compiled module keeps these in C statics; a plain global is a dictionary
# lookup (and `os.readv` two) on every read.
_READ_VIEW: Final = memoryview(bytearray(READ_SIZE))
_READ_INTO: Final = [_READ_VIEW]
_readv: Final = os.readv
_write: Final = os.write

# Flag bits of SocketTransport._state.
_CLOSING = 1  # close() or abort() called: nothing more is written or read
_READING = 2  # the descriptor is registered for reading
_EOF = 4  # write_eof() called: the write side shuts once the buffer is drained
_PAUSED = 8  # the protocol was told to pause writing
_LOST = 16  # connection_lost was scheduled
_IPV6 = 32  # the socket is AF_INET6 (else AF_INET): get_extra_info needs no getsockopt
_LOCAL_LOOPBACK = 64  # the listener is bound to a loopback address, so is this connection
_LOCAL_OTHER = 128  # the listener is bound to one address, and not a loopback one


class SocketTransport:
    """One accepted plain TCP connection (see the module docstring); owns `fd`."""

    __slots__ = ("_buffer", "_high", "_loop", "_low", "_protocol", "_state", "fd")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        protocol: asyncio.Protocol,
        family: int = socket.AF_INET,
        local: int = 0,
    ) -> None:
        """`local`: what the listener's address tells of this connection's
        (`listener_locality`)."""
        self._loop = loop
        self.fd = fd
        self._protocol: asyncio.Protocol | None = protocol
        self._buffer: bytearray | None = None
        self._high = DEFAULT_HIGH_WATER
        self._low = DEFAULT_HIGH_WATER // 4
        self._state = (_IPV6 if family == socket.AF_INET6 else 0) | local

    def start(self) -> None:
        """Start reading, then tell the protocol (which may pause reading or abort)."""
        self._state |= _READING
        self._loop.add_reader(self.fd, self)
        assert self._protocol is not None
        self._protocol.connection_made(cast(asyncio.BaseTransport, self))

    # ------------------------------------------------------------------ reading

    def __call__(self) -> None:
        """The descriptor is readable (the transport itself is the loop's reader
        callback: an idle connection keeps no bound method)."""
        try:
            size = _readv(self.fd, _READ_INTO)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._fail(error)
            return
        protocol = self._protocol
        if protocol is None:
            return
        try:
            if size:
                protocol.data_received(bytes(_READ_VIEW[:size]))
                return
            self._stop_reading()  # end of stream
            keep_open = protocol.eof_received()
        except Exception as error:  # a bug above: like asyncio, report it and close
            self._loop.call_exception_handler(
                {
                    "message": "protocol failed on received data",
                    "exception": error,
                    "transport": self,
                    "protocol": protocol,
                }
            )
            self._lose(error)
            return
        if not keep_open:
            self.close()

    def pause_reading(self) -> None:
        if not self._state & _CLOSING:
            self._stop_reading()

    def resume_reading(self) -> None:
        if not self._state & (_CLOSING | _READING):
            self._state |= _READING
            self._loop.add_reader(self.fd, self)

    def is_reading(self) -> bool:
        return bool(self._state & _READING)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """Hand the connection to `protocol` (a PROXY protocol gate to the MQTT client)."""
        self._protocol = cast(asyncio.Protocol, protocol)

    def get_protocol(self) -> asyncio.BaseProtocol | None:
        return self._protocol

    def _stop_reading(self) -> None:
        if self._state & _READING:
            self._state &= ~_READING
            self._loop.remove_reader(self.fd)

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._state & (_CLOSING | _EOF) or not data:
            return
        buffer = self._buffer
        if buffer is not None:
            buffer += data
            self._check_high()
            return
        try:
            sent = _write(self.fd, data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as error:
            self._fail(error)
            return
        if sent == len(data):
            return
        self._buffer = bytearray(memoryview(data)[sent:])
        self._loop.add_writer(self.fd, self._write_ready)
        self._check_high()

    def _check_high(self) -> None:
        buffer = self._buffer
        if buffer is not None and len(buffer) > self._high and not self._state & _PAUSED:
            self._state |= _PAUSED
            protocol = self._protocol
            if protocol is not None:
                protocol.pause_writing()

    def _write_ready(self) -> None:
        buffer = self._buffer
        if buffer is None:
            self._loop.remove_writer(self.fd)
            return
        try:
            sent = _write(self.fd, buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._fail(error)
            return
        del buffer[:sent]
        if buffer:
            self._check_low(len(buffer))
            return
        self._buffer = None
        self._loop.remove_writer(self.fd)
        self._check_low(0)
        state = self._state
        if state & _CLOSING:
            self._lose(None)
        elif state & _EOF:
            self._shutdown_write()

    def _check_low(self, size: int) -> None:
        if self._state & _PAUSED and size <= self._low:
            self._state &= ~_PAUSED
            protocol = self._protocol
            if protocol is not None and not self._state & _CLOSING:
                protocol.resume_writing()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is None:
            high = DEFAULT_HIGH_WATER if low is None else 4 * low
        if low is None:
            low = high // 4
        if not high >= low >= 0:
            raise ValueError(f"high ({high!r}) must be >= low ({low!r}) must be >= 0")
        self._high = high
        self._low = low
        self._check_high()

    def get_write_buffer_size(self) -> int:
        buffer = self._buffer
        return 0 if buffer is None else len(buffer)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if self._state & (_CLOSING | _EOF):
            return
        self._state |= _EOF
        if self._buffer is None:
            self._shutdown_write()

    def _shutdown_write(self) -> None:
        sock = self._socket()
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the peer is gone already: reading will tell
        finally:
            sock.detach()

    # ------------------------------------------------------------------ closing

    def is_closing(self) -> bool:
        return bool(self._state & _CLOSING)

    def close(self) -> None:
        """Stop reading; write what is buffered, then close (connection_lost(None))."""
        if self._state & _CLOSING:
            return
        self._state |= _CLOSING
        self._stop_reading()
        if self._buffer is None:
            self._lose(None)

    def abort(self) -> None:
        """Close at once, dropping what is buffered."""
        self._lose(None)

    def _fail(self, error: OSError) -> None:
        if error.errno not in _DISCONNECTED:
            logger.warning("connection on fd %d failed: %s", self.fd, error)
        self._lose(error)

    def _lose(self, error: Exception | None) -> None:
        state = self._state
        if state & _LOST:
            return
        self._state = state | _CLOSING | _LOST
        self._stop_reading()
        if self._buffer is not None:
            self._buffer = None
            self._loop.remove_writer(self.fd)
        self._loop.call_soon(self._connection_lost, error)

    def _connection_lost(self, error: Exception | None) -> None:
        protocol, self._protocol = self._protocol, None
        try:
            if protocol is not None:
                protocol.connection_lost(error)
        finally:
            os.close(self.fd)
            self.fd = -1

    # ------------------------------------------------------------------ information

    def _socket(self) -> socket.socket:
        """A socket object on `fd`, to be detached after use. With family, type and
        protocol given, Python only checks that the descriptor is a socket (one
        getsockname), without two getsockopt calls for the type and protocol."""
        family = socket.AF_INET6 if self._state & _IPV6 else socket.AF_INET
        return socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=self.fd)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """peername and sockname (asked of the socket each time: nothing is cached); and
        "loopback", whether the local address is a loopback one, when the listener's
        address says (it is bound to one address), else `default`."""
        if name == "loopback":
            state = self._state
            if state & _LOCAL_LOOPBACK:
                return True
            return False if state & _LOCAL_OTHER else default
        if name not in {"peername", "sockname"} or self.fd < 0:
            return default
        sock = self._socket()
        try:
            return sock.getpeername() if name == "peername" else sock.getsockname()
        except OSError:
            return default
        finally:
            sock.detach()


class ProxiedSocketTransport(SocketTransport):
    """A connection on a PROXY protocol listener: its peer address is the client's and
    its local address the one the client connected to, as the header named them
    (`set_peername`), not the balancer's connection's."""

    __slots__ = ("peername", "sockname")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        protocol: asyncio.Protocol,
        family: int = socket.AF_INET,
        local: int = 0,
    ) -> None:
        super().__init__(loop, fd, protocol, family, local)
        self.peername: tuple[str, int] | None = None
        self.sockname: tuple[str, int] | None = None

    def set_peername(
        self, peername: tuple[str, int], sockname: tuple[str, int] | None = None
    ) -> None:
        """From now on `get_extra_info` answers `peername`, and `sockname` (with
        "loopback" from it) when given."""
        self.peername = peername
        self.sockname = sockname

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if self.peername is not None:
            if name == "peername":
                return self.peername
            sockname = self.sockname
            if sockname is not None:
                if name == "sockname":
                    return sockname
                if name == "loopback":
                    return is_loopback(sockname[0])
        return super().get_extra_info(name, default)


def is_loopback(host: str) -> bool:
    """True for a loopback IP address (127.0.0.0/8, ::1, and IPv4-mapped ones)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


class SocketServer:
    """Listening sockets whose connections become `SocketTransport`s; `close()` stops
    accepting (connected clients stay), like `asyncio.Server.close`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sockets: list[socket.socket],
        protocol_factory: Callable[[], asyncio.Protocol],
        proxied: bool = False,
    ) -> None:
        """`proxied`: connections are `ProxiedSocketTransport`s (a PROXY protocol
        listener, whose `protocol_factory` makes the gate)."""
        self._loop = loop
        self.sockets = sockets
        self._factory = protocol_factory
        self._proxied = proxied
        self._locality = {sock.fileno(): listener_locality(sock) for sock in sockets}
        self._closed = False

    def start_serving(self) -> None:
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                # The bare descriptor: `socket.accept` would wrap it in a socket object
                # (interpreted code), only for the transport to take the descriptor back.
                fd, _address = cast(Any, listening)._accept()  # (not in typeshed)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as error:
                if error.errno not in _OUT_OF_RESOURCES:
                    raise
                logger.error("accepting connections paused %.0f s: %s", ACCEPT_RETRY, error)
                self._loop.remove_reader(listening.fileno())
                self._loop.call_later(ACCEPT_RETRY, self._accept_again, listening)
                return
            self._connected(fd, listening)

    def _accept_again(self, listening: socket.socket) -> None:
        if not self._closed:
            self._loop.add_reader(listening.fileno(), self._accept, listening)

    def _connected(self, fd: int, listening: socket.socket) -> None:
        """TCP_NODELAY and SO_KEEPALIVE come from the listening socket (Linux copies
        them to the sockets it accepts); O_NONBLOCK does not."""
        try:
            os.set_blocking(fd, False)
        except OSError:
            os.close(fd)
            return
        local = self._locality.get(listening.fileno(), 0)
        kind = ProxiedSocketTransport if self._proxied else SocketTransport
        transport = kind(self._loop, fd, self._factory(), listening.family, local)
        transport.start()


def listener_locality(sock: socket.socket) -> int:
    """The `SocketTransport` flag for connections accepted on `sock`: bound to a loopback
    address, to another single address, or 0 for a wildcard (each connection's own
    local address then decides)."""
    try:
        address = ipaddress.ip_address(sock.getsockname()[0])
    except (OSError, ValueError):
        return 0
    if address.is_unspecified:
        return 0
    return _LOCAL_LOOPBACK if address.is_loopback else _LOCAL_OTHER


async def start_socket_listener(
    loop: asyncio.AbstractEventLoop,
    protocol_factory: Callable[[], asyncio.Protocol],
    host: str,
    port: int,
    *,
    backlog: int,
    reuse_port: bool = False,
    proxied: bool = False,
) -> SocketServer:
    """Bind every address `host` resolves to on `port` (0: a free one) and start
    accepting; each connection's protocol gets a `SocketTransport` (`proxied`: a
    `ProxiedSocketTransport`)."""
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    sockets: list[socket.socket] = []
    seen: set[tuple[Any, ...]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            # Half-open connections: the OS probes (keep alive x 1.5 is the MQTT bound);
            # accepted sockets inherit the option.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited too
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    server = SocketServer(loop, sockets, protocol_factory, proxied)
    server.start_serving()
    return server
