"""The `disconnected` event says why the connection ended, on a real broker with real
clients: the client's DISCONNECT (0x00, 0x04, an error code; 3.1.1), the keep alive
timeout, a protocol error, a takeover, an administrator's disconnect, a blocked-list
entry, an expired token, and a socket closed without a DISCONNECT; with the MQTT reason
code as a number where there is one."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest

from tests.harness import let_time_pass
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory

pytestmark = pytest.mark.mqttq_only

CONFIG = '[events]\nkinds = ["disconnected"]\n'


def watch(broker: Any, clients: Clients, client_id: str) -> RawClient:
    """A subscriber to `client_id`'s disconnected events."""
    watcher = clients.connected(broker, f"watcher-{client_id}")
    watcher.subscribe((f"$events/disconnected/{client_id}", 1))
    return watcher


def disconnected(watcher: RawClient) -> dict[str, Any]:
    """The next disconnected event's body, without its timestamp."""
    [packet] = watcher.receive_messages(1)
    body: dict[str, Any] = json.loads(packet.payload)
    assert isinstance(body.pop("timestamp"), int)
    return body


def test_a_normal_disconnect(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "leaves")
    client = clients.raw(broker)
    client.connect("leaves")
    client.disconnect()
    assert disconnected(watcher) == {
        "event": "disconnected",
        "client_id": "leaves",
        "tenant": "default",
        "reason": "normal",
        "reason_code": 0,
    }


def test_a_311_disconnect_is_normal(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "old")
    client = clients.raw(broker)
    client.connect("old", level=4)
    client.disconnect()
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("normal", 0)


@pytest.mark.parametrize(
    ("code", "reason"), [(0x04, "disconnect_with_will"), (0x80, "client_error")]
)
def test_a_disconnect_with_another_reason_code(
    broker_factory: BrokerFactory, clients: Clients, code: int, reason: str
) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "coded")
    client = clients.raw(broker)
    client.connect("coded")
    client.disconnect(code)
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == (reason, code)


def test_a_closed_socket_is_connection_lost(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "vanishes")
    client = clients.raw(broker)
    client.connect("vanishes")
    client.close()  # no DISCONNECT
    body = disconnected(watcher)
    assert body["reason"] == "connection_lost"
    assert "reason_code" not in body  # none was sent either way


@pytest.mark.manual_clock
def test_a_keep_alive_timeout(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "silent")
    client = clients.raw(broker)
    client.connect("silent", keepalive=1)
    let_time_pass(broker, 2.0)  # past 1.5 x keep alive
    client.wait_closed()
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("keep_alive_timeout", 0x8D)


def test_a_protocol_error_with_its_reason_code(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "rude")
    client = clients.raw(broker)
    client.connect("rude")
    client.send(bytes([0x36, 0x05, 0x00, 0x01, 0x74, 0x00, 0x01]))  # PUBLISH with QoS 3
    client.wait_closed()
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("protocol_error", 0x81)


def test_a_takeover(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "twice")
    first = clients.raw(broker)
    first.connect("twice")
    second = clients.raw(broker)
    second.connect("twice")
    first.wait_closed()
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("taken_over", 0x8E)


def test_an_administrators_disconnect_is_kicked(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "unwanted")
    client = clients.raw(broker)
    client.connect("unwanted")
    api = AdminApi(broker.data_dir)
    assert api.ok("POST", "/api/v1/sessions/unwanted/disconnect") == {"disconnected": True}
    client.wait_closed()
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("kicked", 0x98)


def test_a_blocked_client(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=CONFIG)
    watcher = watch(broker, clients, "flooder")
    client = clients.raw(broker)
    client.connect("flooder")
    api = AdminApi(broker.data_dir)
    status, entry = api.call("POST", "/api/v1/blocked", {"client_id": "flooder"})
    assert status == 201, entry
    client.wait_closed()
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("blocked", 0x98)


JWT_SECRET = "a-test-secret-of-32-bytes-or-more!"
JWT_CONFIG = (
    CONFIG
    + """[auth]
anonymous = "never"
providers = ["jwt"]
[auth.jwt]
algorithms = ["HS256"]
secret_env = "MQTTQ_TEST_EVENTS_JWT_SECRET"
"""
)


def test_an_expired_token(
    broker_factory: BrokerFactory, clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQTTQ_TEST_EVENTS_JWT_SECRET", JWT_SECRET)
    broker = broker_factory(config=JWT_CONFIG)
    watcher = clients.raw(broker)
    reader = {"sub": "ops", "subscribe_acl": ["$events/#"]}
    watcher.connect("ops", password=jwt.encode(reader, JWT_SECRET, "HS256").encode())
    watcher.subscribe(("$events/disconnected/short-lived", 1))
    # `exp` is whole seconds: now + 3 leaves at least 2 s for the CONNECT to be accepted
    # (now + 1 could leave a few milliseconds, and a busy machine refused it as expired).
    short = jwt.encode({"exp": int(time.time()) + 3}, JWT_SECRET, "HS256").encode()
    client = clients.raw(broker)
    assert client.connect("short-lived", password=short).reason_code == 0
    client.wait_closed()  # when the token's exp has passed (wall clock: 2-3 s)
    body = disconnected(watcher)
    assert (body["reason"], body["reason_code"]) == ("token_expired", 0xA0)
