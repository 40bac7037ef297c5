"""Operator views of the DEVICE sessions in Redis: list, inspect, dump, trim, remove.

The logic behind `mqttq session` (the CLI only renders). It reads TBMQ 2.x's layout
(`redis_keys`), so it works on queues written by mqttq or by TBMQ. A value it cannot read is
reported (a `problems` entry, an `error` line) and the command carries on. Listing scans
`*}_messages` keys with a large COUNT on every master and summarises each session with one
read-only script call (`session_info.lua`), pipelined, so 100k sessions take seconds.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from mqttq import lua
from mqttq.errors import MqttqError, StorageError
from mqttq.storage.formats.tbmq_json import PUBREL, message_from_json
from mqttq.storage.redis.keys import (
    MESSAGES_SUFFIX,
    RedisClient,
    SessionKeys,
    client_id_of,
    connect,
    glob_escape,
    node_url,
    redacted,
)

SCAN_COUNT: Final = 10_000
"""Keys per SCAN call: few round trips over a large keyspace."""
CHUNK: Final = 1_000
"""Commands per pipeline when reading many keys."""


class RedisSessionsError(MqttqError):
    """Redis cannot be reached or refused a command; the message is one line for the user."""


class SessionNotFound(RedisSessionsError):
    """No key of that session exists."""


class SessionConnected(RedisSessionsError):
    """The session's client is connected (its `_session_node` marker is set)."""


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where the sessions live: a Redis URL (any node of a cluster) and the key prefix."""

    url: str
    cluster: bool = False
    key_prefix: str = ""

    def describe(self) -> str:
        kind = "Redis Cluster" if self.cluster else "Redis"
        return f"{kind} at {redacted(self.url)}"


@dataclass(slots=True)
class EntryInfo:
    """The oldest or newest entry of a queue, as `session_info.lua` saw it."""

    time_ms: int | None
    ttl_ms: int | None
    """None: the key has no TTL."""
    state: str
    """ok | missing | malformed | wrongtype."""


@dataclass(slots=True)
class SessionSummary:
    """One row of `mqttq session ls`."""

    client_id: str
    pending: int
    last_packet_id: int | None
    connected: str | None
    """The `_session_node` marker: the broker node holding the connection."""
    oldest: EntryInfo | None = None
    newest: EntryInfo | None = None
    problems: list[str] = field(default_factory=list)

    def to_json(self, now_ms: int) -> dict[str, Any]:
        oldest, newest = self.oldest, self.newest
        return {
            "client_id": self.client_id,
            "pending": self.pending,
            "last_packet_id": self.last_packet_id,
            "oldest_age_s": age_s(oldest.time_ms if oldest else None, now_ms),
            "newest_age_s": age_s(newest.time_ms if newest else None, now_ms),
            "ttl_s": _seconds(newest.ttl_ms if newest else None),
            "connected": self.connected,
            "problems": self.problems,
        }


@dataclass(slots=True)
class SessionDetail:
    """What `mqttq session inspect` shows of one session."""

    client_id: str
    keys: dict[str, str]
    pending: int = 0
    publish: int = 0
    pubrel: int = 0
    missing: int = 0
    """References whose message key is gone (expired): the next fetch drops them."""
    first_serial: int | None = None
    last_serial: int | None = None
    first_packet_id: int | None = None
    last_packet_id: int | None = None
    last_packet_id_counter: int | None = None
    last_serial_counter: int | None = None
    connected: str | None = None
    oldest_time_ms: int | None = None
    newest_time_ms: int | None = None
    min_ttl_ms: int | None = None
    max_ttl_ms: int | None = None
    memory_bytes: dict[str, int] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)

    def to_json(self, now_ms: int) -> dict[str, Any]:
        data = asdict(self)
        data["oldest_age_s"] = age_s(self.oldest_time_ms, now_ms)
        data["newest_age_s"] = age_s(self.newest_time_ms, now_ms)
        data["min_ttl_s"] = _seconds(self.min_ttl_ms)
        data["max_ttl_s"] = _seconds(self.max_ttl_ms)
        for name in ("oldest_time_ms", "newest_time_ms", "min_ttl_ms", "max_ttl_ms"):
            del data[name]
        data["memory_bytes"]["total"] = sum(self.memory_bytes.values())
        return data


def now_ms() -> int:
    """Milliseconds since the epoch, the unit of the stored `time` field."""
    return time.time_ns() // 1_000_000


def age_s(time_ms: int | None, now: int) -> float | None:
    """Seconds from `time_ms` to `now` (0 when in the future: clocks differ)."""
    return None if time_ms is None else max(0, now - time_ms) / 1000


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _int(value: bytes | str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class SessionAdmin:
    """The session tools on one Redis / Redis Cluster; use `async with SessionAdmin(...)`."""

    def __init__(self, target: RedisTarget) -> None:
        self.target = target
        self._client: RedisClient | None = None
        self._nodes: list[Redis] = []

    async def __aenter__(self) -> SessionAdmin:
        client = connect(self.target.url, cluster=self.target.cluster)
        self._client = client
        try:
            if isinstance(client, RedisCluster):
                await client.initialize()
                self._nodes = [
                    Redis.from_url(node_url(self.target.url, node.host, int(node.port)))
                    for node in client.get_primaries()
                ]
            else:
                await client.ping()
                self._nodes = [client]
        except (RedisError, OSError) as exc:
            await self.aclose()
            raise self._error(exc) from exc
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for node in self._nodes:
            if node is not self._client:
                await node.aclose()
        if self._client is not None:
            await self._client.aclose()
        self._client = None
        self._nodes = []

    def _error(self, exc: BaseException) -> RedisSessionsError:
        if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
            return RedisSessionsError(f"cannot reach {self.target.describe()}: {exc}")
        return RedisSessionsError(f"{self.target.describe()} refused a command: {exc}")

    @property
    def client(self) -> RedisClient:
        if self._client is None:
            raise RedisSessionsError("not connected: use `async with SessionAdmin(...)`")
        return self._client

    def keys(self, client_id: str) -> SessionKeys:
        return SessionKeys(self.target.key_prefix, client_id)

    # --- ls -----------------------------------------------------------------------------

    async def list_sessions(
        self, pattern: str | None = None, progress: Callable[[int], None] | None = None
    ) -> list[SessionSummary]:
        """Every session with a queue (`<prefix>{<id>}_messages`), `pattern` a Redis glob
        on the client id; `progress(n)` after each batch with the sessions read so far."""
        prefix = self.target.key_prefix
        match = f"{glob_escape(prefix)}{{{pattern or '*'}{MESSAGES_SUFFIX}"
        script = lua.load_script(lua.SESSION_INFO)
        sessions: list[SessionSummary] = []
        try:
            for node in self._nodes:
                sha = await node.script_load(script)
                cursor = 0
                while True:
                    cursor, found = await node.scan(cursor, match=match, count=SCAN_COUNT)
                    ids = [c for k in found if (c := client_id_of(_text(k), prefix)) is not None]
                    sessions += await self._summaries(node, sha, ids)
                    if progress is not None:
                        progress(len(sessions))
                    if cursor == 0:
                        break
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc
        return sessions

    async def _summaries(self, node: Redis, sha: str, ids: list[str]) -> list[SessionSummary]:
        result: list[SessionSummary] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            pipe = node.pipeline(transaction=False)
            for client_id in chunk:
                k = self.keys(client_id)
                pipe.evalsha(sha, 3, k.messages, k.last_packet_id, k.session_node)
            replies = await pipe.execute()
            result += [_summary(c, r) for c, r in zip(chunk, replies, strict=True)]
        return result

    # --- inspect, dump ----------------------------------------------------------------------

    async def _entries(self, keys: SessionKeys) -> list[tuple[str, int]]:
        members: Any = await self.client.zrange(keys.messages, 0, -1, withscores=True)
        return [(_text(name), int(score)) for name, score in members]

    async def inspect(self, client_id: str) -> SessionDetail:
        """The session in detail, memory included; SessionNotFound when it has no key."""
        k = self.keys(client_id)
        others = {"last_packet_id": k.last_packet_id, "last_serial": k.last_serial}
        others["session_node"] = k.session_node
        detail = SessionDetail(client_id, {"messages": k.messages, **others})
        try:
            kind = _text(await self.client.type(k.messages))
            if kind not in ("zset", "none"):
                detail.problems.append({"key": k.messages, "error": f"a {kind}, not a zset"})
                entries = []
            else:
                entries = await self._entries(k)
            last_id, last_serial, node = await self.client.mget(list(others.values()))
            values = await self._read(entries, ("GET", "PTTL", "MEMORY USAGE"))
            own = await self._read([(key, 0) for key in (k.messages, *others.values())])
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc
        if kind == "none" and not any(size for (size,) in own):
            raise SessionNotFound(f"no session of client {client_id!r} in {self.target.describe()}")
        detail.last_packet_id_counter, detail.last_serial_counter = _int(last_id), _int(last_serial)
        detail.connected = None if node is None else _text(node)
        detail.memory_bytes = {
            "queue_set": own[0][0] or 0,
            "counters": sum(size or 0 for (size,) in own[1:]),
            "messages": 0,
        }
        for (name, serial), replies in zip(entries, values, strict=True):
            _account(detail, name, serial, replies)
        return detail

    async def _read(
        self, entries: Sequence[tuple[str, int]], commands: Sequence[str] = ("MEMORY USAGE",)
    ) -> list[tuple[Any, ...]]:
        """For each key: the replies of `commands` on it (pipelined, in chunks)."""
        replies: list[Any] = []
        for start in range(0, len(entries), CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for name, _serial in entries[start : start + CHUNK]:
                for command in commands:
                    pipe.execute_command(*command.split(), name)
            replies += await pipe.execute(raise_on_error=False)
        width = len(commands)
        return [tuple(replies[i : i + width]) for i in range(0, len(replies), width)]

    async def dump(self, client_id: str, *, decode: bool = False) -> AsyncIterator[dict[str, Any]]:
        """The queue in delivery order, one JSON-ready object per entry: `serial`, `key`,
        then the stored fields; `error` (and `raw`) instead where it cannot be read.
        `decode`: a UTF-8 payload as text (`payloadEncoding` says which)."""
        keys = self.keys(client_id)
        try:
            entries = await self._entries(keys)
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc
        if not entries:
            raise SessionNotFound(f"client {client_id!r} has no queued messages")
        for start in range(0, len(entries), CHUNK):
            chunk = entries[start : start + CHUNK]
            try:
                values = await self._read(chunk, ("GET",))
            except (RedisError, OSError) as exc:
                raise self._error(exc) from exc
            for (name, serial), (value,) in zip(chunk, values, strict=True):
                yield _dump_line(name, serial, value, decode)

    # --- trim, rm -----------------------------------------------------------------------

    async def trim(self, client_id: str, keep: int) -> tuple[int, int]:
        """Drop the oldest entries beyond `keep`, atomically; (removed, left)."""
        if keep < 0:
            raise ValueError(f"keep must be 0 or more, not {keep}")
        script = self.client.register_script(lua.load_script(lua.TRIM))
        try:
            removed, left = await script(keys=[self.keys(client_id).messages], args=[keep])
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc
        return int(removed), int(left)

    async def remove(self, client_id: str, *, force: bool = False) -> tuple[int, int]:
        """Delete every key of the session: (message keys, other keys) deleted.

        SessionConnected while the broker marks the client connected, unless `force`;
        SessionNotFound when there was nothing to delete.
        """
        k = self.keys(client_id)
        script = self.client.register_script(lua.load_script(lua.CLEAR))
        try:
            node = await self.client.get(k.session_node)
            if node is not None and not force:
                raise SessionConnected(
                    f"client {client_id!r} is connected (to {_text(node)}); "
                    "disconnect it first, or use --force"
                )
            messages, others = await script(keys=k.queue_keys())
            others += await self.client.delete(k.session_node)
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc
        if not messages and not others:
            raise SessionNotFound(f"no session of client {client_id!r} in {self.target.describe()}")
        return int(messages), int(others)


def _summary(client_id: str, reply: list[Any]) -> SessionSummary:
    pending = int(reply[0])
    if pending < 0:
        kind = _text(reply[1])
        return SessionSummary(client_id, 0, None, None, problems=[f"queue key is a {kind}"])
    last_id = _int(reply[1])
    summary = SessionSummary(
        client_id, pending, last_id, None if reply[2] is None else _text(reply[2])
    )
    if reply[1] is not None and last_id is None:
        summary.problems.append("last_packet_id is not a number")
    if pending:
        summary.oldest = _entry_info(reply[3:6])
        summary.newest = _entry_info(reply[6:9])
        for which, info in (("oldest", summary.oldest), ("newest", summary.newest)):
            if info.state != "ok":
                summary.problems.append(f"{which} entry {_STATES[info.state]}")
    return summary


_STATES: Final = {
    "missing": "expired",
    "malformed": "malformed",
    "wrongtype": "not a string",
}


def _entry_info(values: list[Any]) -> EntryInfo:
    time_ms, pttl, state = values
    return EntryInfo(
        None if time_ms is None else int(time_ms),
        None if pttl < 0 else int(pttl),
        _text(state),
    )


def _account(detail: SessionDetail, name: str, serial: int, replies: tuple[Any, ...]) -> None:
    """Add one entry of the queue to `detail`; `replies`: its GET, PTTL, MEMORY USAGE."""
    value, pttl, size = replies
    detail.pending += 1
    detail.memory_bytes["messages"] += size if isinstance(size, int) else 0
    if detail.first_serial is None:
        detail.first_serial = serial
    detail.last_serial = serial
    if value is None:
        detail.missing += 1
        return
    if isinstance(value, Exception):
        detail.problems.append({"key": name, "error": f"not a message: {value}"})
        return
    try:
        stored = message_from_json(value)
    except StorageError as exc:
        detail.problems.append({"key": name, "error": str(exc)})
        return
    if stored.packet_type == PUBREL:
        detail.pubrel += 1
    else:
        detail.publish += 1
    if detail.first_packet_id is None:
        detail.first_packet_id = stored.packet_id
    detail.last_packet_id = stored.packet_id
    created = round(stored.message.created_at * 1000)
    if detail.oldest_time_ms is None or created < detail.oldest_time_ms:
        detail.oldest_time_ms = created
    if detail.newest_time_ms is None or created > detail.newest_time_ms:
        detail.newest_time_ms = created
    if isinstance(pttl, int) and pttl >= 0:
        detail.min_ttl_ms = pttl if detail.min_ttl_ms is None else min(detail.min_ttl_ms, pttl)
        detail.max_ttl_ms = pttl if detail.max_ttl_ms is None else max(detail.max_ttl_ms, pttl)


def _dump_line(name: str, serial: int, value: Any, decode: bool) -> dict[str, Any]:
    line: dict[str, Any] = {"serial": serial, "key": name}
    if value is None:
        line["error"] = "message key missing (expired or deleted)"
        return line
    if isinstance(value, Exception):
        line["error"] = f"not a message: {value}"
        return line
    text = _text(value)
    try:
        message_from_json(value)
    except StorageError as exc:
        line["error"] = str(exc)
        line["raw"] = text
        return line
    stored: dict[str, Any] = json.loads(text)
    if decode:
        payload = stored.get("payload") or ""
        try:
            stored["payload"] = base64.b64decode(payload, validate=True).decode("utf-8")
            stored["payloadEncoding"] = "utf-8"
        except (binascii.Error, UnicodeDecodeError):
            stored["payloadEncoding"] = "base64"
    return line | stored
