"""The frozen settings tree, built once from broker.toml, MQTTQ_* env vars and CLI flags.

Precedence (lowest first): defaults, the TOML file, environment variables
(`MQTTQ_<SECTION>__<KEY>`, e.g. `MQTTQ_MQTT__MAX_KEEP_ALIVE=300`), CLI flags.
Validation names the offending key: `ConfigError("mqtt.max_keep_alive", "must be ...")`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """`[listener]`: the MQTT TCP listener."""

    host: str = "127.0.0.1"
    port: int = 1883


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """`[mqtt]`: protocol limits and the capabilities advertised in CONNACK."""

    max_keep_alive: int = 600
    """Server keep alive cap in seconds; a larger (or 0) client value is replaced (5.0)."""
    receive_maximum: int = 1024
    """Server Receive Maximum: QoS>0 PUBLISHes a client may have unacknowledged."""
    max_packet_size: int = 1_048_576
    """Largest packet accepted from a client (bytes, whole packet)."""
    topic_alias_maximum: int = 64
    """Topic aliases a 5.0 client may use towards the broker; 0 disables."""
    maximum_qos: int = 2
    retain_available: bool = True
    wildcard_subscription_available: bool = True
    shared_subscription_available: bool = True
    subscription_identifier_available: bool = True
    max_queued_messages: int = 10_000
    """Per-session limit of the persistent queue."""
    queue_full_policy: str = "drop_oldest"
    """drop_oldest | reject_new (see storage.ports.QueueFullPolicy)."""
    queue_qos0: bool = False
    """Also queue QoS 0 messages for offline persistent sessions."""
    connect_timeout: float = 10.0
    """Seconds a new TCP connection has to send CONNECT."""
    max_session_expiry_interval: int = 0xFFFFFFFF
    """Cap on the Session Expiry Interval a client asks for (seconds)."""
    max_client_id_length: int = 65535
    allow_empty_client_id: bool = True
    """Assign an id to a client that sends none (5.0, and 3.1.1 with clean session)."""


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """`[storage]`: where sessions, retained messages and queues live."""

    data_dir: Path = field(default_factory=lambda: Path("mqttq-data"))
    backend: str = "sqlite"
    """sqlite (durable, default) | memory (nothing survives a restart)."""
    commit_interval_ms: float = 2.0
    """Group commit: how long the writer waits to gather more writes into one commit."""


@dataclass(frozen=True, slots=True)
class LogSettings:
    """`[log]`: structured logs on stderr."""

    level: str = "warning"
    format: str = "json"
    """json | text."""


@dataclass(frozen=True, slots=True)
class Settings:
    listener: ListenerSettings = field(default_factory=ListenerSettings)
    mqtt: MqttSettings = field(default_factory=MqttSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    log: LogSettings = field(default_factory=LogSettings)
