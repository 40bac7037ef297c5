"""Settings loading: defaults, TOML, env vars, overrides, and the errors that name the key."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

import pytest

from mqttq.config import (
    ConfigFileError,
    Settings,
    env_var_name,
    iter_keys,
    load_settings,
    parse_settings,
)
from mqttq.config.schema import node_id_of
from mqttq.errors import ConfigError


def config_error(
    toml: str | None = None, env: dict[str, str] | None = None, **overrides: object
) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_settings(toml, env or {}, _dotted(overrides), source="broker.toml")
    return caught.value


def _dotted(overrides: dict[str, object]) -> dict[str, object]:
    """`listener__port=1` -> `{"listener.port": 1}` (keyword arguments cannot hold dots)."""
    return {key.replace("__", "."): value for key, value in overrides.items()}


def test_defaults_without_any_source() -> None:
    settings = load_settings(None, {}, {})
    assert settings == Settings()
    assert settings.listener.host == "127.0.0.1"
    assert settings.listener.port == 1883
    assert settings.mqtt.max_queued_messages == 10_000
    assert settings.storage.backend == "sqlite"
    assert settings.storage.data_dir == Path("mqttq-data")
    assert (settings.log.level, settings.log.format) == ("warning", "json")


def test_toml_sets_every_section() -> None:
    toml = """
[listener]
host = "0.0.0.0"
port = 11883

[mqtt]
max_keep_alive = 120
retain_available = false
connect_timeout = 3
queue_full_policy = "reject_new"

[storage]
data_dir = "/var/lib/mqttq"
backend = "memory"
commit_interval_ms = 0

