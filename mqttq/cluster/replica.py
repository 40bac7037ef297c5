"""The pure part of a compacted-topic replica: which records a node applies.

Every record of a replicated topic carries two headers: `node` (the writer's node id, for
operators and tools) and `writer` (one random id per broker process). A process applies
to its in-memory copy every record written by other processes, and skips its own: it
applied them already when it wrote them. Records written by an earlier life of the same
node come from another process id, so a restarted node reads its own past writes back.

Marker records (key starting with MARKER_PREFIX) are how a node knows it has read the
topic to its end at start (TBMQ's bootstrap trick): it writes one with a random key and
reads until that record comes back. Markers are never applied. An empty value is a delete.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MARKER_PREFIX",
    "NODE_HEADER",
    "WRITER_HEADER",
    "Change",
    "ReplicaReader",
    "new_marker",
    "record_headers",
]

NODE_HEADER: Final = "node"
WRITER_HEADER: Final = "writer"
MARKER_PREFIX: Final = "\x00marker/"
"""Keys of catch-up markers; no client id or topic starts with U+0000 [MQTT-1.5.4-2]."""

Headers = Sequence[tuple[str, bytes | str | None]]


@dataclass(frozen=True, slots=True)
class Change:
    """One record to apply: `value` None deletes `key`."""

    key: str
    value: bytes | None


def new_marker() -> str:
    """A fresh marker key."""
    return f"{MARKER_PREFIX}{uuid.uuid4().hex}"


def record_headers(node_id: str, writer: str) -> list[tuple[str, bytes]]:
    """The headers every record this process writes carries."""
    return [(NODE_HEADER, node_id.encode()), (WRITER_HEADER, writer.encode())]


def _header(headers: Headers, name: str) -> str | None:
    for key, raw in headers:
        if key == name:
            if raw is None:
                return ""
            return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    return None


class ReplicaReader:
    """Decides, record by record, what this process applies (see the module docstring).

    `marker` is the key this process is waiting for; `caught_up` turns true once a
    record with that key was read.
    """

    __slots__ = ("caught_up", "marker", "writer")

    def __init__(self, writer: str, marker: str | None = None) -> None:
        self.writer = writer
        self.marker = marker
        self.caught_up = marker is None

    def read(self, key: bytes | None, value: bytes | None, headers: Headers) -> Change | None:
        """The change a record makes to this process's copy, or None (own write, marker,
        record without key)."""
        if key is None:
            return None
        name = key.decode(errors="replace")
        if name.startswith(MARKER_PREFIX):
            if name == self.marker:
                self.caught_up = True
            return None
        if _header(headers, WRITER_HEADER) == self.writer:
            return None
        return Change(name, value or None)
