"""A client's queue as runs (schema 6, `sqlite_schema`): the writer thread's side, and
the reader's decoding of runs into entries. Compiled with mypyc (`mqttq.build`): this is
where the per-entry work of both threads is.

One `enqueue` call writes, for each client it names, ONE `runs` row holding all of that
client's new entries as a JSON array (`[packet_id, message_id, expires_at, pubrel]` each;
past `RUN_LIMIT` entries, one row per `RUN_LIMIT`), keyed by the serial of its first
entry: entry i of a run has serial `first_serial + i`.
A fan-out of 100 messages to 100 sessions, enqueued in 5 calls, is 500 rows, not 10,000:
what SQLite costs is per row (a B-tree insert, a page touched), so the entries come cheap.

Acknowledged (or trimmed, or expired) entries become `null` in place, so positions and
serials never move; a run with no live entry left is deleted. The writer finds the run of
a packet id through `ClientQueue`, an index of each client's live entries kept in memory
(bounded: least recently used clients are dropped and read again when next needed).

The `queue` view (`sqlite_schema.QUEUE_VIEW`) shows the live entries as one row each, for
SQL readers (the Spark report, the body sweep, tests).
"""

from __future__ import annotations

import json
import sqlite3
from bisect import bisect_left, bisect_right
from typing import Any, Final

from mqttq.codec.enums import MAX_PACKET_ID
from mqttq.model import Message
from mqttq.storage.formats.tbmq_json import compact_json
from mqttq.storage.memory import queue_limit_of
from mqttq.storage.ports import QueuedMessage

__all__ = [
    "INDEX_LIMIT",
    "RUN_LIMIT",
    "ClientQueue",
    "QueueIndex",
    "body_ids",
    "live_entries",
    "read_runs",
]

INDEX_LIMIT: Final = 1_000_000
"""Live entries the writer indexes at most (about 70 B each); beyond, whole clients go."""

RUN_LIMIT: Final = 64
"""Entries in one run at most: removing one entry rewrites its run, so a client that acks
a long backlog one PUBACK at a time costs at most this many entries per ack, not the whole
backlog (a queue of 65535 acked one by one was quadratic: 88 s)."""

_SELECT_RUNS: Final = (
    "SELECT first_serial, entries FROM runs WHERE client_id = ? ORDER BY first_serial"
)
_SELECT_RUN: Final = "SELECT entries FROM runs WHERE client_id = ? AND first_serial = ?"
_INSERT_RUN: Final = "INSERT INTO runs (client_id, first_serial, entries) VALUES (?, ?, ?)"
_UPDATE_RUN: Final = "UPDATE runs SET entries = ? WHERE client_id = ? AND first_serial = ?"
_DELETE_RUN: Final = "DELETE FROM runs WHERE client_id = ? AND first_serial = ?"
_DELETE_RUNS: Final = "DELETE FROM runs WHERE client_id = ? AND first_serial IN ({firsts})"
_DELETE_CHUNK: Final = 500
_NULL_ARITIES: Final = (1, 2, 4, 8, 16, 32, 63)
"""Entries one UPDATE nulls in a run (`_null_entries`): a drop of n pads its paths to the
next of these by repeating its last one, so that there are few statements to prepare (the
connection caches 64); 63 is the most one call of json_replace takes (127 arguments)."""
_NULL_SQL: Final = {
    arity: "UPDATE runs SET entries = json_replace(entries"
    + ", ?, NULL" * arity
    + ") WHERE client_id = ? AND first_serial = ?"
    for arity in _NULL_ARITIES
}
_CLEAR: Final = "DELETE FROM runs WHERE client_id = ?"
_COUNTERS: Final = "SELECT last_serial, last_packet_id FROM counters WHERE client_id = ?"
_SAVE_COUNTERS: Final = "INSERT OR REPLACE INTO counters VALUES (?, ?, ?)"


