"""The reads a console (the dashboard) makes of a real broker through the admin API (issue
34): sessions searched and paged on the server, a session in detail, subscriptions by
filter, retained messages by topic prefix with their text, the node at a glance, Kafka on
an embedded broker. Every answer is checked against the OpenAPI document as it arrives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqttq import __version__
from tests.admin.real_broker import PERSISTENT, RealBroker
from tests.integration.waiting import wait_for

API = "/api/v1"


@pytest.fixture
def real(tmp_path: Path) -> Iterator[RealBroker]:
    running = RealBroker(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def ids(page: dict[str, Any]) -> list[str]:
    return [item["client_id"] for item in page["items"]]


def test_sessions_are_paged_with_a_cursor_and_a_total(real: RealBroker) -> None:
    for n in range(7):
        real.client(f"dev-{n}")
    real.client("other")
    first = real.ok("GET", f"{API}/sessions", prefix="dev-", limit=3)
    assert (ids(first), first["total"], first["next_cursor"]) == (
        ["dev-0", "dev-1", "dev-2"],
        7,
        "dev-2",
    )
    assert first["sessions"] == first["items"]  # the name callers used before paging
    second = real.ok("GET", f"{API}/sessions", prefix="dev-", limit=3, cursor="dev-2")
    assert (ids(second), second["total"]) == (["dev-3", "dev-4", "dev-5"], 7)
    last = real.ok("GET", f"{API}/sessions", prefix="dev-", limit=3, cursor="dev-5")
    assert (ids(last), last["next_cursor"], last["total"]) == (["dev-6"], None, 7)
    everything = real.ok("GET", f"{API}/sessions", limit=8)
    assert (len(everything["items"]), everything["next_cursor"]) == (8, None)


def test_sessions_are_searched_by_user_address_state_and_tenant(real: RealBroker) -> None:
    real.ok("POST", f"{API}/credentials", {"username": "meter", "password": "s3cret"})
    real.client("by-user", username="meter", password=b"s3cret")
    real.client("anonymous", "acme")
    away = real.client("away", clean=False, props=PERSISTENT)
    away.disconnect()
    wait_for(lambda: real.online("away") is False, what="away to go offline")

    def search(**params: str) -> list[str]:
        return ids(real.ok("GET", f"{API}/sessions", **params))

    assert search(user="meter") == ["by-user"]
    assert search(user="nobody") == []
    assert search(state="offline") == ["away"]
    assert search(state="connected", tenant="acme") == ["anonymous"]
    assert search(address="127.0.0.1:", state="connected") == ["anonymous", "by-user"]
    assert search(address="10.") == []
    found = real.ok("GET", f"{API}/sessions", user="meter")["items"][0]
    assert (found["username"], found["address"].startswith("127.0.0.1:")) == ("meter", True)
    bad = real.http("GET", f"{API}/sessions", state="asleep")
    assert (bad.status, bad.body["field"]) == (400, "state")
    unknown = real.http("GET", f"{API}/sessions", colour="red")
    assert (unknown.status, unknown.body["field"]) == (400, "colour")


def test_a_session_in_detail(real: RealBroker) -> None:
    client = real.client("detailed", keepalive=30)
    client.subscribe(("t/#", 1), ("u", 0))
    detail = real.ok("GET", f"{API}/sessions/detailed")
    assert (detail["protocol_level"], detail["listener"], detail["keep_alive"]) == (5, "tcp", 30)
    assert detail["peer"] == detail["address"]
    assert detail["peer"].startswith("127.0.0.1:")
    assert [s["topic_filter"] for s in detail["subscriptions"]] == ["t/#", "u"]
    assert (detail["queued"], detail["inflight"]) == (0, 0)


def test_subscriptions_by_filter(real: RealBroker) -> None:
    real.client("s1").subscribe(("home/+/temp", 1))
    real.client("s2").subscribe(("home/+/temp", 0), ("home/#", 2))
    real.client("s3").subscribe(("office/#", 1))

    def who(**params: str) -> list[tuple[str, str]]:
        found = real.ok("GET", f"{API}/subscriptions", **params)["subscriptions"]
        return [(s["client_id"], s["topic_filter"]) for s in found]

    assert who(topic_filter="home/+/temp") == [("s1", "home/+/temp"), ("s2", "home/+/temp")]
    assert who(filter_prefix="home/") == [
        ("s1", "home/+/temp"),
        ("s2", "home/+/temp"),
        ("s2", "home/#"),
    ]
    assert who(filter_prefix="office") == [("s3", "office/#")]


def test_retained_by_prefix_with_text_when_utf8(real: RealBroker) -> None:
    publisher = real.client("pub")
    publisher.publish("cfg/text", "héllo".encode(), qos=1, retain=True)
    publisher.publish("cfg/binary", b"\xff\x00", qos=1, retain=True)
    publisher.publish("other", b"x", qos=1, retain=True)
    found = real.ok("GET", f"{API}/retained", prefix="cfg/")["retained"]
    assert [(r["topic"], r["payload"], r["payload_text"]) for r in found] == [
        ("cfg/binary", "/wA=", None),
        ("cfg/text", "aMOpbGxv", "héllo"),
    ]


def test_node_at_a_glance(real: RealBroker) -> None:
    real.ok("PUT", f"{API}/tenants/acme", {"max_connections_per_node": 5})
    real.client("n1", "acme")
    real.client("n2")
    node = real.ok("GET", f"{API}/node")
    assert (node["version"], node["mode"]) == (__version__, "embedded")
    assert node["listeners"] == [{"name": "tcp", "port": real.port, "connections": 2}]
    assert node["limits"]["usage"]["connections"] == 2
    tenants = {t["name"]: t for t in node["tenants"]}
    assert tenants["acme"]["quota"]["max_connections_per_node"] == 5
    assert (tenants["acme"]["stored"], tenants["acme"]["usage"]["connections"]) == (True, 1)
    assert (tenants["default"]["stored"], tenants["default"]["usage"]["connections"]) == (
        False,
        1,
    )


def test_kafka_of_an_embedded_broker_is_empty(real: RealBroker) -> None:
    assert real.ok("GET", f"{API}/kafka") == {
        "distributed": False,
        "topic_prefix": None,
        "topics": [],
        "consumer_groups": [],
    }
