"""The dashboard on a two-node distributed cluster (real Kafka and Redis, `mqttq serve`
processes): a retained message deleted in node A's page is gone on node B too, and node
A's page shows both nodes (cluster view, charts per node and summed) and Kafka."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mqttq.admin.token import read_discovery
from tests.cluster.cluster_helpers import node_config, wait_group
from tests.conftest import BrokerProcess
from tests.dashboard.conftest import PASSWORD, TOKEN, Dashboard, log_in
from tests.integration.waiting import BrokerFactory, wait_for
from tests.kafka_service import KafkaServer

from playwright.sync_api import expect  # isort: skip (importorskip in conftest first)

pytestmark = [
    pytest.mark.mqttq_only,
    pytest.mark.broker_process,
    pytest.mark.xdist_group("kafka"),
]

ADMIN = f'\n[admin]\nport = 0\ntoken = "{TOKEN}"\nsample_interval = 1.0\n'


def start_node(
    broker_factory: BrokerFactory, kafka: KafkaServer, prefix: str, redis_url: str, n: int
) -> Dashboard:
    node = broker_factory(node_config(kafka.bootstrap, prefix, redis_url, f"node-{n}") + ADMIN)
    assert isinstance(node, BrokerProcess)
    discovery = read_discovery(node.data_dir)
    assert discovery is not None, "the admin server did not start"
    return Dashboard(node, discovery["url"], node.port, "")


def add_admin_user(node: Dashboard) -> None:
    """`mqttq admin-user add admin --role admin` on the node's config and data dir."""
    broker = node.broker
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mqttq",
            "admin-user",
            "add",
            "admin",
            "--role",
            "admin",
            "--config",
            str(broker.workdir / "broker.toml"),
            "--data-dir",
            str(broker.data_dir),
        ],
        check=True,
        env={**os.environ, "MQTTQ_ADMIN_PASSWORD": PASSWORD},
        capture_output=True,
    )


def retained_topics(node: Dashboard, prefix: str) -> list[str]:
    status, body = node.api("GET", f"/api/v1/retained?prefix={prefix}")
    assert status == 200, body
    return [item["topic"] for item in body["retained"]]


@pytest.fixture
def two_nodes(
    broker_factory: BrokerFactory, kafka: KafkaServer, kafka_prefix: str, redis_url: str
) -> Iterator[tuple[Dashboard, Dashboard]]:
    """node-1 (with an admin user `admin`) and node-2 of one cluster, both in msg.all's
    consumer group; their MQTT clients are closed after the test."""
    nodes = [start_node(broker_factory, kafka, kafka_prefix, redis_url, n) for n in (1, 2)]
    try:
        wait_group(kafka.bootstrap, kafka_prefix, 2)
        add_admin_user(nodes[0])
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            for client in node.clients:
                client.close()


def test_a_retained_message_deleted_in_the_page_is_gone_on_the_other_node(
    page: Any, two_nodes: tuple[Dashboard, Dashboard], kafka_prefix: str
) -> None:
    node_a, node_b = two_nodes
    publisher = node_b.client()
    publisher.connect("cluster-retainer")
    publisher.publish("dash/cluster/1", b"on every node", qos=1, retain=True)
    wait_for(
        lambda: retained_topics(node_a, "dash/cluster/") == ["dash/cluster/1"],
        interval=0.2,
        what="node A to hold node B's retained message",
    )

    log_in(page, node_a)
    page.get_by_test_id("nav-retained").click()
    page.get_by_test_id("retained-prefix").fill("dash/cluster/")
    page.get_by_test_id("retained-submit").click()
    row = page.get_by_test_id("retained-row-dash/cluster/1")
    expect(row.get_by_test_id("retained-payload")).to_have_text("on every node")
    row.get_by_test_id("retained-delete").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("notice")).to_have_text("retained message on dash/cluster/1 deleted")

    wait_for(
        lambda: retained_topics(node_b, "dash/cluster/") == [],
        interval=0.2,
        what="node B to drop the retained message deleted on node A",
    )
    subscriber = node_b.client()
    subscriber.connect("late-subscriber")
    subscriber.subscribe(("dash/cluster/#", 1))
    subscriber.expect_silence()

    # The same page shows the whole cluster: both nodes, per node and summed, and Kafka.
    page.get_by_test_id("nav-cluster").click()
    expect(page.get_by_test_id("node-row-node-1")).to_contain_text("alive")
    expect(page.get_by_test_id("node-row-node-2")).to_contain_text("alive")
    page.get_by_test_id("nav-overview").click()
    expect(page.get_by_test_id("stat-mode-value")).to_have_text("distributed")
    scope = page.get_by_test_id("scope")
    expect(scope.locator("option")).to_have_text(["Whole cluster", "node node-1", "node node-2"])
    scope.select_option("node-2")
    expect(page.get_by_test_id("chart-connections")).to_be_visible()
    page.get_by_test_id("nav-kafka").click()
    expect(page.get_by_test_id("kafka-topics")).to_contain_text(f"{kafka_prefix}msg.all")
    expect(page.get_by_test_id("kafka-groups")).to_contain_text(f"{kafka_prefix}msg.all")