def read_runs(conn: sqlite3.Connection, client_id: str) -> list[tuple[int, list[Any]]]:
    """The client's runs in serial order: (first serial, its decoded entries, `None` where
    one is gone). Used by both threads, each on its own connection."""
    return [(first, json.loads(text)) for first, text in conn.execute(_SELECT_RUNS, (client_id,))]


def body_ids(runs: list[tuple[int, list[Any]]]) -> set[int]:
    """The message ids the live entries of `runs` point at."""
    return {entry[1] for _first, run in runs for entry in run if entry is not None}


def live_entries(
    runs: list[tuple[int, list[Any]]], bodies: dict[int, Message], now: float
) -> tuple[list[QueuedMessage], bool, list[int]]:
    """The entries of `runs` (`read_runs`) not expired at `now`, each with its message
    from `bodies` (by message id); whether some had expired; and the serials of those
    whose message is not in `bodies` (unreadable: left out). One pass, and one
    QueuedMessage per entry: what a drain costs per message on the reader thread."""
    entries: list[QueuedMessage] = []
    expired = False
    unreadable: list[int] = []
    for first, run in runs:
        serial = first
        for entry in run:
            if entry is not None:
                packet_id, body_id, expires_at, pubrel = entry
                if expires_at is not None and now >= expires_at:
                    expired = True
                else:
                    message = bodies.get(body_id)
                    if message is None:
                        unreadable.append(serial)
                    else:
                        entries.append(QueuedMessage(serial, packet_id, message, pubrel == 1))
            serial += 1
    return entries, expired, unreadable


def _null_entries(conn: sqlite3.Connection, client_id: str, first: int, offsets: list[int]) -> None:
    """Set these entries of a run to null in place: SQLite rewrites the run's JSON itself,
    so the run is neither read back nor decoded and encoded in Python. (A drain acks each
    run in a few batches; reading, decoding and re-encoding the run was most of a removal's
    cost: docs/benchmarks.md, issue 14 section 11.) Numbers keep their text."""
    top = _NULL_ARITIES[-1]
    for start in range(0, len(offsets), top):
        paths = [f"$[{offset}]" for offset in offsets[start : start + top]]
        arity = _NULL_ARITIES[bisect_left(_NULL_ARITIES, len(paths))]
        paths += [paths[-1]] * (arity - len(paths))
        conn.execute(_NULL_SQL[arity], (*paths, client_id, first))


def _entry_tail(body: int, expires_at: float | None) -> str:
    """A new entry's JSON after its packet id: `,message_id,expires_at,0]`. By hand, at a
    fraction of the encoder's cost on the one-entry runs of live traffic; repr() of a float
    is JSON (finite here)."""
    expiry = "null" if expires_at is None else repr(expires_at)
    return f",{body},{expiry},0]"


def _read_run(conn: sqlite3.Connection, client_id: str, first: int) -> list[Any]:
    (text,) = conn.execute(_SELECT_RUN, (client_id, first)).fetchone()
    entries: list[Any] = json.loads(text)
    return entries


class ClientQueue:
    """What the writer knows of one client's queue: its counters, and where each live
    entry is (packet id -> serial; the runs' first serials, and their live entries)."""

    __slots__ = ("_gone", "last_packet_id", "last_serial", "live", "serial_of", "starts")

    def __init__(self, last_serial: int, last_packet_id: int) -> None:
        self.last_serial = last_serial
        self.last_packet_id = last_packet_id
        self.serial_of: dict[int, int] = {}
        """Live entries: packet id -> serial (ids are unique in a queue [MQTT-2.2.1-4])."""
        self.starts: list[int] = []
        """First serial of each run, ascending: every run with a live entry, and some
        that have none left (dropped in bulk, see `forget_runs`)."""
        self.live: dict[int, int] = {}
        """First serial -> how many of the run's entries are live, for the runs with
        some; oldest run first."""
        self._gone = 0
        """Runs in `starts` with no live entry left."""

    @property
    def count(self) -> int:
        """Live entries, expired ones included until a fetch drops them."""
        return len(self.serial_of)

    def run_of(self, serial: int) -> int:
        """The first serial of the run holding `serial` (which must be live). Runs are
        disjoint ranges of serials, so the last run starting at or before a live serial
        is its own, even with runs that have no live entry left among `starts`."""
        return self.starts[bisect_right(self.starts, serial) - 1]

    def forget_runs(self, firsts: list[int]) -> None:
        """These runs have no live entry left. Their starts stay in `starts` until those
        are half the list: a backlog of many one-entry runs drains oldest first, and taking
        each from the front of the list would copy the rest every time."""
        live = self.live
        for first in firsts:
            del live[first]
        self._gone += len(firsts)
        if self._gone > 16 and 2 * self._gone > len(self.starts):
            self.starts = [start for start in self.starts if start in live]
            self._gone = 0


