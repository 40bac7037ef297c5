"""Two real distributed nodes (issue 34): the history endpoint of either node answers for
both nodes and for the cluster, with Kafka's series measured."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.conftest import Nodes
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import wait_for

pytestmark = [
    pytest.mark.mqttq_only,
    pytest.mark.slow,
    pytest.mark.broker_process,
    pytest.mark.xdist_group("kafka"),
]

DEADLINE = 60.0
"""Bounds a stuck cluster, not its speed (samples come every 5 s)."""


def test_each_node_answers_for_both_and_the_cluster(nodes: Nodes, clients: Clients) -> None:
    one, two = nodes(2)
    clients.connected(two, "on-two-a", level=5)
    clients.connected(two, "on-two-b", level=5)
    clients.connected(one, "on-one", level=5)

    def both(node: Any) -> dict[str, Any] | None:
        history = AdminApi(node.data_dir).ok("GET", "/api/v1/history?seconds=600")
        columns = history["nodes"]
        if set(columns) != {"node-1", "node-2"}:
            return None
        if 1 not in columns["node-1"]["connections"]:
            return None
        if 2 not in columns["node-2"]["connections"]:
            return None
        # 1 on node 1 + 2 on node 2 at one step, once both nodes sampled after the connects
        return history if 3 in history["cluster"]["connections"] else None

    from_one = wait_for(lambda: both(one), timeout=DEADLINE, interval=0.5, what="both nodes")
    from_two = wait_for(lambda: both(two), timeout=DEADLINE, interval=0.5, what="both nodes")
    assert from_one["interval_s"] == from_two["interval_s"] == 5
    for history in (from_one, from_two):
        node_two = history["nodes"]["node-2"]
        assert node_two["kafka_lag"] is not None  # measured in distributed mode
        assert len(node_two["kafka_lag"]) == len(node_two["t"])
        cluster = history["cluster"]
        assert cluster["t"] == sorted(set(history["nodes"]["node-1"]["t"]) | set(node_two["t"]))
