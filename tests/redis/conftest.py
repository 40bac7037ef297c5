"""Fixtures of the Redis tests: real servers from tests/redis_fixtures.py."""

from __future__ import annotations

from tests.redis_fixtures import (
    redis_cluster,
    redis_cluster_url,
    redis_factory,
    redis_server,
    redis_url,
)

__all__ = ["redis_cluster", "redis_cluster_url", "redis_factory", "redis_server", "redis_url"]
