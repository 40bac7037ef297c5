"""Three nodes, one broker (issue 15): a message published on one node reaches
subscribers connected to the others, at QoS 0, 1 and 2, each publisher's order kept;
retained messages and subscriptions made on one node are known to a node started later."""

from __future__ import annotations

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.cluster_helpers import PERSISTENT, until_all, wait_routed
from tests.cluster.conftest import Nodes
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import wait_for

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]


def test_qos_0_1_2_cross_nodes_in_publish_order(
    nodes: Nodes, redis_url: str, clients: Clients
) -> None:
    """A publisher on node 1; a non-persistent subscriber on node 2 and a persistent
    DEVICE subscriber on node 3 each get every message, per QoS in publish order."""
    one, two, three = nodes(3)
    live = clients.connected(two, "live", level=5)
    assert live.subscribe(("x/#", 2)).reason_codes == (2,)
    device = clients.connected(three, "device", level=5, clean=False, props=PERSISTENT)
    assert device.subscribe(("x/#", 2)).reason_codes == (2,)
    publisher = clients.connected(one, "pub", level=5)
    wait_routed(publisher, "x", live, device)

    sent = {qos: [b"q%d-%03d" % (qos, n) for n in range(20)] for qos in (0, 1, 2)}
    for n in range(20):
        for qos in (1, 2, 0):
            ack = publisher.publish(f"x/{qos}", sent[qos][n], qos=qos)
            if qos:
                assert ack is not None and ack.reason_code == 0
    for subscriber in (live, device):
        got = until_all(subscriber, [p for qos in (0, 1, 2) for p in sent[qos]])
        # At least once: a record read again after a rebalance of msg.all may come twice.
        first = list(dict.fromkeys(got))
        for qos in (0, 1, 2):
            assert [p for p in first if p.startswith(b"q%d-" % qos)] == sent[qos], got

    # The persistent subscriber acknowledged everything: nothing is left in Redis (the
    # broker removes acknowledged entries in batches, after its PINGRESP perhaps).
    store = redis.Redis.from_url(redis_url)
    device.ping()
    wait_for(lambda: store.zcard("{device}_messages") == 0, what="an empty {device} queue")
    # At least one of the subscribers is on another node than the one routing.
    counters = [_counters(AdminApi(node.data_dir).metrics()) for node in (one, two, three)]
    assert sum(c["mqttq_cluster_downlinked_total"] for c in counters) >= 60
    assert sum(c["mqttq_cluster_downlink_received_total"] for c in counters) >= 60
    assert all(c["mqttq_cluster_clients"] >= 3 for c in counters)


def _counters(text: str) -> dict[str, float]:
    """Prometheus text -> {sample name: value} of the unlabelled samples."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def test_retained_and_subscriptions_reach_a_node_started_later(
    nodes: Nodes, redis_url: str, clients: Clients
) -> None:
    """Node 1 holds a retained message and an offline persistent session; node 2,
    started afterwards, serves the retained message to a new subscriber, routes a new
    message into the offline session's Redis queue, and resumes that session."""
    (one,) = nodes(1)
    publisher = clients.connected(one, "pub-1", level=5)
    assert publisher.publish("r/state", b"on", qos=1, retain=True) is not None
    check = clients.connected(one, "check", level=5)
    check.subscribe(("r/#", 1))
    assert check.receive_messages(1)[0].payload == b"on"  # routed: retained on node 1
    away = clients.connected(one, "away", level=5, clean=False, props=PERSISTENT)
    assert away.subscribe(("s/#", 1)).reason_codes == (1,)
    away.disconnect()

    (two,) = nodes(1, first=2)
    late = clients.connected(two, "late", level=5)
    late.subscribe(("r/#", 1))
    (retained,) = late.receive_messages(1)
    assert (retained.topic, retained.payload, retained.retain) == ("r/state", b"on", True)

    publisher_two = clients.connected(two, "pub-2", level=5)
    ack = publisher_two.publish("s/x", b"for-away", qos=1)
    assert ack is not None and ack.reason_code == 0
    store = redis.Redis.from_url(redis_url)
    again = clients.raw(two)
    connack = again.connect("away", level=5, clean=False, props=PERSISTENT)
    assert connack.session_present
    assert [m.payload for m in again.receive_messages(1, timeout=60)] == [b"for-away"]
    again.ping()
    wait_for(lambda: store.zcard("{away}_messages") == 0, what="an empty {away} queue")
