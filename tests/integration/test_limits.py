"""Node and tenant limits end to end (issue 5): count limits refuse exactly at the limit
with the right reason codes at 3.1.1 and 5.0, rate limits keep one tenant from slowing
another, and quotas changed through the admin API or SIGHUP apply to connected clients.
Assertions count admitted and refused operations; none measures time."""

from __future__ import annotations

import signal

import pytest

from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, BrokerUnderTest, wait_for
from tests.integration.wire import PUBACK, RC, ConnectionClosed, Prop, publish_packet

pytestmark = pytest.mark.mqttq_only

REFUSALS = "mqttq_refusals_total"


def tenant_props(tenant: str, *extra: tuple[int, object]) -> list[tuple[int, object]]:
    return [(Prop.USER_PROPERTY, ("tenant", tenant)), *extra]


def connect(
    clients: Clients,
    broker: BrokerUnderTest,
    client_id: str,
    tenant: str = "default",
    *,
    level: int = 5,
    expect_success: bool = True,
    **options: object,
) -> tuple[RawClient, int]:
    client = clients.raw(broker)
    props = tenant_props(tenant) if level == 5 else []
    connack = client.connect(
        client_id, level=level, props=props, expect_success=expect_success, **options
    )
    assert connack.reason_code is not None
    return client, connack.reason_code


def publish_burst(client: RawClient, count: int, topic: str = "t") -> list[int]:
    """QoS 1 PUBLISHes sent back to back; the reason code of each PUBACK, in order."""
    codes = []
    for n in range(count):
        puback = client.publish(topic, str(n).encode(), qos=1)
        assert puback is not None and puback.type == PUBACK
        assert puback.reason_code is not None
        codes.append(puback.reason_code)
    return codes


