"""The `[kafka]`, `[kafka.application]` and `storage.log` settings (issue 11)."""

from __future__ import annotations

import pytest

from mqttq.config import parse_settings
from mqttq.errors import ConfigError


def _error(toml: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_settings(toml, env or {}, {}, source="broker.toml")
    return str(caught.value)


def test_defaults_leave_the_log_off() -> None:
    settings = parse_settings(None, {}, {})
    assert settings.storage.log == "none"
    assert settings.kafka.bootstrap_servers == ""
    assert settings.kafka.topic_prefix == "tbmq."
    app = settings.kafka.application
    assert (app.max_poll_records, app.pack_timeout_ms, app.ack_strategy) == (
        200,
        20_000,
        "retry_all",
    )
    assert (app.high_watermark, app.low_watermark, app.flush_every) == (1_310_720, 655_360, 10)


def test_toml_env_and_subsection() -> None:
    toml = """
[storage]
log = "Kafka"
[kafka]
bootstrap_servers = "127.0.0.1:9092"
topic_prefix = "test."
produce_timeout_ms = 3000
[kafka.application]
ack_strategy = "skip_all"
retries = 0
"""
    env = {
        "MQTTQ_KAFKA_APPLICATION__MAX_POLL_RECORDS": "50",
        "MQTTQ_KAFKA__MSG_ALL_PARTITIONS": "3",
    }
    settings = parse_settings(toml, env, {})
    assert settings.storage.log == "kafka"
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert (settings.kafka.topic_prefix, settings.kafka.produce_timeout_ms) == ("test.", 3000)
    assert settings.kafka.msg_all_partitions == 3
    app = settings.kafka.application
    assert (app.ack_strategy, app.retries, app.max_poll_records) == ("skip_all", 0, 50)


@pytest.mark.parametrize(
    ("toml", "key", "words"),
    [
        ('[storage]\nlog = "kafka"', "kafka.bootstrap_servers", 'storage.log = "kafka"'),
        ('[storage]\nlog = "kafk"', "storage.log", "did you mean 'kafka'"),
        ('[kafka]\ntopic_prefix = "a/b"', "kafka.topic_prefix", "letters, digits"),
        ("[kafka]\nproduce_timeout_ms = 0", "kafka.produce_timeout_ms", "greater than 0"),
        ('[kafka.application]\nack_strategy = "x"', "kafka.application.ack_strategy", "retry_all"),
        ("[kafka.application]\nretries = -1", "kafka.application.retries", "0 or more"),
        (
            "[kafka.application]\nlow_watermark = 2000000",
            "kafka.application.low_watermark",
            "below",
        ),
        ("[kafka.application]\nmax_poll = 1", "kafka.application.max_poll", "max_poll_records"),
    ],
)
def test_bad_values_name_the_key(toml: str, key: str, words: str) -> None:
    message = _error(toml)
    assert f"'{key}'" in message
    assert words in message
