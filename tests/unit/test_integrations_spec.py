"""[[integration]] tables: the common keys, checked with the key at fault named."""

from __future__ import annotations

from typing import Any

import pytest

from mqttq.errors import ConfigError
from mqttq.integrations.spec import COMMON_KEYS, SINK_TYPES, parse_integrations


def _http(**extra: Any) -> dict[str, Any]:
    return {"name": "hook", "type": "http", "filters": ["sensors/#"],
            "url": "http://127.0.0.1:8080/ingest", **extra}  # fmt: skip


def test_the_issue_example_parses() -> None:
    bridge = {"name": "to-mosquitto", "type": "mqtt", "direction": "out",
              "filters": ["sensors/#"], "host": "127.0.0.1", "port": 1884}  # fmt: skip
    hook, out = parse_integrations([_http(), bridge])
    assert (hook.name, hook.type, hook.tenant, hook.filters) == (
        "hook",
        "http",
        "default",
        ("sensors/#",),
    )
    assert hook.delivery.batch_size == 100
    assert out.direction == "out"
    assert out.public()["host"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        (_http(name="Hook_1"), "integration[0].name", "lowercase letters"),
        (_http(type="smtp"), "integration[0].type", "unknown type 'smtp'"),
        (_http(filters=["a/#/b"]), "integration[0].filters", "not a valid topic filter"),
        (_http(filters="a/#"), "integration[0].filters", "array of topic filters"),
        (_http(filters=["$share/g/a"]), "integration[0].filters", "no $share filter"),
        (_http(filters=[]), "integration[0].filters", "at least one topic filter"),
        (_http(payload_filter="temp > 3"), "integration[0].payload_filter", "expected"),
        (_http(batch_size=0), "integration[0].batch_size", "between 1 and 10000"),
        (_http(batch_size="10"), "integration[0].batch_size", "must be an integer"),
        (_http(retry_initial_ms=500, retry_max_ms=100), "integration[0].retry_max_ms", "at least"),
        (_http(events=["booted"]), "integration[0].events", "unknown event 'booted'"),
        (_http(enabled="yes"), "integration[0].enabled", "true or false"),
        (_http(urll="x"), "integration[0].urll", "did you mean 'url'?"),
        ({"type": "http"}, "integration[0].name", "is required"),
    ],
)
def test_a_bad_table_names_the_key(table: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_integrations([table])
    assert caught.value.key == key
    assert problem in caught.value.problem


def test_names_are_unique() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_integrations([_http(), _http()])
    assert caught.value.key == "integration[1].name"


def test_events_alone_need_no_filter() -> None:
    (spec,) = parse_integrations([_http(filters=[], events=["connected", "disconnected"])])
    assert spec.events == ("connected", "disconnected")


def test_every_sink_type_names_its_code_and_keys_apart_from_the_common_ones() -> None:
    for kind, sink_type in SINK_TYPES.items():
        settings_class = sink_type.settings_class()
        assert not settings_class.KEYS & COMMON_KEYS, kind
