"""CompositeStorage: sessions and retained messages in one store, queues in another.

The distributed layout of ARCHITECTURE.md section 1 in its first step: SQLite keeps the
sessions, subscriptions and retained messages (they survive a restart), Redis keeps the
DEVICE offline queues (TBMQ's layout, shared with other nodes and tools).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mqttq.model import Message
from mqttq.storage.ports import (
    MessageQueueStore,
    PresenceMarker,
    QueuedMessage,
    SessionRecord,
    Storage,
)


class OpenableQueueStore(MessageQueueStore, PresenceMarker, Protocol):
    """A queue store with a lifecycle and a presence marker, e.g.
    `redis_queue.RedisMessageQueue`."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...


class CompositeStorage:
    """The `Storage` port from `sessions_and_retained` (sessions, subscriptions, retained)
    and `queues` (every queue call). `delete_session` also clears the queue.

    `open` opens both (the queue store first: if it cannot start, nothing else is opened);
    `close` closes both, the queue store last, even when the first close fails.
    """

    def __init__(self, sessions_and_retained: Storage, queues: OpenableQueueStore) -> None:
        self.sessions_and_retained = sessions_and_retained
        self.queues = queues

    async def open(self) -> None:
        await self.queues.open()
        try:
            await self.sessions_and_retained.open()
        except BaseException:
            await self.queues.close()
            raise

    async def close(self) -> None:
        try:
            await self.sessions_and_retained.close()
        finally:
            await self.queues.close()

    # --- sessions and retained ---------------------------------------------------------

    async def load_sessions(self) -> list[SessionRecord]:
        """Every stored session."""
        return await self.sessions_and_retained.load_sessions()

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the session record (subscriptions included), and keep the
        queue store's presence marker in step: the broker saves the record with
        `disconnected_at = None` when the client connects and with the time when it
        leaves."""
        await self.sessions_and_retained.save_session(record)
        await self.queues.mark_connected(record.client_id, record.disconnected_at is None)

    async def mark_connected(self, client_id: str, connected: bool) -> None:
        """The queue store's presence marker alone (see `PresenceMarker`)."""
        await self.queues.mark_connected(client_id, connected)

    async def delete_session(self, client_id: str) -> None:
        """Remove the session record, then its queue and counters."""
        await self.sessions_and_retained.delete_session(client_id)
        await self.queues.clear(client_id)

    async def load_retained(self, now: float) -> list[tuple[str, Message]]:
        """Every (tenant, retained message) not expired at `now`."""
        return await self.sessions_and_retained.load_retained(now)

    async def set_retained(self, tenant: str, topic: str, message: Message | None) -> None:
        """Store (or with None, clear) the retained message of `topic` in `tenant`."""
        await self.sessions_and_retained.set_retained(tenant, topic, message)

    # --- queues ------------------------------------------------------------------------

    async def enqueue(self, items: Sequence[tuple[str, Message]]) -> list[QueuedMessage | None]:
        """See `MessageQueueStore.enqueue`."""
        return await self.queues.enqueue(items)

    async def fetch(self, client_id: str, now: float) -> list[QueuedMessage]:
        """See `MessageQueueStore.fetch`."""
        return await self.queues.fetch(client_id, now)

    async def remove(self, client_id: str, packet_id: int) -> None:
        """See `MessageQueueStore.remove`."""
        await self.queues.remove(client_id, packet_id)

    async def remove_many(self, entries: Sequence[tuple[str, int]]) -> None:
        """See `MessageQueueStore.remove_many`."""
        await self.queues.remove_many(entries)

    async def mark_pubrel(self, client_id: str, packet_id: int) -> None:
        """See `MessageQueueStore.mark_pubrel`."""
        await self.queues.mark_pubrel(client_id, packet_id)

    async def clear(self, client_id: str) -> None:
        """See `MessageQueueStore.clear`."""
        await self.queues.clear(client_id)