class QueueIndex:
    """The writer thread's runs: every change to the `runs` table goes through here, so the
    in-memory index and the file agree (`clear_cache` after a rollback)."""

    __slots__ = ("_indexed", "_limit", "_queues", "_run_limit")

    def __init__(self, limit: int = INDEX_LIMIT, run_limit: int = RUN_LIMIT) -> None:
        self._queues: dict[str, ClientQueue] = {}
        self._indexed = 0
        self._limit = limit
        self._run_limit = run_limit

    def clear_cache(self) -> None:
        """Forget everything (work was rolled back: the file is the truth)."""
        self._queues.clear()
        self._indexed = 0

    def queue(self, conn: sqlite3.Connection, client_id: str) -> ClientQueue:
        """The client's queue, read from the file when not in memory."""
        queues = self._queues
        queue = queues.pop(client_id, None)
        if queue is None:
            queue = self._load(conn, client_id)
            self._indexed += queue.count
            self._evict()
        queues[client_id] = queue  # most recently used last
        return queue

    def _evict(self) -> None:
        queues = self._queues
        while self._indexed > self._limit and len(queues) > 1:
            _client_id, queue = next(iter(queues.items()))
            del queues[_client_id]
            self._indexed -= queue.count

    @staticmethod
    def _load(conn: sqlite3.Connection, client_id: str) -> ClientQueue:
        row = conn.execute(_COUNTERS, (client_id,)).fetchone()
        queue = ClientQueue(*row) if row is not None else ClientQueue(0, 0)
        serial_of = queue.serial_of
        for first, run in read_runs(conn, client_id):
            live = 0
            for offset, entry in enumerate(run):
                if entry is not None:
                    serial_of[entry[0]] = first + offset
                    live += 1
            if live:
                queue.starts.append(first)
                queue.live[first] = live
        return queue

    def enqueue(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, Message]],
        body_of: dict[int, int],
        default_limit: int,
        reject_new: bool,
    ) -> tuple[list[QueuedMessage | None], int]:
        """Queue each (client, message) of `items` (the message's body id in `body_of`, by
        `id(message)`), each client's queue kept within its limit (`queue_limit_of`:
        `default_limit` but for integrations' sessions): beyond it the new ones are
        refused (`reject_new`, their result `None`), else the oldest go. The entries in
        `items`' order, and how many old ones were trimmed."""
        results: list[QueuedMessage | None] = [None] * len(items)
        by_client: dict[str, list[int]] = {}
        for index, (client_id, _message) in enumerate(items):
            wanted = by_client.get(client_id)
            if wanted is None:
                by_client[client_id] = [index]
            else:
                wanted.append(index)
        trimmed = 0
        counters: list[tuple[str, int, int]] = []
        # Each message's entry JSON after its packet id, by `id(message)` (the objects stay
        # alive in `items`): written once per message, not once per subscriber.
        tail_of: dict[int, str] = {}
        for client_id, wanted in by_client.items():
            queue = self.queue(conn, client_id)
            limit = queue_limit_of(client_id, default_limit)
            if reject_new:
                kept = wanted[: max(0, limit - queue.count)]
                if not kept:
                    continue
            else:
                # Only the newest `limit` of this call can stay: the others would be
                # trimmed at once, so they get their ids but are never written.
                kept = wanted[-limit:]
                for index in wanted[: len(wanted) - len(kept)]:
                    queue.last_serial += 1
                    queue.last_packet_id = queue.last_packet_id % MAX_PACKET_ID + 1
                    results[index] = QueuedMessage(
                        queue.last_serial, queue.last_packet_id, items[index][1]
                    )
                # Trim before assigning ids, so that enough of them are free.
                excess = queue.count + len(kept) - limit
                if excess > 0:
                    self.drop_oldest(conn, client_id, queue, excess)
                    trimmed += excess
            messages = [items[index][1] for index in kept]
            tails: list[str] = []
            for message in messages:
                key = id(message)
                tail = tail_of.get(key)
                if tail is None:
                    tail = tail_of[key] = _entry_tail(body_of[key], message.expires_at)
                tails.append(tail)
            packet_ids = self.append(conn, client_id, queue, tails)
            serial = queue.last_serial - len(kept)
            for index, packet_id, message in zip(kept, packet_ids, messages, strict=True):
                serial += 1
                results[index] = QueuedMessage(serial, packet_id, message)
            counters.append((client_id, queue.last_serial, queue.last_packet_id))
        conn.executemany(_SAVE_COUNTERS, counters)
        return results, trimmed

    def append(
        self,
        conn: sqlite3.Connection,
        client_id: str,
        queue: ClientQueue,
        tails: list[str],
    ) -> list[int]:
        """Queue messages (each entry's JSON after its packet id, `_entry_tail`) with the
        next serials, in runs of at most the run limit; their packet ids, in order. An id
        still held by an entry of the queue (one left unacknowledged while 65535 later ones
        passed) is skipped, so no two entries of a queue ever share one [MQTT-2.2.1-4]. The
        caller keeps the queue within 65535."""
        used = queue.serial_of
        run_limit = self._run_limit
        serial = queue.last_serial + 1
        packet_id = queue.last_packet_id
        packet_ids: list[int] = []
        rows: list[tuple[str, int, str]] = []
        elements: list[str] = []
        for tail in tails:
            packet_id = packet_id % MAX_PACKET_ID + 1
            while packet_id in used:
                packet_id = packet_id % MAX_PACKET_ID + 1
            used[packet_id] = serial
            serial += 1
            packet_ids.append(packet_id)
            elements.append(f"[{packet_id}{tail}")
            if len(elements) == run_limit:
                rows.append((client_id, serial - run_limit, "[" + ",".join(elements) + "]"))
                elements = []
        if elements:
            rows.append((client_id, serial - len(elements), "[" + ",".join(elements) + "]"))
        queue.last_serial = serial - 1
        queue.last_packet_id = packet_id
        if len(rows) == 1:
            conn.execute(_INSERT_RUN, rows[0])
        else:
            conn.executemany(_INSERT_RUN, rows)
        for _client_id, first, _text in rows:
            queue.starts.append(first)
            queue.live[first] = min(run_limit, serial - first)
        self._indexed += len(packet_ids)
        self._evict()
        return packet_ids

    def remove_entries(self, conn: sqlite3.Connection, entries: list[tuple[str, int]]) -> int:
        """Delete each (client id, packet id) live entry, client by client; how many there
        were. (Grouped here, compiled: a drain removes every entry it delivers.)"""
        by_client: dict[str, list[int]] = {}
        for client_id, packet_id in entries:
            packet_ids = by_client.get(client_id)
            if packet_ids is None:
                by_client[client_id] = [packet_id]
            else:
                packet_ids.append(packet_id)
        removed = 0
        for client_id, packet_ids in by_client.items():
            removed += self.remove(conn, client_id, packet_ids)
        return removed

    def remove(self, conn: sqlite3.Connection, client_id: str, packet_ids: list[int]) -> int:
        """Delete the live entries with these packet ids; how many there were."""
        queue = self.queue(conn, client_id)
        serial_of = queue.serial_of
        starts = queue.starts
        by_run: dict[int, list[int]] = {}
        for packet_id in packet_ids:
            serial = serial_of.pop(packet_id, None)
            if serial is not None:
                first = starts[bisect_right(starts, serial) - 1]  # queue.run_of, inlined
                offsets = by_run.get(first)
                if offsets is None:
                    by_run[first] = [serial - first]
                else:
                    offsets.append(serial - first)
        removed = 0
        emptied: list[int] = []
        live = queue.live
        for first, offsets in by_run.items():
            if live[first] == len(offsets):
                emptied.append(first)
            else:
                self._drop(conn, client_id, queue, first, offsets)
            removed += len(offsets)
        if emptied:
            queue.forget_runs(emptied)
            if len(emptied) == 1:
                conn.execute(_DELETE_RUN, (client_id, emptied[0]))
            else:  # one statement (per 500: SQLite bounds the parameters)
                for start in range(0, len(emptied), _DELETE_CHUNK):
                    chunk = emptied[start : start + _DELETE_CHUNK]
                    sql = _DELETE_RUNS.format(firsts=",".join("?" * len(chunk)))
                    conn.execute(sql, (client_id, *chunk))
        self._indexed -= removed
        return removed

    def _drop(
        self,
        conn: sqlite3.Connection,
        client_id: str,
        queue: ClientQueue,
        first: int,
        offsets: list[int],
    ) -> None:
        """Null these entries of a run (already out of `serial_of`); delete it once empty."""
        left = queue.live[first] - len(offsets)
        if left <= 0:
            conn.execute(_DELETE_RUN, (client_id, first))
            queue.forget_runs([first])
            return
        queue.live[first] = left
        _null_entries(conn, client_id, first, offsets)

    def mark_pubrel(self, conn: sqlite3.Connection, client_id: str, packet_id: int) -> None:
        """Mark the live entry with that packet id as awaiting PUBCOMP."""
        queue = self.queue(conn, client_id)
        serial = queue.serial_of.get(packet_id)
        if serial is None:
            return
        first = queue.run_of(serial)
        entries = _read_run(conn, client_id, first)
        entries[serial - first][3] = 1
        conn.execute(_UPDATE_RUN, (compact_json(entries), client_id, first))

    def drop_oldest(
        self, conn: sqlite3.Connection, client_id: str, queue: ClientQueue, excess: int
    ) -> None:
        """Delete the `excess` oldest live entries."""
        while excess > 0 and queue.live:
            first = next(iter(queue.live))
            offsets: list[int] = []
            for offset, entry in enumerate(_read_run(conn, client_id, first)):
                if entry is not None and len(offsets) < excess:
                    offsets.append(offset)
                    del queue.serial_of[entry[0]]
            self._drop(conn, client_id, queue, first, offsets)
            self._indexed -= len(offsets)
            excess -= len(offsets)

    def delete_expired(self, conn: sqlite3.Connection, client_id: str, now: float) -> int:
        """Delete the client's entries expired at `now`; how many."""
        queue = self.queue(conn, client_id)
        deleted = 0
        for first, run in read_runs(conn, client_id):
            offsets: list[int] = []
            for offset, entry in enumerate(run):
                if entry is not None and entry[2] is not None and entry[2] <= now:
                    offsets.append(offset)
                    queue.serial_of.pop(entry[0], None)
            if offsets:
                self._drop(conn, client_id, queue, first, offsets)
                deleted += len(offsets)
        self._indexed -= deleted
        return deleted

    def clear(self, conn: sqlite3.Connection, client_id: str) -> int:
        """Delete the client's whole queue; its counters restart at 0 (the caller deletes
        their row). How many live entries went."""
        count = self.queue(conn, client_id).count
        conn.execute(_CLEAR, (client_id,))
        self._queues[client_id] = ClientQueue(0, 0)
        self._indexed -= count
        return count
