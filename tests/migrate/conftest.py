"""Fixtures of the migration tests, beside the real PostgreSQL (tests/postgres_fixtures.py)
and Redis servers (tests/redis_fixtures.py) that the root conftest's plugins share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
