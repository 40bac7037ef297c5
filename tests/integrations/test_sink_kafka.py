"""The `kafka` sink against the suite's real Kafka (tests/kafka_fixtures.py): the records
consumed back after each batch (topic, key, value, headers, timestamp, order); records
refused for good while the rest land; a Kafka that is down, and one that comes back;
settings errors naming the key; secrets expanded at open and kept out of sight; `probe`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery, envelope
from mqttq.integrations.sink import SinkRejected, SinkUnavailable
from mqttq.integrations.sinks.kafka import KafkaSink
from mqttq.storage.kafka.client import KafkaAdmin
from tests.integrations.kafka_sink_helpers import (
    deliveries,
    read_records,
    send_all,
    settings,
    topic_names,
)
from tests.kafka_fixtures import KafkaFactory
from tests.kafka_service import KafkaServer
from tests.services import free_port

# --- settings (no Kafka) ---------------------------------------------------------------


def test_defaults_and_public_view_hide_the_secrets() -> None:
    parsed = settings(
        bootstrap_servers="a:9092,b:9093",
        topic="iot.{tenant}.{topic_level_1}",
        security_protocol="sasl_ssl",
        sasl_mechanism="scram-sha-512",
        sasl_username="mqttq",
        sasl_password="${KAFKA_PASSWORD}",
        ssl_ca_location="/etc/ca.pem",
        name="ignored",  # a common key: parsed elsewhere, ignored here
        batch_size=10,
    )
    assert parsed.public() == {
        "bootstrap_servers": "a:9092,b:9093",
        "topic": "iot.{tenant}.{topic_level_1}",
        "key": "client_id",
        "value": "envelope",
        "payload_encoding": "auto",
        "headers": True,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "mqttq",
        "sasl_password": "***",
        "ssl_ca_location": "/etc/ca.pem",
        "ssl_certificate_location": None,
        "ssl_key_location": None,
        "ssl_key_password": None,
        "acks": "all",
        "compression": "none",
        "timeout_ms": 30_000,
        "max_message_bytes": 1_000_000,
        "auto_create_topics": True,
    }
    assert parsed.sasl_password == "${KAFKA_PASSWORD}"  # the template is what is stored


BASE = {"bootstrap_servers": "127.0.0.1:9092", "topic": "iot.{tenant}"}
SASL = {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u"}


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ({"topic": "t"}, "bootstrap_servers", "is required"),
        ({**BASE, "bootstrap_servers": "kafka"}, "bootstrap_servers", "host:port"),
        ({**BASE, "bootstrap_servers": 9092}, "bootstrap_servers", "non-empty string"),
        ({"bootstrap_servers": "k:1"}, "topic", "is required"),
        ({**BASE, "topic": "iot.{tenant}.{room}"}, "topic", "unknown field {room}"),
        ({**BASE, "topic": "iot.{payload}"}, "topic", "field {payload} cannot be part"),
        ({**BASE, "topic": "iot.{topic_level_0}"}, "topic", "unknown field {topic_level_0}"),
        ({**BASE, "topic": "iot.{tenant!r}"}, "topic", "no format spec"),
        ({**BASE, "topic": "iot.{tenant"}, "topic", "not a valid template"),
        ({**BASE, "key": "room"}, "key", "client_id, topic, topic_level_N or none"),
        ({**BASE, "value": "avro"}, "value", "must be one of envelope, raw"),
        ({**BASE, "payload_encoding": "hex"}, "payload_encoding", "must be one of auto"),
        ({**BASE, "headers": "yes"}, "headers", "must be true or false"),
        ({**BASE, "acks": "2"}, "acks", "must be all, 1 or 0"),
        ({**BASE, "acks": True}, "acks", "must be all, 1 or 0"),
        ({**BASE, "compression": "brotli"}, "compression", "must be one of none"),
        ({**BASE, "timeout_ms": 10}, "timeout_ms", "from 100 to 3600000"),
        ({**BASE, "timeout_ms": True}, "timeout_ms", "must be an integer"),
        ({**BASE, "max_message_bytes": 10}, "max_message_bytes", "must be an integer"),
        ({**BASE, "auto_create_topics": 1}, "auto_create_topics", "must be true or false"),
        ({**BASE, "security_protocol": "tls"}, "security_protocol", "PLAINTEXT, SSL"),
        ({**BASE, **SASL, "sasl_mechanism": "GSSAPI"}, "sasl_mechanism", "SCRAM-SHA-256"),
        ({**BASE, **SASL}, "sasl_password", "is required with security_protocol SASL_SSL"),
        ({**BASE, "sasl_username": "u"}, "sasl_username", "only used with security_protocol"),
        ({**BASE, "ssl_ca_location": "/ca.pem"}, "ssl_ca_location", "SSL or SASL_SSL"),
        (
            {**BASE, "security_protocol": "SSL", "ssl_certificate_location": "/c.pem"},
            "ssl_key_location",
            "both or none",
        ),
        (
            {**BASE, "security_protocol": "SSL", "ssl_key_password": "x"},
            "ssl_key_password",
            "only used with ssl_key_location",
        ),
    ],
)
def test_a_bad_setting_names_its_key(table: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings(**table)
    assert raised.value.key == f"integration[0].{key}"
    assert problem in raised.value.problem


def test_an_unset_secret_fails_at_open_naming_the_variable_never_a_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MQTTQ_TEST_KAFKA_PASSWORD", raising=False)
    sink = KafkaSink(
        settings(**BASE, **SASL, sasl_password="${MQTTQ_TEST_KAFKA_PASSWORD}"), "to-kafka"
    )
    with pytest.raises(ConfigError) as raised:
        asyncio.run(sink.open())
    assert raised.value.key == "integration[to-kafka].sasl_password"
    assert "MQTTQ_TEST_KAFKA_PASSWORD is not set" in raised.value.problem


def test_a_ca_file_that_cannot_be_read_fails_at_open_naming_the_key(tmp_path: Path) -> None:
    parsed = settings(
        bootstrap_servers="127.0.0.1:9093",
        topic="iot",
        security_protocol="SSL",
        ssl_ca_location=str(tmp_path / "missing-ca.pem"),
    )
    with pytest.raises(ConfigError) as raised:
        asyncio.run(KafkaSink(parsed, "tls").open())
    assert raised.value.key == "integration[tls].ssl_ca_location"
    assert raised.value.problem.startswith("Kafka refused it: ")
    assert "ssl.ca.location failed" in raised.value.problem


# --- against the real Kafka ------------------------------------------------------------


def test_a_batch_lands_in_order_with_envelope_key_headers_and_timestamps(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    topic = f"{kafka_prefix}acme.sensors"
    sink = KafkaSink(
        settings(
            bootstrap_servers=kafka.bootstrap, topic=kafka_prefix + "{tenant}.{topic_level_1}"
        ),
        "to-kafka",
    )
    batch = deliveries(
        5,
        tenant="acme",
        user_properties=(("unit", "C"), ("unit", "K")),
        content_type="text/plain",
        retain=True,
    )
    batch.append(
        Delivery(
            topic="sensors/hall",
            payload=b"\xff\x00",  # not UTF-8: base64 in the envelope
            client_id="dev-2",
            tenant="acme",
            qos=0,
            seq=6,
            timestamp_ms=1_700_000_000_005,
            correlation_data=b"\x01\x02",
            response_topic="replies/dev-2",
            message_expiry_interval=60,
        )
    )

    async def scenario() -> None:
        assert await send_all(sink, batch) == []
        records = await read_records(kafka.bootstrap, topic, 6)
        assert [r.offset for r in records] == list(range(6))
        assert [json.loads(r.value) for r in records] == [envelope(d) for d in batch]
        assert [r.key for r in records] == [b"dev-1"] * 5 + [b"dev-2"]
        assert [r.timestamp_ms for r in records] == [d.timestamp_ms for d in batch]
        assert records[0].headers == [
            ("mqtt.topic", b"sensors/kitchen/temp"),
            ("mqtt.qos", b"1"),
            ("mqtt.retain", b"true"),
            ("mqtt.client_id", b"dev-1"),
            ("mqtt.tenant", b"acme"),
            ("mqtt.content_type", b"text/plain"),
            ("mqttq.integration", b"to-kafka"),
            ("mqttq.seq", b"1"),
            ("unit", b"C"),
            ("unit", b"K"),
        ]
        assert records[5].headers == [
            ("mqtt.topic", b"sensors/hall"),
            ("mqtt.qos", b"0"),
            ("mqtt.retain", b"false"),
            ("mqtt.client_id", b"dev-2"),
            ("mqtt.tenant", b"acme"),
            ("mqtt.response_topic", b"replies/dev-2"),
            ("mqtt.correlation_data", b"\x01\x02"),
            ("mqtt.message_expiry_interval", b"60"),
            ("mqttq.integration", b"to-kafka"),
            ("mqttq.seq", b"6"),
        ]

    asyncio.run(scenario())


def test_raw_values_keyed_by_a_topic_level_without_headers_over_two_topics(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    sink = KafkaSink(
        settings(
            bootstrap_servers=kafka.bootstrap,
            topic=kafka_prefix + "{topic_level_1}",
            key="topic_level_2",
            value="raw",
            headers=False,
            compression="lz4",
        ),
        "raw",
    )
    batch = [
        Delivery(topic=f"{kind}/room{n % 2}", payload=b"%s-%d" % (kind.encode(), n), seq=n)
        for n in range(6)
        for kind in ("temp", "door")
    ]

    async def scenario() -> None:
        assert await send_all(sink, batch) == []
        for kind in ("temp", "door"):
            records = await read_records(kafka.bootstrap, f"{kafka_prefix}{kind}", 6)
            assert [(r.key, r.value, r.headers) for r in records] == [
                (b"room%d" % (n % 2), b"%s-%d" % (kind.encode(), n), []) for n in range(6)
            ]

    asyncio.run(scenario())


def test_records_refused_for_good_are_rejected_while_the_rest_land_in_order(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    sink = KafkaSink(
        settings(
            bootstrap_servers=kafka.bootstrap,
            topic=kafka_prefix + "{topic_level_1}",
            value="raw",
            max_message_bytes=5_000,
        ),
        "poison",
    )
    good = deliveries(3, topic="ok/x")
    too_large = Delivery(topic="ok/x", payload=b"x" * 10_000, seq=10)
    bad_name = Delivery(topic="not ok/x", payload=b"space in the topic", seq=11)
    batch = [good[0], too_large, good[1], bad_name, good[2]]

    async def scenario() -> None:
        rejected = await send_all(sink, batch)
        assert [r.delivery for r in rejected] == [too_large, bad_name]
        assert "MSG_SIZE_TOO_LARGE" in rejected[0].reason
        assert "'t." in rejected[0].reason  # names the topic
        assert f"'{kafka_prefix}not ok' is not a valid topic name" in rejected[1].reason
        records = await read_records(kafka.bootstrap, f"{kafka_prefix}ok", 3)
        assert [r.value for r in records] == [b"m0", b"m1", b"m2"]

    asyncio.run(scenario())


def test_a_record_larger_than_the_topic_allows_is_rejected_by_the_broker(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    topic = f"{kafka_prefix}small"
    sink = KafkaSink(settings(bootstrap_servers=kafka.bootstrap, topic=topic, value="raw"), "small")

    async def scenario() -> None:
        await KafkaAdmin(kafka.bootstrap).ensure_topic(topic, 1, {"max.message.bytes": "2000"})
        big = Delivery(topic="a/b", payload=b"y" * 5_000, seq=1)
        [rejected] = await send_all(sink, [big])
        assert rejected.delivery == big
        assert "MSG_SIZE_TOO_LARGE" in rejected.reason
        assert await send_all(sink, deliveries(1)) == []  # a smaller one is written
        assert [r.value for r in await read_records(kafka.bootstrap, topic, 1)] == [b"m0"]

    asyncio.run(scenario())


def test_a_missing_topic_without_auto_create_is_rejected(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    sink = KafkaSink(
        settings(
            bootstrap_servers=kafka.bootstrap,
            topic=kafka_prefix + "{topic_level_1}",
            auto_create_topics=False,
            timeout_ms=4_000,
        ),
        "no-create",
    )

    async def scenario() -> None:
        await KafkaAdmin(kafka.bootstrap).ensure_topic(f"{kafka_prefix}there", 1)
        there, missing = Delivery(topic="there", payload=b"1"), Delivery(topic="gone", payload=b"2")
        [rejected] = await send_all(sink, [there, missing])
        assert rejected.delivery == missing
        assert "UNKNOWN_TOPIC" in rejected.reason and f"{kafka_prefix}gone" in rejected.reason
        [record] = await read_records(kafka.bootstrap, f"{kafka_prefix}there", 1)
        assert json.loads(record.value)["payload"] == "1"
        assert f"{kafka_prefix}gone" not in await topic_names(kafka.bootstrap)

    asyncio.run(scenario())


def test_a_kafka_that_is_down_is_unavailable_and_no_secret_is_in_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MQTTQ_TEST_KAFKA_PASSWORD", "s3cret-pw")
    parsed = settings(
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        topic="iot.{tenant}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="mqttq",
        sasl_password="${MQTTQ_TEST_KAFKA_PASSWORD}",
        timeout_ms=1_000,
    )
    sink = KafkaSink(parsed, "down")

    async def scenario() -> None:
        with pytest.raises(SinkUnavailable) as raised:
            await send_all(sink, deliveries(3))
        reason = str(raised.value)
        assert "kafka: topic 'iot.default'" in reason and "timed out" in reason
        assert "s3cret-pw" not in reason and "\n" not in reason
        with pytest.raises(SinkUnavailable):
            await sink.probe(deliveries(1)[0])
        await sink.close()

    asyncio.run(scenario())
    assert "s3cret-pw" not in json.dumps(parsed.public())


def test_bootstrap_servers_from_the_environment_and_probe_answer_where_it_wrote(
    kafka: KafkaServer, kafka_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQTTQ_TEST_KAFKA_BOOTSTRAP", kafka.bootstrap)
    topic = f"{kafka_prefix}probe"
    parsed = settings(bootstrap_servers="${MQTTQ_TEST_KAFKA_BOOTSTRAP}", topic=topic)
    assert parsed.public()["bootstrap_servers"] == "${MQTTQ_TEST_KAFKA_BOOTSTRAP}"
    sink = KafkaSink(parsed, "probe")
    sample = Delivery(topic="mqttq/test", payload=b"sample", client_id="mqttq-test")

    async def scenario() -> None:
        answers = [await sink.probe(sample), await sink.probe(sample)]
        await sink.close()
        assert answers == [
            f"kafka: written to {topic}[0]@0 (acks=all)",
            f"kafka: written to {topic}[0]@1 (acks=all)",
        ]
        records = await read_records(kafka.bootstrap, topic, 2)
        assert [json.loads(r.value)["payload"] for r in records] == ["sample", "sample"]

    asyncio.run(scenario())


def test_a_probe_to_an_invalid_topic_raises_rejected(kafka: KafkaServer) -> None:
    sink = KafkaSink(settings(bootstrap_servers=kafka.bootstrap, topic="{topic}"), "bad")

    async def scenario() -> None:
        with pytest.raises(SinkRejected, match="'a/b' is not a valid topic name"):
            await sink.probe(Delivery(topic="a/b", payload=b""))
        await sink.close()

    asyncio.run(scenario())


@pytest.mark.slow
def test_kafka_down_then_back_nothing_lost_in_order(
    kafka_factory: KafkaFactory, kafka_prefix: str
) -> None:
    node = kafka_factory()
    topic = f"{kafka_prefix}outage"
    sink = KafkaSink(
        settings(bootstrap_servers=node.bootstrap, topic=topic, value="raw", timeout_ms=3_000),
        "outage",
    )
    first, second = deliveries(3), deliveries(6)[3:]

    async def scenario() -> None:
        await sink.open()
        assert await sink.send(first) == []
        await asyncio.to_thread(node.stop)
        with pytest.raises(SinkUnavailable, match="timed out"):
            await sink.send(second)
        await asyncio.to_thread(node.start)
        assert await sink.send(second) == []  # the worker's retry of the same batch
        await sink.close()
        records = await read_records(node.bootstrap, topic, 6)
        # Those that timed out while Kafka was down were never written: no duplicates here.
        assert [r.value for r in records] == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"]

    asyncio.run(scenario())
