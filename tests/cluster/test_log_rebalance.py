"""A second node joining `msg.all`'s consumer group: the first commits, as its partitions
are revoked, what it had done and not committed yet, so the new owner does not read it
again (a node joining a busy cluster delivered a batch twice)."""

from __future__ import annotations

import asyncio

import pytest

from mqttq.model import Message
from mqttq.storage.kafka import message_log as kafka_log
from mqttq.storage.kafka.message_log import KafkaMessageLog
from tests.kafka_service import KafkaServer

pytestmark = pytest.mark.slow

DEADLINE = 60.0


def _messages(tag: str) -> list[Message]:
    """One message from each of 16 publishers (so both partitions get some)."""
    return [Message("t", tag.encode(), 1, publisher_id=f"pub-{n}") for n in range(16)]


async def _read_all(log: KafkaMessageLog, count: int) -> None:
    """Read `count` messages and mark every batch done."""
    seen = 0
    async with asyncio.timeout(DEADLINE):
        while seen < count:
            batch = await log.read()
            if batch is not None:
                seen += len(batch.messages)
                log.done(batch.position)


def test_a_rebalance_commits_the_done_offsets_of_revoked_partitions(
    kafka: KafkaServer, kafka_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After its first commit the log commits again only a minute later: what the second
    # batch did is committed by the revocation or not at all.
    monkeypatch.setattr(kafka_log, "COMMIT_INTERVAL", 60.0)

    async def scenario() -> None:
        first = KafkaMessageLog(kafka.bootstrap, topic_prefix=kafka_prefix, partitions=2)
        await first.open()
        second = KafkaMessageLog(kafka.bootstrap, topic_prefix=kafka_prefix, partitions=2)
        try:
            for tag in ("committed", "done"):
                await asyncio.gather(*(first.append("default", m) for m in _messages(tag)))
                await _read_all(first, 16)
            await asyncio.sleep(0.5)  # the first commit is made
            await second.open()
            read_again: list[bytes] = []
            async with asyncio.timeout(DEADLINE):
                # Both keep polling (the first must, to give partitions away) until the
                # second has partitions and has read whatever it would.
                while not await second._consumer.assignment():  # type: ignore[union-attr]
                    await asyncio.gather(first.read(), second.read())
                for _ in range(10):
                    batch = await second.read()
                    if batch is not None:
                        read_again += [m.payload for _, m in batch.messages]
            assert read_again == []
        finally:
            await second.close()
            await first.close()

    asyncio.run(scenario())
