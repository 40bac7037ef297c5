"""A connected client that gets blocked is disconnected (5.0: DISCONNECT 0x98 Administrative
action with the reason string "blocked"; 0x8A Banned is not a DISCONNECT code), other
clients carry on; the failed-connections log shows refused CONNECTs (a wrong password, a
blocked client) with their fields, and the refusals are counted in /metrics."""

from __future__ import annotations

import time

from mqttq.reasons import ReasonCode
from tests.blocked.helpers import block, blocked_of
from tests.harness import InProcessBroker
from tests.integration.admin_api import AdminApi
from tests.integration.raw_client import RawClient
from tests.integration.wire import DISCONNECT, assert_disconnected_with

BANNED = 0x8A
ADMINISTRATIVE_ACTION = 0x98


def victim_reconnects_banned(port: int) -> bool:
    again = RawClient(port)
    try:
        return again.connect("victim", expect_success=False).reason_code == BANNED
    finally:
        again.close()


def test_connected_client_blocked_by_id_is_disconnected(
    broker: InProcessBroker,
) -> None:
    victim = RawClient(broker.port)
    bystander = RawClient(broker.port)
    old = RawClient(broker.port)
    try:
        victim.connect("victim")
        bystander.connect("bystander")
        old.connect("old-client", level=4)
        block(broker, "client_id", "victim")
        packets = victim.wait_closed()
        assert_disconnected_with(packets, ADMINISTRATIVE_ACTION)
        assert packets[0].props.get(0x1F) == "blocked"  # the reason string
        assert victim_reconnects_banned(broker.port)
        block(broker, "regex", "old-.*")
        assert old.wait_closed() == []  # 3.1.1 has no server DISCONNECT: closed
        bystander.subscribe(("t/#", 1))  # still served
    finally:
        for client in (victim, bystander, old):
            client.close()


def test_connected_client_blocked_by_address_is_disconnected(broker: InProcessBroker) -> None:
    client = RawClient(broker.port)
    try:
        client.connect("anyone")
        block(broker, "address", "127.0.0.0/8")
        packets = client.wait_closed()
        assert [(p.type, p.reason_code) for p in packets] == [(DISCONNECT, ADMINISTRATIVE_ACTION)]
    finally:
        client.close()


def test_connection_before_connect_from_a_blocked_address_is_closed(
    broker: InProcessBroker,
) -> None:
    client = RawClient(broker.port)
    try:
        block(broker, "address", "127.0.0.1")
        assert client.wait_closed() == []  # not through CONNECT: nothing to answer, closed
    finally:
        client.close()


def test_failed_connections_log_shows_wrong_password_and_blocked(
    broker: InProcessBroker,
) -> None:
    api = AdminApi(broker.data_dir)
    api.add_credential("alice", "right-password")
    before = time.time()
    wrong = RawClient(broker.port)
    try:
        connack = wrong.connect(
            "alice-dev", username="alice", password=b"wrong", expect_success=False
        )
        assert connack.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    finally:
        wrong.close()
    block(broker, "username", "mallory")
    banned = RawClient(broker.port)
    try:
        connack = banned.connect(
            "m-1", level=4, username="mallory", password=b"x", expect_success=False
        )
        assert connack.reason_code == 5
    finally:
        banned.close()
    log = blocked_of(broker).failed
    latest, first = log.recent()
    assert (first.client_id, first.username, first.reason, first.reason_code) == (
        "alice-dev",
        "alice",
        "bad_credentials",
        0x86,
    )
    assert first.address == "127.0.0.1"
    assert first.listener == "tcp"
    assert first.protocol_level == 5
    assert before <= first.at <= latest.at <= time.time()
    assert (latest.client_id, latest.username, latest.reason, latest.protocol_level) == (
        "m-1",
        "mallory",
        "blocked",
        4,
    )
    assert [f.client_id for f in log.recent(client_id="m-1")] == ["m-1"]
    metrics = api.metrics()
    assert 'mqttq_refusals_total{reason="blocked",tenant="default"} 1.0' in metrics
    assert 'mqttq_refusals_total{reason="bad_credentials",tenant="default"} 1.0' in metrics
