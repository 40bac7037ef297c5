"""Tenant isolation end to end: each tenant's topics, wildcards, `$share` groups and
retained messages are its own (issue 5). Tenants come from credentials, or for anonymous
clients from the CONNECT's `tenant` user property."""

from __future__ import annotations

import pytest

from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, BrokerUnderTest
from tests.integration.wire import RC, Prop

pytestmark = pytest.mark.mqttq_only

REFUSALS = "mqttq_refusals_total"


def in_tenant(clients: Clients, broker: BrokerUnderTest, client_id: str, tenant: str) -> RawClient:
    client = clients.raw(broker)
    client.connect(client_id, props=[(Prop.USER_PROPERTY, ("tenant", tenant))])
    return client


def test_wildcards_and_shared_groups_never_cross_tenants(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.add_credential("a", "pw", tenant="acme")
    api.add_credential("g", "pw", tenant="globex")
    acme_all = clients.raw(broker)
    acme_all.connect("acme-all", username="a", password=b"pw")
    acme_all.subscribe(("#", 1), ("+/temp", 1))
    acme_shared = clients.raw(broker)
    acme_shared.connect("acme-shared", username="a", password=b"pw")
    acme_shared.subscribe(("$share/workers/#", 1))
    globex_all = clients.raw(broker)
    globex_all.connect("globex-all", username="g", password=b"pw")
    globex_all.subscribe(("#", 1), ("$share/workers/#", 1))
    default_all = in_tenant(clients, broker, "default-all", "default")
    default_all.subscribe(("#", 1))

    globex_pub = clients.raw(broker)
    globex_pub.connect("globex-pub", username="g", password=b"pw")
    reply = globex_pub.publish("room/temp", b"globex", qos=1)
    assert reply is not None and reply.reason_code == 0
    # globex-all gets it twice: its own `#` and its `$share` membership.
    got = globex_all.receive_messages(2)
    assert sorted(m.payload for m in got) == [b"globex", b"globex"]

    acme_pub = clients.raw(broker)
    acme_pub.connect("acme-pub", username="a", password=b"pw")
    acme_pub.publish("room/temp", b"acme", qos=1)
    # acme-all's `#` and `+/temp` overlap: one delivery [MQTT-3.3.4-2].
    assert [m.payload for m in acme_all.receive_messages(1)] == [b"acme"]
    assert [m.payload for m in acme_shared.receive_messages(1)] == [b"acme"]
    for client in (acme_all, acme_shared, globex_all, default_all):
        client.expect_silence(0.3)


def test_anonymous_clients_cannot_join_a_tenant_with_credentials(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Naming acme in the `tenant` property would give an anonymous client acme's whole
    namespace, past every ACL of acme's own clients: refused with 0x87 (and counted)."""
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.add_credential("a", "pw", tenant="acme", subscribe_acl=["own/#"])
    intruder = clients.raw(broker)
    connack = intruder.connect(
        "intruder", props=[(Prop.USER_PROPERTY, ("tenant", "acme"))], expect_success=False
    )
    assert connack.reason_code == RC.NOT_AUTHORIZED
    assert in_tenant(clients, broker, "hobbyist", "hobby").publish("x", b"1", qos=1) is not None
    text = api.metrics()
    assert metric_value(text, REFUSALS, tenant="acme", reason="not_authorized") == 1


def test_retained_messages_are_per_tenant(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory()
    for tenant, text in (("acme", b"acme state"), ("globex", b"globex state")):
        publisher = in_tenant(clients, broker, f"{tenant}-pub", tenant)
        publisher.publish("status", text, qos=1, retain=True)
    for tenant, text in (("acme", b"acme state"), ("globex", b"globex state")):
        reader = in_tenant(clients, broker, f"{tenant}-reader", tenant)
        reader.subscribe(("#", 1))
        messages = reader.receive_messages(1)
        assert [(m.topic, m.payload, m.retain) for m in messages] == [("status", text, True)]
        reader.expect_silence(0.3)
    outsider = in_tenant(clients, broker, "default-reader", "default")
    outsider.subscribe(("status", 1))
    outsider.expect_silence(0.3)
    api = AdminApi(broker.data_dir)
    listed = api.ok("GET", "/api/v1/retained")["retained"]
    assert sorted((r["tenant"], r["topic"]) for r in listed) == [
        ("acme", "status"),
        ("globex", "status"),
    ]


def test_tenants_survive_a_restart(broker_factory: BrokerFactory, clients: Clients) -> None:
    """Persistent sessions and retained messages keep their tenant across a restart."""
    broker = broker_factory()
    session = clients.raw(broker)
    session.connect(
        "acme-device",
        clean=False,
        props=[(Prop.USER_PROPERTY, ("tenant", "acme")), (Prop.SESSION_EXPIRY_INTERVAL, 600)],
    )
    session.subscribe(("alerts/#", 1))
    session.disconnect()
    in_tenant(clients, broker, "acme-ret", "acme").publish("cfg", b"v1", qos=1, retain=True)
    broker.restart()
    in_tenant(clients, broker, "globex-pub", "globex").publish("alerts/x", b"globex", qos=1)
    in_tenant(clients, broker, "acme-pub", "acme").publish("alerts/x", b"acme", qos=1)
    back = clients.raw(broker)
    connack = back.connect(
        "acme-device",
        clean=False,
        props=[(Prop.USER_PROPERTY, ("tenant", "acme")), (Prop.SESSION_EXPIRY_INTERVAL, 600)],
    )
    assert connack.session_present
    assert [m.payload for m in back.receive_messages(1)] == [b"acme"]
    back.expect_silence(0.3)
    reader = in_tenant(clients, broker, "globex-reader", "globex")
    reader.subscribe(("cfg", 0))
    reader.expect_silence(0.3)


def test_a_client_id_belongs_to_one_tenant(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory()
    owner = in_tenant(clients, broker, "shared-name", "acme")
    intruder = clients.raw(broker)
    refused = intruder.connect(
        "shared-name",
        props=[(Prop.USER_PROPERTY, ("tenant", "globex"))],
        expect_success=False,
    )
    assert refused.reason_code == RC.CLIENT_IDENTIFIER_NOT_VALID
    owner.ping()  # not taken over
