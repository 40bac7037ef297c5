"""`SqliteWriter.submit_row`: rows of one statement queued back to back share one job,
without changing the order of the writes, and each caller keeps its own outcome."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from mqttq.errors import StorageError
from mqttq.storage.sqlite.writer import SqliteWriter
from tests.contract.test_storage_contract import hold

_PUT = "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)"


def _create(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER CHECK (v >= 0))")


def _rows(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    return conn.execute("SELECT k, v FROM kv ORDER BY k").fetchall()


def _with_writer(tmp_path: Path, body: Callable[[SqliteWriter], Awaitable[object]]) -> object:
    async def run() -> object:
        writer = SqliteWriter(tmp_path / "w.db", commit_interval=0)
        await writer.open()
        try:
            await writer.submit(_create)
            return await body(writer)
        finally:
            await writer.close()

    return asyncio.run(run())


def test_rows_queued_back_to_back_are_one_job(tmp_path: Path) -> None:
    async def body(writer: SqliteWriter) -> tuple[int, list[tuple[str, int]]]:
        release, held = await hold(writer)
        jobs_before = writer.statistics().jobs
        waiters = [writer.submit_row(_PUT, (f"k{n}", n)) for n in range(5)]
        release.set()
        await asyncio.gather(held, *waiters)
        jobs = writer.statistics().jobs - jobs_before - 1  # less the held one
        return jobs, await writer.submit(_rows)

    jobs, rows = _with_writer(tmp_path, body)  # type: ignore[misc]
    assert jobs == 1
    assert rows == [(f"k{n}", n) for n in range(5)]


def test_a_job_between_two_rows_keeps_its_place(tmp_path: Path) -> None:
    """a := 1, then every value x 10, then b := 2: a is 10 and b is 2, which holds only if
    b did not join a's job ahead of the multiplication."""

    def times_ten(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE kv SET v = v * 10")

    async def body(writer: SqliteWriter) -> list[tuple[str, int]]:
        release, held = await hold(writer)
        first = writer.submit_row(_PUT, ("a", 1))
        middle = writer.submit(times_ten)
        last = writer.submit_row(_PUT, ("b", 2))
        release.set()
        await asyncio.gather(held, first, middle, last)
        return await writer.submit(_rows)

    assert _with_writer(tmp_path, body) == [("a", 10), ("b", 2)]


def test_a_cancelled_caller_leaves_the_others_and_its_row_written(tmp_path: Path) -> None:
    async def body(writer: SqliteWriter) -> list[tuple[str, int]]:
        release, held = await hold(writer)
        first = writer.submit_row(_PUT, ("a", 1))
        second = writer.submit_row(_PUT, ("b", 2))
        first.cancel()
        release.set()
        await asyncio.gather(held, second)
        return await writer.submit(_rows)

    assert _with_writer(tmp_path, body) == [("a", 1), ("b", 2)]


def test_a_failing_row_fails_every_row_of_its_job_and_writes_none(tmp_path: Path) -> None:
    async def body(writer: SqliteWriter) -> tuple[list[bool], list[tuple[str, int]]]:
        release, held = await hold(writer)
        waiters = [writer.submit_row(_PUT, ("a", 1)), writer.submit_row(_PUT, ("b", -1))]
        release.set()
        await held
        outcomes = await asyncio.gather(*waiters, return_exceptions=True)
        return [isinstance(o, StorageError) for o in outcomes], await writer.submit(_rows)

    failed, rows = _with_writer(tmp_path, body)  # type: ignore[misc]
    assert failed == [True, True]
    assert rows == []


def test_a_row_is_refused_once_the_writer_is_closed(tmp_path: Path) -> None:
    async def body() -> None:
        writer = SqliteWriter(tmp_path / "w.db", commit_interval=0)
        await writer.open()
        await writer.close()
        with pytest.raises(StorageError, match="closed"):
            writer.submit_row(_PUT, ("a", 1))

    asyncio.run(body())
