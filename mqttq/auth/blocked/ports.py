"""The blocked-clients store port: where the entries live between restarts, and how a
change made elsewhere (another node, `mqttq blocked add` on the store directly) reaches
a running broker.

Adapters: SQLite in the embedded broker's data dir (`mqttq.storage.sqlite.blocked`) and
a compacted Kafka topic shared by every node of a cluster (`mqttq.storage.kafka.blocked`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mqttq.auth.blocked.entries import BlockedClient
from mqttq.errors import StorageError

__all__ = ["BlockedStore", "BlockedStoreError", "Changed"]

Changed = Callable[[str, BlockedClient | None], None]
"""Called on the event loop with (entry id, entry) for an entry added or replaced
elsewhere, (entry id, None) for one removed elsewhere."""


class BlockedStoreError(StorageError):
    """The store cannot be read or written (the message names it and why)."""


class BlockedStore(Protocol):
    """Blocked-client entries, durable and shared as the adapter promises."""

    where: str
    """Where the entries live, for messages (a file, a Kafka topic)."""

    async def open(self) -> None:
        """Open (creating what is missing); `load` answers once this returns."""
        ...

    async def close(self) -> None:
        """Stop following changes and release the store; idempotent."""
        ...

    async def load(self) -> list[BlockedClient]:
        """Every stored entry (expired ones too, until removed)."""
        ...

    async def put(self, entry: BlockedClient) -> None:
        """Store `entry` (replacing the one with its id); durable when it returns."""
        ...

    async def delete(self, entry_id: str) -> bool:
        """Remove the entry; False when there was none."""
        ...

    def follow(self, changed: Changed) -> None:
        """From now until `close`, call `changed` for every change made elsewhere (not
        through this object)."""
        ...
