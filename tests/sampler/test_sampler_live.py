"""The sampler on a real broker (rates move while a client publishes) and, for a cluster,
two nodes' samples through a real Redis: each node's history answers for both."""

from __future__ import annotations

import asyncio
import json

import pytest

from mqttq.admin.dashboard.history import cluster_columns
from mqttq.broker.sampler import Counters, RedisSamples, Sampler
from mqttq.storage.redis.keys import connect
from tests.conftest import InProcessBroker
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.sampler.test_rows import counters

pytestmark = pytest.mark.mqttq_only


def test_history_shows_the_messages_a_client_publishes(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[admin]\nport = 0\nsample_interval = 1.0\n")
    assert isinstance(broker, InProcessBroker)
    subscriber = clients.raw(broker)
    subscriber.connect("sampler-sub")
    subscriber.subscribe(("load/#", 0))
    publisher = clients.raw(broker)
    publisher.connect("sampler-pub")
    api = AdminApi(broker.data_dir)

    def moved() -> dict[str, object] | None:
        for _ in range(20):
            publisher.publish("load/x", b"m", qos=0)
        history = api.ok("GET", "/api/v1/history?seconds=120")
        [columns] = history["nodes"].values()
        rates = [r for r in columns["messages_in"] if r]
        outs = [r for r in columns["messages_out"] if r]
        return columns if rates and outs and 2 in columns["connections"] else None

    columns = wait_for(moved, what="a sample with messages in and out", timeout=30.0, interval=0.2)
    assert columns["t"] == sorted(columns["t"])
    assert all(
        later - earlier >= 1.0
        for earlier, later in zip(columns["t"], columns["t"][1:], strict=False)
    )


def test_two_nodes_read_each_other_through_redis(redis_url: str) -> None:
    async def scenario() -> None:
        now = [1000.0]
        a = Sampler(
            lambda at: counters(at, connections=2),
            node_id="node-a",
            interval=5.0,
            shared=RedisSamples(connect(redis_url, cluster=False), "t:", 721),
            clock=lambda: now[0],
        )
        b = Sampler(
            lambda at: counters(at, connections=5, lag=3, produce=(0.0, 0)),
            node_id="node-b",
            interval=5.0,
            shared=RedisSamples(connect(redis_url, cluster=False), "t:", 721),
            clock=lambda: now[0],
        )
        try:
            for _ in range(3):
                for sampler in (a, b):
                    row = sampler.sample_now()
                    assert sampler.shared is not None
                    await sampler.shared.write(sampler.node_id, row)
                now[0] += 5.0
            now[0] -= 5.0
            from_a = await a.history(3600)
            from_b = await b.history(3600)
            assert set(from_a) == set(from_b) == {"node-a", "node-b"}
            assert from_a["node-b"] == from_b["node-b"] == list(b.rows)
            assert from_b["node-a"] == list(a.rows)
            cluster = cluster_columns(from_a, 5.0)
            assert cluster["t"] == [1000.0, 1005.0, 1010.0]
            assert cluster["connections"] == [7, 7, 7]
            assert cluster["kafka_lag"] == [3, 3, 3]
            assert (await a.history(4))["node-b"] == [list(b.rows)[-1]]
            client = connect(redis_url, cluster=False)
            try:
                key = "t:mqttq:dashboard:{node-a}:samples"
                stored = [json.loads(item) for item in await client.lrange(key, 0, -1)]
                assert stored == list(a.rows)
                assert 0 < await client.ttl(key) <= 3660
                assert await client.zscore("t:mqttq:dashboard:nodes", "node-b") == 1010000
            finally:
                await client.aclose()
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(scenario())


def test_a_redis_that_fails_leaves_the_other_nodes_out() -> None:
    async def scenario() -> None:
        import socket  # noqa: PLC0415

        with socket.socket() as probe:  # bound, never listening: refused
            probe.bind(("127.0.0.1", 0))
            url = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
            sampler = Sampler(
                lambda at: Counters(at, 1, 0, 0, {}, 0, 0),
                node_id="alone",
                interval=1.0,
                shared=RedisSamples(connect(url, cluster=False), "", 10),
            )
            sampler.sample_now()
            history = await sampler.history(60)
            await sampler.stop()
        assert list(history) == ["alone"] and len(history["alone"]) == 1

    asyncio.run(scenario())
