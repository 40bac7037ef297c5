"""Fixtures of the cluster operations tests: a real Kafka (tests/kafka_fixtures.py), a
real Redis (tests/redis_fixtures.py), and brokers as `mqttq serve` subprocesses."""

from __future__ import annotations

from tests.kafka_fixtures import kafka, kafka_prefix
from tests.redis_fixtures import redis_server, redis_url

__all__ = ["kafka", "kafka_prefix", "redis_server", "redis_url"]
