"""Fixtures of the APPLICATION-client tests: real PostgreSQL and Kafka (started on first
use, once per session)."""

from __future__ import annotations

from tests.kafka_fixtures import kafka, kafka_factory, kafka_prefix
from tests.postgres_fixtures import postgres_server, postgres_url

__all__ = ["kafka", "kafka_factory", "kafka_prefix", "postgres_server", "postgres_url"]
