"""Faults of the Kafka message log: Kafka stopped (publishers refused, never a silent
PUBACK; the broker recovers by itself when Kafka is back), broker kill -9 (the records it
had acknowledged are read again and delivered), records waiting in msg.all at start."""

from __future__ import annotations

import asyncio

import pytest

from mqttq.codec.properties import Properties
from mqttq.model import Message
from mqttq.storage.formats.kafka_record import encode_message
from mqttq.storage.kafka.client import KafkaProducer
from tests.faults.test_broker_kill9 import TOPIC, publish_until_killed, receive_all
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import PUBACK, PUBLISH, Prop, publish_packet
from tests.kafka.log_helpers import DEADLINE, log_config
from tests.kafka_fixtures import KafkaFactory
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]

PERSISTENT = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
REFUSED = 0x80


def _publish_qos1(client: RawClient, payload: bytes) -> int:
    """Publish at QoS 1 and return the PUBACK's reason code."""
    puback = client.publish("f/x", payload, qos=1)
    assert puback is not None and puback.type == PUBACK
    assert puback.reason_code is not None
    return puback.reason_code


def test_kafka_stopped_refuses_then_recovers(
    kafka_factory: KafkaFactory, broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Kafka down: a 5.0 publisher gets PUBACK 0x80 with a reason string, a 3.1.1 publisher
    gets no PUBACK and is disconnected. Kafka back on the same port: publishes succeed and
    are delivered again, without restarting the broker."""
    server = kafka_factory()
    broker = broker_factory(log_config(server.bootstrap, "down.", timeout_ms=3000))
    watcher = clients.connected(broker, "watcher", level=5)
    watcher.subscribe(("f/#", 1))
    v5 = clients.connected(broker, "v5-pub", level=5)
    assert _publish_qos1(v5, b"before") == 0
    assert watcher.receive_messages(1)[0].payload == b"before"

    server.stop()
    puback = v5.publish("f/x", b"lost-v5", qos=1)
    assert puback is not None and puback.reason_code == REFUSED
    assert puback.props.get(Prop.REASON_STRING)
    v3 = clients.connected(broker, "v3-pub", level=4)
    v3.send(publish_packet("f/x", b"lost-v3", v5=False, qos=1, packet_id=1))
    assert [p for p in v3.wait_closed() if p.type == PUBACK] == []

    server.start()
    assert server.bootstrap.endswith(f":{server.port}")
    recovered = clients.connected(broker, "v5-again", level=5)
    codes: list[int] = []
    wait_for(
        lambda: codes.append(_publish_qos1(recovered, b"after")) or codes[-1] == 0,
        timeout=DEADLINE,
        interval=0.5,
        what="a PUBACK once Kafka is back",
    )
    payloads = []
    while b"after" not in payloads:
        payloads += [m.payload for m in watcher.receive_messages(1)]
    assert b"lost-v5" not in payloads and b"lost-v3" not in payloads

    metrics = _metrics(AdminApi(broker.data_dir).metrics())
    assert metrics["mqttq_log_produce_failures_total"] >= 2 + codes.count(REFUSED)
    assert metrics['mqttq_storage_latency_seconds_count{op="log_produce"}'] >= 2
    assert "mqttq_log_consumer_lag" in metrics


def _metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {name with labels: value}."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


@pytest.mark.parametrize(("qos", "level"), [(2, 5)])
def test_acknowledged_messages_survive_kill9(  # noqa: PLR0917 (fixtures)
    kafka: KafkaServer,
    kafka_prefix: str,
    broker_factory: BrokerFactory,
    clients: Clients,
    qos: int,
    level: int,
) -> None:
    """SIGKILL mid-stream: every message the publisher got a PUBACK / PUBREC for reaches
    the persistent subscriber after the restart (the log is read again from the last
    committed offset), first arrivals in publish order."""
    broker = broker_factory(log_config(kafka.bootstrap, kafka_prefix))
    props = PERSISTENT if level == 5 else []
    subscriber = clients.connected(broker, "k9-sub", level=level, clean=False, props=props)
    assert subscriber.subscribe((TOPIC, qos)).reason_codes == (qos,)
    subscriber.disconnect()
    publisher = clients.connected(broker, "k9-pub", level=level)

    acks = publish_until_killed(broker, publisher, qos)

    subscriber = clients.raw(broker)
    assert subscriber.connect("k9-sub", level=level, clean=False, props=props).session_present
    got = receive_all(subscriber, set(acks.owned))
    first = list(dict.fromkeys(got))  # at least once: a replayed record may come twice
    assert first == sorted(first), "out of order after the restart"
    missing = sorted(set(acks.owned) - set(got))
    assert not missing, f"acknowledged but lost: {missing}"


def test_records_waiting_in_msg_all_are_delivered_at_start(
    kafka: KafkaServer, kafka_prefix: str, broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Records appended while the broker was stopped (by another node, say) are read at
    start and reach the persistent session they match."""
    broker = broker_factory(log_config(kafka.bootstrap, kafka_prefix))
    subscriber = clients.connected(broker, "later", level=5, clean=False, props=PERSISTENT)
    subscriber.subscribe(("w/#", 1))
    subscriber.disconnect()
    assert broker.terminate() == 0
    _append(kafka.bootstrap, f"{kafka_prefix}msg.all", [b"w%d" % n for n in range(5)])
    broker.start()
    back = clients.raw(broker)
    assert back.connect("later", level=5, clean=False, props=PERSISTENT).session_present
    got = back.receive_messages(5)
    assert [(m.type, m.topic, m.payload) for m in got] == [
        (PUBLISH, "w/t", b"w%d" % n) for n in range(5)
    ]


def _append(bootstrap: str, topic: str, payloads: list[bytes]) -> None:
    async def produce() -> None:
        producer = KafkaProducer(bootstrap)
        try:
            for payload in payloads:
                message = Message("w/t", payload, 1, False, Properties(), 1.0, None, "other")
                key, value, headers = encode_message("default", message)
                await producer.produce(topic, value, key, headers)
        finally:
            await producer.close()

    asyncio.run(produce())
