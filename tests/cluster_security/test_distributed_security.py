"""Issue 35 in distributed mode: two `mqttq serve` nodes of one cluster (Kafka, Redis,
PostgreSQL; tests/cluster_security/conftest.py), shared by every test of this module.

`$SYS` numbers of both nodes reach a subscriber on node 2 under `$SYS/brokers/<node id>/`
and never a `#` subscriber; a client event made on node 1 reaches a subscriber on node 2;
one HS256 token connects on both nodes and a bad one is refused on both; the http
provider's service decides for both nodes; a SCRAM credential added through node 1 lives
in PostgreSQL and a SCRAM client proves it on node 2."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import jwt
import psycopg
import pytest

from mqttq.auth.scram import secret_from_text
from mqttq.reasons import ReasonCode
from tests.cluster.cluster_helpers import DEADLINE, PROBE, wait_routed
from tests.cluster_security.conftest import JWT_SECRET, Cluster
from tests.integration.raw_client import RawClient
from tests.integration.test_cli_tenant import run_cli
from tests.integration.wire import PUBLISH, RC
from tests.scram.mqtt5_client import Mqtt5Client
from tests.scram.scram_client import ScramClient
from tests.sys_topics.test_sys_topics import latest

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow, pytest.mark.broker_process]

NODE_1_CONNECTED = "$SYS/brokers/node-1/clients/connected"
NODE_2_CONNECTED = "$SYS/brokers/node-2/clients/connected"


class Opened:
    """RawClients of one test, closed at its end."""

    def __init__(self) -> None:
        self.clients: list[RawClient] = []

    def connected(self, port: int, client_id: str) -> RawClient:
        client = RawClient(port)
        self.clients.append(client)
        client.connect(client_id)
        return client

    def refused(self, port: int, client_id: str, **connect: object) -> int:
        """The CONNACK's reason code (3.x: return code) of a CONNECT that must fail."""
        client = RawClient(port)
        self.clients.append(client)
        connack = client.connect(client_id, expect_success=False, **connect)  # type: ignore[arg-type]
        assert connack.reason_code is not None and connack.reason_code != 0, connack
        return connack.reason_code

    def close(self) -> None:
        for client in self.clients:
            client.close()


@pytest.fixture
def opened() -> Iterator[Opened]:
    registry = Opened()
    yield registry
    registry.close()


def next_publish(client: RawClient) -> tuple[str, bytes]:
    """The next PUBLISH that is not a probe of `wait_routed` (acknowledged)."""
    while True:
        packet = client.recv(DEADLINE)
        if packet.type != PUBLISH:
            continue
        client.ack(packet)
        topic = packet.topic or ""
        if not topic.endswith(PROBE):
            return topic, packet.payload


def test_sys_topics_of_both_nodes_reach_node_2_and_never_a_hash_subscriber(
    cluster: Cluster, opened: Opened
) -> None:
    one, two = cluster.nodes
    watcher = opened.connected(two.port, "sys-watcher")
    watcher.subscribe(("$SYS/brokers/+/clients/connected", 0), ("sys-route/#", 0))
    everything = opened.connected(two.port, "sys-everything")
    everything.subscribe(("#", 0), ("+/brokers/#", 0))
    publisher = opened.connected(one.port, "sys-publisher")
    wait_routed(publisher, "sys-route", watcher, everything)
    # Node 1: the publisher; node 2: the watcher and `everything`.
    latest(watcher, {NODE_1_CONNECTED: "1", NODE_2_CONNECTED: "2"})
    # A change made now is published while both subscriptions are known cluster-wide.
    opened.connected(one.port, "sys-second")
    latest(watcher, {NODE_1_CONNECTED: "2"})
    publisher.publish("sys-route/marker", b"m", qos=1)
    assert next_publish(everything) == ("sys-route/marker", b"m")


def test_a_client_event_on_node_1_reaches_a_subscriber_on_node_2(
    cluster: Cluster, opened: Opened
) -> None:
    one, two = cluster.nodes
    watcher = opened.connected(two.port, "ev-watcher")
    watcher.subscribe(("$events/+/ev-device", 1), ("ev-route/#", 0))
    publisher = opened.connected(one.port, "ev-publisher")
    wait_routed(publisher, "ev-route", watcher)
    device = RawClient(one.port)
    opened.clients.append(device)
    device.connect("ev-device")
    device.disconnect()
    got = [next_publish(watcher) for _ in range(2)]
    assert [topic for topic, _ in got] == [
        "$events/connected/ev-device",
        "$events/disconnected/ev-device",
    ]
    connected, disconnected = (json.loads(payload) for _, payload in got)
    assert (connected["event"], connected["client_id"]) == ("connected", "ev-device")
    assert connected["protocol"] == "MQTT 5.0"
    assert (disconnected["event"], disconnected["reason"]) == ("disconnected", "normal")


