"""MemoryStorage: the reference adapter, plain dicts, nothing survives the process.

Same semantics as the durable adapters (the contract suite runs on all of them): per-client
serials that only grow, packet ids that wrap 65535 -> 1 and skip ids still held in the
queue, the queue limit with DROP_OLDEST or
REJECT_NEW, expiry dropped on fetch and load, counters kept when a queue empties and reset
by `clear` / `delete_session`. Records handed in or out are copies, so a caller mutating
its SessionRecord does not change what is "stored".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mqttq.codec.enums import MAX_PACKET_ID
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.protocol.connect import INTEGRATION_CLIENT_PREFIX
from mqttq.storage.ports import QueuedMessage, QueueFullPolicy, SessionRecord

MAX_QUEUE_LIMIT = 65535
"""Above this, packet ids would repeat inside one queue (TBMQ refuses it too)."""


def queue_limit_of(client_id: str, limit: int) -> int:
    """The queue limit of `client_id` (shared by every adapter): an integration's session
    (`$integration/<name>`) holds as many entries as packet ids allow, since its queue is
    the integration's backlog while a sink is down; every other client `limit`."""
    return MAX_QUEUE_LIMIT if client_id.startswith(INTEGRATION_CLIENT_PREFIX) else limit


def check_queue_limit(queue_limit: int) -> None:
    """Raise ValueError unless 1 <= queue_limit <= 65535 (shared by every adapter)."""
    if not 1 <= queue_limit <= MAX_QUEUE_LIMIT:
        raise ValueError(f"queue_limit must be 1..{MAX_QUEUE_LIMIT}, not {queue_limit}")


@dataclass(slots=True)
class _ClientQueue:
    last_serial: int = 0
    last_packet_id: int = 0
    entries: dict[int, QueuedMessage] = field(default_factory=dict)
    """By packet id. Insertion order is serial order: an id is only ever re-inserted as the
    newest entry, after its previous holder was removed."""


class MemoryStorage:
    """The `Storage` port in memory; for tests and `storage.backend = "memory"`."""

    def __init__(
        self,
        *,
        queue_limit: int = 10000,
        queue_full_policy: QueueFullPolicy = QueueFullPolicy.DROP_OLDEST,
    ) -> None:
        """`queue_limit` (1..65535, else ValueError) bounds each client's queue."""
        check_queue_limit(queue_limit)
        self._limit = queue_limit
        self._policy = queue_full_policy
        self._open = False
        self._closed = False
        self._sessions: dict[str, SessionRecord] = {}
        self._queues: dict[str, _ClientQueue] = {}
        self._retained: dict[tuple[str, str], Message] = {}
        """(tenant, topic) -> retained message."""

    def _check(self) -> None:
        if not self._open:
            state = "closed" if self._closed else "not open (await open() first)"
            raise StorageError(f"memory storage is {state}")

    async def open(self) -> None:
        """Make the storage usable; StorageError after close."""
        if self._closed:
            raise StorageError("memory storage was closed; it cannot reopen")
        self._open = True

    async def close(self) -> None:
        """Later calls raise StorageError (the data is kept only while the object lives)."""
        self._open = False
        self._closed = True

    async def load_sessions(self) -> list[SessionRecord]:
        """Every stored session."""
        self._check()
        return [_copy(record) for record in self._sessions.values()]

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the session record, subscriptions included."""
        self._check()
        self._sessions[record.client_id] = _copy(record)

    async def delete_session(self, client_id: str) -> None:
        """Remove the session record, its queue and its counters."""
        self._check()
        self._sessions.pop(client_id, None)
        self._queues.pop(client_id, None)

    async def enqueue(self, items: Sequence[tuple[str, Message]]) -> list[QueuedMessage | None]:
        """Append each (client_id, message); see `MessageQueueStore.enqueue`."""
        self._check()
        results: list[QueuedMessage | None] = []
        for client_id, message in items:
            queue = self._queues.get(client_id)
            if queue is None:
                queue = self._queues[client_id] = _ClientQueue()
            entries = queue.entries
            if len(entries) >= queue_limit_of(client_id, self._limit):
                if self._policy is QueueFullPolicy.REJECT_NEW:
                    results.append(None)
                    continue
                # Trim first, so two entries never share a packet id.
                del entries[next(iter(entries))]
            # Skip an id still held by an entry left unacknowledged while 65535 later ones
            # passed: no two entries of a queue share a packet id [MQTT-2.2.1-4].
            packet_id = queue.last_packet_id % MAX_PACKET_ID + 1
            while packet_id in entries:
                packet_id = packet_id % MAX_PACKET_ID + 1
            queue.last_packet_id = packet_id
            queue.last_serial += 1
            entry = QueuedMessage(queue.last_serial, packet_id, message)
            entries[entry.packet_id] = entry
            results.append(entry)
        return results

    async def fetch(self, client_id: str, now: float) -> list[QueuedMessage]:
        """The client's queue in serial order; entries expired at `now` are deleted."""
        self._check()
        queue = self._queues.get(client_id)
        if queue is None:
            return []
        expired = [pid for pid, e in queue.entries.items() if e.message.is_expired(now)]
        for packet_id in expired:
            del queue.entries[packet_id]
        return [replace(entry) for entry in queue.entries.values()]

    async def remove(self, client_id: str, packet_id: int) -> None:
        """Delete the entry with that packet id (PUBACK [MQTT-4.3.2] / PUBCOMP [MQTT-4.3.3])."""
        self._check()
        queue = self._queues.get(client_id)
        if queue is not None:
            queue.entries.pop(packet_id, None)

    async def remove_many(self, entries: Sequence[tuple[str, int]]) -> None:
        """Delete each (client_id, packet_id) entry."""
        for client_id, packet_id in entries:
            await self.remove(client_id, packet_id)

    async def mark_pubrel(self, client_id: str, packet_id: int) -> None:
        """Mark the entry as awaiting PUBCOMP [MQTT-4.3.3]; message and expiry are kept."""
        self._check()
        queue = self._queues.get(client_id)
        if queue is not None and (entry := queue.entries.get(packet_id)) is not None:
            # Replaced, not mutated: the caller may still hold the entry enqueue returned.
            queue.entries[packet_id] = replace(entry, pubrel=True)

    async def clear(self, client_id: str) -> None:
        """Delete the client's queue and counters: the next entry gets packet id 1."""
        self._check()
        self._queues.pop(client_id, None)

    async def load_retained(self, now: float) -> list[tuple[str, Message]]:
        """Every (tenant, retained message) not expired at `now` [MQTT-3.3.2-5]; expired
        ones go."""
        self._check()
        for key in [k for k, m in self._retained.items() if m.is_expired(now)]:
            del self._retained[key]
        return [(tenant, message) for (tenant, _), message in self._retained.items()]

    async def set_retained(self, tenant: str, topic: str, message: Message | None) -> None:
        """Store, replace or (with None) clear the retained message of `topic` in `tenant`
        [MQTT-3.3.1-5]."""
        self._check()
        if message is None:
            self._retained.pop((tenant, topic), None)
        else:
            self._retained[(tenant, topic)] = message


def _copy(record: SessionRecord) -> SessionRecord:
    return replace(
        record,
        subscriptions=[replace(s) for s in record.subscriptions],
        awaiting_pubrel=list(record.awaiting_pubrel),
    )
