"""The broker's settings: `schema.py` is the frozen tree (one dataclass per section of
`broker.toml`), `load.py` builds it once from defaults, the TOML file, `MQTTQ_*` variables and
flags and validates it with one message naming the bad key (the keys in `keys.py`, each
value's type in `value_types.py`, its check in `validators.py`, checks across keys in
`cross_checks.py`, the `[[integration]]`, `[lake]` and ACL rule tables in `tables.py`).

Import from here (`from mqttq.config import load_settings, Settings`); the allowed names of
a setting that picks a backend come from `mqttq.storage.registry`.
"""

from __future__ import annotations

from mqttq.config.keys import ENV_PREFIX, OPTIONAL_LISTENERS, TLS_LISTENERS, env_var_name, iter_keys
from mqttq.config.load import ConfigFileError, load_settings, parse_settings
from mqttq.config.schema import (
    AdminSettings,
    AuthSettings,
    ClusterSettings,
    KafkaApplicationSettings,
    KafkaSettings,
    ListenerSettings,
    LogSettings,
    MqttLimitSettings,
    MqttSettings,
    PostgresSettings,
    RedisSettings,
    Settings,
    StorageSettings,
    TlsListenerSettings,
    WsListenerSettings,
    WssListenerSettings,
)
from mqttq.config.validators import (
    ACK_STRATEGIES,
    ANONYMOUS_MODES,
    AUTH_STORES,
    DEVICE_STORES,
    LOG_FORMATS,
    LOG_LEVELS,
    MAX_PACKET_SIZE_LIMIT,
    MESSAGE_LOGS,
    QUEUE_FULL_POLICIES,
    STORAGE_BACKENDS,
    TLS_VERSIONS,
)

__all__ = [
    "ACK_STRATEGIES",
    "ANONYMOUS_MODES",
    "AUTH_STORES",
    "DEVICE_STORES",
    "ENV_PREFIX",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "MAX_PACKET_SIZE_LIMIT",
    "MESSAGE_LOGS",
    "OPTIONAL_LISTENERS",
    "QUEUE_FULL_POLICIES",
    "STORAGE_BACKENDS",
    "TLS_LISTENERS",
    "TLS_VERSIONS",
    "AdminSettings",
    "AuthSettings",
    "ClusterSettings",
    "ConfigFileError",
    "KafkaApplicationSettings",
    "KafkaSettings",
    "ListenerSettings",
    "LogSettings",
    "MqttLimitSettings",
    "MqttSettings",
    "PostgresSettings",
    "RedisSettings",
    "Settings",
    "StorageSettings",
    "TlsListenerSettings",
    "WsListenerSettings",
    "WssListenerSettings",
    "env_var_name",
    "iter_keys",
    "load_settings",
    "parse_settings",
]
