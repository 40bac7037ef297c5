"""BackgroundTasks.barrier: a client waits for its own writes and the queue writes in
flight, not for other clients' writes (real futures on a real event loop, no I/O)."""

from __future__ import annotations

import asyncio

from mqttq.broker.pending import BackgroundTasks


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
