"""`migrate_client.lua` through `RedisWriter.write`, against a real Redis (standalone and a
3-master cluster): the queue's order and members whatever the queue's size (a listpack up to
128 entries, a skiplist above, ZADD chunks of 1,000 members), exact expiries, the counters
and the marker, and the same result whatever order the members are added in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from mqttq.migrate.plan import ClientPlan, Planner
from mqttq.migrate.redis_writer import OnConflict, RedisWriter, WriteStatus

NOW = 1_900_000_000_000  # rows from the future: nothing expires while the test runs
SIZES = {"one": 1, "listpack": 128, "skiplist": 129, "chunks": 2500}


def rows_of(client_id: str, count: int) -> list[tuple[Any, ...]]:
    """`count` message rows; serials past the packet-id wrap, every 7th with an expiry."""
    rows = []
    for n in range(count):
        serial = 65_000 + n
        rows.append(
            (client_id, serial, f"t/{client_id}", NOW + n, (serial - 1) % 65535 + 1, "PUBLISH",
             1, f"{client_id}:{n}".encode(), None, False, 60 + n if n % 7 == 0 else None,
             None, None, None, None)
        )  # fmt: skip
    return rows


def plan(client_id: str, count: int, session: tuple[Any, Any] | None) -> ClientPlan:
    planner = Planner(65535, 3600, clock=lambda: NOW / 1000)
    accumulated = planner.rows_of((client_id,), session)
    for row in rows_of(client_id, count):
        accumulated.kept.append(row)
    accumulated.total = count
    result = planner.plan(accumulated)
    assert not result.problems, result.problems
    return result


def write(url: str, plans: list[ClientPlan], *, cluster: bool) -> list[tuple[WriteStatus, int]]:
    async def run() -> list[tuple[WriteStatus, int]]:
        async with RedisWriter(url, cluster=cluster) as writer:
            return await writer.write(plans, OnConflict.FAIL, "run-1")

    return asyncio.run(run())


@pytest.fixture(params=["standalone", "cluster"])
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, bool, Any]]:
    cluster = request.param == "cluster"
    url: str = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    client: Any = redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    yield url, cluster, client
    client.close()


def test_queues_of_every_size_keep_serial_order_members_and_expiries(
    target: tuple[str, bool, Any],
) -> None:
    url, cluster, client = target
    plans = [plan(name, size, None) for name, size in SIZES.items()]
    assert write(url, plans, cluster=cluster) == [
        (WriteStatus.MIGRATED, size) for size in SIZES.values()
    ]
    for name, size in SIZES.items():
        expected = [(row[1], f"{{{name}}}_messages_{row[4]}") for row in rows_of(name, size)]
        stored = client.zrange(f"{{{name}}}_messages", 0, -1, withscores=True)
        assert [(int(score), member.decode()) for member, score in stored] == expected
        for n in sorted({0, min(1, size - 1), size - 1}):
            row = rows_of(name, size)[n]
            key = f"{{{name}}}_messages_{row[4]}"
            ttl_ms = 3_600_000 if row[10] is None else row[10] * 1000
            assert client.pexpiretime(key) == row[3] + ttl_ms
            value = client.get(key)
            assert value is not None and f'"packetId":{row[4]},'.encode() in value
        assert client.get(f"{{{name}}}_last_packet_id") == str(rows_of(name, size)[-1][4]).encode()
        assert client.get(f"{{{name}}}_last_serial_number") == str(65_000 + size - 1).encode()
        assert client.ttl(f"{{{name}}}_migrated") == -1


def test_counters_come_from_the_plan_and_absent_ones_are_not_written(
    target: tuple[str, bool, Any],
) -> None:
    url, cluster, client = target
    with_session = plan("with-session", 3, (70_000, 4465))
    idle = ClientPlan("idle")  # a session row with NULL counters and no message
    assert write(url, [with_session, idle], cluster=cluster) == [
        (WriteStatus.MIGRATED, 3),
        (WriteStatus.MIGRATED, 0),
    ]
    assert client.get("{with-session}_last_packet_id") == b"4465"
    assert client.get("{with-session}_last_serial_number") == b"70000"
    assert client.exists("{idle}_messages", "{idle}_last_packet_id") == 0
    assert client.exists("{idle}_last_serial_number") == 0
    assert client.get("{idle}_migrated") is not None
    again = write(url, [with_session, idle], cluster=cluster)
    assert again == [(WriteStatus.ALREADY, 0), (WriteStatus.ALREADY, 0)]


def test_newest_first_insertion_gives_the_zadd_of_the_broker(
    redis_url: str,
) -> None:
    """The queue the script builds newest first is the one a plain oldest-first ZADD builds
    (same members, scores and encoding), as the broker's own Lua would have left it."""
    client = redis.Redis.from_url(redis_url)
    try:
        for name, size in (("small", 100), ("large", 300)):
            write(redis_url, [plan(name, size, None)], cluster=False)
            members: list[tuple[bytes, float]] = client.zrange(  # type: ignore[assignment]
                f"{{{name}}}_messages", 0, -1, withscores=True
            )
            for member, score in members:
                client.zadd("reference", {member: score})
            assert client.zrange("reference", 0, -1, withscores=True) == members
            assert client.object("encoding", f"{{{name}}}_messages") == client.object(
                "encoding", "reference"
            )
            client.delete("reference")
    finally:
        client.close()
