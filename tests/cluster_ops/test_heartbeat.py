"""Node heartbeats in Redis and what reads them: the keys (with their TTL, gone after a
clean stop, expiring after kill -9), `mqttq cluster status` and `/api/v1/cluster`."""

from __future__ import annotations

import pytest

from tests.cluster_ops.nodes import (
    INTERVAL_MS,
    cluster_status,
    kill_node,
    node_config,
    nodes_by_id,
    redis_client,
    run_cli,
)
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]

NODES = "mqttq:cluster:nodes"


def _keys(node_id: str) -> tuple[str, str]:
    return f"mqttq:cluster:{{{node_id}}}:node", f"mqttq:cluster:{{{node_id}}}:tenants"


def test_heartbeat_keys_have_a_ttl_and_go_on_a_clean_stop(
    kafka: KafkaServer,
    kafka_prefix: str,
    redis_url: str,
    broker_factory: BrokerFactory,
    clients: Clients,
) -> None:
    broker = broker_factory(node_config("hb-1", kafka.bootstrap, kafka_prefix, redis_url))
    clients.connected(broker, "one")
    with redis_client(redis_url) as db:
        node_key, tenants_key = _keys("hb-1")

        def beating() -> bool:
            record = db.hgetall(node_key)
            return record.get(b"connections") == b"1" and db.exists(tenants_key) == 1

        wait_for(beating, what="the heartbeat with one connection")
        assert 0 < db.pttl(node_key) <= 3 * INTERVAL_MS
        assert 0 < db.pttl(tenants_key) <= 3 * INTERVAL_MS
        assert db.hget(tenants_key, "default") == b"[1, 1, 0]"
        assert db.zscore(NODES, "hb-1") is not None
        record = db.hgetall(node_key)
        assert record[b"node_id"] == b"hb-1"
        assert int(record[b"pid"]) > 0 and f'"tcp": {broker.port}'.encode() in record[b"ports"]

        clients.close_all()
        assert broker.terminate() == 0
        assert db.exists(node_key, tenants_key) == 0
        assert db.zscore(NODES, "hb-1") is None


def test_status_lists_two_nodes_with_their_clients_and_a_killed_one_goes(
    kafka: KafkaServer,
    kafka_prefix: str,
    redis_url: str,
    broker_factory: BrokerFactory,
    clients: Clients,
) -> None:
    first = broker_factory(node_config("st-1", kafka.bootstrap, kafka_prefix, redis_url))
    second = broker_factory(node_config("st-2", kafka.bootstrap, kafka_prefix, redis_url))
    for n in range(2):
        clients.connected(first, f"a{n}")
    clients.connected(second, "b0")

    def counted() -> dict[str, dict[str, object]] | None:
        nodes = nodes_by_id(cluster_status(redis_url))
        if {k: (v.get("connections"), v["state"]) for k, v in nodes.items()} == {
            "st-1": (2, "alive"),
            "st-2": (1, "alive"),
        }:
            return nodes
        return None

    nodes = wait_for(counted, interval=0.2, what="both nodes with their clients")
    assert nodes["st-1"]["ports"]["tcp"] == first.port
    assert nodes["st-2"]["ports"]["tcp"] == second.port
    assert nodes["st-1"]["log_consumer_lag"] >= 0
    assert nodes["st-1"]["tenants"] == {"default": {"connections": 2, "sessions": 2, "topics": 0}}

    # The same through the admin API of either node.
    body = AdminApi(second.data_dir).ok("GET", "/api/v1/cluster")
    assert body["distributed"] is True
    assert {node["node_id"] for node in body["nodes"]} == {"st-1", "st-2"}

    table = run_cli("cluster", "status", "--redis", redis_url)
    assert table.returncode == 0 and "st-1" in table.stdout and "alive" in table.stdout

    kill_node(second)

    def gone() -> bool:
        nodes = nodes_by_id(cluster_status(redis_url))
        return nodes["st-2"]["state"] == "gone" and nodes["st-1"]["state"] == "alive"

    wait_for(gone, interval=0.2, what="the killed node to be gone")
    with redis_client(redis_url) as db:
        assert db.exists(*_keys("st-2")) == 0


def test_status_without_redis_is_one_line_and_exit_1(redis_url: str) -> None:
    done = run_cli("cluster", "status", "--redis", "redis://127.0.0.1:1/0")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mqttq: error: cannot read the cluster")
    assert "Traceback" not in done.stderr and done.stdout == ""
    empty = cluster_status(redis_url)
    assert empty == {"nodes": [], "alive": 0, "stale": 0, "gone": 0}


def test_embedded_broker_has_no_cluster(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    body = AdminApi(broker.data_dir).ok("GET", "/api/v1/cluster")
    assert body == {"distributed": False, "nodes": [], "alive": 0, "stale": 0, "gone": 0}
