"""Fixtures of the APPLICATION-client tests: real PostgreSQL and Kafka (started on first
use, once per session), and brokers with the Kafka log on, in the test's process unless
the test is marked `broker_process` (kill -9)."""

from __future__ import annotations

import pytest

from tests.conftest import BrokerFactory
from tests.kafka_app.app_helpers import ServedBroker, add_app_credential, kafka_config
from tests.kafka_service import KafkaServer

__all__ = ["AppBrokerFactory", "app_broker"]


class AppBrokerFactory:
    """Starts brokers with the Kafka log on (this test's topic prefix) and the APPLICATION
    credential `app`; keyword arguments are `[kafka.application]` keys."""

    def __init__(
        self, factory: BrokerFactory, kafka: KafkaServer, prefix: str, redis_url: str
    ) -> None:
        self.factory = factory
        self.kafka = kafka
        self.prefix = prefix
        self.redis_url = redis_url

    def __call__(self, extra: str = "", **application: object) -> ServedBroker:
        config = kafka_config(self.kafka, self.prefix, extra, self.redis_url, **application)
        broker = self.factory(config)
        add_app_credential(broker)
        return broker


@pytest.fixture
def app_broker(
    broker_factory: BrokerFactory, kafka: KafkaServer, kafka_prefix: str, redis_url: str
) -> AppBrokerFactory:
    return AppBrokerFactory(broker_factory, kafka, kafka_prefix, redis_url)
