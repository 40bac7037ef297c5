"""Node and tenant limits end to end (issue 5): count limits refuse exactly at the limit,
rate limits refuse exactly past their burst, with the reason codes of 3.1.1 and 5.0, at the
node layer (`[mqtt_limit.cluster]`) and at the tenant layer (a tenant's own quota), and
every refusal is counted once in `/metrics` under its tenant and reason. Limits changed
under connected clients, and rates under concurrent load: test_limits_live.py.

Assertions count admitted and refused operations; none measures time. Rates that must
refuse exactly use EXACT_RATES: the bucket holds a few tokens and the next one would take
minutes, so "rate x window + burst" is the burst itself for the length of a test."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, BrokerUnderTest, wait_for
from tests.integration.wire import (
    PUBACK,
    PUBCOMP,
    PUBREC,
    PUBREL,
    RC,
    ConnectionClosed,
    Prop,
    PropList,
    ack_packet,
    assert_disconnected_with,
    publish_packet,
)

pytestmark = pytest.mark.mqttq_only

REFUSALS = "mqttq_refusals_total"
PROTOCOL_ERRORS = "mqttq_protocol_errors_total"
NO_ANONYMOUS = '[auth]\nanonymous = "never"\n'
EXACT_RATES = "[mqtt_limit]\nrate_wait_ms = 0\nburst_seconds = 1000\n"
"""A request without a token is refused at once, and a bucket holds 1000 s of its rate: a
rate of `tokens(n)` admits exactly n requests, then one more only 1000 / n seconds later."""
V311_SERVER_UNAVAILABLE = 3
V311_BAD_CREDENTIALS = 4
V311_NOT_AUTHORIZED = 5
V311_SUBACK_FAILURE = 0x80
SESSION_EXPIRY = (Prop.SESSION_EXPIRY_INTERVAL, 600)


def tokens(count: int) -> float:
    """The rate (per second) whose bucket holds exactly `count` tokens under EXACT_RATES."""
    return count / 1000


def connect(
    clients: Clients,
    broker: BrokerUnderTest,
    client_id: str,
    tenant: str = "default",
    *,
    level: int = 5,
    expect_success: bool = True,
    props: PropList = (),
    **options: object,
) -> tuple[RawClient, int]:
    """A client of `tenant` (5.0: the `tenant` user property; 3.1.1 has none, so its tenant
    comes from the credential in `options`) and the CONNACK's reason / return code."""
    client = clients.raw(broker)
    all_props = [(Prop.USER_PROPERTY, ("tenant", tenant)), *props] if level == 5 else []
    connack = client.connect(
        client_id, level=level, props=all_props, expect_success=expect_success, **options
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


def refusals(api: AdminApi) -> dict[tuple[str, str], int]:
    """Every (tenant, reason) -> count of `mqttq_refusals_total` in /metrics."""
    counts = {}
    for family in text_string_to_metric_families(api.metrics()):
        for sample in family.samples:
            if sample.name == REFUSALS:
                counts[sample.labels["tenant"], sample.labels["reason"]] = int(sample.value)
    return counts


def wait_usage(api: AdminApi, tenant: str, field: str, value: int) -> None:
    """Wait until the broker reports `value` for `tenant`'s usage `field` (sessions, ...)."""

    def reached() -> bool:
        status, body = api.call("GET", f"/api/v1/tenants/{tenant}")
        return status == 200 and body["usage"][field] == value

    wait_for(reached, interval=0.1, what=f"{tenant}'s {field} to be {value}")


# --- connections ---------------------------------------------------------------------------


def test_node_connection_limit_refuses_exactly_at_the_limit(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_connections_per_node = 3\n")
    held = [connect(clients, broker, f"c{n}")[0] for n in range(3)]
    _, code5 = connect(clients, broker, "c3", expect_success=False)
    assert code5 == RC.QUOTA_EXCEEDED
    _, code3 = connect(clients, broker, "c4", level=4, expect_success=False)
    assert code3 == V311_SERVER_UNAVAILABLE
    held[0].disconnect()
    api = AdminApi(broker.data_dir)
    wait_usage(api, "default", "connections", 2)
    connect(clients, broker, "c5")  # the closed connection's slot
    assert connect(clients, broker, "c6", expect_success=False)[1] == RC.QUOTA_EXCEEDED
    assert refusals(api) == {("default", "connections"): 3}


def test_tenant_connection_quota_leaves_other_tenants_alone(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_connections_per_node=2)
    for n in range(2):
        connect(clients, broker, f"acme-{n}", "acme")
    assert connect(clients, broker, "acme-2", "acme", expect_success=False)[1] == (
        RC.QUOTA_EXCEEDED
    )
    for n in range(5):  # the default tenant is not affected
        connect(clients, broker, f"other-{n}")
    assert refusals(api) == {("acme", "connections"): 1}


def test_node_connection_rate_refuses_with_0x9f(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(
        config=f"{EXACT_RATES}[mqtt_limit.cluster]\nmax_connection_rate = 0.001\n"
    )
    codes = [connect(clients, broker, f"r{n}", expect_success=False)[1] for n in range(4)]
    assert codes == [0] + [RC.CONNECTION_RATE_EXCEEDED] * 3
    _, code3 = connect(clients, broker, "old", level=4, expect_success=False)
    assert code3 == V311_SERVER_UNAVAILABLE
    assert refusals(AdminApi(broker.data_dir)) == {("default", "connection_rate"): 4}


def test_tenant_connection_rate_refuses_one_tenant_while_another_connects(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """acme's own `max_connection_rate` (burst 2; its clients log in with its credential):
    its third CONNECT gets 0x9F (3.1.1: return code 3) while another tenant keeps
    connecting."""
    broker = broker_factory(config=EXACT_RATES)
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_connection_rate=tokens(2))
    api.add_credential("acme-dev", "pw", tenant="acme")
    login = {"username": "acme-dev", "password": b"pw"}
    codes = []
    for n in range(4):
        _, code = connect(clients, broker, f"acme-{n}", expect_success=False, **login)
        codes.append(code)
        assert connect(clients, broker, f"globex-{n}", "globex")[1] == 0
    assert codes == [0, 0, RC.CONNECTION_RATE_EXCEEDED, RC.CONNECTION_RATE_EXCEEDED]
    _, code3 = connect(clients, broker, "acme-old", level=4, expect_success=False, **login)
    assert code3 == V311_SERVER_UNAVAILABLE
    assert refusals(api) == {("acme", "connection_rate"): 3}


def test_tcp_connection_rate_closes_sockets_before_any_mqtt(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Over `max_tcp_connection_rate` (a burst of 1, bound 0 s) a socket is closed before
    its CONNECT is read: no CONNACK at all."""
    broker = broker_factory(config=f"{EXACT_RATES}max_tcp_connection_rate = {tokens(1)}\n")
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
    assert (answered, closed) == (1, 5)
    assert refusals(AdminApi(broker.data_dir)) == {("", "tcp_rate"): 5}


# --- sessions ------------------------------------------------------------------------------


def test_session_limit_counts_persistent_sessions_after_disconnect(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_sessions = 2\n")
    for name in ("p1", "p2"):
        client = clients.raw(broker)
        client.connect(name, clean=False, props=[SESSION_EXPIRY])
        client.disconnect()
    third = clients.raw(broker)
    refused = third.connect("p3", clean=False, props=[SESSION_EXPIRY], expect_success=False)
    assert refused.reason_code == RC.QUOTA_EXCEEDED
    # Resuming an existing session needs no new one.
    again = clients.raw(broker)
    assert again.connect("p1", clean=False, props=[SESSION_EXPIRY]).session_present


def test_v311_node_session_limit_answers_return_code_3(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """max_sessions = 2 at 3.1.1: a closed persistent session (clean session 0) keeps its
    slot, a clean one frees it; a refused CONNECT gets return code 3."""
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_sessions = 2\n")
    api = AdminApi(broker.data_dir)
    kept, _ = connect(clients, broker, "kept", level=4, clean=False)
    kept.disconnect()
    online, _ = connect(clients, broker, "online", level=4)
    for client_id, clean in (("x", True), ("y", False)):
        _, code = connect(clients, broker, client_id, level=4, clean=clean, expect_success=False)
        assert code == V311_SERVER_UNAVAILABLE, client_id
    online.disconnect()
    wait_usage(api, "default", "sessions", 1)
    connect(clients, broker, "x", level=4)  # the clean session's slot is free again
    _, code = connect(clients, broker, "y", level=4, clean=False, expect_success=False)
    assert code == V311_SERVER_UNAVAILABLE  # "kept" still holds the other one
    resumed = clients.raw(broker).connect("kept", level=4, clean=False)
    assert resumed.session_present  # resuming needs no new session
    assert refusals(api) == {("default", "sessions"): 3}


def test_tenant_session_quota_counts_closed_persistent_sessions(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """A tenant's max_sessions = 2 at 5.0: CONNACK 0x97 at the limit; a persistent session
    (expiry 600 s) still counts after its connection closed, a clean one (expiry 0) frees
    its slot; other tenants are not limited."""
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_sessions=2)
    kept, _ = connect(clients, broker, "kept", "acme", clean=False, props=[SESSION_EXPIRY])
    kept.disconnect()
    online, _ = connect(clients, broker, "online", "acme")
    assert connect(clients, broker, "x", "acme", expect_success=False)[1] == RC.QUOTA_EXCEEDED
    for n in range(3):
        connect(clients, broker, f"globex-{n}", "globex", props=[SESSION_EXPIRY])
    online.disconnect()
    wait_usage(api, "acme", "sessions", 1)
    connect(clients, broker, "x", "acme")
    _, code = connect(
        clients, broker, "y", "acme", clean=False, props=[SESSION_EXPIRY], expect_success=False
    )
    assert code == RC.QUOTA_EXCEEDED
    resumed = clients.raw(broker).connect(
        "kept", clean=False, props=[(Prop.USER_PROPERTY, ("tenant", "acme")), SESSION_EXPIRY]
    )
    assert resumed.session_present  # resuming needs no new session
    assert api.ok("GET", "/api/v1/tenants/acme")["usage"]["sessions"] == 2
    assert refusals(api) == {("acme", "sessions"): 2}


# --- topics --------------------------------------------------------------------------------


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


def test_v311_node_topic_limit_answers_0x80_for_the_refused_filter_only(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """max_topics = 2 at 3.1.1: in one SUBSCRIBE the filters that fit are granted and the
    one that does not gets 0x80; filters already held are granted again. The node limit
    holds for every tenant (a 5.0 client of another tenant gets 0x97)."""
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_topics = 2\n")
    client, _ = connect(clients, broker, "s", level=4)
    suback = client.subscribe(("a", 0), ("b", 1), ("c", 2))
    assert suback.reason_codes == (0, 1, V311_SUBACK_FAILURE)
    assert client.subscribe(("d", 0), ("b", 2)).reason_codes == (V311_SUBACK_FAILURE, 2)
    globex, _ = connect(clients, broker, "g", "globex")
    assert globex.subscribe(("a", 1)).reason_codes == (RC.QUOTA_EXCEEDED,)
    assert refusals(AdminApi(broker.data_dir)) == {
        ("default", "topics"): 2,
        ("globex", "topics"): 1,
    }


def test_v311_tenant_quotas_apply_to_the_credentials_tenant(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """A 3.1.1 client has no user properties: its tenant is its credential's. acme's
    max_sessions = 1 and max_topics = 2 refuse its second session (return code 3) and its
    third topic (SUBACK 0x80); an anonymous client of the default tenant is not limited."""
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.add_credential("acme-dev", "pw", tenant="acme")
    api.set_tenant("acme", max_sessions=1, max_topics=2)
    login = {"username": "acme-dev", "password": b"pw"}
    first, _ = connect(clients, broker, "acme-1", level=4, clean=False, **login)
    assert first.subscribe(("a", 0), ("b", 0), ("c", 0)).reason_codes == (
        0, 0, V311_SUBACK_FAILURE,
    )  # fmt: skip
    first.disconnect()  # the persistent session keeps its slot and its two topics
    _, code = connect(clients, broker, "acme-2", level=4, expect_success=False, **login)
    assert code == V311_SERVER_UNAVAILABLE
    other, _ = connect(clients, broker, "other", level=4, clean=False)
    assert other.subscribe(("c", 0), ("d", 0), ("e", 0)).reason_codes == (0, 0, 0)
    assert refusals(api) == {("acme", "sessions"): 1, ("acme", "topics"): 1}


def test_tenant_topic_quota_refuses_subscribe_and_retained_with_0x97(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """acme's max_topics = 3 at 5.0: SUBACK 0x97 for a fourth filter, PUBACK 0x97 for a
    retained message on a new topic; existing topics are not limited, an unsubscribed one
    gives its slot back, and another tenant is not limited."""
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_topics=3)
    sub, _ = connect(clients, broker, "acme-sub", "acme")
    suback = sub.subscribe(("a", 1), ("b", 1), ("c", 1), ("d", 1))
    assert suback.reason_codes == (1, 1, 1, RC.QUOTA_EXCEEDED)
    pub, _ = connect(clients, broker, "acme-pub", "acme")
    refused = pub.publish("e", b"new", qos=1, retain=True)
    assert refused is not None and refused.reason_code == RC.QUOTA_EXCEEDED
    kept = pub.publish("a", b"kept", qos=1, retain=True)
    assert kept is not None and kept.reason_code == RC.SUCCESS
    assert [m.topic for m in sub.receive_messages(1)] == ["a"]
    globex, _ = connect(clients, broker, "globex-sub", "globex")
    assert globex.subscribe(("a", 1), ("b", 1), ("c", 1), ("d", 1)).reason_codes == (1,) * 4
    assert sub.unsubscribe("b").reason_codes == (0,)
    assert sub.subscribe(("d", 1)).reason_codes == (1,)
    assert refusals(api) == {("acme", "topics"): 2}


# --- publish rate --------------------------------------------------------------------------


def test_qos2_publish_over_the_rate_gets_pubrec_0x97(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """acme's publish rate holds 3 tokens: 3 QoS 2 PUBLISHes complete, the next get PUBREC
    0x97 (and no PUBREL is expected for them); the refused messages are never delivered."""
    broker = broker_factory(config=EXACT_RATES)
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_publish_rate=tokens(3))
    sub, _ = connect(clients, broker, "acme-sub", "acme")
    assert sub.subscribe(("t", 2)).reason_codes == (2,)
    pub, _ = connect(clients, broker, "acme-pub", "acme")
    answers = [pub.publish("t", b"%d" % n, qos=2) for n in range(6)]
    assert [(a.type, a.reason_code) for a in answers if a is not None] == (
        [(PUBCOMP, RC.SUCCESS)] * 3 + [(PUBREC, RC.QUOTA_EXCEEDED)] * 3
    )
    api.set_tenant("acme", max_publish_rate=1000)
    marker = pub.publish("t", b"marker", qos=2)
    assert marker is not None and (marker.type, marker.reason_code) == (PUBCOMP, RC.SUCCESS)
    payloads = [m.payload for m in sub.receive_messages(4)]
    assert payloads == [b"0", b"1", b"2", b"marker"]
    assert refusals(api) == {("acme", "publish_rate"): 3}


@pytest.mark.parametrize("qos", [1, 2])
def test_v311_publish_over_the_rate_is_not_acknowledged(
    broker_factory: BrokerFactory, clients: Clients, qos: int
) -> None:
    """3.1.1 acks carry no reason code: a QoS 1/2 PUBLISH over the tenant's publish rate
    (2 tokens) gets no PUBACK/PUBREC, the connection is closed, and the refusal is counted
    as one, not as a protocol error. Sent again with its packet id after reconnecting
    [MQTT-4.4.0-1] (once the quota allows it), the message is delivered: nothing is lost."""
    broker = broker_factory(config=EXACT_RATES)
    api = AdminApi(broker.data_dir)
    api.add_credential("acme-dev", "pw", tenant="acme")
    api.set_tenant("acme", max_publish_rate=tokens(2))
    login = {"username": "acme-dev", "password": b"pw"}
    sub, _ = connect(clients, broker, "acme-sub", **login)
    assert sub.subscribe(("t", 2)).reason_codes == (2,)
    old, _ = connect(clients, broker, "acme-old", level=4, clean=False, **login)
    for n in range(2):
        answer = old.publish("t", b"%d" % n, qos=qos)
        assert answer is not None and answer.type == (PUBACK if qos == 1 else PUBCOMP)
    old.send(publish_packet("t", b"2", v5=False, qos=qos, packet_id=99))
    assert old.wait_closed() == []  # no PUBACK / PUBREC for packet 99
    text = api.metrics()
    assert refusals(api) == {("acme", "publish_rate"): 1}
    assert metric_value(text, PROTOCOL_ERRORS) == 0

    api.set_tenant("acme", max_publish_rate=1000)
    again, _ = connect(clients, broker, "acme-old", level=4, clean=False, **login)
    again.send(publish_packet("t", b"2", v5=False, qos=qos, packet_id=99, dup=True))
    if qos == 1:
        assert again.wait_packet(PUBACK, packet_id=99).reason_code == 0
    else:
        again.wait_packet(PUBREC, packet_id=99)
        again.send(ack_packet(PUBREL, 99, v5=False))
        again.wait_packet(PUBCOMP, packet_id=99)
    assert [m.payload for m in sub.receive_messages(3)] == [b"0", b"1", b"2"]


@pytest.mark.parametrize("qos", [1, 2])
def test_v311_retained_publish_on_a_new_topic_over_max_topics_is_not_acknowledged(
    broker_factory: BrokerFactory, clients: Clients, qos: int
) -> None:
    """max_topics = 1, held by a subscription to "#": a 3.1.1 QoS 1/2 retained PUBLISH on a
    new topic gets no PUBACK/PUBREC and its connection is closed; the message is neither
    stored nor delivered (a new subscriber's first message is a later live one), and the
    refusal is counted under `topics`, not as a protocol error."""
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_topics = 1\n")
    api = AdminApi(broker.data_dir)
    watcher, _ = connect(clients, broker, "watcher")
    assert watcher.subscribe(("#", 1)).reason_codes == (1,)
    old, _ = connect(clients, broker, "old", level=4)
    old.send(publish_packet("new/topic", b"state", v5=False, qos=qos, retain=True, packet_id=7))
    assert old.wait_closed() == []
    late, _ = connect(clients, broker, "late")
    assert late.subscribe(("#", 1)).reason_codes == (1,)  # an existing filter: no new topic
    marker, _ = connect(clients, broker, "marker")
    assert marker.publish("live", b"marker", qos=1) is not None
    for subscriber in (late, watcher):
        (first,) = subscriber.receive_messages(1)
        assert (first.topic, first.retain) == ("live", False)
    assert api.ok("GET", "/api/v1/retained")["retained"] == []
    assert refusals(api) == {("default", "topics"): 1}
    assert metric_value(api.metrics(), PROTOCOL_ERRORS) == 0


# --- refusals of authentication and flow control in /metrics ------------------------------


def test_connect_refusals_and_receive_maximum_are_counted_per_reason(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Each refused CONNECT counts once: `bad_credentials` (5.0 0x86, 3.1.1 return code 4)
    under the credential's tenant when the user name has one, else the default tenant, and
    `not_authorized` (anonymous not allowed: 0x87, return code 5) under the default tenant;
    a `tenant` user property never picks the tenant of a refusal. A client over the
    server's Receive Maximum counts under its tenant as `receive_maximum`."""
    broker = broker_factory(config=f"{NO_ANONYMOUS}[mqtt]\nreceive_maximum = 2\n")
    api = AdminApi(broker.data_dir)
    api.add_credential("acme-dev", "pw", tenant="acme")
    cases = [
        (5, "acme-dev", b"wrong", RC.BAD_USER_NAME_OR_PASSWORD),
        (5, "nobody", b"pw", RC.BAD_USER_NAME_OR_PASSWORD),
        (4, "acme-dev", b"wrong", V311_BAD_CREDENTIALS),
        (5, None, None, RC.NOT_AUTHORIZED),
        (4, None, None, V311_NOT_AUTHORIZED),
    ]
    for level, username, password, expected in cases:
        _, code = connect(
            clients, broker, "c", "globex", level=level, username=username,
            password=password, expect_success=False,
        )  # fmt: skip
        assert code == expected, (level, username, password)
    assert refusals(api) == {
        ("acme", "bad_credentials"): 2,
        ("default", "bad_credentials"): 1,
        ("default", "not_authorized"): 2,
    }

    greedy, _ = connect(clients, broker, "greedy", username="acme-dev", password=b"pw")
    for packet_id in (1, 2):  # QoS 2 without PUBREL: each stays in the inbound window
        greedy.send(publish_packet("t", b"x", v5=True, qos=2, packet_id=packet_id))
        greedy.wait_packet(PUBREC, packet_id=packet_id)
    greedy.send(publish_packet("t", b"x", v5=True, qos=2, packet_id=3))
    assert_disconnected_with(greedy.wait_closed(), RC.RECEIVE_MAXIMUM_EXCEEDED)
    assert refusals(api) == {
        ("acme", "bad_credentials"): 2,
        ("default", "bad_credentials"): 1,
        ("default", "not_authorized"): 2,
        ("acme", "receive_maximum"): 1,
    }


def test_a_credentialed_clients_refusal_counts_under_its_own_tenant(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """A client whose password was accepted but whose client id is outside its credential's
    pattern (0x87) belongs to the credential's tenant; a `tenant` user property cannot
    charge the refusal to another tenant (credentialed clients' properties are ignored)."""
    broker = broker_factory(config=NO_ANONYMOUS)
    api = AdminApi(broker.data_dir)
    api.add_credential("acme-gw", "pw", tenant="acme", client_id_pattern="gw-*")
    for level in (5, 4):
        _, code = connect(
            clients, broker, "laptop", "globex", level=level, username="acme-gw",
            password=b"pw", expect_success=False,
        )  # fmt: skip
        assert code == (RC.NOT_AUTHORIZED if level == 5 else V311_NOT_AUTHORIZED)
    assert refusals(api) == {("acme", "not_authorized"): 2}
