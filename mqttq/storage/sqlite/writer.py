"""The one thread that owns the SQLite connection, and its group commit.

Callers on an asyncio loop `submit` a job (a function of the connection); the thread takes
the first job queued, gathers every further job that arrives within `commit_interval` (up to
`max_batch`), runs them all in ONE transaction and ends it with ONE commit, so many
concurrent writers share one fsync. Each job runs inside a savepoint: a job that raises is
undone alone and its caller gets a StorageError; a failing COMMIT fails every job of the
batch. Results reach the loop only after the commit returned, so an awaited write is
durable, and reads queue behind writes (read-your-writes). The loop never calls SQLite.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from mqttq.errors import StorageError
from mqttq.storage.sqlite.schema import connect

# The logger keeps its name from before the move into a sub-package: operators filter on it.
_log = logging.getLogger("mqttq.storage.sqlite_writer")

T = TypeVar("T")

_Job: TypeAlias = tuple[
    Callable[[sqlite3.Connection], Any] | None, asyncio.Future[Any], asyncio.AbstractEventLoop, int
]
"""(function run on the connection, or None to stop; its future; the future's loop; its
weight)."""

_Outcome: TypeAlias = tuple[asyncio.Future[Any], Any, BaseException | None]
"""(the future, its result, or the error to raise in it instead)."""


@dataclass(slots=True)
class WriterStatistics:
    """Counters of the writer thread since it started."""

    jobs: int = 0
    """Jobs run (each enqueue/fetch/remove... call is one job)."""
    commits: int = 0
    """Transactions committed; jobs / commits is the mean group size."""
    failed_commits: int = 0
    largest_batch: int = 0


class SqliteWriter:
    """Owns one SQLite connection on a private thread; see the module docstring."""

    def __init__(
        self,
        path: Path,
        *,
        commit_interval: float,
        idle_gap: float | None = None,
        max_batch: int = 1024,
        max_weight: int | None = None,
        on_rollback: Callable[[], None] = lambda: None,
        on_idle: Callable[[sqlite3.Connection], None] | None = None,
        idle_after: float = 0.0,
        idle_within: float = 0.0,
    ) -> None:
        """Gather jobs for at most `commit_interval` seconds after the first one, but stop
        early once none arrived for `idle_gap` (default: a quarter of the interval), so a
        lone caller does not pay the whole interval. A batch also ends once its jobs weigh
        `max_weight` (see `submit`), so a heavy job commits without waiting for the ones
        queued after it. `on_rollback` runs on the writer thread
        whenever work was undone, so caches kept beside the database can be dropped.
        `on_idle(conn)` runs on the writer thread, outside any transaction (it runs its
        own): housekeeping that must not delay a job. It runs once no job came for
        `idle_after` seconds after a batch, so a burst (a backlog drain) does not share its
        core with it; or, under a load that never pauses that long, at the first moment no
        job waits once `idle_within` seconds went by since the first batch it follows."""
        self._path = path
        self._commit_interval = commit_interval
        self._idle_gap = commit_interval / 4 if idle_gap is None else idle_gap
        self._max_batch = max_batch
        self._max_weight = max_weight
        self._on_rollback = on_rollback
        self._on_idle = on_idle
        self._idle_after = idle_after
        self._idle_within = idle_within
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._open_rows: _Rows | None = None
        """The last job queued, when it is a `submit_row` job the thread has not started:
        the next row of the same statement joins it (guarded by `_lock`)."""
        self._thread: threading.Thread | None = None
        # Guards `_accepting` against the thread's final drain: a job is either queued
        # while the thread will still see it, or refused.
        self._lock = threading.Lock()
        self._accepting = False
        self._closed = False
        self._stopped: asyncio.Future[None] | None = None
        self._stats = WriterStatistics()

    def statistics(self) -> WriterStatistics:
        """A snapshot of the counters."""
        s = self._stats
        return WriterStatistics(s.jobs, s.commits, s.failed_commits, s.largest_batch)

    async def open(self) -> None:
        """Start the thread and open the database; raises StorageError if that fails."""
        if self._closed:
            raise StorageError(f"SQLite storage {self._path} was closed; it cannot reopen")
        if self._thread is not None:
            return
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = loop.create_future()
        self._thread = threading.Thread(
            target=self._main, args=(opened, loop), name="mqttq-sqlite-writer", daemon=True
        )
        with self._lock:
            self._accepting = True
        self._thread.start()
        try:
            await opened
        except StorageError:
            self._closed = True
            raise

    def submit(self, fn: Callable[[sqlite3.Connection], T], weight: int = 1) -> asyncio.Future[T]:
        """Queue `fn` to run on the connection; the future resolves after its commit.
        `weight` (e.g. the rows it writes) counts against the writer's `max_weight`.

        Raises StorageError at once when the writer is not open or already closed.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._check_accepting()
            self._open_rows = None  # a row submitted later must not run before this job
            self._queue.put((fn, future, loop, weight))
        return future

    def submit_row(self, sql: str, params: tuple[Any, ...]) -> asyncio.Future[None]:
        """Queue `conn.execute(sql, params)`; the future resolves after its commit.

        Rows of the same statement submitted one after another, with no other job between
        them, share one job while the thread has not started it: one `executemany`, one
        savepoint. (The sessions a burst of reconnects saves, 100 in a backlog drain, were
        100 jobs; docs/benchmarks.md, issue 14 section 11.) Order is kept: a row never runs
        before a job submitted ahead of it, nor after one submitted behind it. A failure
        fails every row of the job. Each caller has its own future: cancelling one leaves
        the others waiting.
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._check_accepting()
            rows = self._open_rows
            if rows is not None and rows.sql == sql and rows.loop is loop:
                rows.add(params, waiter)
                return waiter
            done: asyncio.Future[None] = loop.create_future()
            rows = self._open_rows = _Rows(self, sql, loop)
            rows.add(params, waiter)
            done.add_done_callback(rows.settle)
            self._queue.put((rows, done, loop, 1))
        return waiter

    def _close_rows(self, rows: _Rows) -> None:
        """The thread starts `rows`: nothing joins it from now on."""
        with self._lock:
            if self._open_rows is rows:
                self._open_rows = None

    def check_open(self) -> None:
        """Raise StorageError, as `submit` would, when the writer is not open or closed."""
        with self._lock:
            self._check_accepting()

    def _check_accepting(self) -> None:
        if not self._accepting:
            state = "closed" if self._closed else "not open (await open() first)"
            raise StorageError(f"SQLite storage {self._path} is {state}")

    async def close(self) -> None:
        """Refuse new jobs, run and commit every job already queued, close the connection.

        Idempotent: a second call waits for the first one's flush.
        """
        with self._lock:
            self._closed = True
            if self._accepting:
                self._accepting = False
                self._stopped = asyncio.get_running_loop().create_future()
                self._queue.put((None, self._stopped, asyncio.get_running_loop(), 0))
        if self._stopped is not None:
            await asyncio.shield(self._stopped)

    # --- writer thread -------------------------------------------------------------

    def _main(self, opened: asyncio.Future[None], loop: asyncio.AbstractEventLoop) -> None:
        try:
            conn = connect(self._path)
        except StorageError as exc:
            self._stop_accepting()
            _deliver([(opened, None, exc)], loop)
            return
        _deliver([(opened, None, None)], loop)
        stop: _Job | None = None
        on_idle = self._on_idle
        # monotonic() by which `on_idle` runs at the latest; None: no batch since it ran.
        idle_due: float | None = None
        try:
            while stop is None:
                wait = None
                if idle_due is not None and on_idle is not None:
                    if time.monotonic() >= idle_due and self._queue.empty():
                        idle_due = None
                        on_idle(conn)
                        continue
                    wait = self._idle_after
                batch, stop = self._collect(wait)
                if batch:
                    self._run_batch(conn, batch)
                    if idle_due is None:
                        idle_due = time.monotonic() + self._idle_within
                elif stop is None and on_idle is not None:  # quiet for `idle_after`
                    idle_due = None
                    on_idle(conn)
        except BaseException:
            _log.exception("SQLite writer thread crashed; storage %s is unusable", self._path)
            raise
        finally:
            # Whatever is still queued (only after a crash, or the stop job itself) gets an
            # answer: awaiting callers never hang.
            self._stop_accepting()
            try:
                conn.close()
            except sqlite3.Error:
                _log.exception("closing SQLite database %s failed", self._path)
            if stop is not None:
                _deliver([(stop[1], None, None)], stop[2])

    def _stop_accepting(self) -> None:
        with self._lock:
            self._accepting = False
        while True:
            try:
                fn, future, loop, _weight = self._queue.get_nowait()
            except queue.Empty:
                return
            error = None if fn is None else StorageError(f"SQLite storage {self._path} closed")
            _deliver([(future, None, error)], loop)

    def _collect(self, wait: float | None = None) -> tuple[list[_Job], _Job | None]:
        """The next batch, and the stop job if it came with it; an empty batch when no
        job came within `wait` seconds (None: wait for one).

        Waits at most `commit_interval` after the first job for more, and no longer than
        `idle_gap` between two of them.
        """
        try:
            first = self._queue.get(timeout=wait)
        except queue.Empty:
            return [], None
        if first[0] is None:
            return [], first
        batch = [first]
        weight = first[3]
        max_weight = self._max_weight
        deadline = time.monotonic() + self._commit_interval
        while len(batch) < self._max_batch and (max_weight is None or weight < max_weight):
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=min(remaining, self._idle_gap))
                except queue.Empty:
                    break
            if job[0] is None:
                return batch, job
            batch.append(job)
            weight += job[3]
        return batch, None

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Job]) -> None:
        outcomes: list[_Outcome] = []
        try:
            conn.execute("BEGIN")
            for fn, future, _loop, _weight in batch:
                assert fn is not None
                conn.execute("SAVEPOINT job")
                try:
                    result = fn(conn)
                except Exception as exc:
                    conn.execute("ROLLBACK TO job")
                    self._on_rollback()
                    outcomes.append((future, None, storage_error(exc)))
                else:
                    outcomes.append((future, result, None))
                conn.execute("RELEASE job")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._stats.failed_commits += 1
            _log.error("SQLite commit of %d jobs failed: %s", len(batch), exc)
            self._rollback(conn)
            outcomes = [
                (future, None, StorageError(f"SQLite commit failed: {exc}"))
                for _fn, future, _loop, _weight in batch
            ]
        else:
            self._stats.commits += 1
        self._stats.jobs += len(batch)
        self._stats.largest_batch = max(self._stats.largest_batch, len(batch))
        by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
        for (_fn, _future, job_loop, _weight), outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(job_loop, []).append(outcome)
        for job_loop, items in by_loop.items():
            _deliver(items, job_loop)

    def _rollback(self, conn: sqlite3.Connection) -> None:
        self._on_rollback()
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                _log.exception("SQLite rollback failed")


class SqliteReader:
    """A second connection on its own thread, for reads that need only committed data
    (WAL lets it read while the writer writes). Opened on first use; `close` closes it."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        """Used on the reader thread only."""

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the reader thread; sqlite3 errors become StorageError."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="mqttq-sqlite-reader")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            conn = self._conn
            if conn is None:
                conn = sqlite3.connect(self._path, isolation_level=None, cached_statements=64)
                conn.execute("PRAGMA busy_timeout = 5000")
                conn.execute("PRAGMA query_only = 1")
                self._conn = conn
            return fn(conn)
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        await asyncio.get_running_loop().run_in_executor(executor, self._close_connection)
        executor.shutdown(wait=False)

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _Rows:
    """A `submit_row` job: rows of one statement, and the future of each caller."""

    __slots__ = ("loop", "params", "sql", "waiters", "writer")

    def __init__(self, writer: SqliteWriter, sql: str, loop: asyncio.AbstractEventLoop) -> None:
        self.writer = writer
        self.sql = sql
        self.loop = loop
        self.params: list[tuple[Any, ...]] = []
        self.waiters: list[asyncio.Future[None]] = []

    def add(self, params: tuple[Any, ...], waiter: asyncio.Future[None]) -> None:
        self.params.append(params)
        self.waiters.append(waiter)

    def __call__(self, conn: sqlite3.Connection) -> None:
        """Writer thread: close the job to new rows, then write them all."""
        self.writer._close_rows(self)
        if len(self.params) == 1:
            conn.execute(self.sql, self.params[0])
        else:
            conn.executemany(self.sql, self.params)

    def settle(self, done: asyncio.Future[None]) -> None:
        """Loop thread: the job's outcome, to each caller still waiting."""
        error = None if done.cancelled() else done.exception()
        for waiter in self.waiters:
            if waiter.done():
                continue
            if done.cancelled():
                waiter.cancel()
            elif error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(None)


def storage_error(exc: Exception) -> StorageError:
    """`exc` as the StorageError a caller of the SQLite store gets (itself if it is one)."""
    if isinstance(exc, StorageError):
        return exc
    error = StorageError(f"SQLite operation failed: {exc!r}")
    error.__cause__ = exc
    return error


def _deliver(items: list[_Outcome], loop: asyncio.AbstractEventLoop) -> None:
    """Resolve futures on their loop with one wake-up for the whole list."""
    try:
        loop.call_soon_threadsafe(_resolve, items)
    except RuntimeError:
        # The loop is closed: nobody can await these futures any more.
        _log.debug("event loop closed before %d SQLite results arrived", len(items))


def _resolve(items: list[_Outcome]) -> None:
    for future, result, error in items:
        if future.done():  # the awaiting task was cancelled
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
