from __future__ import annotations

from tests.kafka_fixtures import kafka, kafka_factory, kafka_prefix  # noqa: F401
