"""Script calls from many sessions, sent to Redis in pipelines (TBMQ's Lettuce lesson).

`Pipeliner` gathers the calls made from the event loop and writes them as one pipeline
when `flush_commands` calls wait or `flush_interval` seconds passed since the first one
(TBMQ: `lettuce.buffered-cmd-count` 5, `flush-interval-ms` 5). One pipeline is on the
wire at a time: calls made meanwhile form the next one (up to `MAX_PIPELINE` calls), so
batches grow with the load and calls run in the order they were made (a PUBACK's remove
never overtakes an earlier save or fetch). `Direct` is the same interface with one round
trip per call, for comparison.

Both keep the order of the calls, which the storage port relies on (as the SQLite adapter's
one writer thread does). Scripts are redis-py `AsyncScript` objects: EVALSHA, reloaded when
Redis answers NOSCRIPT (after a restart or SCRIPT FLUSH). Any Redis or socket failure
becomes StorageError.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisError

from mqttq.errors import StorageError
from mqttq.storage.redis.keys import RedisClient

Arg = str | int | bytes

MAX_PIPELINE = 1024
"""Calls per pipeline at most: redis-py encodes a whole pipeline at once, and a backlog of
50k calls (a drain's PUBACKs while the event loop was busy) would stall the loop for it."""

# The logger keeps its name from before the move into a sub-package: operators filter on it.
_log = logging.getLogger("mqttq.storage.redis_pipeline")


@dataclass(slots=True)
class PipelineStatistics:
    """Script calls and network round trips so far; calls > round trips shows the batching."""

    calls: int = 0
    round_trips: int = 0
    """Pipelines sent (`Pipeliner`), or calls (`Direct`: one round trip each)."""
    largest_batch: int = 0


class ScriptCaller(Protocol):
    """Runs script calls against Redis; the result future fails with StorageError."""

    def call(
        self, script: AsyncScript, keys: Sequence[str], args: Sequence[Arg]
    ) -> asyncio.Future[Any]: ...

    def statistics(self) -> PipelineStatistics: ...

    async def aclose(self) -> None: ...


def storage_error(exc: BaseException) -> StorageError:
    """A Redis or socket failure as the StorageError the storage port raises."""
    return StorageError(f"redis: {type(exc).__name__}: {exc}")


@dataclass(slots=True)
class _Call:
    script: AsyncScript
    keys: Sequence[str]
    args: Sequence[Arg]
    future: asyncio.Future[Any]


def _settle(call: _Call, reply: Any) -> None:
    if call.future.done():  # the caller gave up (cancelled)
        return
    if isinstance(reply, BaseException):
        call.future.set_exception(storage_error(reply))
    else:
        call.future.set_result(reply)


class Pipeliner:
    """Batches script calls into pipelines: see the module docstring."""

    def __init__(self, client: RedisClient, flush_commands: int, flush_interval: float) -> None:
        self._client = client
        self._flush_commands = flush_commands
        self._flush_interval = flush_interval
        self._waiting: list[_Call] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: asyncio.Task[None] | None = None
        self._stats = PipelineStatistics()

    def statistics(self) -> PipelineStatistics:
        return replace(self._stats)

    def call(
        self, script: AsyncScript, keys: Sequence[str], args: Sequence[Arg]
    ) -> asyncio.Future[Any]:
        """Queue one EVALSHA; the future gets the script's reply."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.append(_Call(script, keys, args, future))
        if self._sending is None:
            if len(self._waiting) >= self._flush_commands:
                self._flush()
            elif self._timer is None:
                self._timer = loop.call_later(self._flush_interval, self._flush)
        return future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._sending is not None or not self._waiting:
            return
        waiting = self._waiting
        if len(waiting) > MAX_PIPELINE:
            batch, self._waiting = waiting[:MAX_PIPELINE], waiting[MAX_PIPELINE:]
        else:
            batch, self._waiting = waiting, []
        self._sending = asyncio.get_running_loop().create_task(self._send(batch))

    async def _send(self, batch: list[_Call]) -> None:
        try:
            await self._execute(batch)
        except Exception as exc:
            # A failure outside the replies (e.g. the client refused a command): every
            # caller still waiting learns it, none waits for ever.
            _log.exception("a Redis pipeline failed before Redis answered")
            for call in batch:
                _settle(call, exc)
        finally:
            self._sending = None
            # Whatever arrived while this pipeline was on the wire has waited long enough.
            self._flush()

    async def _execute(self, batch: list[_Call]) -> None:
        stats = self._stats
        stats.calls += len(batch)
        stats.round_trips += 1
        stats.largest_batch = max(stats.largest_batch, len(batch))
        pipe = self._client.pipeline(transaction=False)
        for call in batch:
            # execute_command, not evalsha(): redis-py's cluster pipeline refuses the
            # latter, yet routes a raw EVALSHA by its first key like any keyed command.
            pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
        try:
            replies = await pipe.execute(raise_on_error=False)
        except (RedisError, OSError) as exc:
            for call in batch:
                _settle(call, exc)
            return
        unloaded: list[_Call] = []
        for call, reply in zip(batch, replies, strict=True):
            if isinstance(reply, NoScriptError):
                unloaded.append(call)
            else:
                _settle(call, reply)
        if unloaded:
            await self._reload_and_retry(unloaded)

    async def _reload_and_retry(self, calls: list[_Call]) -> None:
        """Redis lost the scripts (restart, SCRIPT FLUSH): the Script object reloads its
        script on the first call; the rest go out again as one pipeline."""
        first = calls[0]
        try:
            reply = await first.script(keys=first.keys, args=first.args, client=self._client)
        except (RedisError, OSError) as exc:
            reply = exc
        _settle(first, reply)
        if len(calls) > 1:
            await self._execute(calls[1:])

    async def aclose(self) -> None:
        """Send what is queued and wait for it; the client stays open."""
        while self._waiting or self._sending is not None:
            self._flush()
            if self._sending is not None:
                await asyncio.shield(self._sending)


class Direct:
    """One round trip per call, no batching: the baseline the pipelining is measured by.

    Calls run one at a time, in the order they were made (a FIFO lock): calls of one
    client must reach Redis in order (a later save must not get the earlier serial), and
    with several connections in flight they would not.
    """

    def __init__(self, client: RedisClient) -> None:
        self._client = client
        self._turn = asyncio.Lock()
        self._running: set[asyncio.Future[Any]] = set()
        self._stats = PipelineStatistics()

    def statistics(self) -> PipelineStatistics:
        return replace(self._stats)

    def call(
        self, script: AsyncScript, keys: Sequence[str], args: Sequence[Arg]
    ) -> asyncio.Future[Any]:
        """Run one EVALSHA now (NOSCRIPT: the Script object reloads and retries)."""
        stats = self._stats
        stats.calls += 1
        stats.round_trips += 1
        stats.largest_batch = 1
        task = asyncio.ensure_future(self._run(script, keys, args))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def _run(self, script: AsyncScript, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        async with self._turn:
            try:
                return await script(keys=keys, args=args, client=self._client)
            except (RedisError, OSError) as exc:
                raise storage_error(exc) from exc

    async def aclose(self) -> None:
        """Wait for the calls still running."""
        if self._running:
            await asyncio.wait(list(self._running))
