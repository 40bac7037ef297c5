"""Writing migrated clients into Redis / Redis Cluster, and reading them back.

One Lua call per client (`migrate_client.lua`) writes the client's whole queue, counters and
completion marker atomically on its slot: never half a client. The calls of one batch of
clients go out as one pipeline (EVALSHA, no MULTI: each call is atomic by itself, and in a
cluster the batch spans many slots). `migrate_read.lua` reads a client back for the conflict
check and for --verify without changing anything.

Scripts are loaded at `open()` (on every master of a cluster); a NOSCRIPT reply (Redis
restarted, SCRIPT FLUSH) reloads them and sends the affected calls again, which is safe
because the write script does nothing for a client that already has its marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from typing import Any, Final

from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from mqttq.migrate.errors import MigrateError, one_line
from mqttq.migrate.plan import ClientPlan
from mqttq.migrate.state import Checkpoint, marker_key, marker_value
from mqttq.storage.redis.keys import RedisClient, SessionKeys, connect, redacted

WRITE_SCRIPT: Final = "migrate_client"
READ_SCRIPT: Final = "migrate_read"

_REDIS_FAILURES = (RedisError, RedisClusterException, OSError)


class OnConflict(StrEnum):
    """What to do with a client id that already has a session in Redis."""

    FAIL = "fail"
    """Refuse the whole run before writing anything, listing those clients."""
    SKIP = "skip"
    """Leave those clients as they are in Redis; migrate the others."""
    REPLACE = "replace"
    """Delete their Redis queue and counters, then write the migrated ones."""


class WriteStatus(StrEnum):
    """The outcome of writing one client (the write script's status)."""

    MIGRATED = "migrated"
    REPLACED = "replaced"
    ALREADY = "already"
    CONFLICT = "conflict"
    SKIPPED = "skipped"


@dataclass(slots=True)
class RedisClientState:
    """What Redis holds for one client (`migrate_read.lua`)."""

    client_id: str
    marker: str | None
    existing: int
    """How many of the queue set and the two counters exist."""
    last_packet_id: str | None
    last_serial: str | None
    entries: list[tuple[int, str, bytes | None]] = field(default_factory=list)
    """(score, message key name, value or None when gone), in score order."""


def script_source(name: str) -> str:
    """The text of `mqttq/lua/<name>.lua`."""
    return resources.files("mqttq.lua").joinpath(f"{name}.lua").read_text(encoding="utf-8")


def _text(value: Any) -> str | None:
    if value is None or value is False:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class RedisWriter:
    """The Redis side of a migration: `url` (for a cluster: any node) and `key_prefix`."""

    def __init__(self, url: str, *, cluster: bool = False, key_prefix: str = "") -> None:
        self.url = url
        self.cluster = cluster
        self.key_prefix = key_prefix
        self._client: RedisClient | None = None
        self._sha: dict[str, str] = {}

    def describe(self) -> str:
        kind = "Redis Cluster" if self.cluster else "Redis"
        return f"{kind} at {redacted(self.url)}"

    def _error(self, exc: BaseException, doing: str) -> MigrateError:
        return MigrateError(f"{self.describe()}: {doing}: {one_line(exc)}")

    async def __aenter__(self) -> RedisWriter:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect and load the scripts; MigrateError when Redis cannot be used."""
        try:
            client = connect(self.url, cluster=self.cluster)
        except (*_REDIS_FAILURES, ValueError) as exc:
            raise MigrateError(f"cannot use {self.describe()}: {one_line(exc)}") from exc
        self._client = client
        try:
            await self._load_scripts()
        except _REDIS_FAILURES as exc:
            await self.close()
            raise MigrateError(f"cannot connect to {self.describe()}: {one_line(exc)}") from exc

    async def _load_scripts(self) -> None:
        client = self._running()
        for name in (WRITE_SCRIPT, READ_SCRIPT):
            self._sha[name] = str(await client.script_load(script_source(name)))

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _running(self) -> RedisClient:
        if self._client is None:
            raise MigrateError(f"{self.describe()}: not connected")
        return self._client

    def _keys(self, client_id: str) -> tuple[str, str, str, str]:
        messages, last_id, last_serial = SessionKeys(self.key_prefix, client_id).queue_keys()
        return messages, last_id, last_serial, marker_key(self.key_prefix, client_id)

    async def is_empty(self) -> bool:
        """True when the database (every master of a cluster) holds no key at all."""
        try:
            return int(await self._running().dbsize()) == 0
        except _REDIS_FAILURES as exc:
            raise self._error(exc, "DBSIZE") from exc

    async def _run_scripts(
        self, name: str, calls: Sequence[tuple[Sequence[str], Sequence[Any]]]
    ) -> list[Any]:
        """One pipeline of EVALSHA calls of script `name`; the replies in order."""
        client = self._running()
        replies: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for _attempt in range(2):
            pipe = client.pipeline(transaction=False)
            sha = self._sha[name]
            for index in pending:
                keys, args = calls[index]
                # execute_command, not evalsha(): the cluster pipeline refuses the latter
                # but routes a raw EVALSHA by its first key.
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
            try:
                results = await pipe.execute(raise_on_error=False)
            except _REDIS_FAILURES as exc:
                raise self._error(exc, f"running {name}.lua") from exc
            unloaded = []
            for index, result in zip(pending, results, strict=True):
                if isinstance(result, NoScriptError):
                    unloaded.append(index)
                elif isinstance(result, BaseException):
                    raise self._error(result, f"{name}.lua for client {calls[index][0][0]!r}")
                else:
                    replies[index] = result
            if not unloaded:
                return replies
            try:
                await self._load_scripts()
            except _REDIS_FAILURES as exc:
                raise self._error(exc, "reloading the scripts") from exc
            pending = unloaded
        raise MigrateError(f"{self.describe()}: the scripts keep disappearing (SCRIPT FLUSH?)")

    async def write(
        self, plans: Sequence[ClientPlan], on_conflict: OnConflict, run_id: str
    ) -> list[tuple[WriteStatus, int]]:
        """Write each plan (none may be rejected) with one script call, all in one
        pipeline; per plan its status and the messages written."""
        calls: list[tuple[Sequence[str], Sequence[Any]]] = []
        for plan in plans:
            args = (
                on_conflict.value,
                marker_value(run_id, plan.count),
                "" if plan.last_packet_id is None else plan.last_packet_id,
                "" if plan.last_serial is None else plan.last_serial,
                " ".join(plan.heads),
                "\n".join(plan.texts),
            )
            calls.append((self._keys(plan.client_id), args))
        replies = await self._run_scripts(WRITE_SCRIPT, calls)
        return [(WriteStatus(_text(reply[0]) or "?"), int(reply[1])) for reply in replies]

    async def read(self, client_ids: Sequence[str], *, entries: bool) -> list[RedisClientState]:
        """What Redis holds for each client (with its entries when `entries`)."""
        flag = "1" if entries else "0"
        calls = [(self._keys(client_id), (flag,)) for client_id in client_ids]
        replies = await self._run_scripts(READ_SCRIPT, calls)
        states = []
        for client_id, reply in zip(client_ids, replies, strict=True):
            state = RedisClientState(
                client_id, _text(reply[0]), int(reply[1]), _text(reply[2]), _text(reply[3])
            )
            for i in range(4, len(reply), 3):
                value = reply[i + 2]
                state.entries.append(
                    (int(reply[i]), _text(reply[i + 1]) or "", value if value else None)
                )
            states.append(state)
        return states

    async def load_checkpoint(self, key: str) -> Checkpoint | None:
        """The checkpoint stored at `key`, if any."""
        try:
            value = await self._running().get(key)
        except _REDIS_FAILURES as exc:
            raise self._error(exc, "reading the checkpoint") from exc
        return None if value is None else Checkpoint.from_json(value)

    async def save_checkpoint(self, key: str, checkpoint: Checkpoint) -> None:
        """Store the checkpoint at `key`."""
        try:
            await self._running().set(key, checkpoint.to_json())
        except _REDIS_FAILURES as exc:
            raise self._error(exc, "writing the checkpoint") from exc
