"""Two nodes of one cluster (distributed mode, the compacted Kafka topic
`<prefix>client.blocked`): an entry added through node 1's admin API disconnects the
client connected to node 2 and refuses its CONNECTs there; removed on node 2, it lets
the client in on node 1 again."""

from __future__ import annotations

import pytest

from tests.cluster.cluster_helpers import DEADLINE
from tests.cluster.conftest import Nodes
from tests.integration.admin_api import AdminApi
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import DISCONNECT

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow, pytest.mark.broker_process]

BANNED = 0x8A
ADMINISTRATIVE_ACTION = 0x98


def connack_code(port: int, client_id: str) -> int:
    client = RawClient(port)
    try:
        code = client.connect(client_id, expect_success=False).reason_code
        assert code is not None
        return code
    finally:
        client.close()


def test_block_on_one_node_disconnects_the_client_on_the_other(nodes: Nodes) -> None:
    one, two = nodes(2)
    victim = RawClient(two.port)
    try:
        victim.connect("victim")
        entry = AdminApi(one.data_dir).ok(
            "POST", "/api/v1/blocked", {"client_id": "victim", "reason": "cluster test"}
        )
        packets = victim.wait_closed(timeout=DEADLINE)
        assert [(p.type, p.reason_code) for p in packets] == [(DISCONNECT, ADMINISTRATIVE_ACTION)]
    finally:
        victim.close()
    assert connack_code(two.port, "victim") == BANNED
    assert connack_code(one.port, "victim") == BANNED
    api_two = AdminApi(two.data_dir)
    assert api_two.ok("GET", "/api/v1/blocked") == {"blocked": [entry]}
    failed = api_two.ok("GET", "/api/v1/failed-connections?client_id=victim")
    assert [f["reason"] for f in failed["failed_connections"]] == ["blocked"]

    assert api_two.call("DELETE", f"/api/v1/blocked/{entry['id']}")[0] == 204
    wait_for(
        lambda: connack_code(one.port, "victim") == 0,
        timeout=DEADLINE,
        what="the block lifted on node 1",
    )
