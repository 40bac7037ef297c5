"""`IntegrationSpec`: one `[[integration]]` table (or admin API object), checked.

The keys every integration has are read here; the sink's own keys are read by its settings
class (`SinkType.settings_class.from_table`), found through `SINK_TYPES` by the `type` key.
Sinks are imported only when an integration of their type exists, so that a broker without
a Kafka integration never loads confluent-kafka for it.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol

from mqttq.errors import ConfigError, ProtocolError
from mqttq.integrations.payload_filter import PayloadFilter
from mqttq.integrations.sink import Sink
from mqttq.routing.topics import validate_topic_filter

NAME_PATTERN: Final = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


class SinkSettings(Protocol):
    """What every sink's settings class offers (see sinks/*.py)."""

    KEYS: ClassVar[frozenset[str]]

    def public(self) -> dict[str, Any]: ...


class _SettingsClass(Protocol):
    KEYS: ClassVar[frozenset[str]]

    def from_table(self, table: Mapping[str, Any], where: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class SinkType:
    """Where a sink type's code lives: `module` holds `settings` and `sink` classes."""

    module: str
    settings: str
    sink: str
    address: str
    """The key that says where the sink is: the field to blame when it cannot be reached."""

    def settings_class(self) -> _SettingsClass:
        return getattr(importlib.import_module(self.module), self.settings)  # type: ignore[no-any-return]

    def make_sink(self, settings: Any, name: str) -> Sink:
        sink_class = getattr(importlib.import_module(self.module), self.sink)
        return sink_class(settings, name)  # type: ignore[no-any-return]


SINK_TYPES: Final[dict[str, SinkType]] = {
    "http": SinkType("mqttq.integrations.sinks.http", "HttpSinkSettings", "HttpSink", "url"),
    "kafka": SinkType(
        "mqttq.integrations.sinks.kafka", "KafkaSinkSettings", "KafkaSink", "bootstrap_servers"
    ),
    "postgres": SinkType(
        "mqttq.integrations.sinks.postgres", "PostgresSinkSettings", "PostgresSink", "url"
    ),
    "mqtt": SinkType("mqttq.integrations.sinks.mqtt", "MqttSinkSettings", "MqttSink", "host"),
    "lake": SinkType("mqttq.integrations.sinks.lake", "LakeSinkSettings", "LakeSink", "path"),
}
"""Every sink type by the name `type = "..."` gives it: read by validation, the CLI's help
and the worker that builds the sink."""

COMMON_KEYS: Final = frozenset(
    {
        "name",
        "type",
        "tenant",
        "filters",
        "payload_filter",
        "enabled",
        "batch_size",
        "linger_ms",
        "retry_initial_ms",
        "retry_max_ms",
        "max_in_flight",
        "max_backlog_mb",
        "events",
    }
)

EVENTS_PREFIX: Final = "$events/"
"""Client events are messages on `$events/<kind>/<client id>` (mqttq/broker/events.py)."""


def event_filter(kind: str) -> str:
    """The topic filter of one kind of client event, for any client."""
    return f"{EVENTS_PREFIX}{kind}/+"


EVENT_KINDS: Final = (
    "connected",
    "disconnected",
    "subscribed",
    "unsubscribed",
    "session_expired",
    "message_dropped",
)
"""Client events an integration may take besides messages (`events = ["connected", ...]`)."""


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    """How a worker batches and retries."""

    batch_size: int = 100
    """Most deliveries per `Sink.send` (1: one request per message)."""
    linger_ms: int = 5
    """How long a batch waits for more deliveries once it has one."""
    retry_initial_ms: int = 100
    """First wait after a failed batch; doubles up to `retry_max_ms`, with full jitter."""
    retry_max_ms: int = 30_000
    max_in_flight: int = 1_000
    """Deliveries taken from the backlog and not yet settled (bounds memory)."""
    max_backlog_mb: int = 1024
    """Embedded mode: the most the integration's log keeps undelivered on disk (MiB); a
    message past it is not kept, and counted in `dropped`."""


_DEFAULTS: Final = DeliverySettings()


@dataclass(frozen=True, slots=True)
class IntegrationSpec:
    """One integration as configured: the common part and its sink's settings."""

    name: str
    type: str
    tenant: str
    filters: tuple[str, ...]
    settings: Any
    """The sink's settings object (`SINK_TYPES[type].settings_class()`)."""
    payload_filter: PayloadFilter | None = None
    enabled: bool = True
    delivery: DeliverySettings = _DEFAULTS
    events: tuple[str, ...] = ()

    @property
    def topic_filters(self) -> tuple[str, ...]:
        """What the integration takes: its filters, and those of the events it asks for."""
        return (*self.filters, *(event_filter(kind) for kind in self.events))

    @property
    def direction(self) -> str:
        """ "in" for a bridge that brings messages in, else "out"."""
        return str(getattr(self.settings, "direction", "out"))

    def public(self) -> dict[str, Any]:
        """The spec as the admin API and `integration show` print it (no secrets)."""
        body: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "tenant": self.tenant,
            "filters": list(self.filters),
            "enabled": self.enabled,
            "batch_size": self.delivery.batch_size,
            "linger_ms": self.delivery.linger_ms,
            "retry_initial_ms": self.delivery.retry_initial_ms,
            "retry_max_ms": self.delivery.retry_max_ms,
            "max_in_flight": self.delivery.max_in_flight,
            "max_backlog_mb": self.delivery.max_backlog_mb,
        }
        if self.payload_filter is not None:
            body["payload_filter"] = self.payload_filter.text
        if self.events:
            body["events"] = list(self.events)
        body.update(self.settings.public())
        return body


