"""The admin HTTP API of a running `mqttq serve`, end to end (issue 5): token, health,
metrics, sessions, subscriptions, retained messages, tenants and limits, bad input."""

from __future__ import annotations

import pytest

from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import DISCONNECT, RC, Prop

pytestmark = pytest.mark.mqttq_only


def test_token_is_required_except_for_health(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    token_file = broker.data_dir / "admin-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert api.call("GET", "/health", token="")[0] == 200
    assert api.call("GET", "/api/v1/sessions", token="")[0] == 401
    status, body = api.call("GET", "/api/v1/sessions", token="not-the-token")
    assert (status, body["field"]) == (401, "Authorization")
    assert api.call("GET", "/metrics", token="wrong")[0] == 401
    assert api.call("GET", "/api/v1/sessions")[0] == 200


def test_sessions_can_be_listed_disconnected_and_removed(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    keeper = clients.raw(broker)
    keeper.connect("keeper", clean=False, props=[(Prop.SESSION_EXPIRY_INTERVAL, 600)])
    keeper.subscribe(("news/#", 1))
    victim = clients.raw(broker)
    victim.connect("victim")
    listed = api.ok("GET", "/api/v1/sessions")["sessions"]
    assert [(s["client_id"], s["connected"], s["persistent"]) for s in listed] == [
        ("keeper", True, True),
        ("victim", True, False),
    ]
    shown = api.ok("GET", "/api/v1/sessions/keeper")
    assert [s["topic_filter"] for s in shown["subscriptions"]] == ["news/#"]
    subs = api.ok("GET", "/api/v1/subscriptions?client_id=keeper")["subscriptions"]
    assert [(s["topic_filter"], s["qos"]) for s in subs] == [("news/#", 1)]

    assert api.ok("POST", "/api/v1/sessions/victim/disconnect") == {"disconnected": True}
    packets = victim.wait_closed()
    assert [(p.type, p.reason_code) for p in packets] == [(DISCONNECT, RC.ADMINISTRATIVE_ACTION)]
    assert api.call("POST", "/api/v1/sessions/nobody/disconnect")[0] == 404

    assert api.call("DELETE", "/api/v1/sessions/keeper")[0] == 204
    keeper.wait_closed()
    assert api.call("GET", "/api/v1/sessions/keeper")[0] == 404
    again = clients.raw(broker)
    connack = again.connect("keeper", clean=False, props=[(Prop.SESSION_EXPIRY_INTERVAL, 600)])
    assert not connack.session_present
    assert api.call("DELETE", "/api/v1/sessions/keeper-missing")[0] == 404


def test_invalid_quota_changes_nothing(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_topics=10)
    for body, field in (
        ({"max_topics": -1}, "max_topics"),
        ({"max_publish_rate": "fast"}, "max_publish_rate"),
        ({"max_topics": 5, "max_sessionz": 3}, "max_sessionz"),
    ):
        status, error = api.call("PUT", "/api/v1/tenants/acme", body)
        assert status == 400 and error["field"] == field, (body, status, error)
    assert api.ok("GET", "/api/v1/tenants/acme")["quota"]["max_topics"] == 10
    status, error = api.call("PUT", "/api/v1/limits", {"max_connections_per_node": 1.5})
    assert status == 400 and error["field"] == "max_connections_per_node"
    assert api.call("GET", "/api/v1/tenants/nobody")[0] == 404
    assert api.call("DELETE", "/api/v1/tenants/nobody")[0] == 404
    assert api.call("DELETE", "/api/v1/tenants/acme")[0] == 204


def test_metrics_count_connections_and_messages(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    sub = clients.raw(broker)
    sub.connect("sub")
    sub.subscribe(("m", 1))
    pub = clients.raw(broker)
    pub.connect("pub")
    for _ in range(3):
        pub.publish("m", b"x", qos=1)
    sub.receive_messages(3)

    def scraped() -> str | None:
        text = api.metrics()
        return text if metric_value(text, "mqttq_messages_sent_total", qos="1") == 3 else None

    text = wait_for(scraped, what="3 QoS 1 deliveries in /metrics")
    assert metric_value(text, "mqttq_connections") == 2
    assert metric_value(text, "mqttq_messages_received_total", qos="1") == 3
    assert metric_value(text, "mqttq_tenant_connections", tenant="default") == 2


def test_admin_requests_are_rate_limited_per_uri(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(
        config="[admin]\nmax_request_rate = 1.0\n[mqtt_limit]\nrate_wait_ms = 0\n"
    )
    api = AdminApi(broker.data_dir)
    statuses = [api.call("GET", "/api/v1/limits")[0] for _ in range(10)]
    assert statuses[0] == 200
    assert statuses.count(429) >= 5
    assert api.call("GET", "/api/v1/tenants")[0] == 200  # another URI has its own budget
    # The limit comes before the token: a flood without it is refused on rate, not 401.
    answers = [api.call("GET", "/api/v1/sessions", token="wrong") for _ in range(10)]
    assert answers[0] == (401, {"error": "missing or wrong bearer token", "field": "Authorization"})
    assert {status for status, _ in answers} == {401, 429}
    assert [status for status, _ in answers].count(429) >= 5
    assert {body["field"] for status, body in answers if status == 429} == {"path"}
    refused = metric_value(
        api.metrics(), "mqttq_admin_requests_refused_total", route="/api/v1/sessions"
    )
    assert refused is not None and refused >= 5


def test_metrics_show_storage_latency(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    sub = clients.raw(broker)
    sub.connect("stored", clean=False, props=[(Prop.SESSION_EXPIRY_INTERVAL, 600)])
    sub.subscribe(("q", 1))
    sub.disconnect()
    pub = clients.raw(broker)
    pub.connect("pub")
    for _ in range(4):
        pub.publish("q", b"x", qos=1)  # PUBACK comes after the enqueue committed
    text = api.metrics()
    count = metric_value(text, "mqttq_storage_latency_seconds_count", op="enqueue")
    assert count is not None and count >= 1
    saved = metric_value(text, "mqttq_storage_latency_seconds_count", op="save_session")
    assert saved is not None and saved >= 2  # connect and disconnect of "stored"
