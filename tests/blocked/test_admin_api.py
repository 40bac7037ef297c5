"""The admin API of blocked clients over real HTTP: add (the clients it matches are
disconnected at once), list, delete; 4xx naming the field (a bad CIDR, regex, duration);
the failed-connections log."""

from __future__ import annotations

from tests.harness import InProcessBroker
from tests.integration.admin_api import AdminApi
from tests.integration.raw_client import RawClient

BANNED = 0x8A


def test_add_list_delete_through_the_api(broker: InProcessBroker) -> None:
    api = AdminApi(broker.data_dir)
    connected = RawClient(broker.port)
    try:
        connected.connect("sensor-9")
        status, entry = api.call(
            "POST",
            "/api/v1/blocked",
            {"client_id": "sensor-9", "reason": "flooding", "expires_in": "1h"},
        )
        assert status == 201, entry
        assert (entry["kind"], entry["value"], entry["reason"]) == (
            "client_id",
            "sensor-9",
            "flooding",
        )
        assert entry["expires_at"] - entry["created_at"] == 3600
        assert connected.wait_closed()[0].reason_code == 0x98  # disconnected at once
    finally:
        connected.close()
    listed = api.ok("GET", "/api/v1/blocked")
    assert listed == {"blocked": [entry]}
    again = RawClient(broker.port)
    try:
        assert again.connect("sensor-9", expect_success=False).reason_code == BANNED
    finally:
        again.close()
    failed = api.ok("GET", "/api/v1/failed-connections?client_id=sensor-9&limit=5")
    assert [
        (f["client_id"], f["reason"], f["reason_code"]) for f in failed["failed_connections"]
    ] == [("sensor-9", "blocked", BANNED)]
    assert failed["kept"] == 1000
    status, _ = api.call("DELETE", f"/api/v1/blocked/{entry['id']}")
    assert status == 204
    assert api.ok("GET", "/api/v1/blocked") == {"blocked": []}
    status, body = api.call("DELETE", f"/api/v1/blocked/{entry['id']}")
    assert (status, body["field"]) == (404, "id")
    back = RawClient(broker.port)
    try:
        assert back.connect("sensor-9").reason_code == 0
    finally:
        back.close()


def test_bad_input_is_400_naming_the_field(broker: InProcessBroker) -> None:
    api = AdminApi(broker.data_dir)
    cases = [
        ({"address": "10.0.0.0/33"}, "address"),
        ({"address": "not-an-ip"}, "address"),
        ({"regex": "a("}, "regex"),
        ({"client_id": "x", "expires_in": "soon"}, "expires_in"),
        ({"client_id": "x", "expires_in": -5}, "expires_in"),
        ({"regex": "x.*", "match_on": "topic"}, "match_on"),
        ({"client_id": "x", "colour": "red"}, "colour"),
        ({"client_id": "x", "username": "y"}, "username"),
        ({}, "client_id"),
        ({"client_id": 7}, "client_id"),
    ]
    for body, field in cases:
        status, answer = api.call("POST", "/api/v1/blocked", body)
        assert (status, answer.get("field")) == (400, field), (body, answer)
    assert api.ok("GET", "/api/v1/blocked") == {"blocked": []}
    status, answer = api.call("GET", "/api/v1/failed-connections?limit=0")
    assert (status, answer["field"]) == (400, "limit")
