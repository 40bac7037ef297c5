"""RedisMessageQueue: DEVICE offline queues in Redis / Redis Cluster, in TBMQ 2.x's layout.

The `MessageQueueStore` port (see `storage.ports`) on the keys of `redis_keys` and the Lua
scripts of `mqttq.lua`, so that a Redis written by TBMQ 2.x can be served by mqttq and the
other way round. The same semantics as the other adapters (the contract suite runs on all):
serials that only grow, packet ids that wrap 65535 -> 1 and skip ids still queued, the
queue limit with DROP_OLDEST or REJECT_NEW, expiry dropped on fetch.

Each message key gets `EX` = the message's Message Expiry Interval, else `default_ttl`
(TBMQ: 7 days), so Redis itself forgets what nobody fetched. Calls from every session go
through one `Pipeliner` (or `Direct` with `pipelining=False`). Redis down: the calls raise
StorageError (the publisher gets 0x80 on 5.0); the next call after Redis is back reconnects.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Sequence
from typing import Any, Final

from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from mqttq import lua
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.tbmq_json import PUBREL, DecodedMessages, json_per_message
from mqttq.storage.memory import MAX_QUEUE_LIMIT
from mqttq.storage.ports import QueuedMessage, QueueFullPolicy
from mqttq.storage.redis.keys import RedisClient, SessionKeys, connect, packet_id_of, redacted
from mqttq.storage.redis.pipeline import (
    Arg,
    Direct,
    Pipeliner,
    PipelineStatistics,
    ScriptCaller,
)

# The logger keeps its name from before the move into a sub-package: operators filter on it.
_log = logging.getLogger("mqttq.storage.redis_queue")

DEFAULT_TTL: Final = 604_800
"""Seconds a message key lives without a Message Expiry Interval (TBMQ's default, 7 days)."""


def check_redis_queue_limit(queue_limit: int) -> None:
    """ValueError naming `mqtt.max_queued_messages` unless 1 <= queue_limit <= 65535."""
    if not 1 <= queue_limit <= MAX_QUEUE_LIMIT:
        raise ValueError(
            f"mqtt.max_queued_messages (queue_limit) must be 1..{MAX_QUEUE_LIMIT} for Redis "
            f"queues, not {queue_limit}: beyond that, packet ids would repeat in one queue"
        )


class RedisMessageQueue:
    """DEVICE offline queues in Redis (`cluster=False`) or Redis Cluster (`cluster=True`).

    `url` is `redis://[user:password@]HOST:PORT/DB` (for a cluster: any node). Keys start
    with `key_prefix`. `flush_commands` / `flush_interval` (seconds) bound how long calls
    wait to share a pipeline; `pipelining=False` makes one round trip per call.
    `queue_limit` above 65535 is refused (ValueError naming `mqtt.max_queued_messages`).
    `node` names this broker in the presence marker (`mark_connected`; default host:pid);
    given, `enqueue` reports the marker of each entry's client (`QueuedMessage.holder`).
    """

    def __init__(
        self,
        url: str,
        *,
        cluster: bool = False,
        key_prefix: str = "",
        queue_limit: int = 10000,
        queue_full_policy: QueueFullPolicy = QueueFullPolicy.DROP_OLDEST,
        default_ttl: int = DEFAULT_TTL,
        flush_commands: int = 5,
        flush_interval: float = 0.003,
        pipelining: bool = True,
        node: str | None = None,
    ) -> None:
        check_redis_queue_limit(queue_limit)
        if default_ttl < 1:
            raise ValueError(f"default_ttl must be at least 1 second, not {default_ttl}")
        if flush_commands < 1:
            raise ValueError(f"flush_commands must be at least 1, not {flush_commands}")
        if flush_interval < 0:
            raise ValueError(f"flush_interval must be >= 0, not {flush_interval}")
        self.url = url
        self.cluster = cluster
        self.key_prefix = key_prefix
        self._limit_args: tuple[Arg, Arg] = (
            queue_limit,
            1 if queue_full_policy is QueueFullPolicy.REJECT_NEW else 0,
        )
        self._default_ttl = default_ttl
        self._flush_commands = flush_commands
        self._flush_interval = flush_interval
        self._pipelining = pipelining
        self._node = node or f"{socket.gethostname()}:{os.getpid()}"
        self._report_holder = node is not None
        """A named node (a cluster's) learns from every enqueue where the client is."""
        self._client: RedisClient | None = None
        self._caller: ScriptCaller | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._closed = False
        self._final_statistics = PipelineStatistics()
        self._decoded = DecodedMessages()
        """Messages fetched lately: a drain of N sessions holding the same messages
        decodes each once."""

    def __repr__(self) -> str:
        mode = "cluster" if self.cluster else "standalone"
        return f"RedisMessageQueue({redacted(self.url)!r}, {mode}, prefix={self.key_prefix!r})"

    # --- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and load the scripts; StorageError when Redis cannot be reached."""
        if self._closed:
            raise StorageError("the Redis queue store was closed; it cannot reopen")
        if self._client is not None:
            return
        client = connect(self.url, cluster=self.cluster)
        scripts = {name: client.register_script(lua.load_script(name)) for name in lua.NAMES}
        try:
            for script in scripts.values():
                await client.script_load(script.script)
        except (RedisError, OSError) as exc:
            await client.aclose()
            raise StorageError(f"cannot use Redis at {redacted(self.url)}: {exc}") from exc
        self._client = client
        self._scripts = scripts
        self._caller = (
            Pipeliner(client, self._flush_commands, self._flush_interval)
            if self._pipelining
            else Direct(client)
        )

    async def close(self) -> None:
        """Send what is queued, wait for it, disconnect; later calls raise StorageError."""
        self._closed = True
        caller, client = self._caller, self._client
        self._caller = self._client = None
        if caller is not None:
            await caller.aclose()
            self._final_statistics = caller.statistics()
        if client is not None:
            await client.aclose()

    def statistics(self) -> PipelineStatistics:
        """Script calls and round trips to Redis so far (the final ones after close)."""
        caller = self._caller
        return self._final_statistics if caller is None else caller.statistics()

    # --- the port -----------------------------------------------------------------------

    def _not_running(self) -> StorageError:
        state = "closed" if self._closed else "not open (await open() first)"
        return StorageError(f"the Redis queue store is {state}")

    def _running(self) -> ScriptCaller:
        if self._caller is None:
            raise self._not_running()
        return self._caller

    def _ttl(self, message: Message) -> int:
        interval = message.properties.message_expiry_interval
        return self._default_ttl if interval is None else max(1, interval)

    async def enqueue(self, items: Sequence[tuple[str, Message]]) -> list[QueuedMessage | None]:
        """Append each (client_id, message) to that client's queue; see
        `MessageQueueStore.enqueue`. One script call per client, all in the same pipeline."""
        caller = self._running()
        by_client: dict[str, list[int]] = {}
        for index, (client_id, _message) in enumerate(items):
            by_client.setdefault(client_id, []).append(index)
        save = self._scripts[lua.SAVE]
        encoded = json_per_message()
        calls = []
        for client_id, indexes in by_client.items():
            args: list[Arg] = [*self._limit_args]
            for index in indexes:
                message = items[index][1]
                args.append(self._ttl(message))
                args.append(encoded(message).for_entry(client_id, 0))
            keys = SessionKeys(self.key_prefix, client_id)
            save_keys: tuple[str, ...] = keys.queue_keys()
            if self._report_holder:
                save_keys = (*save_keys, keys.session_node)
            calls.append((indexes, caller.call(save, save_keys, args)))
        results: list[QueuedMessage | None] = [None] * len(items)
        replies = await _all([future for _indexes, future in calls])
        for (indexes, _future), reply in zip(calls, replies, strict=True):
            holder = reply[-1].decode(errors="replace") if self._report_holder else None
            for n, index in enumerate(indexes):
                packet_id = reply[2 * n + 1]
                if packet_id:
                    entry = QueuedMessage(reply[2 * n], packet_id, items[index][1], holder=holder)
                    results[index] = entry
        return results

    async def fetch(self, client_id: str, now: float) -> list[QueuedMessage]:
        """The client's queue in serial order. Entries expired at `now` are deleted; one
        that cannot be read (foreign or corrupt value) is logged and skipped."""
        caller = self._running()
        keys = SessionKeys(self.key_prefix, client_id)
        reply: list[Any] = await caller.call(self._scripts[lua.FETCH], (keys.messages,), ())
        entries: list[QueuedMessage] = []
        expired: list[int] = []
        for i in range(0, len(reply), 3):
            serial, name, value = reply[i], reply[i + 1].decode(errors="replace"), reply[i + 2]
            entry = _entry(keys, serial, name, value, self._decoded)
            if entry is None:
                continue
            if entry.message.is_expired(now):
                expired.append(entry.packet_id)
            else:
                entries.append(entry)
        if expired:
            await self.remove_many([(client_id, packet_id) for packet_id in expired])
        return entries

    async def remove(self, client_id: str, packet_id: int) -> None:
        """Delete the entry with that packet id (PUBACK [MQTT-4.3.2] / PUBCOMP [MQTT-4.3.3])."""
        await self.remove_many(((client_id, packet_id),))

    async def remove_many(self, entries: Sequence[tuple[str, int]]) -> None:
        """Delete each (client_id, packet_id) entry: one script call per client (a DEL and
        a ZREM for all of its entries), all pipelined."""
        if not entries:
            return
        caller = self._running()
        remove = self._scripts[lua.REMOVE]
        by_client: dict[str, list[int]] = {}
        for client_id, packet_id in entries:
            by_client.setdefault(client_id, []).append(packet_id)
        calls: list[asyncio.Future[Any]] = []
        for client_id, packet_ids in by_client.items():
            keys = SessionKeys(self.key_prefix, client_id)
            calls.extend(
                caller.call(remove, (keys.messages, *map(keys.message, chunk)), ())
                for chunk in _chunks(packet_ids, _REMOVE_CHUNK)
            )
        await _all(calls)

    async def mark_pubrel(self, client_id: str, packet_id: int) -> None:
        """Mark the entry as awaiting PUBCOMP [MQTT-4.3.3]; its TTL is kept."""
        keys = SessionKeys(self.key_prefix, client_id)
        await self._running().call(self._scripts[lua.MARK_PUBREL], (keys.message(packet_id),), ())

    async def clear(self, client_id: str) -> None:
        """Delete the client's queue, counters and presence marker: the next entry gets
        packet id 1."""
        keys = SessionKeys(self.key_prefix, client_id)
        clear_keys = (*keys.queue_keys(), keys.session_node)
        await self._running().call(self._scripts[lua.CLEAR], clear_keys, ())

    # --- outside the port ---------------------------------------------------------------

    async def mark_connected(self, client_id: str, connected: bool) -> None:
        """Record that `client_id` is connected to this node (`node`, default host:pid),
        in `{client_id}_session_node`, or forget it while the marker names this node.
        `mqttq session rm` checks it before removing; `enqueue` reports it (`holder`)."""
        key = SessionKeys(self.key_prefix, client_id).session_node
        args = (self._node,) if connected else ("", self._node)
        await self._running().call(self._scripts[lua.SESSION_NODE], (key,), args)


_REMOVE_CHUNK: Final = 1000
"""Entries per remove call at most: Lua's unpack() has a bounded stack (LUAI_MAXCSTACK)."""


def _chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def _all(futures: list[asyncio.Future[Any]]) -> list[Any]:
    """The results of `futures`; raises the first failure (gather still retrieves the
    others' failures, so none is reported as never retrieved)."""
    if len(futures) == 1:
        return [await futures[0]]
    return list(await asyncio.gather(*futures))


def _entry(
    keys: SessionKeys, serial: int, name: str, value: Any, decoded: DecodedMessages
) -> QueuedMessage | None:
    """One fetched entry, or None (logged) when it cannot be delivered."""
    packet_id = packet_id_of(name, keys.messages)
    if packet_id is None:
        _log.error("skipping queue entry %r of %r: not a message key", name, keys.client_id)
        return None
    if isinstance(value, list):
        kind = value[0].decode() if value else "?"
        _log.error("skipping queue entry %r: it holds a %s, not a message", name, kind)
        return None
    try:
        message, packet_type = decoded.decode(value)
    except StorageError as exc:
        _log.error("skipping unreadable queue entry %r: %s", name, exc)
        return None
    return QueuedMessage(int(serial), packet_id, message, packet_type == PUBREL)