def hs256(secret: str, **claims: object) -> bytes:
    payload = {"sub": "jwt-user", "exp": int(time.time()) + 3600, **claims}
    return jwt.encode(payload, secret, "HS256").encode()


def test_one_jwt_connects_on_both_nodes_and_a_bad_one_is_refused_on_both(
    cluster: Cluster, opened: Opened
) -> None:
    token = hs256(JWT_SECRET)
    for node in cluster.nodes:
        client = RawClient(node.port)
        opened.clients.append(client)
        assert client.connect(f"jwt-{node.port}", password=token).reason_code == 0
    forged = hs256("not-the-secret-of-this-cluster!!")
    expired = hs256(JWT_SECRET, exp=int(time.time()) - 60)
    for node in cluster.nodes:
        for bad in (forged, expired):
            code = opened.refused(node.port, "jwt-bad", username="jwt-user", password=bad)
            assert code == RC.BAD_USER_NAME_OR_PASSWORD
        # MQTT 3.1.1: return code 4, like a wrong password.
        assert opened.refused(node.port, "jwt-old", level=4, username="u", password=forged) == 4


def test_the_http_service_decides_for_both_nodes(cluster: Cluster, opened: Opened) -> None:
    one, two = cluster.nodes
    for node, client_id in ((one, "http-on-1"), (two, "http-on-2")):
        client = RawClient(node.port)
        opened.clients.append(client)
        connack = client.connect(client_id, username="http-device", password=b"pw")
        assert connack.reason_code == 0
        code = opened.refused(node.port, client_id, username="http-refused", password=b"pw")
        assert code == RC.NOT_AUTHORIZED
    asked = [
        (body["client_id"], body["username"], body["password"])
        for body in cluster.service.requests
        if str(body.get("username") or "").startswith("http-")
    ]
    assert sorted(asked) == [
        ("http-on-1", "http-device", "pw"),
        ("http-on-1", "http-refused", "pw"),
        ("http-on-2", "http-device", "pw"),
        ("http-on-2", "http-refused", "pw"),
    ]


def scram_connect(
    port: int, client_id: str, scram: ScramClient, wrong_password: str | None = None
) -> tuple[int, bool]:
    """The CONNACK's reason code of a SCRAM exchange, and whether the server proved itself."""
    client = Mqtt5Client(port)
    try:
        outcome = client.connect_scram(client_id, scram, wrong_password=wrong_password)
        assert outcome.connack is not None
        return int(outcome.connack.reason_code), outcome.server_verified
    finally:
        client.close()


def test_a_scram_credential_added_on_node_1_lives_in_postgres_and_proves_on_node_2(
    cluster: Cluster,
) -> None:
    one, two = cluster.nodes
    added = run_cli(
        "credentials", "add", "scram-user", "--scram", "--password-stdin", "--json",
        "--data-dir", str(one.data_dir),
        stdin="pencil\n",
    )  # fmt: skip
    assert added.code == 0, added.stderr
    with psycopg.connect(cluster.postgres_url) as conn:
        row = conn.execute(
            "SELECT scram FROM mqtt_client_credentials WHERE username = 'scram-user'"
        ).fetchone()
    assert row is not None
    mechanisms = sorted(secret_from_text(text).mechanism for text in json.loads(row[0]))
    assert mechanisms == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert "pencil" not in row[0]

    for port, mechanism in ((two.port, "SCRAM-SHA-256"), (one.port, "SCRAM-SHA-512")):
        scram = ScramClient(mechanism, "scram-user", "pencil")
        assert scram_connect(port, f"scram-{port}", scram) == (ReasonCode.SUCCESS, True)
    wrong = ScramClient("SCRAM-SHA-256", "scram-user", "pencil")
    assert scram_connect(two.port, "scram-bad", wrong, wrong_password="pencil2") == (
        ReasonCode.BAD_USER_NAME_OR_PASSWORD,
        False,
    )
