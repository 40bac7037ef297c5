"""Fixtures of the migration tests: a real PostgreSQL (tests/postgres_fixtures.py) and real
Redis servers (tests/redis_fixtures.py), imported here because pytest refuses
`pytest_plugins` in a conftest below the root one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.postgres_fixtures import postgres_server, postgres_url
from tests.redis_fixtures import redis_cluster, redis_cluster_url, redis_server, redis_url

__all__ = [
    "postgres_server",
    "postgres_url",
    "redis_cluster",
    "redis_cluster_url",
    "redis_server",
    "redis_url",
]


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
