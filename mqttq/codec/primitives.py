"""MQTT data representations [MQTT-1.5]: integers, variable byte integers, strings, binary.

Decoders take a memoryview and an offset and return `(value, new_offset)`; they raise
`Incomplete` when the view ends before the value does and `MalformedPacket` when the bytes
can never be valid. The packet reader turns an `Incomplete` raised inside a fully buffered
packet into `MalformedPacket`. Encoders return bytes and raise `ValueError` for values the
wire cannot carry.
"""

from __future__ import annotations

from struct import Struct
from typing import Final

from mqttq.codec.enums import MAX_VARINT
from mqttq.errors import Incomplete, MalformedPacket

U16 = Struct("!H")
U32 = Struct("!I")
_unpack_u16 = U16.unpack_from
_unpack_u32 = U32.unpack_from
_pack_u16: Final = U16.pack
_pack_u32 = U32.pack

MAX_U16: Final = 0xFFFF
MAX_U32 = 0xFFFFFFFF

# Remaining lengths below 128 are one byte: the hot path (acks, small PUBLISH) looks them up.
_SINGLE_BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(256))


def decode_u8(view: memoryview, offset: int) -> tuple[int, int]:
    """One byte [MQTT-1.5.1]."""
    if offset >= len(view):
        raise Incomplete
    return view[offset], offset + 1


def decode_u16(view: memoryview, offset: int) -> tuple[int, int]:
    """Two Byte Integer, big-endian [MQTT-1.5.2]."""
    if offset + 2 > len(view):
        raise Incomplete
    return _unpack_u16(view, offset)[0], offset + 2


def decode_u32(view: memoryview, offset: int) -> tuple[int, int]:
    """Four Byte Integer, big-endian [MQTT-1.5.3]."""
    if offset + 4 > len(view):
        raise Incomplete
    return _unpack_u32(view, offset)[0], offset + 4


def decode_varint(view: memoryview, offset: int) -> tuple[int, int]:
    """Variable Byte Integer, at most 4 bytes [MQTT-1.5.5].

    A fourth byte with the continuation bit set is malformed even before the fifth arrives.
    """
    n = len(view)
    if offset >= n:
        raise Incomplete
    byte = view[offset]
    if byte < 0x80:
        return byte, offset + 1
    value = byte & 0x7F
    shift = 7
    for i in range(offset + 1, offset + 4):
        if i >= n:
            raise Incomplete
        byte = view[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    raise MalformedPacket("variable byte integer longer than 4 bytes")


def decode_string(view: memoryview, offset: int) -> tuple[str, int]:
    """UTF-8 Encoded String [MQTT-1.5.4].

    Strict UTF-8: ill-formed sequences and encoded surrogates are malformed
    [MQTT-1.5.4-1], and so is U+0000 [MQTT-1.5.4-2].
    """
    if offset + 2 > len(view):
        raise Incomplete
    end = offset + 2 + ((view[offset] << 8) | view[offset + 1])
    if end > len(view):
        raise Incomplete
    return check_utf8(view[offset + 2 : end]), end


def check_utf8(raw: memoryview) -> str:
    """Decode `raw` as an MQTT UTF-8 string or raise MalformedPacket [MQTT-1.5.4-1/2]."""
    try:
        # CPython's strict codec already rejects surrogates and overlong forms.
        text = str(raw, "utf-8")
    except UnicodeDecodeError:
        raise MalformedPacket("string is not well-formed UTF-8") from None
    if "\x00" in text:
        raise MalformedPacket("string contains U+0000")
    return text


def decode_binary(view: memoryview, offset: int) -> tuple[bytes, int]:
    """Binary Data: a two byte length and that many bytes [MQTT-1.5.6]."""
    if offset + 2 > len(view):
        raise Incomplete
    end = offset + 2 + ((view[offset] << 8) | view[offset + 1])
    if end > len(view):
        raise Incomplete
    return bytes(view[offset + 2 : end]), end


def decode_string_pair(view: memoryview, offset: int) -> tuple[tuple[str, str], int]:
    """UTF-8 String Pair: name then value [MQTT-1.5.7]."""
    name, offset = decode_string(view, offset)
    value, offset = decode_string(view, offset)
    return (name, value), offset


def encode_u8(value: int) -> bytes:
    """One byte; ValueError outside 0..255."""
    if not 0 <= value <= 0xFF:
        raise ValueError(f"byte out of range: {value}")
    return _SINGLE_BYTE[value]


def encode_u16(value: int) -> bytes:
    """Two Byte Integer; ValueError outside 0..65535."""
    if not 0 <= value <= MAX_U16:
        raise ValueError(f"two byte integer out of range: {value}")
    return _pack_u16(value)


def encode_u32(value: int) -> bytes:
    """Four Byte Integer; ValueError outside 0..2**32-1."""
    if not 0 <= value <= MAX_U32:
        raise ValueError(f"four byte integer out of range: {value}")
    return _pack_u32(value)


def encode_varint(value: int) -> bytes:
    """Variable Byte Integer in the fewest bytes [MQTT-1.5.5-1]; ValueError if out of range."""
    if 0 <= value < 0x80:
        return _SINGLE_BYTE[value]
    if not 0 <= value <= MAX_VARINT:
        raise ValueError(f"variable byte integer out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_string(text: str) -> bytes:
    """UTF-8 Encoded String with its length [MQTT-1.5.4].

    ValueError for lone surrogates, U+0000 or more than 65535 encoded bytes.
    """
    raw = text.encode("utf-8")  # UnicodeEncodeError (a ValueError) for lone surrogates
    if len(raw) > MAX_U16:
        raise ValueError("string longer than 65535 bytes")
    if 0 in raw:  # an int operand: no TypeError raised and cleared inside (see writer)
        raise ValueError("string contains U+0000")
    return _pack_u16(len(raw)) + raw


def encode_binary(data: bytes) -> bytes:
    """Binary Data with its length [MQTT-1.5.6]; ValueError beyond 65535 bytes."""
    if len(data) > MAX_U16:
        raise ValueError("binary data longer than 65535 bytes")
    return _pack_u16(len(data)) + bytes(data)


def encode_string_pair(pair: tuple[str, str]) -> bytes:
    """UTF-8 String Pair [MQTT-1.5.7]."""
    return encode_string(pair[0]) + encode_string(pair[1])
