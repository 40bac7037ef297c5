"""Which store a broker keeps its integrations in (the broker and the CLI both ask here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqttq.integrations.stores.postgres import PostgresIntegrationStore
from mqttq.integrations.stores.sqlite import SqliteIntegrationStore

if TYPE_CHECKING:
    from mqttq.config import Settings

__all__ = ["store_for"]


def store_for(settings: Settings) -> SqliteIntegrationStore | PostgresIntegrationStore:
    """The store a broker with `settings` keeps its integrations in, not opened: PostgreSQL
    (`[postgres] url`) with the Kafka message log, where every node shares it; else SQLite
    in the data dir (with the log but no PostgreSQL, each node keeps its own). The broker
    and the `mqttq integration` commands both ask here."""
    if settings.storage.log == "kafka" and settings.postgres.url:
        return PostgresIntegrationStore(settings.postgres.url)
    return SqliteIntegrationStore.in_data_dir(settings.storage.data_dir)
