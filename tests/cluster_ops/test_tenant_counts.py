"""The tenant layer of the limits counts cluster-wide: two nodes share one tenant's quota
through their heartbeats in Redis, a killed node's counts expire, and the node layer stays
per node. Also the heartbeat itself on a real 3-master Redis Cluster (hash tags)."""

from __future__ import annotations

import asyncio

import pytest

from mqttq.cluster.heartbeat import NodeHeartbeat
from mqttq.cluster.nodes import NodeRecord
from mqttq.cluster.status import cluster_status
from mqttq.storage.redis.keys import connect
from tests.cluster_ops.nodes import kill_node, node_config
from tests.integration.helpers import Clients
from tests.integration.test_limits import SESSION_EXPIRY, V311_SERVER_UNAVAILABLE
from tests.integration.test_limits import connect as connect_client
from tests.integration.waiting import BrokerFactory, BrokerUnderTest, wait_for
from tests.integration.wire import RC
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]

LIMIT = 3


def _refused(clients: Clients, broker: BrokerUnderTest, client_id: str, level: int) -> int:
    """Connect a client of the default tenant (3.1.1 clients without credentials are in
    it); its reason code (a client admitted is closed)."""
    client, code = connect_client(
        clients, broker, client_id, "default", level=level, expect_success=False
    )
    client.close()
    return code


def test_tenant_connections_count_across_two_nodes(
    kafka: KafkaServer,
    kafka_prefix: str,
    redis_url: str,
    broker_factory: BrokerFactory,
    clients: Clients,
) -> None:
    quota = f"[mqtt_limit.tenant]\nmax_connections_per_node = {LIMIT}\n"
    first = broker_factory(node_config("tc-1", kafka.bootstrap, kafka_prefix, redis_url, quota))
    second = broker_factory(node_config("tc-2", kafka.bootstrap, kafka_prefix, redis_url, quota))
    held = [connect_client(clients, first, f"a{n}", "default")[0] for n in range(LIMIT - 1)]
    held.append(connect_client(clients, second, "b0", "default")[0])
    # Node 1 holds 2, node 2 holds 1: the 4th of the tenant is refused on either node once
    # their heartbeats have crossed (on 5.0 0x97, on 3.1.1 return code 3).
    wait_for(
        lambda: _refused(clients, first, "a-more", 5) == RC.QUOTA_EXCEEDED,
        interval=0.1,
        what="node 1 to count node 2's connection",
    )
    wait_for(
        lambda: _refused(clients, second, "b-more", 5) == RC.QUOTA_EXCEEDED,
        interval=0.1,
        what="node 2 to count node 1's connections",
    )
    assert _refused(clients, second, "b-v3", 4) == V311_SERVER_UNAVAILABLE
    # Another tenant is not affected: its own quota, cluster-wide too.
    for n in range(LIMIT):
        connect_client(clients, second if n % 2 else first, f"other-{n}", "globex")

    # Node 1 killed: its two connections expire with its keys; node 2 admits again, up to
    # the limit (it holds 1).
    kill_node(first)

    def admitted() -> bool:
        client, code = connect_client(clients, second, "b1", "default", expect_success=False)
        if code != 0:
            client.close()
        return code == 0

    wait_for(admitted, interval=0.2, what="node 2 to forget the killed node's connections")
    connect_client(clients, second, "b2", "default")
    assert _refused(clients, second, "b3", 5) == RC.QUOTA_EXCEEDED


def test_tenant_sessions_and_topics_count_across_two_nodes(
    kafka: KafkaServer,
    kafka_prefix: str,
    redis_url: str,
    broker_factory: BrokerFactory,
    clients: Clients,
) -> None:
    """max_sessions = 2 and max_topics = 1 for the tenant: a persistent session kept on
    node 1 after its client left and a subscription there count on node 2 as well."""
    quota = "[mqtt_limit.tenant]\nmax_sessions = 2\nmax_topics = 1\n"
    first = broker_factory(node_config("ts-1", kafka.bootstrap, kafka_prefix, redis_url, quota))
    second = broker_factory(node_config("ts-2", kafka.bootstrap, kafka_prefix, redis_url, quota))
    kept, _ = connect_client(clients, first, "kept", "acme", clean=False, props=[SESSION_EXPIRY])
    assert kept.subscribe(("t/1", 1)).reason_codes == (1,)
    kept.disconnect()
    subscriber, _ = connect_client(clients, second, "online", "acme")

    def session_refused() -> bool:
        client, code = connect_client(clients, second, "third", "acme", expect_success=False)
        client.close()
        return code == RC.QUOTA_EXCEEDED

    wait_for(session_refused, interval=0.1, what="node 2 to count node 1's kept session")
    # The tenant's one topic is held on node 1: a new filter on node 2 is refused.
    suback = subscriber.subscribe(("t/2", 1))
    assert suback.reason_codes == (RC.QUOTA_EXCEEDED,)


def test_heartbeat_on_a_redis_cluster(redis_cluster_url: str) -> None:
    async def scenario() -> dict[str, object]:
        seen: list[dict[str, dict[str, int]]] = []

        def beat(node_id: str, connections: int) -> NodeHeartbeat:
            def snapshot(now: float) -> NodeRecord:
                return NodeRecord(
                    node_id=node_id,
                    host="127.0.0.1",
                    ports={"tcp": 1},
                    pid=1,
                    started_at=now,
                    heartbeat_at=now,
                    interval_ms=1000,
                    connections=connections,
                )

            return NodeHeartbeat(
                connect(redis_cluster_url, cluster=True),
                url=redis_cluster_url,
                key_prefix="p:",
                node_id=node_id,
                interval_ms=1000,
                snapshot=snapshot,
                tenant_counts=lambda: {"acme": {"connections": connections}},
                on_cluster_usage=seen.append,
            )

        one, two = beat("c-1", 2), beat("c-2", 5)
        assert await one.beat() and await two.beat() and await one.beat()
        reader = connect(redis_cluster_url, cluster=True)
        status = await cluster_status(reader, "p:")
        await one.stop()
        after = await cluster_status(reader, "p:")
        await two.stop()
        await reader.aclose()
        assert seen[-1] == {"acme": {"connections": 5, "sessions": 0, "topics": 0}}
        assert [n["node_id"] for n in after["nodes"]] == ["c-2"]  # type: ignore[index]
        return status

    status = asyncio.run(scenario())
    assert status["alive"] == 2
    assert [n["connections"] for n in status["nodes"]] == [2, 5]  # type: ignore[attr-defined]
