"""Fixtures of the Kafka message log tests: a real Kafka (tests/kafka_fixtures.py), Redis
for DEVICE queues, and the broker subprocess configured with `storage.log = "kafka"`."""

from __future__ import annotations

from tests.kafka_fixtures import kafka, kafka_factory, kafka_prefix
from tests.redis_fixtures import redis_server, redis_url

__all__ = ["kafka", "kafka_factory", "kafka_prefix", "redis_server", "redis_url"]
