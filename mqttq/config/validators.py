"""What each key's value may be, checked after its type (`value_types`): ranges, choices
(with "did you mean"), URLs, paths, regular expressions, networks. `CHECKS` maps a dotted
key to its check, which returns None or the problem (`must be ..., got ...`); `NORMALIZE`
maps a key to the spelling it is stored in (`log.level = "INFO"` -> `info`).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from mqttq.auth.providers.chain import PROVIDER_NAMES
from mqttq.config.keys import OPTIONAL_LISTENERS, SUBSECTIONS, TLS_LISTENERS, TYPES
from mqttq.storage import registry

__all__ = [
    "ACK_STRATEGIES",
    "ANONYMOUS_MODES",
    "AUTH_STORES",
    "CHECKS",
    "DEVICE_STORES",
    "JWT_ALGORITHMS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "MAX_PACKET_SIZE_LIMIT",
    "MESSAGE_LOGS",
    "NORMALIZE",
    "QUEUE_FULL_POLICIES",
    "STORAGE_BACKENDS",
    "TLS_VERSIONS",
]

LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS: Final = ("json", "text")
# The names of backends come from the one registry (and `auth.store`'s below).
STORAGE_BACKENDS: Final = registry.names("storage.backend")
DEVICE_STORES: Final = registry.names("storage.device")
MESSAGE_LOGS: Final = registry.names("storage.log")
ACK_STRATEGIES: Final = ("retry_all", "skip_all")
QUEUE_FULL_POLICIES: Final = ("drop_oldest", "reject_new")
ANONYMOUS_MODES: Final = ("always", "loopback", "never")
AUTH_STORES: Final = registry.names("auth.store")
MAX_PACKET_SIZE_LIMIT: Final = 268_435_460
"""Largest possible MQTT packet: 268,435,455 bytes of remaining length + 5 header bytes."""
TLS_VERSIONS: Final = ("1.2", "1.3")


def _in_range(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if low <= value <= high:
            return None
        return f"must be between {low} and {high}, got {value}"

    return check


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value in choices:
            return None
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"must be one of {', '.join(choices)}, got {value!r}{hint}"

    return check


def _positive(value: Any) -> str | None:
    return None if value > 0 else f"must be greater than 0, got {value}"


def _not_negative(value: Any) -> str | None:
    return None if value >= 0 else f"must be 0 or more, got {value}"


def _not_empty(value: Any) -> str | None:
    return None if str(value).strip() else "must not be empty"


def _url_path(value: Any) -> str | None:
    text = str(value)
    if text.startswith("/") and not any(c.isspace() or c in "?#" for c in text):
        return None
    return f"must be a URL path starting with '/' (no spaces, '?' or '#'), got {value!r}"


def _redis_url(value: Any) -> str | None:
    text = str(value)
    if not text.startswith(("redis://", "rediss://", "unix://")):
        return f"must start with redis://, rediss:// or unix://, got {value!r}"
    try:
        _ = urllib.parse.urlsplit(text).port  # raises as redis-py's URL parser would
    except ValueError:
        return f"must give a port 0..65535 as redis://HOST:PORT/DB, got {value!r}"
    return None


def _postgres_url(value: Any) -> str | None:
    if not value or str(value).startswith(("postgresql://", "postgres://")):
        return None
    return f"must start with postgresql:// or postgres://, got {value!r}"


_KAFKA_TOPIC_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
)


def _kafka_name_part(value: Any, most: int) -> str | None:
    """A part of Kafka topic names: [a-zA-Z0-9._-], at most `most` characters (a topic name
    holds 249: room is left for the rest)."""
    if set(str(value)) - _KAFKA_TOPIC_CHARS:
        return f"may hold only letters, digits, '.', '_' and '-', got {value!r}"
    if len(str(value)) > most:
        return f"must be at most {most} characters, got {len(str(value))}"
    return None


def _kafka_topic_prefix(value: Any) -> str | None:
    return _kafka_name_part(value, 100)


def _node_id(value: Any) -> str | None:
    # It names Kafka topics (`<prefix>msg.downlink.basic.<node_id>`).
    return _kafka_name_part(value, 64)


def _kafka_retention(value: Any) -> str | None:
    return None if value == -1 or value > 0 else f"must be -1 (forever) or > 0, got {value}"


JWT_ALGORITHMS: Final = (
    *(f"{family}{bits}" for family in ("HS", "RS", "ES", "PS") for bits in (256, 384, 512)),
    "EdDSA",
)
"""What `auth.jwt.algorithms` may list (never `none`)."""


def _providers(value: Any) -> str | None:
    if not value:
        return "must name at least one provider"
    for name in value:
        if name not in PROVIDER_NAMES:
            return _one_of(*PROVIDER_NAMES)(name)
    if len(set(value)) != len(value):
        return f"names a provider twice: {list(value)}"
    return None


def _jwt_algorithms(value: Any) -> str | None:
    for name in value:
        if name not in JWT_ALGORITHMS:
            if name.lower() == "none":
                return "must not list 'none' (unsigned tokens are never accepted)"
            return _one_of(*JWT_ALGORITHMS)(name)
    return None


def _http_url(value: Any) -> str | None:
    if not value or str(value).startswith(("http://", "https://")):
        return None
    return f"must start with http:// or https://, got {value!r}"


def _http_headers(value: Any) -> str | None:
    for header in value:
        name, colon, _ = str(header).partition(":")
        if not colon or not name.strip() or any(c.isspace() for c in name.strip()):
            return f'each header must read "Name: value", got {header!r}'
    return None


def _cn_regex(value: Any) -> str | None:
    if not value:
        return None
    try:
        pattern = re.compile(value)
    except re.error as exc:
        return f"is not a regular expression: {exc}"
    if "cn" not in pattern.groupindex:
        return "needs a named group (?P<cn>...) for the part matched to credentials"
    return None


def _cidrs(value: Any) -> str | None:
    for cidr in value:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            return f"each entry must be an address or network (CIDR), got {cidr!r}"
    return None


def _event_topic(value: Any) -> str | None:
    text = str(value)
    if "{kind}" not in text or "{client_id}" not in text:
        return f"must hold {{kind}} and {{client_id}}, got {value!r}"
    if any(c in text for c in "+#\0"):
        return f"must not hold '+', '#' or NUL, got {value!r}"
    return None


NORMALIZE: Final[dict[str, Callable[[Any], Any]]] = {
    "storage.log": str.lower,
    "kafka.application.ack_strategy": str.lower,
    "log.level": str.lower,
    "log.format": str.lower,
    "auth.anonymous": str.lower,
    "auth.store": str.lower,
}
"""Keys whose value is stored in one spelling (lower case), before its check."""

CHECKS: Final[dict[str, Callable[[Any], str | None]]] = {
    "listener.host": _not_empty,
    "listener.port": _in_range(0, 65535),
    **{f"{name}.port": _in_range(0, 65535) for name in OPTIONAL_LISTENERS},
    **{f"{name}.min_version": _one_of(*TLS_VERSIONS) for name in TLS_LISTENERS},
    "listener.ws.path": _url_path,
    "listener.proxy_trusted": _cidrs,
    "listener.proxy_header_timeout": _positive,
    "sys.interval": _not_negative,
    "blocked.failed_connections": _in_range(0, 1_000_000),
    "blocked.purge_interval": _positive,
    "events.topic": _event_topic,
    "listener.wss.path": _url_path,
    "mqtt.max_keep_alive": _in_range(1, 65535),
    "mqtt.receive_maximum": _in_range(1, 65535),
    "mqtt.max_packet_size": _in_range(1, MAX_PACKET_SIZE_LIMIT),
    "mqtt.topic_alias_maximum": _in_range(0, 65535),
    "mqtt.maximum_qos": _in_range(0, 2),
    "mqtt.max_queued_messages": _in_range(1, 65535),
    "mqtt.queue_full_policy": _one_of(*QUEUE_FULL_POLICIES),
    "mqtt.connect_timeout": _positive,
    "mqtt.max_session_expiry_interval": _in_range(0, 0xFFFFFFFF),
    # A server must accept client ids of 1..23 bytes [MQTT-3.1.3-5]; the field is 2 bytes.
    "mqtt.max_client_id_length": _in_range(23, 65535),
    "storage.data_dir": _not_empty,
    "storage.backend": _one_of(*STORAGE_BACKENDS),
    "storage.commit_interval_ms": _not_negative,
    "storage.device": _one_of(*DEVICE_STORES),
    "redis.url": _redis_url,
    "redis.default_ttl": _positive,
    "redis.flush_commands": _positive,
    "redis.flush_interval_ms": _not_negative,
    "storage.log": _one_of(*MESSAGE_LOGS),
    "kafka.topic_prefix": _kafka_topic_prefix,
    "kafka.produce_timeout_ms": _positive,
    "kafka.msg_all_partitions": _in_range(1, 10_000),
    "kafka.application.max_poll_records": _in_range(1, 100_000),
    "kafka.application.pack_timeout_ms": _positive,
    "kafka.application.ack_strategy": _one_of(*ACK_STRATEGIES),
    "kafka.application.retries": _not_negative,
    "kafka.application.topic_retention_ms": _kafka_retention,
    "kafka.application.topic_segment_bytes": _in_range(14, 2**31 - 1),
    "kafka.application.shared_topic_partitions": _in_range(1, 10_000),
    "kafka.application.high_watermark": _positive,
    "kafka.application.low_watermark": _not_negative,
    "kafka.application.flush_every": _in_range(1, 100_000),
    "cluster.node_id": _node_id,
    "cluster.heartbeat_interval_ms": _in_range(100, 600_000),
    "log.level": _one_of(*LOG_LEVELS),
    "log.format": _one_of(*LOG_FORMATS),
    "auth.anonymous": _one_of(*ANONYMOUS_MODES),
    "auth.store": _one_of(*AUTH_STORES),
    "auth.providers": _providers,
    "auth.cache_ttl": _not_negative,
    "auth.jwt.algorithms": _jwt_algorithms,
    "auth.jwt.token_field": _one_of("password", "username"),
    "auth.jwt.jwks_url": _http_url,
    "auth.jwt.jwks_refresh": _positive,
    "auth.jwt.leeway": _not_negative,
    "auth.http.url": _http_url,
    "auth.http.timeout": _positive,
    "auth.http.headers": _http_headers,
    "auth.http.on_error": _one_of("deny", "skip"),
    "auth.http.error_log_interval": _positive,
    "auth.x509.cn_regex": _cn_regex,
    "postgres.url": _postgres_url,
    "admin.host": _not_empty,
    "admin.port": _in_range(0, 65535),
    "admin.max_request_rate": _positive,
    "admin.session_idle_timeout": _in_range(60, 30 * 86_400),
    "admin.sample_interval": _in_range(1, 60),
    "mqtt_limit.rate_wait_ms": _not_negative,
    "mqtt_limit.burst_seconds": _positive,
    "mqtt_limit.max_tcp_connection_rate": _not_negative,
    **{
        f"mqtt_limit.{layer}.{name}": _not_negative
        for layer in SUBSECTIONS["mqtt_limit"]
        for name in TYPES[f"mqtt_limit.{layer}"]
    },
}
"""Each key's check: None for a good value, else the problem (`must be ..., got ...`)."""
