"""A distributed node stopped by SIGTERM while it publishes `$SYS` topics: the message
log closes during the shutdown, and the `$SYS` publisher must not log an error (with a
traceback) for every round it still runs before it is stopped."""

from __future__ import annotations

import json

import pytest

from tests.harness import BrokerProcess
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE, BrokerFactory
from tests.kafka.log_helpers import log_config
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow, pytest.mark.broker_process]


def test_sigterm_while_publishing_sys_topics_logs_no_error(
    broker_factory: BrokerFactory, kafka: KafkaServer, kafka_prefix: str
) -> None:
    extra = '[cluster]\nnode_id = "only"\n[sys]\ninterval = 0.02\n'
    node = broker_factory(config=log_config(kafka.bootstrap, kafka_prefix, extra))
    assert isinstance(node, BrokerProcess)
    watcher = RawClient(node.port)
    try:
        watcher.connect("sys-watcher")
        watcher.subscribe(("$SYS/brokers/only/uptime", 0))
        packet = watcher.recv(DEADLINE)  # published through the log, read back from it
        assert packet.topic == "$SYS/brokers/only/uptime"
    finally:
        watcher.close()
    assert node.terminate() == 0
    records = [json.loads(line) for line in node.stderr_text().splitlines() if line.startswith("{")]
    errors = [r for r in records if r["level"] in ("error", "critical")]
    assert errors == []
