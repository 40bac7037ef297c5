"""The PROXY protocol, versions 1 and 2 (HAProxy's proxy-protocol.txt): a load balancer
in front of the broker opens each connection with one header that names the client's
real address, and the broker takes that address as the connection's own.

`parse_proxy_header` is sans-I/O: it takes the bytes received so far and returns the
header with the number of bytes it took (the MQTT stream starts right after), raises
`Incomplete` when more bytes are needed, or `ProxyHeaderError` when the bytes cannot be a
header. It never raises anything else, whatever the bytes (tests/proxy_protocol has the
Hypothesis properties), and deciding early never depends on how the bytes were split.

`ProxyGate` is the asyncio shell: the protocol a `proxy_protocol = true` listener gives
each new connection. It refuses peers outside `proxy_trusted`, waits at most
`header_timeout` seconds for the header, then sets the transport's peer address to the
client's and hands the transport to the MQTT protocol (which then sees the real address
in `get_extra_info("peername")`, as ACLs, blocking, logs and the admin API do). It runs
once per connection, at accept: the MQTT byte stream never passes through it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, cast

from mqttq.errors import Incomplete, MqttqError

__all__ = [
    "MAX_V1_LENGTH",
    "V2_SIGNATURE",
    "ProxyGate",
    "ProxyHeader",
    "ProxyHeaderError",
    "ProxyStatistics",
    "TrustedNetworks",
    "parse_proxy_header",
]

logger = logging.getLogger("mqttq.broker.proxy_protocol")

V1_PREFIX: Final = b"PROXY "
MAX_V1_LENGTH: Final = 107
"""The longest v1 header, CRLF included (proxy-protocol.txt 2.1)."""
V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
V2_FIXED: Final = 16
"""Signature, version and command, family and protocol, length."""
_V2_ADDRESS_SIZES: Final = {0x1: 12, 0x2: 36, 0x3: 216}
"""Bytes of the address block by family: AF_INET, AF_INET6, AF_UNIX."""
_DIGITS: Final = frozenset(b"0123456789")


class ProxyHeaderError(MqttqError):
    """The bytes cannot start a PROXY protocol header; the message says why."""


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """One parsed header. `source` is the client's (host, port) and `destination` the
    address it connected to, both None when the header names none (v2 LOCAL, v1
    UNKNOWN, an unspecified or Unix family): the connection's own address stands then."""

    version: int
    command: str
    """PROXY, or LOCAL (v2: the balancer's own connection, e.g. a health check)."""
    source: tuple[str, int] | None = None
    destination: tuple[str, int] | None = None


def parse_proxy_header(data: bytes | bytearray | memoryview) -> tuple[ProxyHeader, int]:
    """The header at the start of `data` and its length in bytes (see the module
    docstring); `Incomplete` or `ProxyHeaderError` otherwise."""
    raw = bytes(data)
    if not raw:
        raise Incomplete
    if raw[0] == V1_PREFIX[0]:
        return _parse_v1(raw)
    if raw[0] == V2_SIGNATURE[0]:
        return _parse_v2(raw)
    raise ProxyHeaderError(f"no PROXY header (first byte 0x{raw[0]:02X})")


def _parse_v1(raw: bytes) -> tuple[ProxyHeader, int]:
    prefix = raw[: len(V1_PREFIX)]
    if not V1_PREFIX.startswith(prefix):
        raise ProxyHeaderError("v1 header does not start with 'PROXY '")
    end = raw.find(b"\r\n", 0, MAX_V1_LENGTH)
    if end < 0:
        # The line so far (a CR last may be the start of its CRLF): what the whole line
        # would be refused for is refused now, with the same words.
        scan = raw[:MAX_V1_LENGTH]
        if scan.endswith(b"\r"):
            scan = scan[:-1]
        _check_printable(scan)
        if len(raw) >= MAX_V1_LENGTH:
            raise ProxyHeaderError(f"v1 header longer than {MAX_V1_LENGTH} bytes")
        raise Incomplete
    line = raw[:end]
    if len(line) < len(V1_PREFIX):
        raise ProxyHeaderError("v1 header does not start with 'PROXY '")
    _check_printable(line)
    parts = line.decode("ascii").split(" ")
    length = end + 2
    if parts[1] == "UNKNOWN":  # anything after it is to be ignored
        return ProxyHeader(1, "PROXY"), length
    if parts[1] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError(f"v1 protocol must be TCP4, TCP6 or UNKNOWN, got {parts[1]!r}")
    if len(parts) != 6:
        raise ProxyHeaderError(f"v1 {parts[1]} header needs 6 fields, got {len(parts)}")
    family = ipaddress.IPv4Address if parts[1] == "TCP4" else ipaddress.IPv6Address
    source = _v1_address(family, parts[2], parts[4])
    destination = _v1_address(family, parts[3], parts[5])
    return ProxyHeader(1, "PROXY", source, destination), length


def _check_printable(line: bytes) -> None:
    if any(byte < 0x20 or byte > 0x7E for byte in line):
        raise ProxyHeaderError("v1 header holds a byte that is not printable ASCII")


