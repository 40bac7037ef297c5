"""SqliteStorage: the durable embedded store (one file, WAL, synchronous=FULL, group commit).

Every call becomes a job for `SqliteWriter`'s thread; many concurrent calls share one
transaction and one fsync. When a mutating coroutine returns, its effect is committed and
survives a kill -9 or a power loss (the durability contract of `storage.ports`).

Queue semantics match the Redis layout of TBMQ (ARCHITECTURE.md section 3): a serial that
only grows orders each client's queue, packet ids wrap 65535 -> 1 while the serial does not,
the per-client limit is at most 65535 and an id still held in the queue is skipped, so
packet ids in one queue never collide, and the last serial / packet id survive an empty
queue (only `clear` and `delete_session` reset them).

Message-once (schema 5, `sqlite_schema`): a message the broker hands to N sessions is
written as one body, so a fan-out commits 1 JSON text instead of N; a body no entry points
at any more is removed by a sweep the writer runs when idle. Runs (schema 6,
`sqlite_runs`): the entries one call queues for one client are one row, so a fan-out of M
messages to N sessions in one call is N rows, not M x N.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mqttq.auth.model import ClientType
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.session_json import (
    subscriptions_from_json,
    subscriptions_to_json,
    will_from_json,
    will_to_json,
)
from mqttq.storage.formats.tbmq_json import message_from_json, message_to_json
from mqttq.storage.memory import check_queue_limit
from mqttq.storage.ports import QueuedMessage, QueueFullPolicy, SessionRecord
from mqttq.storage.sqlite import inbox as sqlite_inbox
from mqttq.storage.sqlite.bodies import MessageBodies
from mqttq.storage.sqlite.queue_mirror import QueueMirror
from mqttq.storage.sqlite.runs import (
    INDEX_LIMIT,
    RUN_LIMIT,
    QueueIndex,
    body_ids,
    live_entries,
    read_runs,
)
from mqttq.storage.sqlite.writer import (
    SqliteReader,
    SqliteWriter,
    WriterStatistics,
    storage_error,
)

# The logger keeps its name from before the move into a sub-package: operators filter on it.
_log = logging.getLogger("mqttq.storage.sqlite")

_FetchOutcome = tuple[list[QueuedMessage], bool] | StorageError
"""One client's (entries, whether some had expired), or why it could not be read."""

_ENQUEUE_CHUNK = 2000
"""Entries per commit when a loop iteration's fan-out is large: at ~1 us an entry (runs,
schema 6, compiled) a chunk's job takes ~2 ms and its commit (fsync) ~1.5 ms. Measured on
the persistent scenario (100 x 100): 1,000 or 4,000 gave a later 50th PUBACK than 2,000;
5,000 an earlier one only by putting the 50th message in the first commit, with a later
first PUBACK (docs/benchmarks.md, issue 14 section 7). Messages from the publish inbox
(schema 7), whose publishers were answered before their fan-out, are not chunked."""


