"""Every storage backend's name, declared once, with where its adapter lives.

A setting that picks a backend (`storage.backend`, `storage.device`, `storage.log`,
`auth.store`) takes one of the names listed here for its key: config validation
(`mqttq.config`) accepts exactly these names, `mqttq serve --help` lists them, and the
composition root (`mqttq.cli.serve`) imports the adapter a name stands for with `load`, so
that nothing Redis, Kafka or PostgreSQL is imported unless the settings name it. A new
backend is one row here, one adapter sub-package, and its arguments in the composition root.

References are "module:attribute" strings (uvicorn's `import_from_string`); None marks a
name that needs no adapter of its own (`storage.device = "sqlite"` keeps DEVICE queues in
the backend above, `storage.log = "none"` routes at once).
"""

from __future__ import annotations

import importlib
from typing import Any, Final

__all__ = ["BACKENDS", "load", "names"]

BACKENDS: Final[dict[str, dict[str, str | None]]] = {
    "storage.backend": {
        "sqlite": "mqttq.storage.sqlite.store:SqliteStorage",
        "memory": "mqttq.storage.memory:MemoryStorage",
    },
    "storage.device": {
        "sqlite": None,
        "redis": "mqttq.storage.redis.queue:RedisMessageQueue",
    },
    "storage.log": {
        "none": None,
        "kafka": "mqttq.storage.kafka.message_log:KafkaMessageLog",
    },
    "auth.store": {
        "sqlite": "mqttq.storage.sqlite.auth:SqliteAuthStore",
        "postgres": "mqttq.storage.postgres.auth:PostgresAuthStore",
    },
}
"""Setting key -> {backend name -> "module:attribute" of its adapter, or None}; the first
name of each key is its default."""


def names(key: str) -> tuple[str, ...]:
    """The backend names `key` accepts, its default first."""
    return tuple(BACKENDS[key])


def load(key: str, name: str) -> Any:
    """The adapter class `name` stands for under `key` (imported now, not before).

    Raises KeyError for a name the key does not list, and ValueError for a name that needs
    no adapter of its own."""
    reference = BACKENDS[key][name]
    if reference is None:
        raise ValueError(f"{key} = {name!r} has no adapter of its own")
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)