def test_node_connection_limit_refuses_exactly_at_the_limit(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_connections_per_node = 3\n")
    held = [connect(clients, broker, f"c{n}")[0] for n in range(3)]
    _, code5 = connect(clients, broker, "c3", expect_success=False)
    assert code5 == RC.QUOTA_EXCEEDED
    _, code3 = connect(clients, broker, "c4", level=4, expect_success=False)
    assert code3 == 3  # 3.1.1: Server unavailable
    held[0].disconnect()
    wait_for(lambda: connect(clients, broker, "c5", expect_success=False)[1] == 0)
    text = AdminApi(broker.data_dir).metrics()
    assert metric_value(text, REFUSALS, tenant="default", reason="connections") >= 2


def test_tenant_connection_quota_leaves_other_tenants_alone(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    AdminApi(broker.data_dir).set_tenant("acme", max_connections_per_node=2)
    for n in range(2):
        connect(clients, broker, f"acme-{n}", "acme")
    assert connect(clients, broker, "acme-2", "acme", expect_success=False)[1] == (
        RC.QUOTA_EXCEEDED
    )
    for n in range(5):  # the default tenant is not affected
        connect(clients, broker, f"other-{n}")


def test_session_limit_counts_persistent_sessions_after_disconnect(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_sessions = 2\n")
    expiry = (Prop.SESSION_EXPIRY_INTERVAL, 600)
    for name in ("p1", "p2"):
        client = clients.raw(broker)
        client.connect(name, clean=False, props=[expiry])
        client.disconnect()
    third = clients.raw(broker)
    refused = third.connect("p3", clean=False, props=[expiry], expect_success=False)
    assert refused.reason_code == RC.QUOTA_EXCEEDED
    # Resuming an existing session needs no new one.
    again = clients.raw(broker)
    assert again.connect("p1", clean=False, props=[expiry]).session_present


def test_topic_limit_refuses_new_topics_only(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_topics = 2\n")
    client, _ = connect(clients, broker, "s")
    assert client.subscribe(("a", 0), ("b", 0)).reason_codes == (0, 0)
    assert client.subscribe(("c", 0)).reason_codes == (RC.QUOTA_EXCEEDED,)
    other, _ = connect(clients, broker, "s2")
    assert other.subscribe(("a", 1)).reason_codes == (1,)  # an existing topic: no new one
    retained = other.publish("new/topic", b"x", qos=1, retain=True)
    assert retained is not None and retained.reason_code == RC.QUOTA_EXCEEDED
    plain = other.publish("a", b"x", qos=1)  # routing to existing topics is not limited
    assert plain is not None and plain.reason_code == 0
    assert client.unsubscribe("b").reason_codes == (0,)
    assert client.subscribe(("c", 0)).reason_codes == (0,)


def test_publish_rate_of_one_tenant_does_not_slow_another(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit]\nrate_wait_ms = 0\nburst_seconds = 1.0\n")
    AdminApi(broker.data_dir).set_tenant("acme", max_publish_rate=1)
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    globex, _ = connect(clients, broker, "globex-pub", "globex")
    acme_codes = publish_burst(acme, 30)
    globex_codes = publish_burst(globex, 30)
    assert acme_codes[0] == RC.NO_MATCHING_SUBSCRIBERS  # the burst of one admits the first
    assert acme_codes.count(RC.QUOTA_EXCEEDED) >= 20
    assert set(acme_codes) <= {RC.QUOTA_EXCEEDED, RC.NO_MATCHING_SUBSCRIBERS}
    assert globex_codes == [RC.NO_MATCHING_SUBSCRIBERS] * 30
    text = AdminApi(broker.data_dir).metrics()
    refused = acme_codes.count(RC.QUOTA_EXCEEDED)
    assert metric_value(text, REFUSALS, tenant="acme", reason="publish_rate") == refused
    assert metric_value(text, REFUSALS, tenant="globex", reason="publish_rate") is None


def test_raised_quota_applies_to_a_connected_client(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit]\nrate_wait_ms = 0\n")
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_publish_rate=1)
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    assert RC.QUOTA_EXCEEDED in publish_burst(acme, 20)
    api.set_tenant("acme", max_publish_rate=1_000_000)
    assert publish_burst(acme, 50) == [RC.NO_MATCHING_SUBSCRIBERS] * 50  # same connection
    tenant = api.ok("GET", "/api/v1/tenants/acme")
    assert tenant["quota"]["max_publish_rate"] == 1_000_000
    assert tenant["usage"]["connections"] == 1


def test_publish_over_the_rate_waits_for_a_token_within_the_bound(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """With a wait bound, a burst over the rate is delayed, not refused (20/s, bound 5 s:
    30 messages need at most about 1.5 s of waiting)."""
    broker = broker_factory(config="[mqtt_limit]\nrate_wait_ms = 5000\nburst_seconds = 0.1\n")
    AdminApi(broker.data_dir).set_tenant("acme", max_publish_rate=20)
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    assert publish_burst(acme, 30) == [RC.NO_MATCHING_SUBSCRIBERS] * 30


def test_v311_client_over_the_publish_rate_is_disconnected(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(
        config="[mqtt_limit]\nrate_wait_ms = 0\n[mqtt_limit.cluster]\nmax_publish_rate = 1\n"
    )
    client, _ = connect(clients, broker, "old", level=4)
    assert client.publish("t", b"1", qos=1) is not None  # the burst of one
    for n in range(5):
        client.send_quietly(publish_packet("t", b"x", v5=False, qos=1, packet_id=100 + n))
    packets = client.wait_closed()
    assert all(p.type == PUBACK for p in packets)  # no error PUBACK in 3.1.1, just closed


def test_connection_rate_refuses_with_0x9f(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(
        config="[mqtt_limit]\nrate_wait_ms = 0\n[mqtt_limit.cluster]\nmax_connection_rate = 1\n"
    )
    codes = [connect(clients, broker, f"r{n}", expect_success=False)[1] for n in range(8)]
    assert codes[0] == 0
    assert codes.count(RC.CONNECTION_RATE_EXCEEDED) >= 4
    assert set(codes) <= {0, RC.CONNECTION_RATE_EXCEEDED}


def test_node_limits_change_through_the_api_and_sighup(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_connections_per_node = 100\n")
    api = AdminApi(broker.data_dir)
    assert api.ok("GET", "/api/v1/limits")["node"]["max_connections_per_node"] == 100
    api.ok("PUT", "/api/v1/limits", {"max_connections_per_node": 1})
    connect(clients, broker, "only")
    assert connect(clients, broker, "second", expect_success=False)[1] == RC.QUOTA_EXCEEDED
    # SIGHUP re-reads the file: back to 100.
    config = broker.workdir / "broker.toml"
    assert "max_connections_per_node = 100" in config.read_text()
    assert broker.process is not None
    broker.process.send_signal(signal.SIGHUP)
    wait_for(lambda: api.ok("GET", "/api/v1/limits")["node"]["max_connections_per_node"] == 100)
    connect(clients, broker, "third")


def test_tcp_connection_rate_closes_sockets_before_any_mqtt(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Over `max_tcp_connection_rate` (bound 0 s) a socket is closed before its CONNECT is
    read: no CONNACK at all."""
    broker = broker_factory(
        config="[mqtt_limit]\nrate_wait_ms = 0\nmax_tcp_connection_rate = 1\nburst_seconds = 1\n"
    )
    sockets = [clients.raw(broker) for _ in range(6)]  # all accepted by the kernel at once
    answered = closed = 0
    for client in sockets:
        try:
            connack = client.connect("t", expect_success=False)
        except (ConnectionClosed, OSError):  # the socket was dropped unread
            closed += 1
            continue
        assert connack.reason_code == 0
        answered += 1
    assert answered >= 1 and closed >= 3
    text = AdminApi(broker.data_dir).metrics()
    assert metric_value(text, REFUSALS, tenant="", reason="tcp_rate") == closed