class SqliteStorage:
    """The `Storage` port on one SQLite file; the parent directory is created if missing."""

    enqueue_chunk = _ENQUEUE_CHUNK
    """The most entries the broker should put in one `enqueue` call (`EnqueueBatcher`):
    each such call commits on its own, so the first publishers' PUBACKs need not wait
    until a whole loop iteration's fan-out is durable."""

    def __init__(
        self,
        path: Path,
        *,
        queue_limit: int = 10000,
        queue_full_policy: QueueFullPolicy = QueueFullPolicy.DROP_OLDEST,
        commit_interval: float = 0.002,
        index_limit: int = INDEX_LIMIT,
        run_limit: int = RUN_LIMIT,
    ) -> None:
        """`queue_limit` (1..65535, else ValueError) bounds each client's queue;
        `commit_interval` is how long the writer waits to gather more jobs into a commit;
        `index_limit` bounds the live entries the writer indexes in memory, `run_limit`
        the entries of one stored run (`sqlite_runs`)."""
        check_queue_limit(queue_limit)
        self._limit = queue_limit
        self._policy = queue_full_policy
        # Touched only on the writer thread; dropped whenever a job or commit rolls back.
        self._runs = QueueIndex(index_limit, run_limit)
        self._run_limit = run_limit
        self._reader = SqliteReader(Path(path))
        self._fetches: list[
            tuple[str, float, asyncio.Future[tuple[list[QueuedMessage], bool]]]
        ] = []
        """Fetches asked for in this loop iteration (`_read_fetches`)."""
        self._mirror = QueueMirror(queue_limit)
        """The queues seen from their start (loop only): a reconnect's fetch of one of them
        needs no read of the file."""
        self._bodies = MessageBodies()
        """Message bodies read lately (reader thread only): a drain of N sessions holding
        the same messages reads and decodes each once."""
        # Writer thread only: entries deleted since the last sweep of unreferenced bodies,
        # and how many there must be before the next one (half the entries the last sweep
        # saw: its scan of the queue costs O(1) per deleted entry, amortized).
        self._deleted = 0
        self._sweep_after = _SWEEP_MIN
        self._writer = SqliteWriter(
            Path(path),
            commit_interval=commit_interval,
            max_weight=_ENQUEUE_CHUNK,
            on_rollback=self._runs.clear_cache,
            on_idle=self._sweep_if_due,
            idle_after=_SWEEP_QUIET,
            idle_within=_SWEEP_WITHIN,
        )

    def statistics(self) -> WriterStatistics:
        """Jobs and commits so far (group commit shows as jobs > commits)."""
        return self._writer.statistics()

    async def open(self) -> None:
        """Open (creating if needed) the database; StorageError if it cannot be used."""
        await self._writer.open()
        if not await self._writer.submit(_holds_entries):
            self._mirror.start_empty()

    async def close(self) -> None:
        """Commit everything already queued, then close; later calls raise StorageError."""
        await self._writer.close()
        await self._reader.close()

    # --- sessions -------------------------------------------------------------------

    async def load_sessions(self) -> list[SessionRecord]:
        """Every stored session; a row whose subscriptions cannot be read is logged, skipped."""
        return await self._writer.submit(_load_sessions)

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the session record, subscriptions included."""
        row = (
            record.client_id,
            record.protocol_level,
            record.session_expiry_interval,
            record.disconnected_at,
            record.client_type,
            subscriptions_to_json(record.subscriptions),
            record.tenant,
            None if record.will is None else will_to_json(record.will, record.client_id),
            json.dumps(sorted(record.awaiting_pubrel)) if record.awaiting_pubrel else "[]",
        )
        await self._writer.submit_row(_SAVE_SESSION, row)

    async def delete_session(self, client_id: str) -> None:
        """Remove the session record, its queue and its counters."""

        def job(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM sessions WHERE client_id = ?", (client_id,))
            self._clear(conn, client_id)

        with self._mirroring((client_id,)):
            await self._writer.submit(job)
        self._mirror.reset(client_id)

    # --- queues ---------------------------------------------------------------------

    async def enqueue(self, items: Sequence[tuple[str, Message]]) -> list[QueuedMessage | None]:
        """Append each (client_id, message) durably; see `MessageQueueStore.enqueue`."""
        copied = list(items)  # the job runs later, on another thread
        with self._mirroring(client_id for client_id, _message in copied):
            results = await self._writer.submit(
                lambda conn: self._enqueue(conn, copied), weight=len(copied)
            )
        self._mirror.enqueued(copied, results)
        return results

    # --- the publish inbox (sqlite_inbox) ---------------------------------------------

    async def append_inbox(self, rows: Sequence[tuple[str, Message]]) -> list[int]:
        """Store each (tenant, message) as an inbox row, committed at once (not waiting
        to share the commit: publishers wait for it); their sequence numbers."""
        copied = list(rows)
        return await self._writer.submit(
            lambda conn: sqlite_inbox.append(conn, copied), weight=_ENQUEUE_CHUNK
        )

    async def enqueue_logged(
        self, items: Sequence[tuple[str, Message]], seqs: Sequence[int]
    ) -> list[QueuedMessage | None]:
        """`enqueue`, and delete the inbox rows `seqs` (the messages `items` came from) in
        the same transaction."""
        copied = list(items)
        done = list(seqs)

        def job(conn: sqlite3.Connection) -> list[QueuedMessage | None]:
            sqlite_inbox.delete(conn, done)
            return self._enqueue(conn, copied)

        with self._mirroring(client_id for client_id, _message in copied):
            results = await self._writer.submit(job, weight=len(copied))
        self._mirror.enqueued(copied, results)
        return results

    async def inbox_done(self, seqs: Sequence[int]) -> None:
        """Delete inbox rows whose messages were routed with nothing to queue."""
        done = list(seqs)
        await self._writer.submit(lambda conn: sqlite_inbox.delete(conn, done))

    async def load_inbox(self) -> list[tuple[int, str, Message]]:
        """The inbox rows left by the last run: (seq, tenant, message), in order."""
        return await self._writer.submit(sqlite_inbox.load)

    async def fetch(self, client_id: str, now: float) -> list[QueuedMessage]:
        """The client's queue in serial order; entries expired at `now` are deleted.

        From the queue mirror when it holds the client (no read at all). Else read on
        the reader's own connection, from what is committed: a reconnect does not
        wait for the writer's running batch and its fsync. What the caller awaited before
        (the broker's barrier: the client's removals, the queue writes in flight) is
        committed, so it sees those; an entry committed later is handed over live."""
        self._writer.check_open()
        mirrored = self._mirror.take(client_id, now)
        if mirrored is not None:
            entries, expired = mirrored
        else:
            future: asyncio.Future[tuple[list[QueuedMessage], bool]]
            future = asyncio.get_running_loop().create_future()
            if not self._fetches:
                future.get_loop().call_soon(self._read_fetches)
            self._fetches.append((client_id, now, future))
            entries, expired = await future
        if expired:
            with self._mirroring((client_id,)):
                await self._writer.submit(lambda conn: self._delete_expired(conn, client_id, now))
        return entries

    async def fetch_after(self, client_id: str, after: int, limit: int) -> list[QueuedMessage]:
        """At most `limit` entries of the client's queue with a serial above `after`, in
        serial order, expired ones included (the caller drops and removes them): a reader
        that keeps its place (an integration's backlog) reads a long queue once, in
        pieces, not whole at each step. From the queue mirror when it holds the client,
        else from the runs at or after `after` on the reader's connection."""
        self._writer.check_open()
        mirrored = self._mirror.entries_after(client_id, after, limit)
        if mirrored is not None:
            return mirrored
        return await self._reader.run(lambda conn: self._fetch_after(conn, client_id, after, limit))

    def _fetch_after(
        self, conn: sqlite3.Connection, client_id: str, after: int, limit: int
    ) -> list[QueuedMessage]:
        """Reader thread: see `fetch_after`. A run holds at most `run_limit` serials, so
        the one holding `after + 1` starts above `after - run_limit`."""
        runs: list[tuple[int, list[Any]]] = []
        count = 0
        for first, text in conn.execute(_SELECT_RUNS_FROM, (client_id, after - self._run_limit)):
            run = json.loads(text)
            if first + len(run) <= after + 1:
                continue
            runs.append((first, run))
            count += sum(1 for entry in run if entry is not None)
            if count >= limit + self._run_limit:
                break
        bodies = self._bodies.read(conn, body_ids(runs))
        entries, _expired, unreadable = live_entries(runs, bodies, float("-inf"))
        if unreadable:
            _log.error("skipping unreadable queue entries of %s: serials %s", client_id, unreadable)
        found = [entry for entry in entries if entry.serial > after]
        return found[:limit]

    def _read_fetches(self) -> None:
        """The fetches of one loop iteration (a burst of reconnects), read in one job of
        the reader thread: one hand-off and one wake-up for all of them."""
        batch, self._fetches = self._fetches, []

        def read(conn: sqlite3.Connection) -> list[_FetchOutcome]:
            outcomes: list[_FetchOutcome] = []
            for client_id, now, _future in batch:
                try:
                    outcomes.append(self._fetch(conn, client_id, now))
                except (sqlite3.Error, StorageError) as exc:
                    outcomes.append(storage_error(exc))
            return outcomes

        def settled(done: asyncio.Future[list[_FetchOutcome]]) -> None:
            error = None if done.cancelled() else done.exception()
            for index, (_client_id, _now, future) in enumerate(batch):
                if future.done():  # its caller was cancelled
                    continue
                if done.cancelled():
                    future.cancel()
                elif error is not None:
                    future.set_exception(error)
                else:
                    outcome = done.result()[index]
                    if isinstance(outcome, BaseException):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)

        asyncio.ensure_future(self._reader.run(read)).add_done_callback(settled)

    async def remove(self, client_id: str, packet_id: int) -> None:
        """Delete the entry with that packet id (PUBACK [MQTT-4.3.2] / PUBCOMP [MQTT-4.3.3])."""
        await self.remove_many(((client_id, packet_id),))

    async def remove_many(self, entries: Sequence[tuple[str, int]]) -> None:
        """Delete each (client_id, packet_id) entry in one job (one savepoint, one commit),
        with one DELETE per client."""
        copied = list(entries)  # the job runs later, on another thread
        with self._mirroring(client_id for client_id, _packet_id in copied):
            await self._writer.submit(lambda conn: self._remove(conn, copied))
        self._mirror.removed(copied)

    async def mark_pubrel(self, client_id: str, packet_id: int) -> None:
        """Mark the entry as awaiting PUBCOMP [MQTT-4.3.3]; message and expiry are kept."""
        with self._mirroring((client_id,)):
            await self._writer.submit(
                lambda conn: self._runs.mark_pubrel(conn, client_id, packet_id)
            )
        self._mirror.marked_pubrel(client_id, packet_id)

    async def clear(self, client_id: str) -> None:
        """Delete the client's queue and counters: the next entry gets packet id 1."""
        with self._mirroring((client_id,)):
            await self._writer.submit(lambda conn: self._clear(conn, client_id))
        self._mirror.reset(client_id)

    # --- retained -------------------------------------------------------------------

    async def load_retained(self, now: float) -> list[tuple[str, Message]]:
        """Every (tenant, retained message) not expired at `now` [MQTT-3.3.2-5]; expired
        ones are deleted, unreadable ones logged and skipped."""
        return await self._writer.submit(lambda conn: _load_retained(conn, now))

    async def set_retained(self, tenant: str, topic: str, message: Message | None) -> None:
        """Store, replace or (with None) clear the retained message of `topic` in `tenant`
        [MQTT-3.3.1-5]."""
        if message is None:
            await self._writer.submit(_statement(_CLEAR_RETAINED, (tenant, topic)))
            return

        def job(conn: sqlite3.Connection) -> None:
            # Encoded on the writer thread: a large payload's base64 stays off the loop.
            text = message_to_json(message, client_id=message.publisher_id, packet_id=0)
            conn.execute(_SET_RETAINED, (tenant, topic, text, message.expires_at))

        await self._writer.submit(job)

    async def sweep(self) -> int:
        """Delete every body no entry points at any more; how many went. The writer does
        this on its own when idle after enough deletions; callers need it only to see
        the file settled (tests, tools)."""
        return await self._writer.submit(self._sweep)

    @contextlib.contextmanager
    def _mirroring(self, client_ids: Iterable[str]) -> Iterator[None]:
        """Around a call that changes these clients' queues: if it fails (or its caller is
        cancelled, while the job may still commit), the mirror forgets them."""
        try:
            yield
        except BaseException:
            self._mirror.forget(client_ids)
            raise

    # --- writer-thread side -----------------------------------------------------------

    def _sweep(self, conn: sqlite3.Connection) -> int:
        swept = conn.execute(_SWEEP).rowcount
        (entries,) = conn.execute("SELECT COUNT(*) FROM queue").fetchone()
        self._deleted = 0
        self._sweep_after = max(_SWEEP_MIN, entries // 2)
        return swept

    def _sweep_if_due(self, conn: sqlite3.Connection) -> None:
        """The writer's idle hook: one sweep, in a transaction of its own, when due."""
        if self._deleted < self._sweep_after:
            return
        try:
            conn.execute("BEGIN")
            self._sweep(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _log.warning("sweeping unreferenced SQLite message bodies failed: %s", exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def _enqueue(
        self, conn: sqlite3.Connection, items: list[tuple[str, Message]]
    ) -> list[QueuedMessage | None]:
        body_of = _insert_bodies(conn, items)
        reject_new = self._policy is QueueFullPolicy.REJECT_NEW
        results, trimmed = self._runs.enqueue(conn, items, body_of, self._limit, reject_new)
        self._deleted += trimmed
        return results

    def _fetch(
        self, conn: sqlite3.Connection, client_id: str, now: float
    ) -> tuple[list[QueuedMessage], bool]:
        """(entries not expired at `now`, whether some were expired); reader thread."""
        runs = read_runs(conn, client_id)
        bodies = self._bodies.read(conn, body_ids(runs))
        entries, expired, unreadable = live_entries(runs, bodies, now)
        if unreadable:
            _log.error("skipping unreadable queue entries of %s: serials %s", client_id, unreadable)
        return entries, expired

    def _remove(self, conn: sqlite3.Connection, entries: list[tuple[str, int]]) -> None:
        self._deleted += self._runs.remove_entries(conn, entries)

    def _delete_expired(self, conn: sqlite3.Connection, client_id: str, now: float) -> None:
        self._deleted += self._runs.delete_expired(conn, client_id, now)

    def _clear(self, conn: sqlite3.Connection, client_id: str) -> None:
        self._deleted += self._runs.clear(conn, client_id)
        conn.execute("DELETE FROM counters WHERE client_id = ?", (client_id,))


_SELECT_RUNS_FROM = (
    "SELECT first_serial, entries FROM runs WHERE client_id = ? AND first_serial > ?"
    " ORDER BY first_serial"
)
_SAVE_SESSION = (
    "INSERT OR REPLACE INTO sessions (client_id, protocol_level, session_expiry_interval,"
    " disconnected_at, client_type, subscriptions, tenant, will, awaiting_pubrel)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SET_RETAINED = (
    "INSERT OR REPLACE INTO retained (tenant, topic, message, expires_at) VALUES (?, ?, ?, ?)"
)
_CLEAR_RETAINED = "DELETE FROM retained WHERE tenant = ? AND topic = ?"
_INSERT_BODY = "INSERT INTO messages (body) VALUES (?)"
# Not correlated: SQLite reads the referenced ids once into a temporary index.
_SWEEP = "DELETE FROM messages WHERE id NOT IN (SELECT message_id FROM queue)"
_SWEEP_MIN = 4096
"""Entries deleted before a sweep is worth its scan, however small the queues."""
_SWEEP_QUIET = 0.05
"""Seconds without a job before the writer looks whether a sweep is due: its scan of the
queue (milliseconds for 10,000 entries) then waits for the end of a burst instead of
sharing the broker's core with a backlog drain, which it did at the first empty moment of
the writer's queue (docs/benchmarks.md, issue 14 section 11)."""
_SWEEP_WITHIN = 1.0
"""...or at most this long after the burst began: a load that never pauses still has its
bodies swept."""


def _insert_bodies(conn: sqlite3.Connection, items: list[tuple[str, Message]]) -> dict[int, int]:
    """Each distinct message object of `items` stored once (the broker hands the same
    object to every subscriber it is delivered to unchanged); the body id by
    `id(message)`. The objects stay alive in `items`. A body no entry ends up pointing at
    (its items dropped at once, or refused) goes with the next sweep."""
    body_of: dict[int, int] = {}
    last = None
    for _client_id, message in items:
        if message is last:  # a fan-out's items come message by message
            continue
        last = message
        key = id(message)
        if key not in body_of:
            text = message_to_json(message, client_id="", packet_id=0)
            cursor = conn.execute(_INSERT_BODY, (text,))
            assert cursor.lastrowid is not None
            body_of[key] = cursor.lastrowid
    return body_of


def _holds_entries(conn: sqlite3.Connection) -> bool:
    """Whether any client has a queued entry (a run with no live entry is deleted)."""
    (holds,) = conn.execute("SELECT EXISTS (SELECT 1 FROM runs)").fetchone()
    return bool(holds)


def _statement(sql: str, params: tuple[Any, ...]) -> Callable[[sqlite3.Connection], None]:
    def job(conn: sqlite3.Connection) -> None:
        conn.execute(sql, params)

    return job


def _load_sessions(conn: sqlite3.Connection) -> list[SessionRecord]:
    records = []
    for row in conn.execute(
        "SELECT client_id, protocol_level, session_expiry_interval, disconnected_at,"
        " client_type, subscriptions, tenant, will, awaiting_pubrel FROM sessions"
    ):
        client_id, level, expiry, disconnected_at, client_type, subs, tenant = row[:7]
        try:
            subscriptions = subscriptions_from_json(subs)
        except StorageError as exc:
            _log.error("skipping session %r with unreadable subscriptions: %s", client_id, exc)
            continue
        try:
            kind = ClientType(client_type)
        except ValueError:  # as before the type was checked: anything else acts as DEVICE
            _log.error(
                "session %r: unknown client type %r, loaded as DEVICE", client_id, client_type
            )
            kind = ClientType.DEVICE
        record = SessionRecord(
            client_id, level, expiry, subscriptions, disconnected_at, kind, tenant
        )
        try:
            record.will = None if row[7] is None else will_from_json(row[7])
        except StorageError as exc:  # the session is kept; only its will is lost
            _log.error("session %r: unreadable will skipped: %s", client_id, exc)
        try:
            record.awaiting_pubrel = [int(i) for i in json.loads(row[8])]
        except (ValueError, TypeError) as exc:
            _log.error("session %r: unreadable QoS 2 ids skipped: %s", client_id, exc)
        records.append(record)
    return records


def _load_retained(conn: sqlite3.Connection, now: float) -> list[tuple[str, Message]]:
    messages = []
    expired = False
    for tenant, topic, text, expires_at in conn.execute(
        "SELECT tenant, topic, message, expires_at FROM retained"
    ):
        if expires_at is not None and now >= expires_at:
            expired = True
            continue
        try:
            messages.append((tenant, message_from_json(text).message))
        except StorageError as exc:
            _log.error("skipping unreadable retained message of %r: %s", topic, exc)
    if expired:
        conn.execute("DELETE FROM retained WHERE expires_at <= ?", (now,))
    return messages
