"""CompositeStorage(SQLite, Redis queues) beyond the storage contract: the contract itself
runs on it in tests/contract (its `backend` fixture: redis and redis-cluster); here, what
only this composition has (a deleted session's Redis queue, the queue limit's key, an
unreachable Redis)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.composite import CompositeStorage
from mqttq.storage.ports import Storage
from mqttq.storage.redis.queue import RedisMessageQueue
from mqttq.storage.sqlite.store import SqliteStorage
from tests.contract.conftest import StorageFactory, run_with


class _CompositeFactory:
    def __init__(self, kind: str, url: str, tmp_path: Path) -> None:
        self.kind = kind
        self._url = url
        self._tmp_path = tmp_path
        self._numbers = itertools.count()

    def __call__(self, **options: Any) -> Storage:
        path = self._tmp_path / f"store{next(self._numbers)}" / "mqttq.db"
        queues = RedisMessageQueue(self._url, cluster=self.kind == "redis-cluster", **options)
        return CompositeStorage(SqliteStorage(path, commit_interval=0.001), queues)


@pytest.fixture(params=["redis", "redis-cluster"])
def make_storage(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    """CompositeStorage(SqliteStorage, RedisMessageQueue) on standalone Redis or a cluster."""
    fixture = "redis_url" if request.param == "redis" else "redis_cluster_url"
    url: str = request.getfixturevalue(fixture)
    return _CompositeFactory(str(request.param), url, tmp_path)


@pytest.mark.parametrize("limit", [0, 65536])
def test_queue_limit_out_of_range_names_the_config_key(limit: int) -> None:
    with pytest.raises(ValueError, match=r"mqtt\.max_queued_messages"):
        RedisMessageQueue("redis://127.0.0.1:1/0", queue_limit=limit)


def test_delete_session_clears_the_redis_queue_too(make_storage: StorageFactory) -> None:
    async def body(s: Storage) -> None:
        assert isinstance(s, CompositeStorage)
        await s.enqueue([("a", Message("t", b"x", qos=1))])
        await s.delete_session("a")
        assert await s.queues.fetch("a", 0) == []

    run_with(make_storage(), body)


def test_open_fails_cleanly_when_redis_is_unreachable(tmp_path: Path) -> None:
    sqlite = SqliteStorage(tmp_path / "mqttq.db")
    storage = CompositeStorage(sqlite, RedisMessageQueue("redis://127.0.0.1:1/0"))

    async def body() -> None:
        with pytest.raises(StorageError, match=r"cannot use Redis at redis://127\.0\.0\.1:1/0"):
            await storage.open()
        # SQLite was never opened: nothing is left to close.
        with pytest.raises(StorageError):
            await sqlite.load_sessions()

    asyncio.run(body())
