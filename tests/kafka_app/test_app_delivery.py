"""APPLICATION clients on a real Kafka: offline delivery in order, recovery with the same
packet ids (reconnect and broker kill -9), ack strategies, expiry, special client ids."""

from __future__ import annotations

import pytest

from mqttq.storage.app_topics import app_topic
from tests.conftest import BrokerFactory
from tests.integration.helpers import Clients
from tests.integration.wire import PUBLISH, Prop
from tests.kafka_app.app_helpers import add_app_credential, connect_app, kafka_config
from tests.kafka_service import KafkaServer


@pytest.fixture
def app_broker(broker_factory: BrokerFactory, kafka: KafkaServer, kafka_prefix: str):  # type: ignore[no-untyped-def]
    def make(**application: object):  # type: ignore[no-untyped-def]
        broker = broker_factory(kafka_config(kafka, kafka_prefix, **application))
        add_app_credential(broker)
        return broker

    return make


def test_offline_messages_arrive_in_order(app_broker, clients: Clients) -> None:  # type: ignore[no-untyped-def]
    broker = app_broker()
    app = connect_app(clients, broker, "analytics1", expect_present=False)
    assert app.subscribe(("data/#", 1)).reason_codes == (1,)
    app.disconnect()
    publisher = clients.connected(broker, "pub")
    for n in range(50):
        assert publisher.publish(f"data/{n % 3}", b"m%d" % n, qos=1).reason_code in (0, None)
    app = connect_app(clients, broker, "analytics1", expect_present=True)
    got = app.receive_messages(50)
    assert [m.payload for m in got] == [b"m%d" % n for n in range(50)]
    assert [m.packet_id for m in got] == list(range(1, 51))
    assert not any(m.dup for m in got)
    # Live deliveries go through the topic too, after the backlog.
    publisher.publish("data/x", b"live", qos=1)
    (live,) = app.receive_messages(1)
    assert (live.payload, live.packet_id) == (b"live", 51)
