"""An integration's embedded backlog (`SessionBacklog`) on a real SQLite store: what the
feed hands over in an order other than the serials' still reaches the worker, once.

The feed is the broker's hand-over of each committed entry (`Session.deliver_stored`),
made in the order the publishers' messages complete: each publisher's order, and not
always serial order (messages of two publishers queued in one commit complete in their
publishers' turns). Here the store is real and the entries are the ones it committed; the
holder of `storage` and the session's three fields the backlog uses stand in for the broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mqttq.broker.integrations import SessionBacklog, session_id
from mqttq.integrations.record import Delivery
from mqttq.integrations.spec import DeliverySettings, IntegrationSpec
from mqttq.model import Message
from mqttq.storage.ports import QueuedMessage
from mqttq.storage.sqlite.store import SqliteStorage

NAME = "hook"


def spec(max_in_flight: int) -> IntegrationSpec:
    delivery = DeliverySettings(batch_size=10, linger_ms=0, max_in_flight=max_in_flight)
    return IntegrationSpec(NAME, "http", "default", ("t/#",), None, delivery=delivery)


def message(topic: str, publisher: str) -> Message:
    return Message(topic, topic.encode(), 1, False, created_at=time.time(), publisher_id=publisher)


async def opened(tmp_path: Path, max_in_flight: int) -> tuple[SqliteStorage, Any, SessionBacklog]:
    storage = SqliteStorage(tmp_path / "mqttq.sqlite3", commit_interval=0.001)
    await storage.open()
    session = SimpleNamespace(client_id=session_id(NAME), feed=None, fetched_serial=0)
    backlog = SessionBacklog(SimpleNamespace(storage=storage), session, spec(max_in_flight))  # type: ignore[arg-type]
    await backlog.open()
    return storage, session, backlog


async def stored(storage: SqliteStorage, *messages: Message) -> list[QueuedMessage]:
    """Queue `messages` for the integration's session in one call (one commit)."""
    entries = await storage.enqueue([(session_id(NAME), m) for m in messages])
    assert all(entry is not None for entry in entries)
    return [entry for entry in entries if entry is not None]


async def delivered(backlog: SessionBacklog, count: int) -> list[Delivery]:
    """Take and settle until `count` deliveries came (a take that waits fails the test)."""
    out: list[Delivery] = []
    while len(out) < count:
        batch: Sequence[Delivery] = await asyncio.wait_for(backlog.take(10, 0), 10)
        await backlog.settle(batch)
        out.extend(batch)
    await backlog.settle([])  # the last batch's removal committed
    return out


