"""Pytest fixtures for real Redis servers (tests/services.py starts them).

One standalone server and one 3-master cluster per test session, started on first use and
stopped at the end; each test gets them flushed (`redis_url`, `redis_cluster_url`). A test
that stops or restarts Redis takes its own server from `redis_factory`.

Registered once, by `pytest_plugins` in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.services import RedisClusterServers, RedisServer, ServiceError, redis_available


def _require_redis() -> None:
    if not redis_available():
        pytest.fail("redis-server is not installed: run scripts/install-services.sh")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The session's standalone Redis (not flushed: use `redis_url`)."""
    _require_redis()
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """The session's 3-master Redis Cluster (not flushed: use `redis_cluster_url`)."""
    _require_redis()
    cluster = RedisClusterServers(tmp_path_factory.mktemp("redis-cluster"))
    try:
        cluster.start()
    except ServiceError:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """`redis://127.0.0.1:PORT/0` of the standalone server, emptied for this test."""
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisClusterServers) -> str:
    """The URL of one cluster node, every node emptied for this test."""
    redis_cluster.flush()
    return redis_cluster.url


RedisFactory = Callable[[], RedisServer]


@pytest.fixture
def redis_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisFactory]:
    """Started private servers, for tests that stop or restart Redis; stopped at teardown."""
    _require_redis()
    started: list[RedisServer] = []

    def make() -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("redis-own"))
        started.append(server)
        server.start()
        return server

    yield make
    for server in started:
        server.stop()
