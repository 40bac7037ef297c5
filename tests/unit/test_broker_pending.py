"""BackgroundTasks.barrier: a client waits for its own writes and the queue writes in
flight, not for other clients' writes; RemoveBatcher: one storage call per event-loop
iteration (real futures on a real event loop, no I/O)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mqttq.broker.delivery.pending import BackgroundTasks, EnqueueBatcher, RemoveBatcher
from mqttq.errors import StorageError


def test_barrier_waits_for_the_clients_writes_only() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        tasks = BackgroundTasks()
        mine = loop.create_future()
        other = loop.create_future()
        tasks.track(mine, "remove", "me")
        tasks.track(other, "remove", "someone else")
        order: list[str] = []

        async def reconnect() -> None:
            await tasks.barrier("me")
            order.append("barrier passed")

        waiter = asyncio.ensure_future(reconnect())
        await asyncio.sleep(0)
        order.append("before my write settled")
        mine.set_result(None)
        await waiter
        order.append(f"other write still pending: {not other.done()}")
        other.set_result(None)
        await asyncio.sleep(0)
        order.append(f"tracked after all settled: {len(tasks)}")
        return order

    assert asyncio.run(scenario()) == [
        "before my write settled",
        "barrier passed",
        "other write still pending: True",
        "tracked after all settled: 0",
    ]


def test_barrier_waits_for_queue_writes_of_any_client() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        tasks = BackgroundTasks()
        enqueue = loop.create_future()
        tasks.track_enqueue(enqueue)
        order: list[str] = []

        async def reconnect() -> None:
            await tasks.barrier("me")
            order.append("barrier passed")

        waiter = asyncio.ensure_future(reconnect())
        await asyncio.sleep(0)
        order.append("enqueue pending")
        enqueue.set_exception(OSError("disk full"))  # a failed write settles it too
        await waiter
        return order

    assert asyncio.run(scenario()) == ["enqueue pending", "barrier passed"]


def test_global_barrier_waits_for_every_write() -> None:
    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        tasks = BackgroundTasks()
        futures = [loop.create_future() for _ in range(3)]
        for index, future in enumerate(futures):
            tasks.track(future, None, f"c{index}")
        waiter = asyncio.ensure_future(tasks.barrier())
        for future in futures[:-1]:
            future.set_result(None)
            await asyncio.sleep(0)
        early = waiter.done()
        futures[-1].set_result(None)
        await waiter
        return early

    assert asyncio.run(scenario()) is False


def test_removals_of_one_iteration_share_one_call_and_barriers_wait_for_it() -> None:
    async def scenario() -> tuple[list[list[tuple[str, int]]], list[str]]:
        calls: list[list[tuple[str, int]]] = []
        gate = asyncio.Event()
        order: list[str] = []

        async def remove_many(items: list[tuple[str, int]]) -> None:
            calls.append(items)
            await gate.wait()
            order.append(f"removed {len(items)}")

        tasks = BackgroundTasks()
        removals = RemoveBatcher(remove_many, tasks)
        removals.remove("a", 1)
        removals.remove("b", 7)
        removals.remove("a", 2)

        async def reconnect(client_id: str) -> None:
            await tasks.barrier(client_id)  # same iteration as the removals: still waits
            order.append(f"barrier {client_id}")

        waiters = [asyncio.ensure_future(reconnect(c)) for c in ("a", "b")]
        await asyncio.sleep(0.01)
        order.append("before the commit")
        gate.set()
        await asyncio.gather(*waiters)
        removals.remove("c", 3)  # a later iteration: a batch of its own
        await tasks.barrier()
        return calls, order

    calls, order = asyncio.run(scenario())
    assert calls == [[("a", 1), ("b", 7), ("a", 2)], [("c", 3)]]
    assert order == ["before the commit", "removed 3", "barrier a", "barrier b", "removed 1"]


def test_a_failed_removal_batch_is_logged_once_and_releases_barriers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        async def remove_many(items: list[tuple[str, int]]) -> None:
            raise StorageError("disk gone")

        tasks = BackgroundTasks()
        removals = RemoveBatcher(remove_many, tasks)
        removals.remove("a", 1)
        removals.remove("b", 2)
        await tasks.barrier("a")
        await tasks.barrier("b")
        await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="mqttq.broker"):
        asyncio.run(scenario())
    failures = [r.getMessage() for r in caplog.records if "remove failed" in r.getMessage()]
    assert failures == ["storage remove failed: disk gone"]


def test_enqueue_chunks_split_between_callers_in_order() -> None:
    """With `chunk`, one iteration's callers are split into calls of at most `chunk` items
    (a caller larger than that alone), issued in order; each caller gets its own entries."""

    async def scenario() -> tuple[list[list[str]], list[list[str]]]:
        calls: list[list[str]] = []

        async def enqueue(items: list[tuple[str, Any]]) -> list[Any]:
            calls.append([client for client, _ in items])
            return [f"{client}:{message}" for client, message in items]

        batcher = EnqueueBatcher(enqueue, BackgroundTasks(), chunk=3)
        sizes = {"a": 2, "b": 2, "c": 1, "d": 4}
        futures = [
            batcher.enqueue([(client, n) for n in range(size)]) for client, size in sizes.items()
        ]
        return calls, list(await asyncio.gather(*futures))

    calls, results = asyncio.run(scenario())
    assert calls == [["a", "a"], ["b", "b", "c"], ["d"] * 4]
    assert results == [["a:0", "a:1"], ["b:0", "b:1"], ["c:0"], ["d:0", "d:1", "d:2", "d:3"]]


def test_logged_callers_share_one_call_with_their_inbox_rows() -> None:
    """Callers whose messages are in the publish inbox (`logged`) have been answered
    already: their items go in one call, with their rows, however many; a mixed iteration
    is chunked as usual, each call carrying the rows of its own callers."""

    async def scenario() -> list[tuple[str, list[str], list[int]]]:
        calls: list[tuple[str, list[str], list[int]]] = []

        async def enqueue(items: list[tuple[str, Any]]) -> list[Any]:
            calls.append(("plain", [client for client, _ in items], []))
            return [None] * len(items)

        async def enqueue_logged(items: list[tuple[str, Any]], seqs: list[int]) -> list[Any]:
            calls.append(("logged", [client for client, _ in items], seqs))
            return [None] * len(items)

        batcher = EnqueueBatcher(enqueue, BackgroundTasks(), 2, enqueue_logged)
        await asyncio.gather(
            batcher.enqueue([("a", 1), ("b", 1)], 7),
            batcher.enqueue([("a", 2), ("b", 2)], 8),
        )
        await asyncio.gather(
            batcher.enqueue([("a", 3), ("b", 3)], 9),
            batcher.enqueue([("c", 4), ("d", 4)]),
        )
        return calls

    assert asyncio.run(scenario()) == [
        ("logged", ["a", "b", "a", "b"], [7, 8]),
        ("logged", ["a", "b"], [9]),
        ("plain", ["c", "d"], []),
    ]
