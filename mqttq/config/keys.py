"""The dotted keys of broker.toml: its sections (`[listener.tls]`), each key's type and
default as `schema.py` declares them, the environment variable spelling a key
(`MQTTQ_<SECTION>__<KEY>`), and the "did you mean" hint for a key that does not exist.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Final, get_type_hints

from mqttq.config.schema import (
    AdminSettings,
    AuthSettings,
    BlockedSettings,
    ClusterSettings,
    EventsSettings,
    HttpAuthSettings,
    JwtAuthSettings,
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
    SysSettings,
    TlsListenerSettings,
    WsListenerSettings,
    WssListenerSettings,
    X509AuthSettings,
)
from mqttq.limits.quota import Quota

__all__ = [
    "ENV_PREFIX",
    "ENV_SECTIONS",
    "OPTIONAL_LISTENERS",
    "RULE_LISTS",
    "SECTIONS",
    "SUBSECTIONS",
    "TLS_LISTENERS",
    "TYPES",
    "env_var_name",
    "iter_keys",
    "suggest",
]

ENV_PREFIX: Final = "MQTTQ_"
TLS_LISTENERS: Final = ("listener.tls", "listener.wss")
"""Listener sections that need a certificate and key."""
OPTIONAL_LISTENERS: Final = ("listener.tls", "listener.ws", "listener.wss")
"""Listener sections that are off unless present."""

# Each section's dataclass; its fields (but the subsections and rule lists) are its keys.
SECTIONS: Final[dict[str, type]] = {
    "listener": ListenerSettings,
    "listener.tls": TlsListenerSettings,
    "listener.ws": WsListenerSettings,
    "listener.wss": WssListenerSettings,
    "mqtt": MqttSettings,
    "storage": StorageSettings,
    "redis": RedisSettings,
    "kafka": KafkaSettings,
    "kafka.application": KafkaApplicationSettings,
    "cluster": ClusterSettings,
    "log": LogSettings,
    "auth": AuthSettings,
    "auth.jwt": JwtAuthSettings,
    "auth.http": HttpAuthSettings,
    "auth.x509": X509AuthSettings,
    "postgres": PostgresSettings,
    "admin": AdminSettings,
    "mqtt_limit": MqttLimitSettings,
    "mqtt_limit.cluster": Quota,
    "mqtt_limit.tenant": Quota,
    "sys": SysSettings,
    "events": EventsSettings,
    "blocked": BlockedSettings,
}
SUBSECTIONS: Final = {
    "listener": ("tls", "ws", "wss"),
    "mqtt_limit": ("cluster", "tenant"),
    "kafka": ("application",),
    "auth": ("jwt", "http", "x509"),
}
"""Sections holding tables of their own (`[mqtt_limit.cluster]`)."""
RULE_LISTS: Final = {"auth": ("anonymous_acl",)}
"""Keys holding arrays of ACL rule tables (`[[auth.anonymous_acl]]`): TOML only."""
TYPES: Final[dict[str, dict[str, type]]] = {
    name: {
        f.name: get_type_hints(cls)[f.name]
        for f in fields(cls)
        if f.name not in SUBSECTIONS.get(name, ()) and f.name not in RULE_LISTS.get(name, ())
    }
    for name, cls in SECTIONS.items()
}
"""Each section's keys with their types (`TYPES["mqtt"]["max_keep_alive"] is int`)."""
_ALL_KEYS: Final = tuple(f"{s}.{k}" for s, keys in TYPES.items() for k in keys)
"""Every dotted key, in section order (`mqtt.max_keep_alive`)."""
ENV_SECTIONS: Final = {name.replace(".", "_"): name for name in SECTIONS}
"""Environment spelling of a section (`MQTTQ_MQTT_LIMIT_CLUSTER__...`) -> its name."""


def env_var_name(key: str) -> str:
    """The environment variable for a dotted key: `mqtt.max_keep_alive` ->
    `MQTTQ_MQTT__MAX_KEEP_ALIVE`."""
    section, _, name = key.rpartition(".")
    return f"{ENV_PREFIX}{section.upper().replace('.', '_')}__{name.upper()}"


def iter_keys() -> Iterator[tuple[str, type, object]]:
    """Every dotted key with its type and default, in section order (for docs and tests)."""
    defaults = Settings()
    for key in _ALL_KEYS:
        section, _, name = key.rpartition(".")
        owner: object = defaults
        for part in section.split("."):
            owner = getattr(owner, part)
        yield key, TYPES[section][name], getattr(owner, name)


def suggest(
    dotted: str, *, by_name: bool = False, spell: Callable[[str], str] | None = None
) -> str:
    """A hint for an unknown key: the closest known key, else the section's keys.

    `by_name`: `dotted` is a bare name found outside any section (`port = 1`).
    """
    if by_name:
        section, name = "", dotted
    else:
        section, _, name = dotted.rpartition(".")
    close = [key for key in _ALL_KEYS if key.rpartition(".")[2] == name]
    if not close:
        close = difflib.get_close_matches(dotted, _ALL_KEYS, n=1, cutoff=0.6)
    if not close and section in TYPES:
        matches = difflib.get_close_matches(name, list(TYPES[section]), n=1, cutoff=0.5)
        close = [f"{section}.{key}" for key in matches]
    if close:
        return f"; did you mean {(spell or str)(close[0])!r}?"
    if section in TYPES:
        return f"; known keys in [{section}]: " + ", ".join(TYPES[section])
    return "; known sections: " + ", ".join(SECTIONS)
