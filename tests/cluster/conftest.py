"""Fixtures of the cluster tests: the session's real Kafka and Redis."""

from __future__ import annotations

from tests.kafka_fixtures import kafka, kafka_factory, kafka_prefix
from tests.redis_fixtures import redis_server, redis_url

__all__ = ["kafka", "kafka_factory", "kafka_prefix", "redis_server", "redis_url"]
