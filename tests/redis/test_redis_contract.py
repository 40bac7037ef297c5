"""The storage contract suite (tests/contract) on CompositeStorage(SQLite, Redis queues).

Every contract case that takes `make_storage` runs here again, once on a standalone Redis and
once on a 3-master Redis Cluster, with this module's `make_storage`: SQLite keeps sessions
and retained messages, RedisMessageQueue the queues. New contract cases are picked up
without touching this file.
"""

from __future__ import annotations

import asyncio
import inspect
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
from tests.contract import test_storage_contract as contract
from tests.contract.conftest import StorageFactory, run_with

CONTRACT_CASES = {
    name: case
    for name, case in vars(contract).items()
    if name.startswith("test_") and "make_storage" in inspect.signature(case).parameters
}
globals().update(CONTRACT_CASES)


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


def test_the_contract_cases_are_all_here() -> None:
    assert len(CONTRACT_CASES) >= 14
    assert "test_a_packet_id_still_queued_is_skipped" in CONTRACT_CASES


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