def _v1_address(
    family: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address], host: str, port: str
) -> tuple[str, int]:
    try:
        address = family(host)
    except ValueError:
        raise ProxyHeaderError(f"v1 address {host!r} is not an {family.__name__[:4]}") from None
    digits = port.encode()
    if not digits or len(digits) > 5 or not set(digits) <= _DIGITS:
        raise ProxyHeaderError(f"v1 port {port!r} is not a number 0..65535")
    if len(digits) > 1 and digits[0] == ord("0"):
        raise ProxyHeaderError(f"v1 port {port!r} has a leading zero")
    number = int(port)
    if number > 65535:
        raise ProxyHeaderError(f"v1 port {port!r} is not a number 0..65535")
    return str(address), number


def _parse_v2(raw: bytes) -> tuple[ProxyHeader, int]:
    signature = raw[: len(V2_SIGNATURE)]
    if not V2_SIGNATURE.startswith(signature):
        raise ProxyHeaderError("v2 signature does not match")
    if len(raw) > 12:
        version, command = raw[12] >> 4, raw[12] & 0x0F
        if version != 2:
            raise ProxyHeaderError(f"v2 header has version {version}, expected 2")
        if command > 1:
            raise ProxyHeaderError(f"v2 command must be LOCAL (0) or PROXY (1), got {command}")
    if len(raw) > 13:
        family, transport = raw[13] >> 4, raw[13] & 0x0F
        if family > 3:
            raise ProxyHeaderError(f"v2 address family {family} is unknown")
        if transport > 2:
            raise ProxyHeaderError(f"v2 transport protocol {transport} is unknown")
    if len(raw) < V2_FIXED:
        raise Incomplete
    command = raw[12] & 0x0F
    family, transport = raw[13] >> 4, raw[13] & 0x0F
    size = int.from_bytes(raw[14:16], "big")
    needed = _V2_ADDRESS_SIZES.get(family, 0) if command == 1 else 0
    if size < needed:
        raise ProxyHeaderError(f"v2 length {size} cannot hold the addresses ({needed} bytes)")
    if command == 1 and transport == 2:
        raise ProxyHeaderError("v2 header is for a datagram (UDP) connection")
    length = V2_FIXED + size
    if len(raw) < length:
        raise Incomplete
    block = raw[V2_FIXED:length]
    _check_tlvs(block[_V2_ADDRESS_SIZES.get(family, 0) :], command, family)
    if command == 0:
        return ProxyHeader(2, "LOCAL"), length
    if family == 1:
        return ProxyHeader(
            2,
            "PROXY",
            (str(ipaddress.IPv4Address(block[0:4])), int.from_bytes(block[8:10], "big")),
            (str(ipaddress.IPv4Address(block[4:8])), int.from_bytes(block[10:12], "big")),
        ), length
    if family == 2:
        return ProxyHeader(
            2,
            "PROXY",
            (str(ipaddress.IPv6Address(block[0:16])), int.from_bytes(block[32:34], "big")),
            (str(ipaddress.IPv6Address(block[16:32])), int.from_bytes(block[34:36], "big")),
        ), length
    return ProxyHeader(2, "PROXY"), length  # AF_UNSPEC or AF_UNIX: no IP address to take


def _check_tlvs(tlvs: bytes, command: int, family: int) -> None:
    """TLVs are skipped, but each must fit in the block: a length that runs past it means
    the header is not what it says. (LOCAL and unknown families may carry anything.)"""
    if command == 0 or family in (0, 3):
        return
    offset = 0
    while offset < len(tlvs):
        if len(tlvs) - offset < 3:
            raise ProxyHeaderError("v2 TLV is cut short")
        size = int.from_bytes(tlvs[offset + 1 : offset + 3], "big")
        offset += 3 + size
        if offset > len(tlvs):
            raise ProxyHeaderError("v2 TLV runs past the header")


# ---------------------------------------------------------------------- the asyncio shell


class TrustedNetworks:
    """The `proxy_trusted` networks (CIDR); `contains(host)` for a peer's address."""

    __slots__ = ("networks",)

    def __init__(self, cidrs: Iterable[str]) -> None:
        """Raises ValueError naming a CIDR that is not one."""
        self.networks = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)

    def contains(self, host: str) -> bool:
        """True when `host` (an IP address as the socket API gives it) is in a network."""
        try:
            address = ipaddress.ip_address(host.partition("%")[0])
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)
        return any(
            address in net or (mapped is not None and mapped in net) for net in self.networks
        )


