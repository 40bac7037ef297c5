"""The http provider end to end: a real broker in this process and a real aiohttp
authentication service on port 0 that grants, denies, is slow and is down."""

from __future__ import annotations

import logging

import pytest

from tests.auth.service import AuthService, closed_port
from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory
from tests.integration.wire import RC, SUBACK

pytestmark = pytest.mark.mqttq_only


def config(url: str, *, providers: str = '["http"]', extra: str = "", ttl: float = 0) -> str:
    return (
        f'[auth]\nanonymous = "never"\nproviders = {providers}\ncache_ttl = {ttl}\n'
        f'[auth.http]\nurl = "{url}"\ntimeout = 0.5\n'
        'headers = ["Authorization: Bearer ${MQTTQ_TEST_HTTP_TOKEN}"]\n' + extra
    )


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQTTQ_TEST_HTTP_TOKEN", "t0ken")


def test_a_grant_carries_tenant_and_acls_and_the_service_sees_the_client(
    broker_factory: BrokerFactory, clients: Clients, auth_service: AuthService
) -> None:
    auth_service.answer = lambda body: (
        200,
        {"result": "allow", "tenant": "acme", "acl": {"subscribe": ["devices/%c/#"]}},
    )
    broker = broker_factory(config=config(f"{auth_service.url}/auth"))
    client = clients.raw(broker)
    assert client.connect("dev-9", username="u1", password=b"pw").reason_code == 0
    assert client.subscribe(("devices/dev-9/x", 0)).reason_codes == (0,)
    refused = client.subscribe(("devices/dev-1/x", 0))
    assert (refused.type, refused.reason_codes) == (SUBACK, (RC.NOT_AUTHORIZED,))
    (seen,) = auth_service.requests
    headers = seen.pop("_headers")
    assert headers["Authorization"] == "Bearer t0ken"
    assert seen == {
        "client_id": "dev-9",
        "username": "u1",
        "password": "pw",
        "address": "127.0.0.1",
        "listener": "tcp",
        "cert_cn": None,
        "protocol": 5,
    }
    sessions = AdminApi(broker.data_dir).ok("GET", "/api/v1/sessions")["sessions"]
    assert [(s["client_id"], s["tenant"]) for s in sessions] == [("dev-9", "acme")]


@pytest.mark.parametrize(
    "answer", [(403, {"error": "no"}), (401, {}), (200, {"result": "deny"})], ids=str
)
def test_a_4xx_or_a_deny_refuses_with_not_authorized(
    broker_factory: BrokerFactory,
    clients: Clients,
    auth_service: AuthService,
    answer: tuple[int, object],
) -> None:
    auth_service.answer = lambda body: answer
    broker = broker_factory(config=config(f"{auth_service.url}/auth"))
    for level, expected in ((5, RC.NOT_AUTHORIZED), (4, 5)):
        client = clients.raw(broker)
        connack = client.connect(
            "d", level=level, username="u", password=b"p", expect_success=False
        )
        assert connack.reason_code == expected
        client.wait_closed()
    metrics = AdminApi(broker.data_dir).metrics()
    assert metric_value(metrics, "mqttq_auth_decisions_total", provider="http", outcome="deny") == 2


def test_a_slow_or_down_service_denies_and_is_logged_once_per_interval(
    broker_factory: BrokerFactory,
    clients: Clients,
    auth_service: AuthService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mqttq.auth.http")
    auth_service.delay = 3.0  # past the 0.5 s timeout
    slow = broker_factory(config=config(f"{auth_service.url}/auth"))
    down = broker_factory(config=config(f"http://127.0.0.1:{closed_port()}/auth"))
    for broker in (slow, down):
        for attempt in range(3):
            client = clients.raw(broker)
            connack = client.connect(
                f"c{attempt}", username="u", password=b"p", expect_success=False
            )
            assert connack.reason_code == RC.NOT_AUTHORIZED
            client.wait_closed()
    lines = [r.getMessage() for r in caplog.records if r.name == "mqttq.auth.http"]
    assert len(lines) == 2, lines  # one per broker, not one per CONNECT
    assert "timed out" in lines[0]
    assert "1 time(s)" in lines[0]
    metrics = AdminApi(down.data_dir).metrics()
    assert (
        metric_value(metrics, "mqttq_refusals_total", tenant="default", reason="unavailable") == 3
    )


def test_on_error_skip_and_ignore_go_on_to_the_next_provider(
    broker_factory: BrokerFactory, clients: Clients, auth_service: AuthService
) -> None:
    auth_service.answer = lambda body: (
        (200, {"result": "ignore"}) if body["username"] == "alice" else (500, {})
    )
    broker = broker_factory(
        config=config(
            f"{auth_service.url}/auth",
            providers='["http", "credentials"]',
            extra='on_error = "skip"\n',
        )
    )
    api = AdminApi(broker.data_dir)
    api.add_credential("alice", "s3cret")
    api.add_credential("bob", "b0b")
    assert clients.raw(broker).connect("a", username="alice", password=b"s3cret").reason_code == 0
    assert clients.raw(broker).connect("b", username="bob", password=b"b0b").reason_code == 0
    refused = clients.raw(broker).connect(
        "c", username="bob", password=b"nope", expect_success=False
    )
    assert refused.reason_code == RC.BAD_USER_NAME_OR_PASSWORD


def test_decisions_are_cached_for_the_ttl(
    broker_factory: BrokerFactory, clients: Clients, auth_service: AuthService
) -> None:
    broker = broker_factory(config=config(f"{auth_service.url}/auth", ttl=60))
    for _ in range(3):
        client = clients.raw(broker)
        assert client.connect("same", username="u", password=b"p").reason_code == 0
        client.disconnect()
    other = clients.raw(broker)
    assert other.connect("same", username="u", password=b"other").reason_code == 0
    assert len(auth_service.requests) == 2  # the second password is another key
    metrics = AdminApi(broker.data_dir).metrics()
    assert metric_value(metrics, "mqttq_auth_cache_hits_total") == 2
