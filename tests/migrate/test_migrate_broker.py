"""End to end: TBMQ 1.x rows migrated into Redis are delivered by the broker in Redis
mode (`mqttq serve`'s composition, in this process: tests/harness.py) to the client that
reconnects, in serial order, with their packet ids and properties; a PUBREL entry continues
its QoS 2 flow; the broker continues the serial and packet ids.

What the broker needs besides the queue: its session record (SQLite). Without one, a
reconnecting client gets a new session and the broker clears the migrated queue; the
second test pins that down, which is why `pg-to-redis` has --sessions-to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.harness import InProcessBroker
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import PUBACK, PUBCOMP, PUBLISH, PUBREC, PUBREL, Prop, ack_packet
from tests.migrate.source_data import (
    MsgRow,
    SessionRow,
    create_source,
    insert,
    migrate_json,
    now_ms,
)

KEEP = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
USER_PROPERTIES = '{"props":[{"k":"site","v":"kyiv"},{"k":"site","v":"lviv"}]}'


@pytest.fixture
def broker(tmp_path: Path, redis_url: str) -> Iterator[InProcessBroker]:
    """What `mqttq serve` builds with SQLite sessions in `data_dir` and queues in Redis, in
    this process (tests/harness.py), started by the test once the migration wrote its
    rows; stopped after it."""
    config = f'[storage]\ndevice = "redis"\n[redis]\nurl = "{redis_url}"\ncluster = false\n'
    started = InProcessBroker(tmp_path / "broker", config)
    yield started
    assert not started.ended, started.stderr_text()
    started.stop()


def test_migrated_queue_is_delivered_and_the_session_goes_on(
    postgres_url: str, redis_url: str, raw_redis: redis.Redis, broker: InProcessBroker
) -> None:
    t = now_ms()
    create_source(postgres_url)
    insert(
        postgres_url,
        [
            MsgRow(
                "dev-1",
                65534,
                topic="dev/1/cmd",
                time=t,
                packet_id=65534,
                packet_type="PUBREL",
                qos=2,
                payload=b"released",
            ),
            MsgRow(
                "dev-1",
                65535,
                topic="dev/1/cmd",
                time=t,
                packet_id=65535,
                qos=1,
                payload=b'{"on":true}',
                user_properties=USER_PROPERTIES,
                msg_expiry_interval=3600,
                payload_format_indicator=1,
                content_type="application/json",
                response_topic="dev/1/reply",
                correlation_data=b"\x07\x08",
            ),
            MsgRow(
                "dev-1",
                65536,
                topic="dev/1/cmd",
                time=t,
                packet_id=1,
                qos=2,
                payload=b"after the wrap",
            ),
            MsgRow(
                "dev-1", 65537, topic="dev/1/cmd", time=t, packet_id=2, qos=1, payload=b"newest"
            ),
        ],
        [SessionRow("dev-1", 65537, 2)],
    )
    report = migrate_json(
        "--pg", postgres_url, "--redis", redis_url, "--sessions-to", str(broker.data_dir)
    )
    assert (report["messages"]["migrated"], report["sessions"]["written"]) == (4, 1)
    broker.start()

    client = RawClient(broker.port)
    try:
        connack = client.connect("dev-1", clean=False, props=KEEP)
        assert connack.session_present
        # The PUBREL entry first [MQTT-4.4.0-1]: its QoS 2 flow continues with PUBCOMP.
        pubrel = client.recv()
        assert (pubrel.type, pubrel.packet_id) == (PUBREL, 65534)
        client.send(ack_packet(PUBCOMP, 65534, v5=True))
        first, second, third = (client.wait_packet(PUBLISH) for _ in range(3))
        assert [(p.packet_id, p.qos, p.topic, p.payload) for p in (first, second, third)] == [
            (65535, 1, "dev/1/cmd", b'{"on":true}'),
            (1, 2, "dev/1/cmd", b"after the wrap"),
            (2, 1, "dev/1/cmd", b"newest"),
        ]
        props = first.props
        assert props.all(Prop.USER_PROPERTY) == [("site", "kyiv"), ("site", "lviv")]
        assert props.get(Prop.CONTENT_TYPE) == "application/json"
        assert props.get(Prop.RESPONSE_TOPIC) == "dev/1/reply"
        assert props.get(Prop.CORRELATION_DATA) == b"\x07\x08"
        assert props.get(Prop.PAYLOAD_FORMAT_INDICATOR) == 1
        assert 3000 < props.get(Prop.MESSAGE_EXPIRY_INTERVAL) <= 3600  # what is left
        assert Prop.MESSAGE_EXPIRY_INTERVAL not in second.props
        client.send(ack_packet(PUBACK, 65535, v5=True))
        client.send(ack_packet(PUBREC, 1, v5=True))
        assert client.wait_packet(PUBREL, packet_id=1).packet_id == 1
        client.send(ack_packet(PUBCOMP, 1, v5=True))
        client.send(ack_packet(PUBACK, 2, v5=True))
        wait_for(lambda: raw_redis.zcard("{dev-1}_messages") == 0, what="the queue to drain")
        assert client.subscribe(("dev/1/#", 1)).reason_codes == (1,)
        client.disconnect()

        publisher = RawClient(broker.port)
        publisher.connect("publisher")
        publisher.publish("dev/1/cmd", b"new", qos=1)
        publisher.disconnect()
        # The broker continues the serial and the packet ids where TBMQ left them.
        wait_for(lambda: raw_redis.zcard("{dev-1}_messages") == 1, what="the new message")
        assert raw_redis.zrange("{dev-1}_messages", 0, -1, withscores=True) == [
            (b"{dev-1}_messages_3", 65538.0)
        ]
    finally:
        client.close()


def test_without_a_session_record_the_broker_clears_the_migrated_queue(
    postgres_url: str, redis_url: str, raw_redis: redis.Redis, broker: InProcessBroker
) -> None:
    create_source(postgres_url)
    insert(postgres_url, [MsgRow("dev-2", 1, packet_id=1, payload=b"lost")])
    migrate_json("--pg", postgres_url, "--redis", redis_url)
    assert raw_redis.zcard("{dev-2}_messages") == 1
    broker.start()
    client = RawClient(broker.port)
    try:
        connack = client.connect("dev-2", clean=False, props=KEEP)
        assert not connack.session_present
        wait_for(
            lambda: not raw_redis.exists("{dev-2}_messages", "{dev-2}_messages_1"),
            what="the broker to clear the queue of the new session",
        )
        client.expect_silence(0.2)
    finally:
        client.close()
