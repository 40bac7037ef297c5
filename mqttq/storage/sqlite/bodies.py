"""The reader's memo of queued message bodies (table `messages`, see `sqlite_schema`).

A body's id is never reused (AUTOINCREMENT) and a body never changes once written, so a
message decoded from it stays right for as long as it is kept: a backlog drain of N
sessions holding the same messages reads and decodes each body once, not N times.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection

from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.tbmq_json import message_from_json

# The logger keeps its name from before the move into a sub-package: operators filter on it.
_log = logging.getLogger("mqttq.storage.sqlite_bodies")

_CHUNK = 500
"""Ids per SELECT: SQLite bounds the parameters of a statement."""


class MessageBodies:
    """Decoded bodies by id, for one thread (the reader's). Bounded: emptied once the
    bodies it holds exceed `max_chars` characters of JSON in all."""

    __slots__ = ("_chars", "_known", "_max_chars")

    def __init__(self, max_chars: int = 16 * 1024 * 1024) -> None:
        self._known: dict[int, Message] = {}
        self._chars = 0
        self._max_chars = max_chars

    def read(self, conn: sqlite3.Connection, ids: Collection[int]) -> dict[int, Message]:
        """The message of each id in `ids`; an id whose body is missing or unreadable is
        left out (and logged), so the caller skips the entries pointing at it."""
        known = self._known
        found = {body_id: known[body_id] for body_id in ids if body_id in known}
        missing = [body_id for body_id in ids if body_id not in found]
        for start in range(0, len(missing), _CHUNK):
            chunk = missing[start : start + _CHUNK]
            sql = f"SELECT id, body FROM messages WHERE id IN ({','.join('?' * len(chunk))})"
            for body_id, text in conn.execute(sql, chunk):
                try:
                    message = message_from_json(text).message
                except StorageError as exc:
                    _log.error("unreadable message body %d: %s", body_id, exc)
                    continue
                found[body_id] = message
                self._remember(body_id, message, len(text))
        return found

    def _remember(self, body_id: int, message: Message, chars: int) -> None:
        if self._chars + chars > self._max_chars:
            self._known.clear()
            self._chars = 0
        if chars <= self._max_chars:
            self._known[body_id] = message
            self._chars += chars
