"""Fixtures of the storage contract suite: one factory per adapter, fresh state per test."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import Storage
from mqttq.storage.sqlite.store import SqliteStorage


class StorageFactory(Protocol):
    """Builds a new, unopened adapter; SQLite ones each get their own file."""

    kind: str

    def __call__(self, **options: Any) -> Storage: ...


class _Factory:
    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self._tmp_path = tmp_path
        self._numbers = itertools.count()

    def __call__(self, **options: Any) -> Storage:
        if self.kind == "memory":
            return MemoryStorage(**options)
        path = self._tmp_path / f"store{next(self._numbers)}" / "mqttq.db"
        return SqliteStorage(path, commit_interval=0.001, **options)


@pytest.fixture(params=["memory", "sqlite"])
def make_storage(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    """Parametrizes a test over every adapter that runs without outside servers."""
    return _Factory(str(request.param), tmp_path)


def run_with(storage: Storage, body: Callable[[Storage], Awaitable[None]]) -> None:
    """Open `storage`, run `body` on a fresh event loop, close it even when `body` fails."""

    async def main() -> None:
        await storage.open()
        try:
            await body(storage)
        finally:
            await storage.close()

    asyncio.run(main())


def sql_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows `sql` selects from the SQLite file at `path` (its own connection)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(sql).fetchall()
    conn.close()
    return rows
