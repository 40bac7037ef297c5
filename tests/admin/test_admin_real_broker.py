"""The admin API on a real broker, longer stories: RealBroker (in-process Broker,
MemoryStorage, SqliteAuthStore, AdminServer on port 0) driven by real MQTT clients over
TCP and real HTTP; every JSON answer is checked against the OpenAPI document as it
arrives (RealBroker.http).

What is asserted is what a user sees: the messages a new subscriber gets, PUBACK reason
codes, the tenant's usage, the rows in storage, sockets closed by the broker.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.admin.real_broker import PERSISTENT, RealBroker
from tests.integration.admin_api import metric_value
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import DISCONNECT, RC, connect_packet

API = "/api/v1"


@pytest.fixture
def real(tmp_path: Path) -> Iterator[RealBroker]:
    running = RealBroker(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def topics(items: list[dict[str, Any]], *keys: str) -> list[tuple[Any, ...]]:
    return [tuple(item[key] for key in keys) for item in items]


# --- retained messages ----------------------------------------------------------------------


def test_deleting_a_retained_message_frees_its_topic(real: RealBroker) -> None:
    assert real.ok("PUT", f"{API}/tenants/acme", {"max_topics": 2})["quota"]["max_topics"] == 2
    publisher = real.client("pub", "acme")
    for topic in ("r/1", "r/2"):
        accepted = publisher.publish(topic, topic.encode(), qos=1, retain=True)
        assert accepted is not None and accepted.reason_code is not None
        assert accepted.reason_code < 0x80, accepted
    full = publisher.publish("r/3", b"r/3", qos=1, retain=True)
    assert full is not None and full.reason_code == RC.QUOTA_EXCEEDED
    assert real.ok("GET", f"{API}/tenants/acme")["usage"]["topics"] == 2
    assert real.stored_retained() == [("acme", "r/1"), ("acme", "r/2")]

    assert real.http("DELETE", f"{API}/retained", tenant="acme", topic="r/1").status == 204

    assert real.ok("GET", f"{API}/tenants/acme")["usage"]["topics"] == 1
    assert real.stored_retained() == [("acme", "r/2")]
    listed = real.ok("GET", f"{API}/retained", tenant="acme")["retained"]
    assert topics(listed, "tenant", "topic") == [("acme", "r/2")]
    # The freed topic takes a new retained message, and only one does.
    fits = publisher.publish("r/3", b"r/3", qos=1, retain=True)
    assert fits is not None and fits.reason_code is not None and fits.reason_code < 0x80
    full = publisher.publish("r/4", b"r/4", qos=1, retain=True)
    assert full is not None and full.reason_code == RC.QUOTA_EXCEEDED
    assert real.stored_retained() == [("acme", "r/2"), ("acme", "r/3")]

    # A new subscriber gets r/2 and r/3 retained, then the live marker: never r/1. (Its
    # wildcard needs a topic of its own: the quota grows live.)
    real.ok("PUT", f"{API}/tenants/acme", {"max_topics": 3})
    subscriber = real.client("sub", "acme")
    assert subscriber.subscribe(("r/+", 1)).reason_codes == (1,)
    publisher.publish("r/marker", b"live", qos=1)
    got = [(m.topic, m.payload, m.retain) for m in subscriber.receive_messages(3)]
    assert sorted(got[:2]) == [("r/2", b"r/2", True), ("r/3", b"r/3", True)]
    assert got[2] == ("r/marker", b"live", False)

    gone = real.http("DELETE", f"{API}/retained", tenant="acme", topic="r/1")
    assert (gone.status, gone.body["field"]) == (404, "topic")
    elsewhere = real.http("DELETE", f"{API}/retained", tenant="other", topic="r/2")
    assert elsewhere.status == 404
    assert real.stored_retained() == [("acme", "r/2"), ("acme", "r/3")]


# --- listings: tenant and limit ---------------------------------------------------------------


def test_listings_filter_by_tenant_and_limit(real: RealBroker) -> None:
    a1 = real.client("a1", "acme")
    a1.subscribe(("a/x", 0), ("a/y", 1))
    a1.publish("a/1", b"one", qos=1, retain=True)
    a2 = real.client("a2", "acme")
    a2.subscribe(("a/z", 2))
    a2.publish("a/2", b"two", qos=1, retain=True)
    d1 = real.client("d1")
    d1.subscribe(("d/x", 1))
    d1.publish("d/1", b"three", qos=1, retain=True)
    real.client("d2")

    every = real.ok("GET", f"{API}/sessions")["sessions"]
    assert topics(every, "client_id", "tenant", "subscriptions") == [
        ("a1", "acme", 2),
        ("a2", "acme", 1),
        ("d1", "default", 1),
        ("d2", "default", 0),
    ]
    assert every[0]["address"].startswith("127.0.0.1:")
    assert every[0] | {"disconnected_at": None, "address": None} == {
        "client_id": "a1",
        "tenant": "acme",
        "client_type": "DEVICE",
        "connected": True,
        "listener": "tcp",
        "persistent": False,
        "protocol_level": 5,
        "expiry_interval": 0,
        "subscriptions": 2,
        "queued": 0,
        "inflight": 0,
        "disconnected_at": None,
        "username": None,
        "address": None,
    }

    def sessions(**params: str | int) -> list[str]:
        return [s["client_id"] for s in real.ok("GET", f"{API}/sessions", **params)["sessions"]]

    assert sessions(tenant="acme") == ["a1", "a2"]
    assert sessions(tenant="acme", limit=1) == ["a1"]
    assert sessions(tenant="default") == ["d1", "d2"]
    assert sessions(limit=3) == ["a1", "a2", "d1"]
    assert sessions(tenant="nobody") == []
    assert sessions(prefix="d", limit=1) == ["d1"]

    def subscriptions(**params: str | int) -> list[tuple[Any, ...]]:
        found = real.ok("GET", f"{API}/subscriptions", **params)["subscriptions"]
        return topics(found, "client_id", "topic_filter", "qos")

    assert subscriptions() == [
        ("a1", "a/x", 0),
        ("a1", "a/y", 1),
        ("a2", "a/z", 2),
        ("d1", "d/x", 1),
    ]
    assert subscriptions(tenant="acme") == [("a1", "a/x", 0), ("a1", "a/y", 1), ("a2", "a/z", 2)]
    assert subscriptions(tenant="acme", limit=2) == [("a1", "a/x", 0), ("a1", "a/y", 1)]
    assert subscriptions(tenant="default") == [("d1", "d/x", 1)]
    assert subscriptions(client_id="a2") == [("a2", "a/z", 2)]
    assert subscriptions(client_id="a2", tenant="default") == []
    assert subscriptions(limit=1) == [("a1", "a/x", 0)]

    def retained(**params: str | int) -> list[tuple[Any, ...]]:
        found = real.ok("GET", f"{API}/retained", **params)["retained"]
        return [(r["tenant"], r["topic"], base64.b64decode(r["payload"])) for r in found]

    assert retained() == [
        ("acme", "a/1", b"one"),
        ("acme", "a/2", b"two"),
        ("default", "d/1", b"three"),
    ]
    assert retained(tenant="acme") == [("acme", "a/1", b"one"), ("acme", "a/2", b"two")]
    assert retained(tenant="acme", limit=1) == [("acme", "a/1", b"one")]
    assert retained(limit=2) == [("acme", "a/1", b"one"), ("acme", "a/2", b"two")]
    assert retained(tenant="default") == [("default", "d/1", b"three")]
    assert retained(tenant="nobody") == []
    for path in ("sessions", "subscriptions", "retained"):
        refused = real.http("GET", f"{API}/{path}", limit=0)
        assert (refused.status, refused.body["field"]) == (400, "limit")


# --- sessions: detail, disconnect, remove ---------------------------------------------------


def test_session_detail_disconnect_and_remove(real: RealBroker) -> None:
    keeper = real.client("keeper", "acme", clean=False, props=PERSISTENT)
    keeper.subscribe(("k/#", 1))
    shown = real.ok("GET", f"{API}/sessions/keeper")
    assert shown["peer"] == "{}:{}".format(*keeper.sock.getsockname())
    assert (shown["connected"], shown["persistent"], shown["expiry_interval"]) == (True, True, 600)
    assert topics(shown["subscriptions"], "client_id", "tenant", "topic_filter", "qos") == [
        ("keeper", "acme", "k/#", 1)
    ]
    assert shown["stored_messages"] == 0

    assert real.ok("POST", f"{API}/sessions/keeper/disconnect") == {"disconnected": True}
    closing = keeper.wait_closed()
    assert [(p.type, p.reason_code) for p in closing] == [(DISCONNECT, RC.ADMINISTRATIVE_ACTION)]

    def gone_offline() -> dict[str, Any] | None:
        session: dict[str, Any] = real.ok("GET", f"{API}/sessions/keeper")
        return None if session["connected"] else session

    offline = wait_for(gone_offline, what="the session to go offline")
    assert offline["peer"] is None
    assert isinstance(offline["disconnected_at"], float)
    assert real.ok("POST", f"{API}/sessions/keeper/disconnect") == {"disconnected": False}

    # Published while it is offline: kept in storage for it.
    publisher = real.client("pub", "acme")
    publisher.publish("k/1", b"kept", qos=1)
    assert real.ok("GET", f"{API}/sessions/keeper")["stored_messages"] == 1

    assert real.http("DELETE", f"{API}/sessions/keeper").status == 204
    missing = real.http("GET", f"{API}/sessions/keeper")
    assert (missing.status, missing.body["field"]) == (404, "client_id")
    assert real.http("DELETE", f"{API}/sessions/keeper").status == 404
    assert real.http("POST", f"{API}/sessions/keeper/disconnect").status == 404
    again = real.client("keeper", "acme", clean=False, props=PERSISTENT)
    assert again.subscribe(("other", 0)).reason_codes == (0,)
    assert real.ok("GET", f"{API}/sessions/keeper")["stored_messages"] == 0

    # Removing a connected session closes its connection too.
    assert real.http("DELETE", f"{API}/sessions/pub").status == 204
    closing = publisher.wait_closed()
    assert [(p.type, p.reason_code) for p in closing] == [(DISCONNECT, RC.ADMINISTRATIVE_ACTION)]
    assert [s["client_id"] for s in real.ok("GET", f"{API}/sessions")["sessions"]] == ["keeper"]


# --- limits ---------------------------------------------------------------------------------


def test_node_limits_carry_the_tcp_connection_rate(real: RealBroker) -> None:
    node = real.ok("GET", f"{API}/limits")["node"]
    assert node == real.broker.limits.node_quota.to_dict() | {"max_tcp_connection_rate": 10_000.0}

    closed = real.ok("PUT", f"{API}/limits", {"max_tcp_connection_rate": 0})["node"]
    assert closed["max_tcp_connection_rate"] == 0.0
    refused = RawClient(real.port)
    real.clients.append(refused)
    refused.send_quietly(connect_packet("late", level=5))
    assert refused.wait_closed() == []  # dropped before any MQTT: no CONNACK
    text = real.http("GET", "/metrics").body
    assert metric_value(text, "mqttq_refusals_total", tenant="", reason="tcp_rate") == 1

    for body, field in (
        ({"max_tcp_connection_rate": -1}, "max_tcp_connection_rate"),
        ({"max_tcp_connection_rate": "fast"}, "max_tcp_connection_rate"),
        ({"max_tcp_connection_rate": 5, "max_topics": 1.5}, "max_topics"),
        ({"max_tcp_connection_rate": 5, "max_tcp_rate": 5}, "max_tcp_rate"),
    ):
        answer = real.http("PUT", f"{API}/limits", body)
        assert (answer.status, answer.body["field"]) == (400, field), body
    assert real.ok("GET", f"{API}/limits")["node"] == closed
    assert real.broker.limits.tcp_rate == 0.0

    opened = real.ok("PUT", f"{API}/limits", {"max_tcp_connection_rate": 50, "max_topics": 7})
    assert opened["node"] == closed | {"max_tcp_connection_rate": 50.0, "max_topics": 7}
    assert real.client("welcome").subscribe(("t", 0)).reason_codes == (0,)


# --- every other route, answered as documented ----------------------------------------------


def test_tenants_credentials_and_service_routes(real: RealBroker) -> None:
    health = real.ok("GET", "/health")
    assert (health["status"], health["mqtt_port"]) == ("ok", real.port)
    assert real.ok("GET", "/openapi.json")["openapi"] == "3.1.0"
    real.client("c1", "acme").subscribe(("x", 0))
    put = real.ok("PUT", f"{API}/tenants/acme", {"max_sessions": 5})
    assert (put["stored"], put["quota"]["max_sessions"]) == (True, 5)
    assert put["usage"] == {"connections": 1, "sessions": 1, "topics": 1}
    assert [t["name"] for t in real.ok("GET", f"{API}/tenants")["tenants"]] == ["acme"]
    assert real.ok("GET", f"{API}/tenants/default")["stored"] is False
    assert real.http("DELETE", f"{API}/tenants/acme").status == 204
    assert real.ok("GET", f"{API}/tenants/acme")["stored"] is False  # in use: still shown
    assert real.http("GET", f"{API}/tenants/idle").status == 404

    created = real.ok("POST", f"{API}/credentials", {"username": "u1", "password": "pw"})
    assert created["tenant"] == "default"
    changed = real.ok("PUT", f"{API}/credentials/u1", {"tenant": "acme", "publish_acl": []})
    assert (changed["tenant"], changed["publish_acl"]) == ("acme", [])
    listed = real.ok("GET", f"{API}/credentials", tenant="acme")["credentials"]
    assert [c["username"] for c in listed] == ["u1"]
    # The credential works at once, in its tenant and with its ACL.
    user = RawClient(real.port)
    real.clients.append(user)
    user.connect("u1-client", username="u1", password=b"pw")
    denied = user.publish("x", b"no", qos=1)
    assert denied is not None and denied.reason_code == RC.NOT_AUTHORIZED
    assert real.ok("GET", f"{API}/sessions/u1-client")["tenant"] == "acme"
    assert real.http("DELETE", f"{API}/credentials/u1").status == 204
    assert real.http("GET", f"{API}/credentials/u1").status == 404
