"""Storage ports: what the broker needs from any backend, as `typing.Protocol`s, all here.

- `Storage` (sessions, retained messages, queues) and its optional capabilities
  (`ChunkedQueueStore`, `InboxStore`, `PresenceMarker`), found by `isinstance`;
- `MessageLog`: where every PUBLISH goes before it is routed (distributed mode);
- `AppContextStore`: what a disconnected APPLICATION client's consumer leaves for its next
  connection.

`AuthStore` (credentials and tenants) stays in `mqttq.auth.ports`: the authenticator, on a
floor below storage, names it. The adapters live in one sub-package per backend (sqlite/,
redis/, kafka/, postgres/, and memory.py); `registry.py` names them.

Durability contract: when a mutating coroutine returns, its effect survives a `kill -9` of
the broker (for durable adapters). Adapters group writes so that many concurrent calls
share one commit / round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from mqttq.auth.model import ClientType
from mqttq.codec.packets import Will
from mqttq.model import AppContext, Message, QueuedMessage, Subscription

__all__ = [
    "AppContextStore",
    "ChunkedQueueStore",
    "InboxStore",
    "LogBatch",
    "MessageLog",
    "MessageQueueStore",
    "PresenceMarker",
    "QueueFullPolicy",
    "QueuedMessage",
    "RetainedStore",
    "SessionRecord",
    "SessionStore",
    "Storage",
]


class QueueFullPolicy(StrEnum):
    """What `enqueue` does when a session's queue holds `limit` messages."""

    DROP_OLDEST = "drop_oldest"
    """Trim the oldest entries (TBMQ's behaviour); the new message is always kept."""
    REJECT_NEW = "reject_new"
    """Keep the queue; the new message is refused (publisher gets 0x97 on 5.0)."""


@dataclass(slots=True)
class SessionRecord:
    """The durable part of a persistent session [MQTT-4.1]."""

    client_id: str
    protocol_level: int
    session_expiry_interval: int
    """Seconds; 0xFFFFFFFF never expires."""
    subscriptions: list[Subscription] = field(default_factory=list)
    disconnected_at: float | None = None
    """Wall-clock time of the last disconnect; None while connected."""
    client_type: ClientType = ClientType.DEVICE
    tenant: str = "default"
    """The tenant whose namespace the session's subscriptions live in."""
    will: Will | None = None
    """The will of the session's connection while connected, or the will still due after
    an abnormal disconnect [MQTT-3.1.2-8]; survives a broker restart."""
    awaiting_pubrel: list[int] = field(default_factory=list)
    """Inbound QoS 2 packet ids whose PUBREL has not arrived, as of the last disconnect:
    a re-sent PUBLISH with one of them is a duplicate [MQTT-4.3.3-10]."""


@runtime_checkable
class ChunkedQueueStore(Protocol):
    """A queue store that commits each `enqueue` call on its own (SQLite): the broker
    splits a large fan-out into calls of at most `enqueue_chunk` items, so that the first
    acknowledgements need not wait for the whole fan-out to be durable."""

    enqueue_chunk: int


@runtime_checkable
class InboxStore(Protocol):
    """A store with a publish inbox (SQLite, `sqlite_inbox`): a message is made durable as
    one row before its fan-out, and the `enqueue_logged` call that queues its entries
    deletes that row atomically."""

    async def append_inbox(self, rows: Sequence[tuple[str, Message]]) -> list[int]:
        """Store each (tenant, message) durably; their sequence numbers."""

    async def enqueue_logged(
        self, items: Sequence[tuple[str, Message]], seqs: Sequence[int]
    ) -> list[QueuedMessage | None]:
        """`enqueue(items)`, deleting the inbox rows `seqs` in the same transaction."""

    async def inbox_done(self, seqs: Sequence[int]) -> None:
        """Delete inbox rows whose messages queued nothing."""

    async def load_inbox(self) -> list[tuple[int, str, Message]]:
        """The rows left: (seq, tenant, message) in the order they were stored."""


@runtime_checkable
class PresenceMarker(Protocol):
    """A store that records which node a client is connected to (Redis queues:
    `{client_id}_session_node`), and reports it with every entry it queues."""

    async def mark_connected(self, client_id: str, connected: bool) -> None:
        """Record that the client is connected to this node, or (False) forget it while
        the record names this node."""
        ...