def parse_integration(table: Mapping[str, Any], where: str) -> IntegrationSpec:
    """Check one integration table; ConfigError names `<where>.<key>` and the problem."""
    if not isinstance(table, Mapping):
        raise ConfigError(where, f"must be a table, got {type(table).__name__}")
    name = _string(table, "name", where, required=True)
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"{where}.name", f"use lowercase letters, digits and '-' (at most 64), got {name!r}"
        )
    kind = _string(table, "type", where, required=True)
    sink_type = SINK_TYPES.get(kind)
    if sink_type is None:
        raise ConfigError(
            f"{where}.type", f"unknown type {kind!r}; known types: {', '.join(SINK_TYPES)}"
        )
    settings_class = sink_type.settings_class()
    known = COMMON_KEYS | settings_class.KEYS
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}.{key}", f"unknown key for a {kind} integration{hint}")
    tenant = _string(table, "tenant", where) or "default"
    filters = _filters(table, where)
    events = _events(table, where)
    if not filters and not events:
        raise ConfigError(f"{where}.filters", "give at least one topic filter (or events)")
    payload_filter = None
    text = _string(table, "payload_filter", where)
    if text:
        try:
            payload_filter = PayloadFilter.parse(text)
        except ValueError as exc:
            raise ConfigError(f"{where}.payload_filter", str(exc)) from None
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.enabled", f"must be true or false, got {enabled!r}")
    delivery = DeliverySettings(
        batch_size=_int(table, "batch_size", where, (1, 10_000)),
        linger_ms=_int(table, "linger_ms", where, (0, 60_000)),
        retry_initial_ms=_int(table, "retry_initial_ms", where, (1, 3_600_000)),
        retry_max_ms=_int(table, "retry_max_ms", where, (1, 3_600_000)),
        max_in_flight=_int(table, "max_in_flight", where, (1, 1_000_000)),
        max_backlog_mb=_int(table, "max_backlog_mb", where, (1, 1 << 30)),
    )
    if delivery.retry_max_ms < delivery.retry_initial_ms:
        raise ConfigError(f"{where}.retry_max_ms", "must be at least retry_initial_ms")
    if delivery.max_in_flight < delivery.batch_size:
        raise ConfigError(f"{where}.max_in_flight", "must be at least batch_size")
    settings = settings_class.from_table(table, where)
    return IntegrationSpec(
        name, kind, tenant, filters, settings, payload_filter, enabled, delivery, events
    )


def parse_integrations(
    tables: Sequence[Any], where: str = "integration"
) -> tuple[IntegrationSpec, ...]:
    """Check every `[[integration]]` table; names must be unique."""
    if not isinstance(tables, Sequence) or isinstance(tables, (str, bytes)):
        raise ConfigError(where, "must be an array of tables [[integration]]")
    specs: list[IntegrationSpec] = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        spec = parse_integration(table, f"{where}[{index}]")
        if spec.name in seen:
            raise ConfigError(f"{where}[{index}].name", f"{spec.name!r} is already used")
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def _string(table: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = table.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{where}.{key}", "is required")
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}", f"must be a string, got {type(value).__name__}")
    return value


def _int(table: Mapping[str, Any], key: str, where: str, bounds: tuple[int, int]) -> int:
    low, high = bounds
    value = table.get(key, getattr(_DEFAULTS, key))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key}", f"must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{where}.{key}", f"must be between {low} and {high}, got {value}")
    return value


def _filters(table: Mapping[str, Any], where: str) -> tuple[str, ...]:
    raw = table.get("filters", [])
    if isinstance(raw, str) or not isinstance(raw, list):
        raise ConfigError(f"{where}.filters", 'must be an array of topic filters, e.g. ["a/#"]')
    for topic_filter in raw:
        if not isinstance(topic_filter, str):
            raise ConfigError(f"{where}.filters", f"{topic_filter!r} is not a string")
        try:
            validate_topic_filter(topic_filter)
        except ProtocolError as exc:
            raise ConfigError(
                f"{where}.filters", f"{topic_filter!r} is not a valid topic filter: {exc.message}"
            ) from None
        if topic_filter.startswith("$share/"):
            raise ConfigError(
                f"{where}.filters", f"{topic_filter!r}: an integration takes no $share filter"
            )
    return tuple(raw)


def _events(table: Mapping[str, Any], where: str) -> tuple[str, ...]:
    raw = table.get("events", [])
    if isinstance(raw, str) or not isinstance(raw, list):
        raise ConfigError(f"{where}.events", f"must be an array of {', '.join(EVENT_KINDS)}")
    for kind in raw:
        if kind not in EVENT_KINDS:
            raise ConfigError(
                f"{where}.events", f"unknown event {kind!r}; known: {', '.join(EVENT_KINDS)}"
            )
    return tuple(raw)