def test_an_entry_fed_after_a_newer_one_is_delivered(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, session, backlog = await opened(tmp_path, max_in_flight=100)
        try:
            a1, b1 = await stored(storage, message("t/a", "a"), message("t/b", "b"))
            assert a1.serial < b1.serial
            session.feed(b1)  # publisher b's message completed first
            session.feed(a1)
            got = await delivered(backlog, 2)
            assert sorted(d.topic for d in got) == ["t/a", "t/b"]
            assert backlog.lag() == 0
            assert backlog.dropped() == 0
            assert await storage.fetch(session_id(NAME), time.time()) == []
        finally:
            backlog.close()
            await storage.close()

    asyncio.run(scenario())


def test_an_older_entry_left_in_storage_by_a_full_backlog_is_read_back(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, session, backlog = await opened(tmp_path, max_in_flight=1)
        try:
            a1, b1, a2 = await stored(
                storage, message("t/a/1", "a"), message("t/b/1", "b"), message("t/a/2", "a")
            )
            session.feed(b1)  # held: the backlog is full now
            session.feed(a1)  # waits in storage
            session.feed(a2)
            got = await delivered(backlog, 3)
            assert [d.topic for d in got] == ["t/b/1", "t/a/1", "t/a/2"]
            assert backlog.dropped() == 0
            assert await storage.fetch(session_id(NAME), time.time()) == []
        finally:
            backlog.close()
            await storage.close()

    asyncio.run(scenario())


def test_entries_fed_while_storage_is_read_are_delivered_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, session, backlog = await opened(tmp_path, max_in_flight=2)
        try:
            first = await stored(storage, *(message(f"t/{i}", "a") for i in range(4)))
            for entry in first:
                session.feed(entry)  # two held, two left in storage: a refill follows
            got = await delivered(backlog, 2)
            # The refill's read is under way on the next take; what commits meanwhile is
            # fed during it and must neither be lost nor delivered twice.
            take = asyncio.ensure_future(backlog.take(10, 0))
            later = await stored(storage, message("t/4", "a"), message("t/5", "a"))
            for entry in later:
                session.feed(entry)
            batch = await asyncio.wait_for(take, 10)
            await backlog.settle(batch)
            got += batch
            got += await delivered(backlog, 6 - len(got))
            assert [d.topic for d in got] == [f"t/{i}" for i in range(6)]
            assert backlog.dropped() == 0
        finally:
            backlog.close()
            await storage.close()

    asyncio.run(scenario())


def test_a_backlog_past_the_store_queue_limit_leaves_memory_and_drains_from_the_file(
    tmp_path: Path,
) -> None:
    # The store keeps an integration's queue up to 65,535 entries, its mirror in memory
    # only up to the store's limit (10 here): past it the backlog is read from the file.
    async def scenario() -> None:
        storage = SqliteStorage(tmp_path / "mqttq.sqlite3", commit_interval=0.001, queue_limit=10)
        await storage.open()
        session = SimpleNamespace(client_id=session_id(NAME), feed=None, fetched_serial=0)
        broker = SimpleNamespace(storage=storage)
        backlog = SessionBacklog(broker, session, spec(max_in_flight=5))  # type: ignore[arg-type]
        await backlog.open()
        try:
            topics = [f"t/{i}" for i in range(40)]
            for start in range(0, 40, 10):
                entries = await stored(
                    storage, *(message(t, "a") for t in topics[start : start + 10])
                )
                for entry in entries:
                    session.feed(entry)
            got = await delivered(backlog, 40)
            assert [d.topic for d in got] == topics
            assert backlog.dropped() == 0
            assert backlog.lag() == 0
            assert await storage.fetch(session_id(NAME), time.time()) == []
        finally:
            backlog.close()
            await storage.close()

    asyncio.run(scenario())


def test_a_queue_in_the_file_is_read_in_pieces_from_where_asked(tmp_path: Path) -> None:
    async def scenario() -> None:
        path = tmp_path / "mqttq.sqlite3"
        storage = SqliteStorage(path, commit_interval=0.001)
        await storage.open()
        for call in range(4):  # several runs
            await stored(storage, *(message(f"t/{call}/{i}", "a") for i in range(50)))
        gone = await storage.fetch_after(session_id(NAME), 0, 3)
        await storage.remove_many([(session_id(NAME), e.packet_id) for e in gone])
        await storage.close()
        # Reopened over queued entries: the queue is not mirrored, it is read from the file.
        storage = SqliteStorage(path, commit_interval=0.001)
        await storage.open()
        try:
            first = await storage.fetch_after(session_id(NAME), 0, 10)
            assert [e.serial for e in first] == list(range(4, 14))
            assert first[0].message.topic == "t/0/3"
            middle = await storage.fetch_after(session_id(NAME), 120, 1000)
            assert [e.serial for e in middle] == list(range(121, 201))
            assert middle[-1].message.topic == "t/3/49"
            assert await storage.fetch_after(session_id(NAME), 200, 10) == []
        finally:
            await storage.close()

    asyncio.run(scenario())


def test_a_backlog_left_in_the_file_drains_whole_and_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        path = tmp_path / "mqttq.sqlite3"
        storage = SqliteStorage(path, commit_interval=0.001)
        await storage.open()
        topics = [f"t/{i}" for i in range(300)]
        for start in range(0, 300, 100):
            await stored(storage, *(message(t, "a") for t in topics[start : start + 100]))
        await storage.close()
        storage, _session, backlog = await opened(tmp_path, max_in_flight=25)
        try:
            got = await delivered(backlog, 300)
            assert [d.topic for d in got] == topics
            assert backlog.dropped() == 0
            assert backlog.lag() == 0
            assert await storage.fetch(session_id(NAME), time.time()) == []
        finally:
            backlog.close()
            await storage.close()

    asyncio.run(scenario())