class SessionStore(Protocol):
    async def load_sessions(self) -> list[SessionRecord]:
        """Every stored session, for the broker's start."""
        ...

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the session record (subscriptions included)."""
        ...

    async def delete_session(self, client_id: str) -> None:
        """Remove the session record and its queue."""
        ...


class MessageQueueStore(Protocol):
    async def enqueue(self, items: Sequence[tuple[str, Message]]) -> list[QueuedMessage | None]:
        """Append each (client_id, message) to that client's queue, durably.

        Assigns serial and packet id per client (ids wrap 65535 -> 1; the serial keeps
        growing). Returns one entry per item, aligned with `items`; None where the queue
        was full under REJECT_NEW. Under DROP_OLDEST the oldest entries beyond the limit
        are deleted.
        """
        ...

    async def fetch(self, client_id: str, now: float) -> list[QueuedMessage]:
        """The client's queue in serial order, without messages expired at `now`."""
        ...

    async def remove(self, client_id: str, packet_id: int) -> None:
        """Delete the entry with that packet id (PUBACK / PUBCOMP received)."""
        ...

    async def remove_many(self, entries: Sequence[tuple[str, int]]) -> None:
        """Delete each (client_id, packet_id) entry, all in one transaction or round trip
        (the PUBACKs and PUBCOMPs of one event-loop iteration); unknown ones are ignored."""
        ...

    async def mark_pubrel(self, client_id: str, packet_id: int) -> None:
        """Mark the entry as awaiting PUBCOMP (PUBREC received); keeps its expiry."""
        ...

    async def clear(self, client_id: str) -> None:
        """Delete the client's whole queue and its packet-id counter."""
        ...


class RetainedStore(Protocol):
    """Retained messages, one per (tenant, topic): each tenant has its own topic space."""

    async def load_retained(self, now: float) -> list[tuple[str, Message]]:
        """Every (tenant, retained message) not expired at `now`."""
        ...

    async def set_retained(self, tenant: str, topic: str, message: Message | None) -> None:
        """Store (or with None, clear) the retained message of `topic` in `tenant`."""
        ...


class Storage(SessionStore, MessageQueueStore, RetainedStore, Protocol):
    """Everything one backend provides; opened once at start, closed (flushed) at stop."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...


# --- the message log -------------------------------------------------------------------
# With `storage.log = "kafka"` the broker appends each accepted PUBLISH to the log and
# acknowledges the publisher once the log confirmed it; it routes what it reads back from
# the log, and marks each batch done once the deliveries it triggered are durable. An
# adapter implements `MessageLog` (storage/kafka/message_log.py); only `cli serve` picks one.


@dataclass(slots=True)
class LogBatch:
    """Messages read from the log, in log order, and where the batch ends."""

    messages: list[tuple[str, Message]]
    """(tenant, message) pairs; records the adapter could not decode are left out."""
    position: object
    """Opaque to the broker: what `MessageLog.done` takes to mark this batch consumed."""


class MessageLog(Protocol):
    """A durable, ordered log of published messages (per publisher order is kept)."""

    async def open(self) -> None:
        """Connect, create what is missing (the topic), start reading. Raises
        StorageError when the log is unreachable."""

    def append(self, tenant: str, message: Message) -> asyncio.Future[Any]:
        """Append `message`; the future resolves once the log stored it durably and fails
        (StorageError) when it did not. Appends of one publisher keep their order."""

    async def read(self) -> LogBatch | None:
        """The next batch, or None when nothing came within a short wait."""

    def done(self, position: object) -> None:
        """Every batch up to `position` is processed: it will not be read again after a
        restart (committed soon after, several batches at once)."""

    def statistics(self) -> dict[str, int]:
        """Counters for /metrics: at least `log_consumer_lag` (records not yet read)."""

    async def close(self) -> None:
        """Commit what `done` marked, stop reading, deliver or fail pending appends."""


# --- APPLICATION consumer contexts ----------------------------------------------------


class AppContextStore(Protocol):
    """Saved consumer contexts of APPLICATION sessions."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def load_app_context(self, client_id: str) -> AppContext | None:
        """The context saved for `client_id`, if any."""
        ...

    async def save_app_context(self, context: AppContext) -> None:
        """Insert or replace the context of `context.client_id`."""
        ...

    async def delete_app_context(self, client_id: str) -> None:
        """Forget it (the session ended); unknown ids are ignored."""
        ...

    async def list_app_contexts(self) -> list[AppContext]:
        """Every saved context, by client id (for operators)."""
        ...