@dataclass(slots=True)
class ProxyStatistics:
    """Connections through PROXY protocol listeners, by outcome; `last_logged` keeps
    each refusal kind to one log line per `LOG_EVERY` seconds."""

    accepted: int = 0
    local: int = 0
    """LOCAL (v2) or UNKNOWN (v1): the balancer's own connection, its address kept."""
    untrusted: int = 0
    malformed: int = 0
    timeouts: int = 0
    blocked: int = 0
    """Closed after the header: the client's address is on the blocked list."""
    last_logged: dict[str, float] = field(default_factory=dict)

    LOG_EVERY = 60.0

    def refused(self, kind: str, peer: str, why: str) -> None:
        """Count one refusal of `kind` (untrusted, malformed, timeouts) and log it unless
        a line for that kind was written within LOG_EVERY seconds."""
        setattr(self, kind, getattr(self, kind) + 1)
        now = time.monotonic()
        last = self.last_logged.get(kind)
        if last is None or now - last >= self.LOG_EVERY:
            self.last_logged[kind] = now
            logger.warning(
                "PROXY protocol: connection from %s refused: %s (%s: %d so far; the next "
                "ones are counted and logged again after %.0f s)",
                peer,
                why,
                kind,
                getattr(self, kind),
                self.LOG_EVERY,
            )

    def as_dict(self) -> dict[str, int]:
        """The counters by outcome."""
        return {
            "accepted": self.accepted,
            "local": self.local,
            "untrusted": self.untrusted,
            "malformed": self.malformed,
            "timeouts": self.timeouts,
            "blocked": self.blocked,
        }


class ProxyGate(asyncio.Protocol):
    """The first protocol of a connection on a PROXY protocol listener (see the module
    docstring). `inner` makes the MQTT protocol the transport is then handed to;
    `address_refused` (the blocked list's) closes a connection from a blocked client
    address before the MQTT protocol reads a byte."""

    __slots__ = (
        "_address_refused",
        "_buffer",
        "_inner",
        "_stats",
        "_timeout",
        "_timer",
        "_transport",
        "_trusted",
    )

    def __init__(
        self,
        inner: Callable[[], asyncio.Protocol],
        trusted: TrustedNetworks,
        stats: ProxyStatistics,
        header_timeout: float,
        address_refused: Callable[[str], bool] | None = None,
    ) -> None:
        self._inner = inner
        self._address_refused = address_refused
        self._trusted = trusted
        self._stats = stats
        self._timeout = header_timeout
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) and peer else ""
        if not self._trusted.contains(host):
            self._refuse("untrusted", "its address is not in proxy_trusted")
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._timeout, self._timed_out)

    def data_received(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        self._buffer += data
        try:
            header, length = parse_proxy_header(self._buffer)
        except Incomplete:
            return
        except ProxyHeaderError as error:
            self._refuse("malformed", str(error))
            return
        rest, self._buffer = self._buffer[length:], b""
        self._pass_on(header, rest)

    def eof_received(self) -> bool | None:
        self._cancel_timer()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._transport = None

    def _timed_out(self) -> None:
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._refuse("timeouts", f"no complete header within {self._timeout:g} s")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _refuse(self, kind: str, why: str) -> None:
        self._cancel_timer()
        transport = self._transport
        peer = None if transport is None else transport.get_extra_info("peername")
        self._stats.refused(kind, f"{peer[0]}:{peer[1]}" if peer else "?", why)
        if transport is not None:
            transport.abort()

    def _pass_on(self, header: ProxyHeader, rest: bytes) -> None:
        self._cancel_timer()
        transport = self._transport
        assert transport is not None
        refused = self._address_refused
        if refused is not None:
            peer = header.source or transport.get_extra_info("peername")
            if peer and refused(str(peer[0])):
                self._stats.blocked += 1
                transport.abort()
                return
        if header.source is None:
            self._stats.accepted += 1
            self._stats.local += 1
            target: asyncio.BaseTransport = transport
        else:
            self._stats.accepted += 1
            target = _with_peer(transport, header.source, header.destination)
        protocol = self._inner()
        transport.set_protocol(protocol)
        protocol.connection_made(target)
        if rest and not transport.is_closing():
            protocol.data_received(rest)


def _with_peer(
    transport: asyncio.Transport, source: tuple[str, int], destination: tuple[str, int] | None
) -> asyncio.BaseTransport:
    """`transport` answering `source` for its peer address and `destination` for its
    local one: plain TCP's transport keeps them itself (`set_peername`); an asyncio
    transport is wrapped."""
    setter = getattr(transport, "set_peername", None)
    if setter is not None:
        setter(source, destination)
        return transport
    return PeerTransport(transport, source, destination)


class PeerTransport(asyncio.Transport):
    """An asyncio transport whose peer (and local) address is the one the PROXY header
    named; everything else is the wrapped transport's (WebSocket listeners)."""

    def __init__(
        self,
        raw: asyncio.Transport,
        peername: tuple[str, int],
        sockname: tuple[str, int] | None = None,
    ) -> None:
        super().__init__()
        self._raw = raw
        self._peername = peername
        self._sockname = sockname

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peername
        if name == "sockname" and self._sockname is not None:
            return self._sockname
        return self._raw.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._raw.is_closing()

    def close(self) -> None:
        self._raw.close()

    def abort(self) -> None:
        self._raw.abort()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._raw.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self._raw.writelines(list_of_data)

    def write_eof(self) -> None:
        self._raw.write_eof()

    def can_write_eof(self) -> bool:
        return self._raw.can_write_eof()

    def pause_reading(self) -> None:
        self._raw.pause_reading()

    def resume_reading(self) -> None:
        self._raw.resume_reading()

    def is_reading(self) -> bool:
        return self._raw.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._raw.get_write_buffer_limits()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._raw.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._raw.get_protocol()
