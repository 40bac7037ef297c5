"""APPLICATION clients on a real Kafka: offline delivery in order, recovery with the same
packet ids (reconnect and broker kill -9), ack strategies, expiry, special client ids."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec

from mqttq.storage.kafka.app_topics import app_topic
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import PUBACK, PUBCOMP, PUBLISH, PUBREC, PUBREL, Prop, ack_packet
from tests.kafka_app.app_helpers import connect_app
from tests.kafka_app.conftest import AppBrokerFactory


def publish_all(publisher: RawClient, topic: str, payloads: list[bytes], qos: int = 1) -> None:
    for payload in payloads:
        ack = publisher.publish(topic, payload, qos=qos)
        assert ack is not None and ack.reason_code in (0, None), ack


def test_offline_messages_arrive_in_order(app_broker: AppBrokerFactory, clients: Clients) -> None:
    broker = app_broker()
    app = connect_app(clients, broker, "analytics1", expect_present=False)
    sid = [(Prop.SUBSCRIPTION_IDENTIFIER, 7)]
    assert app.subscribe(("data/#", 1), props=sid).reason_codes == (1,)
    app.disconnect()
    publisher = clients.connected(broker, "pub")
    payloads = [b"m%d" % n for n in range(50)]
    publish_all(publisher, "data/a", payloads)
    app = connect_app(clients, broker, "analytics1", expect_present=True)
    got = app.receive_messages(50)
    assert [m.payload for m in got] == payloads
    assert [m.packet_id for m in got] == list(range(1, 51))
    assert not any(m.dup for m in got)
    assert all(m.props.all(Prop.SUBSCRIPTION_IDENTIFIER) == [7] for m in got)
    # Live deliveries go through the topic too, after the backlog.
    publish_all(publisher, "data/x", [b"live"])
    (live,) = app.receive_messages(1)
    assert (live.payload, live.packet_id) == (b"live", 51)


def test_topic_of_a_special_client_id(app_broker: AppBrokerFactory, clients: Clients) -> None:
    """A client id outside [a-zA-Z0-9]+ gets the sha256-named topic, with one partition
    and the configured retention and segment size, created on first connect."""
    broker = app_broker(topic_retention_ms=3_600_000, topic_segment_bytes=1_048_576)
    client_id = "app/1 é-#+"
    app = connect_app(clients, broker, client_id)
    app.subscribe(("s/+", 2))
    publisher = clients.connected(broker, "pub")
    publish_all(publisher, "s/1", [b"one"], qos=2)
    (got,) = app.receive_messages(1)
    assert (got.payload, got.qos) == (b"one", 2)
    topic = app_topic(broker_prefix(app_broker), client_id)
    admin = AdminClient({"bootstrap.servers": app_broker.kafka.bootstrap})
    metadata = admin.list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 1
    (configs,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    entries = configs.result(timeout=10)
    assert entries["retention.ms"].value == "3600000"
    assert entries["segment.bytes"].value == "1048576"


def broker_prefix(factory: AppBrokerFactory) -> str:
    return factory.prefix


def end_offset(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = TopicPartition(topic, 0)
    (future,) = admin.list_offsets({partition: OffsetSpec.latest()}).values()
    return int(future.result(timeout=10).offset)


def test_reconnect_resends_unacked_with_same_ids(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    """Unacknowledged PUBLISHes (and a PUBREL awaiting PUBCOMP) are re-sent on the next
    connection with their packet ids and DUP=1 [MQTT-4.4.0-1]; acknowledged ones are not;
    new messages get new ids after them."""
    broker = app_broker()
    app = connect_app(clients, broker, "recover1")
    app.subscribe(("r/#", 2))
    publisher = clients.connected(broker, "pub")
    publish_all(publisher, "r/1", [b"a", b"b", b"c", b"d"], qos=1)
    publish_all(publisher, "r/2", [b"e"], qos=2)
    first = app.receive_messages(5, ack=False)
    assert [(m.payload, m.packet_id, m.dup) for m in first] == [
        (b"a", 1, False),
        (b"b", 2, False),
        (b"c", 3, False),
        (b"d", 4, False),
        (b"e", 5, False),
    ]
    app.send(ack_packet(PUBACK, 1, v5=True))
    app.send(ack_packet(PUBACK, 3, v5=True))
    app.send(ack_packet(PUBREC, 5, v5=True))
    app.wait_packet(PUBREL, packet_id=5)
    app.ping()
    app.disconnect()
    app.close()
    publish_all(publisher, "r/3", [b"f"], qos=1)
    again = connect_app(clients, broker, "recover1", expect_present=True)
    pubrel = again.wait_packet(PUBREL)
    assert pubrel.packet_id == 5
    resent = again.receive_messages(3)
    assert [(m.payload, m.packet_id, m.dup) for m in resent] == [
        (b"b", 2, True),
        (b"d", 4, True),
        (b"f", 6, False),
    ]
    again.send(ack_packet(PUBCOMP, 5, v5=True))
    again.expect_silence(0.5)


@pytest.mark.broker_process
def test_kill9_loses_nothing_acknowledged(app_broker: AppBrokerFactory, clients: Clients) -> None:
    """The broker is killed (-9) in the middle of a pack: every message the publisher got
    a PUBACK for reaches the APPLICATION client after the restart, in order."""
    broker = app_broker()
    app = connect_app(clients, broker, "crash1")
    app.subscribe(("k/#", 1))
    app.disconnect()
    app.close()
    publisher = clients.connected(broker, "pub")
    offline = [b"offline%d" % n for n in range(30)]
    publish_all(publisher, "k/a", offline)
    publisher.close()
    app = connect_app(clients, broker, "crash1", expect_present=True)
    first = app.receive_messages(30, ack=False)
    assert [m.payload for m in first] == offline
    for message in first[:10]:
        app.ack(message)
    app.ping()
    broker.kill9()
    app.close()
    app = connect_app(clients, broker, "crash1", expect_present=True)
    # No context was saved and the pack was not committed: it comes again whole (at least
    # once: the 10 acknowledged too), nothing missing, in order.
    again = app.receive_messages(30)
    assert [m.payload for m in again] == offline
    app.expect_silence(0.5)


def test_retry_all_resends_then_skips_and_logs_offsets(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    broker = app_broker(pack_timeout_ms=800, ack_strategy="retry_all", retries=2)
    app = connect_app(clients, broker, "retry1")
    app.subscribe(("t/#", 1))
    publisher = clients.connected(broker, "pub")
    publish_all(publisher, "t/a", [b"x", b"y"])
    first = app.receive_messages(2, ack=False)
    assert [(m.packet_id, m.dup) for m in first] == [(1, False), (2, False)]
    app.send(ack_packet(PUBACK, 2, v5=True))
    for _ in range(2):  # two retries of the unacknowledged one
        (retry,) = app.receive_messages(1, ack=False)
        assert (retry.payload, retry.packet_id, retry.dup) == (b"x", 1, True)
    # Retries exhausted: the pack is committed past it, said in the log, then go on.
    wait_for(lambda: "offsets [0]" in broker.stderr_text(), what="the skipped-offsets log line")
    publish_all(publisher, "t/a", [b"z"])
    (after,) = app.receive_messages(1)
    assert (after.payload, after.packet_id, after.dup) == (b"z", 3, False)


def test_skip_all_skips_at_once(app_broker: AppBrokerFactory, clients: Clients) -> None:
    broker = app_broker(pack_timeout_ms=500, ack_strategy="skip_all")
    app = connect_app(clients, broker, "skip1")
    app.subscribe(("t/#", 1))
    publisher = clients.connected(broker, "pub")
    publish_all(publisher, "t/a", [b"x", b"y", b"w"])
    assert [m.packet_id for m in app.receive_messages(3, ack=False)] == [1, 2, 3]
    app.send(ack_packet(PUBACK, 2, v5=True))
    wait_for(lambda: "offsets [0, 2]" in broker.stderr_text(), what="the skipped-offsets log line")
    api = AdminApi(broker.data_dir)
    wait_for(
        lambda: "mqttq_app_messages_skipped_total 2.0" in api.call("GET", "/metrics")[1],
        what="2 skipped messages in /metrics",
    )
    publish_all(publisher, "t/a", [b"z"])
    (after,) = app.receive_messages(1)  # no re-send of x or w came first
    assert (after.payload, after.dup) == (b"z", False)


def test_expired_messages_are_skipped_and_expiry_rewritten(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    broker = app_broker()
    app = connect_app(clients, broker, "expiry1")
    app.subscribe(("e/#", 1))
    app.disconnect()
    publisher = clients.connected(broker, "pub")
    publisher.publish("e/1", b"short", qos=1, props=[(Prop.MESSAGE_EXPIRY_INTERVAL, 1)])
    publisher.publish("e/1", b"long", qos=1, props=[(Prop.MESSAGE_EXPIRY_INTERVAL, 60)])
    published = time.monotonic()
    while time.monotonic() - published < 2.2:  # "short" has expired once this is over
        time.sleep(0.1)
    app = connect_app(clients, broker, "expiry1")
    got = app.wait_packet(PUBLISH)
    assert (got.payload, got.packet_id) == (b"long", 1)  # no packet id used by "short"
    remaining = got.props.get(Prop.MESSAGE_EXPIRY_INTERVAL)
    assert remaining is not None and 1 <= remaining <= 58


def test_clean_start_passes_over_the_old_sessions_messages(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    """A new session (clean start) of an APPLICATION client does not get what its topic
    holds from the earlier session [MQTT-3.1.2-4]; what is published after it, it does."""
    broker = app_broker()
    app = connect_app(clients, broker, "fresh1")
    app.subscribe(("f/#", 1))
    app.disconnect()
    app.close()
    publisher = clients.connected(broker, "pub")
    publish_all(publisher, "f/a", [b"old1", b"old2"])
    # The log routes them to the client's topic after the PUBACK: wait until they are in.
    topic = app_topic(app_broker.prefix, "fresh1")
    wait_for(lambda: end_offset(app_broker.kafka.bootstrap, topic) == 2, what="2 records")
    fresh = clients.raw(broker)
    fresh.connect(
        "fresh1",
        clean=True,
        props=[(Prop.SESSION_EXPIRY_INTERVAL, 600)],
        username="app",
        password=b"app-secret",
    )
    fresh.subscribe(("f/#", 1))
    publish_all(publisher, "f/a", [b"new"])
    (got,) = fresh.receive_messages(1)
    assert (got.payload, got.packet_id) == (b"new", 1)
    fresh.expect_silence(0.5)


def test_retained_message_reaches_the_topic(app_broker: AppBrokerFactory, clients: Clients) -> None:
    """A retained message a new subscription gets goes through the client's topic too,
    RETAIN=1 [MQTT-3.3.1-9], and comes again after a reconnect if not acknowledged."""
    broker = app_broker()
    publisher = clients.connected(broker, "pub")
    publisher.publish("cfg/mode", b"eco", qos=1, retain=True)
    # The PUBACK says Kafka has it; the retained store has it once the log's consumer
    # routed it (a subscription made before that gets the message live, RETAIN=0). A probe
    # subscriber receiving it, live or retained, shows the routing (and so the store) done.
    probe = clients.connected(broker, "probe")
    probe.subscribe(("cfg/mode", 1))
    (routed,) = probe.receive_messages(1)
    assert routed.payload == b"eco"
    app = connect_app(clients, broker, "retain1")
    app.subscribe(("cfg/#", 1))
    (got,) = app.receive_messages(1, ack=False)
    assert (got.payload, got.retain, got.packet_id) == (b"eco", True, 1)
    app.disconnect()
    app.close()
    again = connect_app(clients, broker, "retain1", expect_present=True)
    (resent,) = again.receive_messages(1)
    assert (resent.payload, resent.retain, resent.packet_id, resent.dup) == (b"eco", True, 1, True)
