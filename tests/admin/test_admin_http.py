"""The admin HTTP API over real HTTP (aiohttp client) on a real in-process broker
(RealBroker: MemoryStorage, SqliteAuthStore, real MQTT clients): every route's statuses,
bodies and field names; the token; the per-URI rate limit (before the token); bad input
changing nothing. BackendDouble only injects what a broker cannot be made to do (an
unexpected failure, UnknownTenant). Longer stories on the real broker (a retained message
deleted, the TCP rate) are in test_admin_real_broker.py; the credentials routes in
test_admin_http_credentials.py; unknown routes, oversized bodies, unexpected failures and
the per-URI rate limit in test_admin_http_limits.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mqttq.limits.quota import Quota
from tests.admin.conftest import Api, DoubleApi, RunAdmin, RunDouble
from tests.admin.real_broker import RealBroker, populated
from tests.integration.waiting import wait_for
from tests.integration.wire import DISCONNECT, RC

API = "/api/v1"
JSON_TYPE = {"Content-Type": "application/json"}
TENANT_KEYS = {"name", "quota", "stored", "usage", "created_at", "updated_at"}

# One concrete request per protected route (method, path).
PROTECTED = [
    ("GET", "/metrics"),
    ("GET", f"{API}/sessions"),
    ("GET", f"{API}/sessions/c1"),
    ("POST", f"{API}/sessions/c1/disconnect"),
    ("DELETE", f"{API}/sessions/c1"),
    ("GET", f"{API}/subscriptions"),
    ("GET", f"{API}/retained"),
    ("DELETE", f"{API}/retained?topic=a"),
    ("GET", f"{API}/tenants"),
    ("GET", f"{API}/tenants/acme"),
    ("PUT", f"{API}/tenants/acme"),
    ("DELETE", f"{API}/tenants/acme"),
    ("GET", f"{API}/limits"),
    ("PUT", f"{API}/limits"),
    ("GET", f"{API}/credentials"),
    ("POST", f"{API}/credentials"),
    ("GET", f"{API}/credentials/u"),
    ("PUT", f"{API}/credentials/u"),
    ("DELETE", f"{API}/credentials/u"),
]


def unchanged(real: RealBroker) -> None:
    """Nothing a refused request asked for happened to `populated` state."""
    assert (real.online("c1"), real.online("c2"), real.online("d1")) == (True, False, True)
    assert real.stored_retained() == [("acme", "a/1"), ("default", "a/1"), ("default", "z")]
    assert real.call(real.store.list_tenants()) == []
    assert real.call(real.store.list_credentials()) == []
    assert real.broker.limits.node_quota == Quota()
    assert real.broker.limits.tcp_rate == 10_000.0


def assert_error(answer: Any, status: int, field: str | None) -> None:
    """A JSON error naming `field` (every 4xx names one; a 5xx none)."""
    assert answer.status == status, answer.body
    assert set(answer.body) == {"error", "field"}
    assert isinstance(answer.body["error"], str) and answer.body["error"]
    assert answer.body["field"] == field


# --- token --------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_every_protected_route_needs_the_token(admin: RunAdmin, method: str, path: str) -> None:
    async def scenario(api: Api) -> None:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": "Basic dGVzdA=="},
            {"Authorization": "Bearer"},
        ):
            answer = await api.call(method, path, headers=headers, token=None, json={})
            assert_error(answer, 401, "Authorization")
            assert answer.headers["WWW-Authenticate"] == "Bearer"
        unchanged(api.real)

    admin(scenario, setup=populated)


def test_token_scheme_is_case_insensitive_and_unknown_paths_need_it(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.get(
            f"{API}/limits", token=None, headers={"Authorization": "bearer test-token-0123456789"}
        )
        assert answer.status == 200
        assert_error(await api.get("/nothing/here", token=None), 401, "Authorization")
        assert_error(await api.get("/nothing/here"), 404, "path")

    admin(scenario)


def test_health_and_openapi_need_no_token(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        health = await api.get("/health", token=None)
        assert health.status == 200
        assert (health.body["status"], health.body["mqtt_port"]) == ("ok", api.real.port)
        document = await api.get("/openapi.json", token=None)
        assert document.status == 200
        assert document.body["openapi"] == "3.1.0"
        # A wrong token does not spoil them either.
        assert (await api.get("/health", token="wrong")).status == 200

    admin(scenario)


# --- sessions, subscriptions, retained ----------------------------------------------------


def test_list_sessions_filters_and_limits(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.get(f"{API}/sessions")
        assert answer.status == 200
        assert [s["client_id"] for s in answer.body["sessions"]] == ["c1", "c2", "d1"]
        assert answer.body["items"] == answer.body["sessions"]
        assert (answer.body["next_cursor"], answer.body["total"]) == (None, 3)
        first = dict(answer.body["sessions"][0])
        assert first.pop("address").startswith("127.0.0.1:")
        assert first == {
            "client_id": "c1",
            "tenant": "acme",
            "client_type": "DEVICE",
            "connected": True,
            "listener": "tcp",
            "persistent": False,
            "protocol_level": 5,
            "expiry_interval": 0,
            "subscriptions": 1,
            "queued": 0,
            "inflight": 0,
            "disconnected_at": None,
            "username": None,
        }
        offline = answer.body["sessions"][1]
        assert (offline["address"], offline["username"]) == (None, None)
        assert (offline["connected"], offline["persistent"]) == (False, True)
        assert isinstance(offline["disconnected_at"], float)
        by_tenant = await api.get(f"{API}/sessions", params={"tenant": "default"})
        assert [s["client_id"] for s in by_tenant.body["sessions"]] == ["d1"]
        by_prefix = await api.get(f"{API}/sessions", params={"prefix": "c", "limit": "1"})
        assert [s["client_id"] for s in by_prefix.body["sessions"]] == ["c1"]
        empty_means_any = await api.get(f"{API}/sessions", params={"tenant": ""})
        assert len(empty_means_any.body["sessions"]) == 3

    admin(scenario, setup=populated)


@pytest.mark.parametrize(
    "limit",
    ["0", "10001", "-1", "abc", "1.5", "\u0661", "+5", "9" * 5000],
    ids=lambda value: ascii(value)[:14],
)
def test_limit_out_of_range_is_refused(admin: RunAdmin, limit: str) -> None:
    async def scenario(api: Api) -> None:
        for path in (f"{API}/sessions", f"{API}/subscriptions", f"{API}/retained"):
            assert_error(await api.get(path, params={"limit": limit}), 400, "limit")

    admin(scenario)


def test_limit_bounds_are_accepted(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        for limit in ("1", "10000"):
            answer = await api.get(f"{API}/retained", params={"limit": limit})
            assert answer.status == 200
            assert len(answer.body["retained"]) == min(int(limit), 3)

    admin(scenario, setup=populated)


def test_unknown_or_repeated_query_parameters_are_refused(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        assert_error(await api.get(f"{API}/sessions?tenat=acme"), 400, "tenat")
        assert_error(await api.get(f"{API}/sessions?tenant=a&tenant=b"), 400, "tenant")
        assert_error(await api.get(f"{API}/tenants?x=1"), 400, "x")

    admin(scenario)


def test_show_session(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.get(f"{API}/sessions/c1")
        assert answer.status == 200
        assert answer.body["client_id"] == "c1"
        assert [s["topic_filter"] for s in answer.body["subscriptions"]] == ["a/+"]
        assert_error(await api.get(f"{API}/sessions/nobody"), 404, "client_id")

    admin(scenario, setup=populated)


def test_client_id_with_a_slash_is_one_path_segment(admin: RunAdmin) -> None:
    def setup(real: RealBroker) -> None:
        real.client("site/7 dev")

    async def scenario(api: Api) -> None:
        answer = await api.get(f"{API}/sessions/site%2F7%20dev")
        assert answer.status == 200
        assert answer.body["client_id"] == "site/7 dev"

    admin(scenario, setup=setup)


def test_disconnect_session(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        real = api.real
        first = await api.call("POST", f"{API}/sessions/c1/disconnect")
        assert (first.status, first.body) == (200, {"disconnected": True})
        closing = real.connected["c1"].wait_closed()
        assert [(p.type, p.reason_code) for p in closing] == [
            (DISCONNECT, RC.ADMINISTRATIVE_ACTION)
        ]
        # c1's session ended with its connection (expiry 0); c2's stays, offline.
        wait_for(lambda: real.online("c1") is None, what="c1's session to end")
        gone = await api.call("POST", f"{API}/sessions/c1/disconnect")
        assert_error(gone, 404, "client_id")
        offline = await api.call("POST", f"{API}/sessions/c2/disconnect")
        assert (offline.status, offline.body) == (200, {"disconnected": False})
        assert real.online("c2") is False
        assert_error(await api.call("POST", f"{API}/sessions/zz/disconnect"), 404, "client_id")
        assert real.online("d1") is True

    admin(scenario, setup=populated)


def test_remove_session(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.call("DELETE", f"{API}/sessions/c2")
        assert (answer.status, answer.body) == (204, None)
        assert api.real.online("c2") is None
        assert_error(await api.call("DELETE", f"{API}/sessions/c2"), 404, "client_id")
        subscriptions = (await api.get(f"{API}/subscriptions")).body["subscriptions"]
        assert [s["client_id"] for s in subscriptions] == ["c1", "d1"]

    admin(scenario, setup=populated)


def test_list_subscriptions(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        every = await api.get(f"{API}/subscriptions")
        assert every.status == 200
        assert [s["topic_filter"] for s in every.body["subscriptions"]] == ["a/+", "b/#", "x"]
        assert set(every.body["subscriptions"][0]) == {
            "client_id",
            "tenant",
            "topic_filter",
            "qos",
            "no_local",
            "retain_as_published",
            "retain_handling",
            "subscription_identifier",
        }
        acme = await api.get(f"{API}/subscriptions", params={"tenant": "acme"})
        assert [s["client_id"] for s in acme.body["subscriptions"]] == ["c1", "c2"]
        one = await api.get(f"{API}/subscriptions", params={"client_id": "c2"})
        assert [s["topic_filter"] for s in one.body["subscriptions"]] == ["b/#"]
        first = await api.get(f"{API}/subscriptions", params={"tenant": "acme", "limit": "1"})
        assert [s["client_id"] for s in first.body["subscriptions"]] == ["c1"]

    admin(scenario, setup=populated)


def test_list_and_delete_retained(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        every = await api.get(f"{API}/retained")
        assert [(r["tenant"], r["topic"]) for r in every.body["retained"]] == [
            ("acme", "a/1"),
            ("default", "a/1"),
            ("default", "z"),
        ]
        acme = await api.get(f"{API}/retained", params={"tenant": "acme"})
        [message] = acme.body["retained"]
        assert message | {"created_at": None} == {
            "tenant": "acme",
            "topic": "a/1",
            "qos": 1,
            "payload_size": 2,
            "payload": "aGk=",
            "payload_text": "hi",
            "created_at": None,
            "expires_at": None,
        }

        deleted = await api.call(
            "DELETE", f"{API}/retained", params={"tenant": "acme", "topic": "a/1"}
        )
        assert deleted.status == 204
        assert api.real.stored_retained() == [("default", "a/1"), ("default", "z")]
        gone = await api.call(
            "DELETE", f"{API}/retained", params={"tenant": "acme", "topic": "a/1"}
        )
        assert_error(gone, 404, "topic")
        # The tenant defaults to "default".
        assert (await api.call("DELETE", f"{API}/retained", params={"topic": "z"})).status == 204
        assert api.real.stored_retained() == [("default", "a/1")]

    admin(scenario, setup=populated)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tenant": "acme"}, "topic"),
        ({"topic": "a/+"}, "topic"),
        ({"topic": "a/#"}, "topic"),
        ({"topic": "a", "tenant": "no spaces"}, "tenant"),
    ],
)
def test_delete_retained_bad_input(admin: RunAdmin, params: dict[str, str], field: str) -> None:
    async def scenario(api: Api) -> None:
        assert_error(await api.call("DELETE", f"{API}/retained", params=params), 400, field)
        unchanged(api.real)

    admin(scenario, setup=populated)


# --- tenants and limits -------------------------------------------------------------------


def test_tenants_list_show_put_delete(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        real = api.real
        limits = real.broker.limits
        default_quota = limits.default_quota
        empty = await api.get(f"{API}/tenants")
        assert empty.status == 200
        assert empty.body == {"default_quota": default_quota.to_dict(), "tenants": []}

        put = await api.call("PUT", f"{API}/tenants/acme", json={"max_topics": 7})
        assert put.status == 200
        assert set(put.body) == TENANT_KEYS
        expected = default_quota.replace(max_topics=7)
        assert put.body["quota"] == expected.to_dict()
        assert put.body["stored"] is True
        # c1 online, c2 offline; a/+ and b/# subscribed, a/1 retained.
        assert put.body["usage"] == {"connections": 1, "sessions": 2, "topics": 3}
        stored = real.call(real.store.get_tenant("acme"))
        assert stored is not None and stored.quota == expected
        assert put.body["created_at"] == stored.created_at > 0
        assert limits.quota_of("acme") == expected  # applied at once

        # A second PUT keeps the stored fields it does not name.
        again = await api.call("PUT", f"{API}/tenants/acme", json={"max_publish_rate": 9.5})
        assert again.body["quota"] == expected.replace(max_publish_rate=9.5).to_dict()
        assert again.body["created_at"] == stored.created_at

        listed = await api.get(f"{API}/tenants")
        assert [t["name"] for t in listed.body["tenants"]] == ["acme"]
        assert listed.body["tenants"][0] == (await api.get(f"{API}/tenants/acme")).body

        deleted = await api.call("DELETE", f"{API}/tenants/acme")
        assert deleted.status == 204
        assert real.call(real.store.get_tenant("acme")) is None
        assert limits.quota_of("acme") == default_quota
        assert_error(await api.call("DELETE", f"{API}/tenants/acme"), 404, "name")

    admin(scenario, setup=populated)


def test_unstored_tenants(admin: RunAdmin) -> None:
    def setup(real: RealBroker) -> None:
        real.client("b1", "busy")

    async def scenario(api: Api) -> None:
        default = await api.get(f"{API}/tenants/default")
        assert default.status == 200
        assert default.body == {
            "name": "default",
            "quota": api.real.broker.limits.default_quota.to_dict(),
            "stored": False,
            "usage": {"connections": 0, "sessions": 0, "topics": 0},
            "created_at": None,
            "updated_at": None,
        }
        busy = await api.get(f"{API}/tenants/busy")
        assert (busy.status, busy.body["stored"]) == (200, False)
        assert busy.body["usage"] == {"connections": 1, "sessions": 1, "topics": 0}
        assert_error(await api.get(f"{API}/tenants/idle"), 404, "name")

    admin(scenario, setup=setup)


def test_unknown_tenant_from_the_backend_is_404(admin_double: RunDouble) -> None:
    async def scenario(api: DoubleApi) -> None:
        api.backend.unknown_tenant_raises = True
        assert_error(await api.call("DELETE", f"{API}/tenants/ghost"), 404, "name")

    admin_double(scenario)


BAD_QUOTAS = [
    ({"max_topics": -1}, "max_topics"),
    ({"max_topics": 1.5}, "max_topics"),
    ({"max_topics": "10"}, "max_topics"),
    ({"max_topics": True}, "max_topics"),
    ({"max_topics": None}, "max_topics"),
    ({"max_publish_rate": -0.5}, "max_publish_rate"),
    ('{"max_connection_rate": 1e400}', "max_connection_rate"),
    ({"max_sessions": 2**63}, "max_sessions"),
    ({"max_topics": 5, "max_sesions": 1}, "max_sesions"),
    ({"max_connections_per_node": 5, "max_publish_rate": "fast"}, "max_publish_rate"),
]


@pytest.mark.parametrize(("body", "field"), BAD_QUOTAS)
def test_bad_quota_changes_nothing(admin: RunAdmin, body: dict[str, Any] | str, field: str) -> None:
    data = body if isinstance(body, str) else json.dumps(body)

    async def scenario(api: Api) -> None:
        real = api.real
        limits = real.broker.limits
        assert (await api.call("PUT", f"{API}/tenants/acme", json={"max_topics": 3})).status == 200
        before = real.call(real.store.list_tenants())
        node = limits.node_quota
        for path in (f"{API}/tenants/acme", f"{API}/tenants/newcomer", f"{API}/limits"):
            answer = await api.call("PUT", path, data=data, headers=JSON_TYPE)
            assert_error(answer, 400, field)
        assert real.call(real.store.list_tenants()) == before
        assert limits.node_quota is node
        assert limits.quota_of("acme") == Quota(max_topics=3)
        assert limits.quota_of("newcomer") == limits.default_quota

    admin(scenario)


@pytest.mark.parametrize(
    ("data", "content_type", "field"),
    [
        ("{bad json", "application/json", "body"),
        ("", "application/json", "body"),
        ("[1, 2]", "application/json", "body"),
        ('"max_topics"', "application/json", "body"),
        ("null", "application/json", "body"),
        ('{"max_topics": NaN}', "application/json", "body"),
        ('{"max_topics": Infinity}', "application/json", "body"),
        (b'{"max_topics": "\xff"}', "application/json", "body"),
        ('{"max_topics": 5}', "text/plain", "Content-Type"),
        ('{"max_topics": 5}', "application/x-www-form-urlencoded", "Content-Type"),
    ],
)
def test_malformed_bodies_are_refused(
    admin: RunAdmin, data: str | bytes, content_type: str, field: str
) -> None:
    async def scenario(api: Api) -> None:
        headers = {"Content-Type": content_type}
        for method, path in (
            ("PUT", f"{API}/tenants/acme"),
            ("PUT", f"{API}/limits"),
            ("POST", f"{API}/credentials"),
            ("PUT", f"{API}/credentials/u"),
        ):
            answer = await api.call(method, path, data=data, headers=headers)
            assert_error(answer, 400, field)
        unchanged(api.real)

    admin(scenario, setup=populated)


def test_bad_tenant_name_in_put(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        for name in ("with%20space", "a" * 129, "sl%2Fash", "%C3%A9t%C3%A9"):
            answer = await api.call("PUT", f"{API}/tenants/{name}", json={"max_topics": 1})
            assert_error(answer, 400, "name")
        ok = await api.call("PUT", f"{API}/tenants/{'a' * 128}", json={})
        assert ok.status == 200
        stored = api.real.call(api.real.store.list_tenants())
        assert [t.name for t in stored] == ["a" * 128]

    admin(scenario)


def test_node_limits(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        tcp = {"max_tcp_connection_rate": 10_000.0}
        answer = await api.get(f"{API}/limits")
        assert answer.body == {"node": Quota().to_dict() | tcp}
        put = await api.call("PUT", f"{API}/limits", json={"max_publish_rate": 10, "max_topics": 2})
        assert put.status == 200
        expected = Quota(max_publish_rate=10.0, max_topics=2)
        assert put.body == {"node": expected.to_dict() | tcp}
        assert api.real.broker.limits.node_quota == expected  # applied at once
        again = await api.call("PUT", f"{API}/limits", json={"max_sessions": 4})
        assert again.body == {"node": expected.replace(max_sessions=4).to_dict() | tcp}
        tcp_only = await api.call("PUT", f"{API}/limits", json={"max_tcp_connection_rate": 2})
        assert tcp_only.body == {
            "node": expected.replace(max_sessions=4).to_dict() | {"max_tcp_connection_rate": 2.0}
        }
        assert api.real.broker.limits.tcp_rate == 2.0
        both = await api.call(
            "PUT", f"{API}/limits", json={"max_tcp_connection_rate": 0, "max_topics": 9}
        )
        assert both.body["node"]["max_tcp_connection_rate"] == 0.0
        assert both.body["node"]["max_topics"] == 9
        limits = api.real.broker.limits
        assert (limits.tcp_rate, limits.node_quota.max_topics) == (0.0, 9)

    admin(scenario)


@pytest.mark.parametrize(
    "body",
    [
        '{"max_tcp_connection_rate": -1}',
        '{"max_tcp_connection_rate": "5"}',
        '{"max_tcp_connection_rate": true}',
        '{"max_tcp_connection_rate": null}',
        '{"max_tcp_connection_rate": 1e400}',
        '{"max_tcp_connection_rate": 1e300}',
        '{"max_tcp_connection_rate": 5, "max_topics": -1}',
        '{"max_topics": 1, "max_tcp_connection_rate": [1]}',
    ],
)
def test_bad_tcp_connection_rate_changes_nothing(admin: RunAdmin, body: str) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.call("PUT", f"{API}/limits", data=body, headers=JSON_TYPE)
        field = "max_topics" if '"max_topics": -1' in body else "max_tcp_connection_rate"
        assert_error(answer, 400, field)
        assert api.real.broker.limits.tcp_rate == 10_000.0
        assert api.real.broker.limits.node_quota == Quota()
        # Tenants have no TCP rate: the field is unknown there.
        tenant = await api.call("PUT", f"{API}/tenants/acme", json={"max_tcp_connection_rate": 1})
        assert_error(tenant, 400, "max_tcp_connection_rate")

    admin(scenario)
