"""Credentials and ACLs end to end: the real `mqttq serve`, credentials created through
its admin API, clients speaking MQTT 3.1.1 and 5.0 built from the spec (issue 5)."""

from __future__ import annotations

import pytest

from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory
from tests.integration.wire import PUBACK, RC, Prop, Will

pytestmark = pytest.mark.mqttq_only

NO_ANONYMOUS = '[auth]\nanonymous = "never"\n'


def test_password_checks_at_both_protocol_levels(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=NO_ANONYMOUS)
    api = AdminApi(broker.data_dir)
    api.add_credential("alice", "s3cret")
    for level in (4, 5):
        ok = clients.raw(broker).connect(
            f"ok-{level}", level=level, username="alice", password=b"s3cret"
        )
        assert ok.reason_code == 0
    # 5.0: 0x86 Bad User Name or Password; 3.1.1: return code 4 [MQTT-3.2.2.3].
    cases = [
        (5, "alice", b"wrong", RC.BAD_USER_NAME_OR_PASSWORD),
        (5, "mallory", b"s3cret", RC.BAD_USER_NAME_OR_PASSWORD),
        (5, "alice", None, RC.BAD_USER_NAME_OR_PASSWORD),
        (4, "alice", b"wrong", 4),
        (4, "mallory", b"x", 4),
        (5, None, None, RC.NOT_AUTHORIZED),  # anonymous = "never"
        (4, None, None, 5),
    ]
    for level, username, password, expected in cases:
        client = clients.raw(broker)
        connack = client.connect(
            "c", level=level, username=username, password=password, expect_success=False
        )
        assert connack.reason_code == expected, (level, username, password, connack)
        client.wait_closed()


def test_anonymous_is_allowed_on_loopback_by_default(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    assert clients.raw(broker).connect("anon").reason_code == 0


def test_client_id_pattern_of_a_credential(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=NO_ANONYMOUS)
    AdminApi(broker.data_dir).add_credential("dev", "pw", client_id_pattern="sensor-*")
    assert clients.raw(broker).connect("sensor-7", username="dev", password=b"pw").reason_code == 0
    refused = clients.raw(broker).connect(
        "laptop", username="dev", password=b"pw", expect_success=False
    )
    assert refused.reason_code == RC.NOT_AUTHORIZED


def test_publish_and_subscribe_acls(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=NO_ANONYMOUS)
    api = AdminApi(broker.data_dir)
    api.add_credential("dev", "pw", publish_acl=["telemetry/%c/#"], subscribe_acl=["commands/%c/#"])
    api.add_credential("ops", "pw")  # unrestricted, same (default) tenant
    watcher = clients.raw(broker)
    watcher.connect("watcher", username="ops", password=b"pw")
    watcher.subscribe(("#", 1))

    v5 = clients.raw(broker)
    v5.connect("d1", username="dev", password=b"pw")
    suback = v5.subscribe(("commands/d1/#", 1), ("commands/d2/#", 1), ("#", 0))
    assert suback.reason_codes == (1, RC.NOT_AUTHORIZED, RC.NOT_AUTHORIZED)
    denied = v5.publish("telemetry/d2/t", b"spoofed", qos=1)
    assert denied is not None and denied.reason_code == RC.NOT_AUTHORIZED
    denied2 = v5.publish("telemetry/d2/t", b"spoofed2", qos=2)
    assert denied2 is not None and denied2.reason_code == RC.NOT_AUTHORIZED
    allowed = v5.publish("telemetry/d1/t", b"real", qos=1)
    assert allowed is not None and allowed.reason_code == 0

    v3 = clients.raw(broker)
    v3.connect("d3", level=4, username="dev", password=b"pw")
    # 3.1.1: a refused subscription is 0x80 [MQTT-3.9.3]; a refused publish is dropped,
    # and its PUBACK still comes (3.1.1 has no way to say no).
    assert v3.subscribe(("commands/d1/#", 0)).reason_codes == (0x80,)
    puback = v3.publish("telemetry/d1/x", b"dropped", qos=1)
    assert puback is not None and puback.type == PUBACK
    v3.publish("telemetry/d3/x", b"kept", qos=1)

    received = watcher.receive_messages(2)
    assert [(m.topic, m.payload) for m in received] == [
        ("telemetry/d1/t", b"real"),
        ("telemetry/d3/x", b"kept"),
    ]
    watcher.expect_silence(0.3)
    text = api.metrics()
    refusals = "mqttq_refusals_total"
    assert metric_value(text, refusals, tenant="default", reason="acl_publish") == 3
    assert metric_value(text, refusals, tenant="default", reason="acl_subscribe") == 3


def test_will_outside_the_publish_acl_refuses_the_connect(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=NO_ANONYMOUS)
    AdminApi(broker.data_dir).add_credential("dev", "pw", publish_acl=["own/#"])
    refused = clients.raw(broker).connect(
        "w", username="dev", password=b"pw", will=Will("other/t", b"x"), expect_success=False
    )
    assert refused.reason_code == RC.NOT_AUTHORIZED


def test_password_change_applies_to_the_next_connect(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=NO_ANONYMOUS)
    api = AdminApi(broker.data_dir)
    api.add_credential("bob", "old")
    assert clients.raw(broker).connect("b1", username="bob", password=b"old").reason_code == 0
    api.ok("PUT", "/api/v1/credentials/bob", {"password": "new"})
    stale = clients.raw(broker).connect("b2", username="bob", password=b"old", expect_success=False)
    assert stale.reason_code == RC.BAD_USER_NAME_OR_PASSWORD
    assert clients.raw(broker).connect("b3", username="bob", password=b"new").reason_code == 0
    api.ok("DELETE", "/api/v1/credentials/bob")
    gone = clients.raw(broker).connect("b4", username="bob", password=b"new", expect_success=False)
    assert gone.reason_code == RC.BAD_USER_NAME_OR_PASSWORD


def test_tenant_user_property_only_for_anonymous(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """A credentialed client cannot move itself into another tenant with the property."""
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.add_credential("acme-dev", "pw", tenant="acme")
    spy = clients.raw(broker)
    spy.connect("spy", props=[(Prop.USER_PROPERTY, ("tenant", "globex"))])
    spy.subscribe(("#", 0))
    dev = clients.raw(broker)
    dev.connect(
        "acme-1",
        username="acme-dev",
        password=b"pw",
        props=[(Prop.USER_PROPERTY, ("tenant", "globex"))],
    )
    dev.publish("t", b"acme only", qos=1)
    spy.expect_silence(0.3)
    sessions = api.ok("GET", "/api/v1/sessions?prefix=acme-")["sessions"]
    assert [(s["client_id"], s["tenant"]) for s in sessions] == [("acme-1", "acme")]
