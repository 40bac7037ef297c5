"""Extract: the DEVICE queues of a Redis or Redis Cluster (TBMQ 2.x's layout, `redis_keys`)
as a DataFrame with one row per queue entry, read by the executors.

No JVM connector: the work is Python functions on the executors, in two stages.
1. One task per Redis master (one for a standalone Redis) SCANs it for `*}_messages` keys
   (the queues; with the key prefix) and yields (node URL, key) pairs.
2. The pairs are spread over `partitions` tasks; each opens one connection per node it
   needs and reads its queues in pipelines: ZRANGE WITHSCORES (members and serials), then
   GET and PTTL of every member's message string.

A member whose string is gone (expired) is a row with `present` false: the broker drops
such references on the next fetch. The driver first checks that Redis answers (a bad URL
fails with one line) and lists the masters of a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import groupby
from typing import TYPE_CHECKING, Any, Final

import redis
from redis.cluster import RedisCluster

from mqttq.spark.reports import ReportError
from mqttq.storage.redis.keys import (
    MESSAGES_SUFFIX,
    client_id_of,
    glob_escape,
    node_url,
    packet_id_of,
    redacted,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SCAN_COUNT: Final = 10_000
QUEUES_PER_PIPELINE: Final = 200
ENTRIES_PER_PIPELINE: Final = 2_000
CONNECT_TIMEOUT: Final = 5.0


def entry_schema() -> StructType:
    """The rows of `read_entries` (and of the SQLite extract: the reports take either)."""
    from pyspark.sql.types import (  # noqa: PLC0415
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    return StructType(
        [
            StructField("client_id", StringType(), False),
            StructField("serial", LongType(), False),
            StructField("packet_id", IntegerType(), True),
            StructField("packet_type", StringType(), True),
            StructField("time_ms", LongType(), True),
            StructField("bytes", LongType(), True),
            StructField("ttl_ms", LongType(), True),
            StructField("present", BooleanType(), False),
        ]
    )


def describe(url: str, cluster: bool) -> str:
    """`Redis at URL` or `Redis Cluster at URL`, without the password."""
    return f"{'Redis Cluster' if cluster else 'Redis'} at {redacted(url)}"


def master_urls(url: str, cluster: bool, *, prefix: str | None = None) -> list[str]:
    """The URL of every master to scan (`url` itself for a standalone Redis). ReportError
    (one line) when Redis cannot be reached, or, given the key `prefix`, when no master
    holds any queue (the scan stops at the first one found)."""
    try:
        if cluster:
            with RedisCluster.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT) as client:
                primaries = client.get_primaries()
            masters = [node_url(url, node.host, int(node.port)) for node in primaries]
        else:
            with redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT) as client:
                client.ping()
            masters = [url]
        if prefix is not None and not any(next(scan_queues(m, prefix), None) for m in masters):
            raise ReportError(f"no DEVICE queue in {describe(url, cluster)}")
    except (redis.RedisError, OSError) as exc:
        raise ReportError(f"cannot reach {describe(url, cluster)}: {exc}") from exc
    except ValueError as exc:  # redis-py refuses a malformed URL
        raise ReportError(f"bad Redis URL {redacted(url)!r}: {exc}") from exc
    return masters


def scan_queues(node: str, prefix: str) -> Iterator[tuple[str, bytes]]:
    """(node, key) of every queue ZSET on one master (runs on an executor)."""
    match = f"{glob_escape(prefix)}{{*{MESSAGES_SUFFIX}"
    with redis.Redis.from_url(node, socket_connect_timeout=CONNECT_TIMEOUT) as client:
        for key in client.scan_iter(match=match, count=SCAN_COUNT, _type="zset"):
            yield node, key


def read_queues(pairs: Iterable[tuple[str, bytes]], prefix: str) -> Iterator[tuple[Any, ...]]:
    """The entry rows of the queues in `pairs` (runs on an executor, one partition)."""
    for node, keys in groupby(sorted(pairs), key=lambda pair: pair[0]):
        with redis.Redis.from_url(node, socket_connect_timeout=CONNECT_TIMEOUT) as client:
            queue_keys = [key for _node, key in keys]
            for start in range(0, len(queue_keys), QUEUES_PER_PIPELINE):
                yield from _read_chunk(
                    client, queue_keys[start : start + QUEUES_PER_PIPELINE], prefix
                )


def _read_chunk(
    client: redis.Redis, queue_keys: list[bytes], prefix: str
) -> Iterator[tuple[Any, ...]]:
    pipe = client.pipeline(transaction=False)
    for key in queue_keys:
        pipe.zrange(key, 0, -1, withscores=True)
    members: list[tuple[str, str, bytes, int]] = []
    for key, queue in zip(queue_keys, pipe.execute(), strict=True):
        name = key.decode(errors="replace")
        client_id = client_id_of(name, prefix)
        if client_id is None:
            continue
        members += [(client_id, name, member, int(score)) for member, score in queue]
    for start in range(0, len(members), ENTRIES_PER_PIPELINE):
        chunk = members[start : start + ENTRIES_PER_PIPELINE]
        pipe = client.pipeline(transaction=False)
        for _client_id, _name, member, _serial in chunk:
            pipe.get(member)
            pipe.pttl(member)
        replies = pipe.execute()
        for i, (client_id, name, member, serial) in enumerate(chunk):
            text, ttl = replies[2 * i], replies[2 * i + 1]
            packet_id = packet_id_of(member.decode(errors="replace"), name)
            yield (client_id, serial, packet_id, *_fields(text), _ttl(ttl), text is not None)


def _fields(text: bytes | None) -> tuple[str | None, int | None, int | None]:
    """packetType, time and size of a stored message; None for what it lacks."""
    if text is None:
        return None, None, None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None, None, len(text)
    if not isinstance(obj, dict):
        return None, None, len(text)
    packet_type = obj.get("packetType")
    time_ms = obj.get("time")
    return (
        packet_type if isinstance(packet_type, str) else None,
        time_ms if type(time_ms) is int else None,
        len(text),
    )


def _ttl(pttl: int) -> int | None:
    return pttl if pttl >= 0 else None


def read_entries(
    spark: SparkSession, url: str, *, cluster: bool, prefix: str, partitions: int
) -> DataFrame:
    """Every queue entry of the Redis at `url`: client_id, serial, packet_id, packet_type,
    time_ms, bytes (of the JSON), ttl_ms (None: no TTL or gone), present."""
    masters = master_urls(url, cluster)
    pairs = spark.sparkContext.parallelize(masters, len(masters)).flatMap(
        lambda node: scan_queues(node, prefix)
    )
    entries = pairs.repartition(partitions).mapPartitions(lambda part: read_queues(part, prefix))
    return spark.createDataFrame(entries, entry_schema())
