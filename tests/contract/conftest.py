"""The contract suites' one backend fixture, and the storage contract's adapter factory.

A contract module names the backends its port has, `BACKENDS = ("sqlite", "postgres")`;
every test of it that takes `backend` (directly or through its module's factory fixture)
runs once per name (test ids `[sqlite]`, `[postgres]`, ...). `backend` gives the name, a
fresh directory and, for a backend on a server, the URL of an emptied database on the
session's server (tests/redis_fixtures.py, tests/postgres_fixtures.py): one place that
knows how each backend is reached, one parametrization for every contract.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from mqttq.storage.composite import CompositeStorage
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import Storage
from mqttq.storage.redis.queue import RedisMessageQueue
from mqttq.storage.sqlite.store import SqliteStorage

SERVER_URLS = {
    "redis": "redis_url",
    "redis-cluster": "redis_cluster_url",
    "postgres": "postgres_url",
}
"""Backends on a server: the fixture giving an emptied database's URL on it."""

IN_PROCESS = ("memory", "sqlite")
"""Backends with no server: a fresh directory is all they need."""


@dataclasses.dataclass(frozen=True)
class Backend:
    """One backend a contract test runs on: its `name`, a fresh `tmp_path` and, on a
    server, the `url` of an emptied database there ("" otherwise)."""

    name: str
    tmp_path: Path
    url: str = ""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    names = getattr(metafunc.module, "BACKENDS", None)
    assert names, f"{metafunc.module.__name__} takes `backend` but names no BACKENDS"
    unknown = set(names) - set(SERVER_URLS) - set(IN_PROCESS)
    assert not unknown, f"unknown backends {sorted(unknown)} in {metafunc.module.__name__}"
    metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The backend this run of the test is on (see the module docstring)."""
    name = str(request.param)
    server = SERVER_URLS.get(name)
    url = "" if server is None else str(request.getfixturevalue(server))
    return Backend(name, tmp_path, url)


class StorageFactory(Protocol):
    """Builds a new, unopened adapter; SQLite ones each get their own file."""

    kind: str

    def __call__(self, **options: Any) -> Storage: ...


class _Factory:
    def __init__(self, backend: Backend) -> None:
        self.kind = backend.name
        self._backend = backend
        self._numbers = itertools.count()

    def __call__(self, **options: Any) -> Storage:
        if self.kind == "memory":
            return MemoryStorage(**options)
        path = self._backend.tmp_path / f"store{next(self._numbers)}" / "mqttq.db"
        if self.kind == "sqlite":
            return SqliteStorage(path, commit_interval=0.001, **options)
        # SQLite keeps sessions and retained messages, Redis the queues (storage.queue).
        cluster = self.kind == "redis-cluster"
        queues = RedisMessageQueue(self._backend.url, cluster=cluster, **options)
        return CompositeStorage(SqliteStorage(path, commit_interval=0.001), queues)


@pytest.fixture
def make_storage(backend: Backend) -> StorageFactory:
    """New, unopened Storage adapters of this test's backend (the module's BACKENDS):
    MemoryStorage, SqliteStorage, or CompositeStorage(SqliteStorage, RedisMessageQueue) on
    standalone Redis or a 3-master Redis Cluster. Each SQLite one gets its own file; the
    Redis ones share the test's emptied database."""
    return _Factory(backend)


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
