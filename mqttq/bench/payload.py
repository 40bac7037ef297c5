"""Benchmark payload layout: a fixed header followed by padding to the requested size.

Header (big-endian, 19 bytes):

| offset | size | field                                                        |
|--------|------|--------------------------------------------------------------|
| 0      | 2    | magic `b"mq"` (tells bench messages from anything else)      |
| 2      | 1    | flags (bit 0: sent during warm-up, excluded from statistics) |
| 3      | 4    | publisher index (unique within one run)                      |
| 7      | 4    | per-publisher sequence number, starting at 0                 |
| 11     | 8    | send time, `time.time_ns()` (comparable across processes)    |

Wall-clock nanoseconds are used rather than a monotonic clock because publisher and
subscriber may live in different worker processes; on one machine they share the clock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

MAGIC: Final = b"mq"
FLAG_WARMUP: Final = 0x01
_HEADER: Final = struct.Struct(">2sBIIQ")
HEADER_SIZE: Final = _HEADER.size
"""The smallest payload the tool can send (19 bytes)."""


@dataclass(slots=True, frozen=True)
class PayloadHeader:
    """The decoded header of one bench payload."""

    publisher: int
    sequence: int
    sent_ns: int
    warmup: bool


class PayloadBuilder:
    """Builds payloads of exactly `size` bytes for one publisher.

    The padding is allocated once; each call costs one header pack and one concatenation.
    """

    __slots__ = ("_padding", "publisher")

    def __init__(self, publisher: int, size: int) -> None:
        if size < HEADER_SIZE:
            raise ValueError(f"payload size must be at least {HEADER_SIZE} bytes, got {size}")
        if not 0 <= publisher <= 0xFFFFFFFF:
            raise ValueError(f"publisher index out of range: {publisher}")
        self.publisher = publisher
        self._padding = b"\x00" * (size - HEADER_SIZE)

    def build(self, sequence: int, sent_ns: int, warmup: bool = False) -> bytes:
        """Return the payload for message `sequence` sent at `sent_ns` (time.time_ns())."""
        flags = FLAG_WARMUP if warmup else 0
        return _HEADER.pack(MAGIC, flags, self.publisher, sequence, sent_ns) + self._padding


def decode_header(payload: bytes) -> PayloadHeader | None:
    """Decode a bench payload header; None when the payload is not one of ours."""
    if len(payload) < HEADER_SIZE:
        return None
    magic, flags, publisher, sequence, sent_ns = _HEADER.unpack_from(payload)
    if magic != MAGIC:
        return None
    return PayloadHeader(publisher, sequence, sent_ns, bool(flags & FLAG_WARMUP))


def unpack_header(payload: bytes) -> tuple[int, int, int, int] | None:
    """Hot-path twin of `decode_header`: (flags, publisher, sequence, sent_ns) or None."""
    if len(payload) < HEADER_SIZE or payload[:2] != MAGIC:
        return None
    _, flags, publisher, sequence, sent_ns = _HEADER.unpack_from(payload)
    return flags, publisher, sequence, sent_ns
