"""The PROXY protocol header parser (mqttq/broker/net/proxy_protocol.py): real headers
byte for byte, every malformation a `ProxyHeaderError`, and, for any bytes, a defined
result that does not depend on how the bytes arrived."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.broker.net.proxy_protocol import (
    MAX_V1_LENGTH,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    TrustedNetworks,
    parse_proxy_header,
)
from mqttq.errors import Incomplete

Outcome = tuple[str, object]


def outcome(data: bytes) -> Outcome:
    """What the parser makes of `data`: ("header", (header, length)), ("incomplete",
    None) or ("error", message). Any other exception fails the test."""
    try:
        return "header", parse_proxy_header(data)
    except Incomplete:
        return "incomplete", None
    except ProxyHeaderError as error:
        return "error", str(error)


def fed_in_pieces(data: bytes, cuts: list[int]) -> Outcome:
    """The outcome when `data` arrives in pieces cut at `cuts`, parsed as the gate does
    (the whole buffer again after each piece, stopping at the first decision)."""
    received = b""
    previous = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        received += data[previous:cut]
        previous = cut
        result = outcome(received)
        if result[0] != "incomplete":
            return result
    return outcome(received)


def v2(command: int, family: int, transport: int, block: bytes) -> bytes:
    return (
        V2_SIGNATURE
        + bytes([0x20 | command, family << 4 | transport])
        + struct.pack("!H", len(block))
        + block
    )


def v2_inet(src: str, dst: str, sport: int, dport: int, tlvs: bytes = b"") -> bytes:
    block = (
        ipaddress.IPv4Address(src).packed
        + ipaddress.IPv4Address(dst).packed
        + struct.pack("!HH", sport, dport)
    )
    return v2(1, 1, 1, block + tlvs)


# ----------------------------------------------------------------------- known headers


def test_v1_tcp4() -> None:
    data = b"PROXY TCP4 192.168.0.1 10.0.0.2 56324 1883\r\n\x10\x0c"
    header, length = parse_proxy_header(data)
    assert header == ProxyHeader(1, "PROXY", ("192.168.0.1", 56324), ("10.0.0.2", 1883))
    assert data[length:] == b"\x10\x0c"


def test_v1_tcp6_and_unknown() -> None:
    header, length = parse_proxy_header(b"PROXY TCP6 2001:db8::1 ::1 40000 8883\r\n")
    assert header.source == ("2001:db8::1", 40000)
    assert header.destination == ("::1", 8883)
    assert length == 39
    header, length = parse_proxy_header(b"PROXY UNKNOWN ffff::1 whatever\r\nMQ")
    assert header == ProxyHeader(1, "PROXY", None, None)
    assert length == 32


def test_v1_longest_header_is_accepted_one_more_byte_is_not() -> None:
    # proxy-protocol.txt's worst case: 107 bytes with the CRLF.
    full = b"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
    worst = b"PROXY UNKNOWN " + full + b" " + full + b" 65535 65535\r\n"
    assert len(worst) == MAX_V1_LENGTH
    assert parse_proxy_header(worst) == (ProxyHeader(1, "PROXY"), MAX_V1_LENGTH)
    line = b"PROXY TCP6 " + full + b" " + full + b" 65535 65535\r\n"
    header, length = parse_proxy_header(line)
    assert length == len(line)
    assert header.source == ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535)
    too_long = b"PROXY UNKNOWN " + full + b" " + full + b" 65535 655350\r\n"
    with pytest.raises(ProxyHeaderError, match="longer than 107 bytes"):
        parse_proxy_header(too_long)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "not printable"),
        (b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", "TCP4, TCP6 or UNKNOWN"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "needs 6 fields"),
        (b"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n", "not an IPv4"),
        (b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", "not an IPv4"),
        (b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n", "not an IPv6"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", "0..65535"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", "leading zero"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "0..65535"),
        (b"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", "TCP4, TCP6 or UNKNOWN"),
        (b"PROXY " + b"A" * 120, "longer than 107"),
        (b"PROXZ", "does not start with 'PROXY '"),
        (b"\x10\x0c\x00\x04MQTT", "no PROXY header"),
        (V2_SIGNATURE[:5] + b"X", "signature"),
        (V2_SIGNATURE + b"\x11", "version 1"),
        (V2_SIGNATURE + b"\x22", "command must be"),
        (V2_SIGNATURE + b"\x21\x41", "family 4"),
        (V2_SIGNATURE + b"\x21\x13", "transport protocol 3"),
        (V2_SIGNATURE + b"\x21\x11\x00\x0b", "cannot hold the addresses"),
        (V2_SIGNATURE + b"\x21\x12\x00\x0c" + bytes(12), "datagram"),
        (v2_inet("1.2.3.4", "5.6.7.8", 1, 2, b"\x04\x00\x05ab"), "runs past"),
        (v2_inet("1.2.3.4", "5.6.7.8", 1, 2, b"\x04\x00"), "cut short"),
    ],
)
def test_malformed_headers_say_why(data: bytes, words: str) -> None:
    with pytest.raises(ProxyHeaderError, match=words.replace(".", r"\.").replace("(", r"\(")):
        parse_proxy_header(data)


def test_v2_inet_inet6_local_and_tlvs() -> None:
    data = v2_inet("203.0.113.7", "127.0.0.1", 51000, 1883, b"\x04\x00\x02ok\x01\x00\x00")
    header, length = parse_proxy_header(data + b"\x10")
    assert header == ProxyHeader(2, "PROXY", ("203.0.113.7", 51000), ("127.0.0.1", 1883))
    assert length == len(data)
    block6 = (
        ipaddress.IPv6Address("2001:db8::7").packed
        + ipaddress.IPv6Address("::1").packed
        + struct.pack("!HH", 4242, 8883)
    )
    header, _ = parse_proxy_header(v2(1, 2, 1, block6))
    assert header.source == ("2001:db8::7", 4242)
    assert header.destination == ("::1", 8883)
    header, length = parse_proxy_header(v2(0, 0, 0, b"") + b"rest")
    assert header == ProxyHeader(2, "LOCAL")
    assert length == 16
    header, _ = parse_proxy_header(v2(1, 3, 1, bytes(216)))  # AF_UNIX: no IP to take
    assert header == ProxyHeader(2, "PROXY")


def test_every_proper_prefix_of_a_header_is_incomplete() -> None:
    headers = [
        b"PROXY TCP4 192.168.0.1 10.0.0.2 56324 1883\r\n",
        b"PROXY UNKNOWN\r\n",
        v2_inet("1.2.3.4", "5.6.7.8", 1, 2, b"\x04\x00\x01x"),
        v2(0, 0, 0, b""),
    ]
    for header in headers:
        for cut in range(len(header)):
            assert outcome(header[:cut]) == ("incomplete", None), (header, cut)
        assert outcome(header)[0] == "header"


def test_trusted_networks() -> None:
    trusted = TrustedNetworks(["127.0.0.1/32", "10.0.0.0/8", "::1/128"])
    assert trusted.contains("127.0.0.1")
    assert trusted.contains("10.200.3.4")
    assert trusted.contains("::1")
    assert trusted.contains("::ffff:10.0.0.1")  # an IPv4 peer on a dual-stack socket
    assert not trusted.contains("127.0.0.2")
    assert not trusted.contains("192.168.1.1")
    assert not trusted.contains("")
    assert not trusted.contains("not an address")
    with pytest.raises(ValueError, match=r"10\.0\.0\.300"):
        TrustedNetworks(["10.0.0.300/8"])


# ----------------------------------------------------------------------- properties

_v1_like = st.builds(
    lambda parts, tail: b" ".join(parts) + tail,
    st.lists(
        st.sampled_from(
            [b"PROXY", b"TCP4", b"TCP6", b"UNKNOWN", b"1.2.3.4", b"::1", b"0", b"65535", b"01"]
        )
        | st.binary(max_size=8),
        max_size=8,
    ),
    st.sampled_from([b"\r\n", b"\r", b"\n", b"", b"\r\nMQTT"]),
)
_v2_like = st.builds(
    lambda command, family, transport, block, cut: v2(command, family, transport, block)[
        : cut or None
    ],
    st.integers(0, 3),
    st.integers(0, 5),
    st.integers(0, 3),
    st.binary(max_size=60),
    st.integers(0, 80),
)
_any_bytes = (
    st.binary(max_size=200)
    | _v1_like
    | _v2_like
    | st.builds(lambda data: V2_SIGNATURE + data, st.binary(max_size=60))
)


@settings(max_examples=400)
@given(_any_bytes)
def test_any_bytes_have_a_defined_result(data: bytes) -> None:
    kind, value = outcome(data)  # nothing else escapes
    if kind == "header":
        header, length = value  # type: ignore[misc]
        assert isinstance(header, ProxyHeader)
        assert 0 < length <= len(data)
        assert header.version in (1, 2)
        for address in (header.source, header.destination):
            if address is not None:
                ipaddress.ip_address(address[0])
                assert 0 <= address[1] <= 65535
        # The header ends where it says: bytes after it change nothing.
        assert outcome(data[:length]) == (kind, value)
        assert outcome(data + b"\x10\x00") == (kind, value)
    elif kind == "incomplete":
        assert len(data) < MAX_V1_LENGTH + 16 + 65535


@settings(max_examples=400)
@given(_any_bytes, st.lists(st.integers(0, 200), max_size=6))
def test_split_anywhere_gives_the_same_result(data: bytes, cuts: list[int]) -> None:
    cuts = [cut for cut in cuts if cut <= len(data)]
    assert fed_in_pieces(data, cuts) == outcome(data)


@settings(max_examples=100)
@given(_any_bytes)
def test_split_at_every_byte_boundary(data: bytes) -> None:
    whole = outcome(data)
    assert fed_in_pieces(data, list(range(len(data) + 1))) == whole
