"""QueueMirror: the loop's copy of the SQLite queues it has seen from their start, so that
a reconnect takes its backlog from memory instead of a read of the file.

The SQLite store is the truth; the mirror only follows what its calls committed. A client
enters the mirror when its queue is known empty: a committed `clear` or `delete_session`
(every new persistent session begins with one), or, when the store opened a file that held
no queued entry at all, every client at once. From then on each committed `enqueue`
appends its entries, each committed removal or PUBREL mark applies, and `take` answers a
fetch with exactly the entries the file holds, in serial order. The broker's barrier (a
reconnect waits for the client's queue writes and removals in flight) is what makes the
mirror current when a fetch asks: its writes have all resumed their callers by then.

A client leaves the mirror (its next fetch reads the file, as before) when the mirror
cannot say what the file holds: an enqueue that would trim the queue's oldest entries, any
failed call, or the bound on mirrored entries (the least recently connected clients go
first). After a restart over a file with queued entries, every queue is read from the
file until its session starts anew.

A drain of 100 sessions x 100 messages read its backlog on the reader thread (13 ms of CPU
on the broker's one core, docs/benchmarks.md issue 14 section 9); from the mirror it is a
dictionary walk per session on the loop. The entries are the objects `enqueue` returned,
which the broker also delivers live: a message fanned out to many sessions stays one object.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from mqttq.model import Message
from mqttq.storage.ports import QueuedMessage

__all__ = ["MIRROR_LIMIT", "QueueMirror"]

MIRROR_LIMIT: Final = 200_000
"""Entries mirrored at most, over all clients, each mirrored client counting as one more
(about 170 B each besides the messages, which the broker holds anyway while it delivers
them): ~35 MB."""


class QueueMirror:
    """Per client, its live entries by packet id in serial order; see the module."""

    def __init__(self, queue_limit: int, limit: int = MIRROR_LIMIT) -> None:
        """`queue_limit`: the store's per-client bound (an enqueue past it trims in the
        file, and the client leaves the mirror); `limit`: entries mirrored at most."""
        self._queue_limit = queue_limit
        self._limit = limit
        self._everyone = False
        """Every client not in `_queues` has an empty queue (the file held none; nothing
        was forgotten since)."""
        self._queues: dict[str, dict[int, QueuedMessage]] = {}
        """In least recently connected order: a reset or a fetch moves the client last."""
        self._count = 0

    def start_empty(self) -> None:
        """The file holds no queued entry: every client is mirrored from now on."""
        self._queues.clear()
        self._count = 0
        self._everyone = True

    def reset(self, client_id: str) -> None:
        """The client's queue is committed empty (`clear`, `delete_session`)."""
        self._drop(client_id)
        if not self._everyone:  # else absent means empty: client ids that come and go
            self._queues[client_id] = {}  # leave nothing behind
            if self._count + len(self._queues) > self._limit:
                self._evict()

    def forget(self, client_ids: Iterable[str] | None = None) -> None:
        """Stop mirroring these clients (None: every client): a call on them failed, so
        what the file holds is not known here."""
        self._everyone = False
        if client_ids is None:
            self._queues.clear()
            self._count = 0
            return
        for client_id in client_ids:
            self._drop(client_id)

    def enqueued(
        self, items: Sequence[tuple[str, Message]], results: Sequence[QueuedMessage | None]
    ) -> None:
        """A committed enqueue of `items` and its `results` (None: refused)."""
        queues = self._queues
        limit = self._queue_limit
        for (client_id, _message), entry in zip(items, results, strict=True):
            if entry is None:
                continue
            queue = queues.get(client_id)
            if queue is None:
                if not self._everyone:
                    continue
                queue = queues[client_id] = {}
            if len(queue) >= limit:
                # The store trimmed the oldest to make room: which ones is its business.
                # An integration's queue, which the store keeps up to 65,535 entries
                # (`queue_limit_of`), leaves here at the same point, so that the memory a
                # sink that is down costs stays bounded: its backlog beyond lives on disk
                # only, and its reader takes it from the file in pieces (`fetch_after`).
                self._everyone = False
                self._drop(client_id)
                continue
            queue[entry.packet_id] = entry
            self._count += 1
        if self._count + len(queues) > self._limit:
            self._evict()

    def removed(self, entries: Iterable[tuple[str, int]]) -> None:
        """Committed removals of (client_id, packet_id)."""
        queues = self._queues
        for client_id, packet_id in entries:
            queue = queues.get(client_id)
            if queue is not None and queue.pop(packet_id, None) is not None:
                self._count -= 1
                if not queue and self._everyone:
                    del queues[client_id]

    def marked_pubrel(self, client_id: str, packet_id: int) -> None:
        """A committed PUBREL mark [MQTT-4.3.3]."""
        queue = self._queues.get(client_id)
        if queue is not None:
            entry = queue.get(packet_id)
            if entry is not None:
                entry.pubrel = True

    def take(self, client_id: str, now: float) -> tuple[list[QueuedMessage], bool] | None:
        """The client's entries not expired at `now`, in serial order, and whether some
        had expired (they leave the mirror: the caller deletes them from the file); None
        when the client is not mirrored."""
        queue = self._queues.pop(client_id, None)
        if queue is None:
            return ([], False) if self._everyone else None
        self._queues[client_id] = queue
        entries = list(queue.values())
        expired = [
            entry.packet_id
            for entry in entries
            if entry.message.expires_at is not None and now >= entry.message.expires_at
        ]
        if expired:
            for packet_id in expired:
                del queue[packet_id]
            self._count -= len(expired)
            entries = list(queue.values())
        return entries, bool(expired)

    def entries_after(self, client_id: str, after: int, limit: int) -> list[QueuedMessage] | None:
        """At most `limit` of the client's entries with a serial above `after`, in serial
        order, expired ones included, the mirror unchanged; None when the client is not
        mirrored."""
        queue = self._queues.get(client_id)
        if queue is None:
            return [] if self._everyone else None
        found: list[QueuedMessage] = []
        for entry in queue.values():
            if entry.serial > after:
                found.append(entry)
                if len(found) >= limit:
                    break
        return found

    def _drop(self, client_id: str) -> None:
        queue = self._queues.pop(client_id, None)
        if queue is not None:
            self._count -= len(queue)

    def _evict(self) -> None:
        """Drop the least recently connected clients until the bound holds."""
        queues = self._queues
        self._everyone = False
        while self._count + len(queues) > self._limit and queues:
            self._drop(next(iter(queues)))
