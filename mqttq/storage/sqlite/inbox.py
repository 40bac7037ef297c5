"""The publish inbox of the SQLite store: accepted PUBLISHes waiting for their fan-out.

A message for persistent sessions is made durable once, as one `inbox` row, and its
publisher is acknowledged when that row committed; the broker then routes it and queues its
entries, and the job that queues them deletes the row in the same transaction
(`SqliteStorage.enqueue_logged`). So a `kill -9` at any point leaves each accepted message
either in the inbox (routed again at the next start, `load`) or in its queues, never in
both and never in neither: exactly once per queue.

A row keeps the message as an MQTT 5 PUBLISH packet (the compiled codec writes one in
about a microsecond, a quarter of the TBMQ JSON of queued bodies: the publisher waits for
this job), with the publisher, the time it arrived and when it expires beside it.

Writer-thread functions of a connection; `SqliteStorage` submits them as jobs.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import Final

from mqttq.codec import encode_packet
from mqttq.codec.packets import PublishPacket
from mqttq.codec.reader import decode_packet
from mqttq.errors import MqttqError
from mqttq.model import Message

__all__ = ["append", "delete", "load"]

# The logger keeps its name from before the move into a sub-package: operators filter on it.
_log = logging.getLogger("mqttq.storage.sqlite_inbox")

_INSERT: Final = (
    "INSERT INTO inbox (tenant, publisher, created_at, expires_at, publish) VALUES (?, ?, ?, ?, ?)"
)
_DELETE: Final = "DELETE FROM inbox WHERE seq = ?"
_MQTT_5: Final = 5
_ANY_SIZE: Final = 268_435_460
"""Larger than any MQTT packet: a stored one is never refused for its size."""


def append(conn: sqlite3.Connection, rows: Sequence[tuple[str, Message]]) -> list[int]:
    """Insert one row per (tenant, message); their sequence numbers, in order."""
    seqs: list[int] = []
    for tenant, message in rows:
        packet = PublishPacket(
            message.topic,
            message.payload,
            message.qos,
            message.retain,
            False,
            1 if message.qos else None,
            message.properties,
        )
        cursor = conn.execute(
            _INSERT,
            (
                tenant,
                message.publisher_id,
                message.created_at,
                message.expires_at,
                encode_packet(packet, _MQTT_5),
            ),
        )
        assert cursor.lastrowid is not None
        seqs.append(cursor.lastrowid)
    return seqs


def delete(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Delete the rows whose messages were fanned out."""
    conn.executemany(_DELETE, [(seq,) for seq in seqs])


def load(conn: sqlite3.Connection) -> list[tuple[int, str, Message]]:
    """Every row left, in acceptance order: (seq, tenant, message). A row that cannot be
    read is logged and deleted (nothing could ever route it)."""
    rows: list[tuple[int, str, Message]] = []
    unreadable: list[int] = []
    for seq, tenant, publisher, created_at, expires_at, data in conn.execute(
        "SELECT seq, tenant, publisher, created_at, expires_at, publish FROM inbox ORDER BY seq"
    ):
        try:
            packet, used = decode_packet(bytes(data), _MQTT_5, _ANY_SIZE)
            if not isinstance(packet, PublishPacket):
                raise MqttqError(f"a {type(packet).__name__}, not a PUBLISH packet")
            if used != len(data):
                raise MqttqError(f"{len(data) - used} bytes after the PUBLISH packet")
        except MqttqError as exc:
            _log.error("dropping unreadable inbox row %d: %s", seq, exc)
            unreadable.append(seq)
            continue
        message = Message(
            packet.topic,
            packet.payload,
            packet.qos,
            packet.retain,
            packet.properties,
            created_at,
            expires_at,
            publisher,
        )
        rows.append((seq, tenant, message))
    if unreadable:
        delete(conn, unreadable)
    return rows
