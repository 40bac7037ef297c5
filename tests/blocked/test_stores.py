"""The blocked-client store port on both adapters (SQLite in a data dir, the compacted
Kafka topic): what one writer stores, a second one (another process: the CLI, another
node) loads at open and hears through `follow`, puts and deletes alike; an entry stored
again under its id replaces it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mqttq.auth.blocked.entries import BlockedClient, parse_entry
from mqttq.auth.blocked.ports import BlockedStore
from mqttq.storage.sqlite.blocked import SqliteBlockedStore
from tests.kafka_service import KafkaServer

pytestmark = pytest.mark.mqttq_only

DEADLINE = 30.0
"""Bounds a hang, not speed."""

Pair = Callable[[], BlockedStore]


async def wait_heard(heard: list[tuple[str, BlockedClient | None]], count: int) -> None:
    async def until() -> None:
        while len(heard) < count:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(until(), DEADLINE)


async def contract(make: Pair) -> None:
    now = time.time()
    first = parse_entry("client_id", "dev-1", reason="a", now=now)
    network = parse_entry("address", "2001:db8::/32", expires_in=3600, now=now)
    writer, reader = make(), make()
    await writer.open()
    try:
        await writer.put(first)
        await reader.open()
        try:
            assert await reader.load() == [first]
            heard: list[tuple[str, BlockedClient | None]] = []
            reader.follow(lambda entry_id, entry: heard.append((entry_id, entry)))
            await writer.put(network)
            await wait_heard(heard, 1)
            assert heard == [(network.id, network)]
            replaced = parse_entry("client_id", "dev-1", reason="b", now=now + 1)
            await writer.put(replaced)
            assert await writer.delete(network.id) is True
            assert await writer.delete(network.id) is False
            await wait_heard(heard, 3)
            assert heard[1:] == [(first.id, replaced), (network.id, None)]
            assert sorted(e.id for e in await writer.load()) == [first.id]
            assert await reader.load() == [replaced]
        finally:
            await reader.close()
    finally:
        await writer.close()
    again = make()  # a new life of a node reads what is stored
    await again.open()
    try:
        assert await again.load() == [replaced]
    finally:
        await again.close()


def test_sqlite_store(tmp_path: Path) -> None:
    asyncio.run(contract(lambda: SqliteBlockedStore.in_data_dir(tmp_path, poll_interval=0.05)))


@pytest.mark.slow
def test_kafka_store(kafka: KafkaServer, kafka_prefix: str) -> None:
    from mqttq.storage.kafka.blocked import KafkaBlockedStore  # noqa: PLC0415 (Kafka only)

    asyncio.run(contract(lambda: KafkaBlockedStore(kafka.bootstrap, kafka_prefix)))
