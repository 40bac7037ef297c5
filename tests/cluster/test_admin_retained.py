"""Two nodes (issue 34): the node and Kafka views of the admin API in distributed mode, and a
retained message deleted through node 1's admin API is gone on
node 2 too, and stays gone on node 1 after a restart. The delete goes through the
broker's own path for retained messages, which tells every node (the compacted retained
topic), instead of clearing node 1's memory and its own storage only."""

from __future__ import annotations

import pytest

from tests.cluster.cluster_helpers import DEADLINE, PROBE, wait_routed
from tests.cluster.conftest import Nodes
from tests.conftest import BrokerProcess
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import wait_for
from tests.integration.wire import PUBLISH

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]


def retained_topics(node: BrokerProcess) -> list[str]:
    """The retained topics node's admin API lists under `cfg/`."""
    listed = AdminApi(node.data_dir).ok("GET", "/api/v1/retained?prefix=cfg/")["retained"]
    return [entry["topic"] for entry in listed]


def retained_for_new_subscriber(clients: Clients, node: BrokerProcess, name: str) -> list[bytes]:
    """The payloads of the retained messages a new subscriber to `cfg/#` on `node`
    receives: they come right after its SUBACK, before the first probe reaches it."""
    subscriber = clients.connected(node, f"{name}-sub", level=5)
    assert subscriber.subscribe(("cfg/#", 1)).reason_codes == (1,)
    publisher = clients.connected(node, f"{name}-pub", level=5)
    wait_routed(publisher, "cfg", subscriber)
    got = []
    while (packet := subscriber.try_recv(0.0)) is not None:
        if packet.type == PUBLISH and not (packet.topic or "").endswith(PROBE):
            got.append(packet.payload)
    return got


def test_retained_deleted_on_one_node_is_gone_on_both_and_after_a_restart(
    nodes: Nodes, clients: Clients, kafka_prefix: str
) -> None:
    one, two = nodes(2)
    # What a console reads of a node in distributed mode (here: the two nodes just started).
    api = AdminApi(one.data_dir)
    assert api.ok("GET", "/api/v1/node")["mode"] == "distributed"
    kafka = api.ok("GET", "/api/v1/kafka")
    assert (kafka["distributed"], kafka["topic_prefix"]) == (True, kafka_prefix)
    assert f"{kafka_prefix}msg.all" in [topic["name"] for topic in kafka["topics"]]
    groups = {group["group"]: group for group in kafka["consumer_groups"]}
    assert groups[f"{kafka_prefix}msg.all.consumers"]["members"] == 2
    publisher = clients.connected(one, "pub", level=5)
    assert publisher.publish("cfg/a", b"v1", qos=1, retain=True) is not None
    wait_for(lambda: retained_topics(two) == ["cfg/a"], timeout=DEADLINE, what="cfg/a on node 2")
    assert retained_for_new_subscriber(clients, two, "before") == [b"v1"]

    assert AdminApi(one.data_dir).call("DELETE", "/api/v1/retained?topic=cfg/a")[0] == 204
    assert retained_topics(one) == []
    wait_for(lambda: retained_topics(two) == [], timeout=DEADLINE, what="cfg/a gone on node 2")
    assert retained_for_new_subscriber(clients, two, "two") == []

    one.restart()
    assert retained_topics(one) == []
    assert retained_for_new_subscriber(clients, one, "one") == []