[log]
level = "INFO"
format = "text"
"""
    settings = parse_settings(toml, {}, {})
    assert settings.listener == dataclasses.replace(Settings().listener, host="0.0.0.0", port=11883)
    assert settings.mqtt.max_keep_alive == 120
    assert settings.mqtt.retain_available is False
    assert settings.mqtt.connect_timeout == 3.0
    assert isinstance(settings.mqtt.connect_timeout, float)
    assert settings.mqtt.queue_full_policy == "reject_new"
    assert settings.storage.data_dir == Path("/var/lib/mqttq")
    assert settings.storage.backend == "memory"
    assert settings.storage.commit_interval_ms == 0.0
    assert (settings.log.level, settings.log.format) == ("info", "text")


def test_env_overrides_toml_and_flags_override_env() -> None:
    toml = "[listener]\nport = 1000\nhost = '127.0.0.2'\n[mqtt]\nmax_keep_alive = 10\n"
    env = {"MQTTQ_LISTENER__PORT": "2000", "MQTTQ_MQTT__MAX_KEEP_ALIVE": "20"}
    settings = parse_settings(toml, env, {"listener.port": 3000})
    assert settings.listener.port == 3000
    assert settings.mqtt.max_keep_alive == 20
    assert settings.listener.host == "127.0.0.2"


def test_env_values_are_parsed_to_the_field_type() -> None:
    env = {
        "MQTTQ_LISTENER__PORT": "0",
        "MQTTQ_MQTT__QUEUE_QOS0": "yes",
        "MQTTQ_MQTT__RETAIN_AVAILABLE": "false",
        "MQTTQ_MQTT__CONNECT_TIMEOUT": "2.5",
        "MQTTQ_MQTT__MAX_SESSION_EXPIRY_INTERVAL": "0xFFFF",
        "MQTTQ_STORAGE__DATA_DIR": "/tmp/mqttq-test",
        "MQTTQ_LOG__LEVEL": "DEBUG",
    }
    settings = parse_settings(None, env, {})
    assert settings.listener.port == 0
    assert settings.mqtt.queue_qos0 is True
    assert settings.mqtt.retain_available is False
    assert settings.mqtt.connect_timeout == 2.5
    assert settings.mqtt.max_session_expiry_interval == 0xFFFF
    assert settings.storage.data_dir == Path("/tmp/mqttq-test")
    assert settings.log.level == "debug"


def test_env_names_without_a_section_separator_are_not_settings() -> None:
    env = {"MQTTQ_CONFIG": "/etc/mqttq.toml", "MQTTQ_SOMETHING": "x", "mqttq_log__level": "nope"}
    assert parse_settings(None, env, {}) == Settings()


def test_typed_and_string_overrides_and_none_means_not_given() -> None:
    overrides: dict[str, object] = {
        "listener.port": 0,
        "storage.data_dir": Path("/srv/mqttq"),
        "mqtt.max_keep_alive": "30",
        "log.level": None,
    }
    settings = parse_settings(None, {}, overrides)
    assert settings.listener.port == 0
    assert settings.storage.data_dir == Path("/srv/mqttq")
    assert settings.mqtt.max_keep_alive == 30
    assert settings.log.level == "warning"


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.listener.port = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.mqtt = settings.mqtt  # type: ignore[misc]


@pytest.mark.parametrize(("key", "_type", "default"), list(iter_keys()))
def test_every_default_round_trips_through_its_env_var(
    key: str, _type: type, default: object
) -> None:
    text = str(default).lower() if isinstance(default, bool) else str(default)
    settings = parse_settings(None, {env_var_name(key): text}, {})
    assert _lookup(settings, key) == default


def _lookup(settings: object, key: str) -> object:
    """The value of a dotted key (`mqtt_limit.cluster.max_topics`) in the settings tree."""
    value = settings
    for part in key.split("."):
        value = getattr(value, part)
    return value


def test_nested_limit_sections_from_toml_and_env() -> None:
    text = "[mqtt_limit]\nrate_wait_ms = 5\n[mqtt_limit.cluster]\nmax_topics = 3\n"
    env = {"MQTTQ_MQTT_LIMIT_TENANT__MAX_PUBLISH_RATE": "7.5"}
    settings = parse_settings(text, env, {})
    assert settings.mqtt_limit.rate_wait_ms == 5.0
    assert settings.mqtt_limit.cluster.max_topics == 3
    assert settings.mqtt_limit.tenant.max_publish_rate == 7.5
    assert (
        settings.mqtt_limit.cluster.max_publish_rate
        == settings.mqtt_limit.tenant.max_topics * 0 + 1_000_000.0
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "[mqtt_limit.cluster]\nmax_topics = -1\n",
            "mqtt_limit.cluster.max_topics': must be 0 or more",
        ),
        (
            "[mqtt_limit.tenant]\nmax_publish_rate = 'x'\n",
            "mqtt_limit.tenant.max_publish_rate': expected a number",
        ),
        ("[mqtt_limit.cluster]\nmax_topic = 1\n", "did you mean 'mqtt_limit.cluster.max_topics'"),
        ("[mqtt_limit]\ncluster = 3\n", "mqtt_limit.cluster': must be a table"),
        ("[auth]\nanonymous = 'sometimes'\n", "must be one of always, loopback, never"),
        ("[postgres]\nurl = 'mysql://x'\n", "must start with postgresql://"),
    ],
)
def test_limit_and_auth_errors_name_the_key(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, {}, {})
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("listener.port", "-1", "between 0 and 65535"),
        ("listener.port", "65536", "between 0 and 65535"),
        ("listener.host", "''", "must not be empty"),
        ("mqtt.max_keep_alive", "0", "between 1 and 65535"),
        ("mqtt.max_keep_alive", "65536", "between 1 and 65535"),
        ("mqtt.receive_maximum", "0", "between 1 and 65535"),
        ("mqtt.receive_maximum", "65536", "between 1 and 65535"),
        ("mqtt.max_packet_size", "0", "between 1 and 268435460"),
        ("mqtt.max_packet_size", "268435461", "between 1 and 268435460"),
        ("mqtt.topic_alias_maximum", "-1", "between 0 and 65535"),
        ("mqtt.topic_alias_maximum", "65536", "between 0 and 65535"),
        ("mqtt.maximum_qos", "3", "between 0 and 2"),
        ("mqtt.maximum_qos", "-1", "between 0 and 2"),
        ("mqtt.max_queued_messages", "0", "between 1 and 65535"),
        ("mqtt.max_queued_messages", "65536", "between 1 and 65535"),
        ("mqtt.queue_full_policy", "'drop-oldest'", "did you mean 'drop_oldest'"),
        ("mqtt.queue_full_policy", "'never'", "drop_oldest, reject_new"),
        ("mqtt.connect_timeout", "0", "greater than 0"),
        ("mqtt.connect_timeout", "-1.5", "greater than 0"),
        ("mqtt.connect_timeout", "inf", "finite"),
        ("mqtt.max_session_expiry_interval", "4294967296", "between 0 and 4294967295"),
        ("mqtt.max_client_id_length", "22", "between 23 and 65535"),
        ("storage.backend", "'redis'", "sqlite, memory"),
        ("storage.commit_interval_ms", "-1", "0 or more"),
        ("storage.data_dir", "''", "must not be empty"),
        ("log.level", "'verbose'", "debug, info, warning, error, critical"),
        ("log.format", "'xml'", "json, text"),
    ],
)
def test_out_of_range_values_name_the_key(key: str, value: str, fragment: str) -> None:
    section, _, name = key.partition(".")
    error = config_error(f"[{section}]\n{name} = {value}\n")
    assert error.key == key
    assert fragment in error.problem
    assert key in str(error)
    assert "broker.toml" in str(error)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("listener.port", "'1883'", "expected an integer, got string '1883'"),
        ("listener.port", "true", "expected an integer, got boolean true"),
        ("listener.port", "1883.0", "expected an integer, got float 1883.0"),
        ("listener.host", "1", "expected a string, got integer 1"),
        ("mqtt.retain_available", "1", "expected true or false, got integer 1"),
        ("mqtt.connect_timeout", "'10'", "expected a number"),
        ("storage.data_dir", "[]", "expected a path"),
        ("log.level", "{}", "expected a string, got a table"),
    ],
)
def test_wrong_types_in_toml_name_the_key(key: str, value: str, fragment: str) -> None:
    section, _, name = key.partition(".")
    error = config_error(f"[{section}]\n{name} = {value}\n")
    assert error.key == key
    assert fragment in error.problem


@pytest.mark.parametrize(
    ("var", "text", "key", "fragment"),
    [
        ("MQTTQ_LISTENER__PORT", "http", "listener.port", "expected an integer, got 'http'"),
        ("MQTTQ_MQTT__QUEUE_QOS0", "maybe", "mqtt.queue_qos0", "expected true or false"),
        ("MQTTQ_MQTT__CONNECT_TIMEOUT", "soon", "mqtt.connect_timeout", "expected a number"),
        ("MQTTQ_MQTT__MAX_KEEP_ALIVE", "0", "mqtt.max_keep_alive", "between 1 and 65535"),
    ],
)
def test_bad_env_values_name_the_key_and_the_variable(
    var: str, text: str, key: str, fragment: str
) -> None:
    error = config_error(env={var: text})
    assert error.key == key
    assert fragment in error.problem
    assert var in error.problem


def test_bad_override_names_the_key() -> None:
    error = config_error(listener__port=70000)
    assert error.key == "listener.port"
    assert "command line" in error.problem


@pytest.mark.parametrize(
    ("toml", "key", "suggestion"),
    [
        ("[mqtt]\nmax_keepalive = 5\n", "mqtt.max_keepalive", "'mqtt.max_keep_alive'"),
        ("[mqtt]\nport = 1884\n", "mqtt.port", "'listener.port'"),
        ("[listener]\nprot = 1884\n", "listener.prot", "'listener.port'"),
        ("[storage]\ndatadir = 'x'\n", "storage.datadir", "'storage.data_dir'"),
        ("port = 1884\n", "port", "'listener.port'"),
        ("[mqt]\nmax_keep_alive = 5\n", "mqt", "[mqtt]"),
    ],
)
def test_unknown_keys_suggest_the_closest_known_key(toml: str, key: str, suggestion: str) -> None:
    error = config_error(toml)
    assert error.key == key
    assert f"did you mean {suggestion}" in error.problem


def test_unknown_key_without_a_close_match_lists_the_section_keys() -> None:
    error = config_error("[log]\nwhatever_this_is = 1\n")
    assert error.key == "log.whatever_this_is"
    assert "known keys in [log]: level, format" in error.problem


def test_unknown_env_key_suggests_the_env_var_spelling() -> None:
    error = config_error(env={"MQTTQ_MQTT__MAX_KEEPALIVE": "5"})
    assert error.key == "mqtt.max_keepalive"
    assert "did you mean 'MQTTQ_MQTT__MAX_KEEP_ALIVE'" in error.problem


def test_unknown_override_key_is_an_error() -> None:
    error = config_error(listener__prot=1)
    assert error.key == "listener.prot"
    assert "did you mean 'listener.port'" in error.problem


def test_section_that_is_not_a_table() -> None:
    error = config_error("mqtt = 5\n")
    assert error.key == "mqtt"
    assert "must be a table [mqtt]" in error.problem


def test_toml_syntax_error_names_the_file_and_line() -> None:
    with pytest.raises(ConfigFileError) as caught:
        parse_settings("[listener]\nport = 1883\nhost = \n", {}, {}, source="/etc/broker.toml")
    message = str(caught.value)
    assert message.startswith("config file /etc/broker.toml: invalid TOML")
    assert "line 3" in message


@pytest.mark.parametrize(
    ("key", "expected"),
    [("mqtt.max_keep_alive", "MQTTQ_MQTT__MAX_KEEP_ALIVE"), ("log.level", "MQTTQ_LOG__LEVEL")],
)
def test_env_var_name(key: str, expected: str) -> None:
    assert env_var_name(key) == expected


def test_iter_keys_covers_every_field_once() -> None:
    keys = [key for key, _, _ in iter_keys()]
    assert len(keys) == len(set(keys))
    expected = set()
    for section in dataclasses.fields(Settings):
        # [[integration]] and [lake] (its typed-column tables): read by their own
        # parsers, not keys of the loader.
        if section.name in ("integration", "lake"):
            continue
        for f in dataclasses.fields(getattr(Settings(), section.name)):
            value = getattr(getattr(Settings(), section.name), f.name)
            if dataclasses.is_dataclass(value):  # [mqtt_limit.cluster] and the like
                expected |= {f"{section.name}.{f.name}.{g.name}" for g in dataclasses.fields(value)}
            elif f.name == "anonymous_acl":  # [[auth.anonymous_acl]]: tables, not a key
                continue
            else:
                expected.add(f"{section.name}.{f.name}")
    assert set(keys) == expected


def test_anonymous_acl_rules_from_toml_in_order() -> None:
    text = (
        '[[auth.anonymous_acl]]\npermission = "deny"\naction = "subscribe"\n'
        'topic = "test/nosubscribe"\n'
        '[[auth.anonymous_acl]]\npermission = "ALLOW"\naction = "all"\ntopic = "#"\n'
    )
    rules = parse_settings(text, {}, {}).auth.anonymous_acl
    assert [(r.permission, r.action, r.topic) for r in rules] == [
        ("deny", "subscribe", "test/nosubscribe"),
        ("allow", "all", "#"),
    ]
    assert parse_settings(None, {}, {}).auth.anonymous_acl == ()


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ('permission = "maybe"\naction = "all"\ntopic = "#"', "rule 1: permission must be"),
        ('permission = "deny"\naction = "read"\ntopic = "#"', "rule 1: action must be"),
        ('permission = "deny"\naction = "all"\ntopic = "a/#/b"', "not a valid topic filter"),
        ('permission = "deny"\naction = "all"', "rule 1: topic must be"),
        ('permission = "deny"\naction = "all"\ntopic = "#"\nqos = 1', "unknown key 'qos'"),
    ],
)
def test_bad_anonymous_acl_rule_names_the_key_and_rule(rule: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(f"[[auth.anonymous_acl]]\n{rule}\n", {}, {})
    assert "auth.anonymous_acl" in str(caught.value)
    assert fragment in str(caught.value)


def test_listener_tables_turn_their_listener_on() -> None:
    off = parse_settings(None, {}, {}).listener
    assert (off.tls.enabled, off.ws.enabled, off.wss.enabled) == (False, False, False)
    on = parse_settings('[listener.ws]\n[listener.wss]\ncertfile = "c"\nkeyfile = "k"\n', {}, {})
    assert (on.listener.tls.enabled, on.listener.ws.enabled, on.listener.wss.enabled) == (
        False,
        True,
        True,
    )
    assert on.listener.ws.port == 8083 and on.listener.ws.path == "/mqtt"
    env = parse_settings(None, {"MQTTQ_LISTENER_WS__ENABLED": "true"}, {}).listener.ws
    assert env.enabled


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[listener.tls]\nport = 8883\n", "listener.tls.certfile"),
        ('[listener.tls]\ncertfile = "c"\n', "listener.tls.keyfile"),
        (
            '[listener.wss]\ncertfile = "c"\nkeyfile = "k"\nmin_version = "1.1"\n',
            "listener.wss.min_version",
        ),
        ('[listener.ws]\npath = "mqtt"\n', "listener.ws.path"),
        (
            '[listener.tls]\ncertfile = "c"\nkeyfile = "k"\nidentity_as_username = true\n',
            "listener.tls.identity_as_username",
        ),
    ],
)
def test_bad_listener_settings_name_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, {}, {})
    assert key in str(caught.value)


def test_node_id_is_the_setting_else_host_and_port_else_host_and_pid() -> None:
    named = parse_settings('[cluster]\nnode_id = "node-1"\n', {}, {})
    assert node_id_of(named) == "node-1"
    host = "".join(
        c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in socket.gethostname()
    )
    on_port = parse_settings("[listener]\nport = 1884\n", {}, {})
    assert node_id_of(on_port) == f"{host}-1884"
    any_port = parse_settings("[listener]\nport = 0\n", {}, {})
    assert node_id_of(any_port) == f"{host}-pid{os.getpid()}"


def test_node_id_names_kafka_topics_so_it_holds_their_characters_only() -> None:
    with pytest.raises(ConfigError, match=r"cluster\.node_id.*letters, digits"):
        parse_settings('[cluster]\nnode_id = "node 1"\n', {}, {})
    with pytest.raises(ConfigError, match=r"cluster\.node_id.*at most 64"):
        parse_settings(f'[cluster]\nnode_id = "{"n" * 65}"\n', {}, {})


def test_integration_tables_are_kept_as_given() -> None:
    settings = parse_settings(
        '[[integration]]\nname = "hook"\ntype = "http"\nfilters = ["a/#"]\n'
        'url = "http://127.0.0.1:1/x"\nheaders = { Authorization = "Bearer ${T}" }\n',
        {},
        {},
    )
    assert settings.integration == (
        {
            "name": "hook",
            "type": "http",
            "filters": ["a/#"],
            "url": "http://127.0.0.1:1/x",
            "headers": {"Authorization": "Bearer ${T}"},
        },
    )
    assert Settings().integration == ()


@pytest.mark.parametrize(
    ("text", "key"),
    [("integration = 3", "integration"), ("integration = [1]", "integration[0]")],
)
def test_integration_must_be_an_array_of_tables(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, {}, {})
    assert caught.value.key == key
