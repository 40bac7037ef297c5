"""Fixtures of the cluster tests: the session's real Kafka and Redis, and `nodes`, which
starts `mqttq serve` nodes of one cluster (this test's topic prefix, one Redis)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cluster.cluster_helpers import start_nodes
from tests.conftest import BrokerProcess
from tests.integration.waiting import BrokerFactory
from tests.kafka_service import KafkaServer

__all__ = ["nodes"]

Nodes = Callable[..., list[BrokerProcess]]


@pytest.fixture
def nodes(
    kafka: KafkaServer, kafka_prefix: str, redis_url: str, broker_factory: BrokerFactory
) -> Nodes:
    """`nodes(count, first=1, heartbeat_ms=None)`: `count` started nodes named
    node-<first>, ..."""

    def start(count: int, first: int = 1, heartbeat_ms: int | None = None) -> list[BrokerProcess]:
        return start_nodes(
            broker_factory,
            kafka.bootstrap,
            kafka_prefix,
            redis_url,
            count,
            first,
            heartbeat_ms=heartbeat_ms,
        )

    return start
