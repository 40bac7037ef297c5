"""RealBroker: an in-process Broker (MemoryStorage, a real SqliteAuthStore in a temporary
directory) with its AdminServer on 127.0.0.1 port 0, on an event loop in a background
thread as `mqttq serve` runs them (tests/harness.py `BrokerLoop`); the admin tests drive
it with real MQTT clients over TCP (RawClient) and real HTTP. `http` checks every JSON
answer against the OpenAPI document as it arrives.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqttq.admin.broker_backend import BrokerAdmin
from mqttq.admin.server import AdminServer
from mqttq.auth.ports import AuthStore
from mqttq.broker.server import Broker
from mqttq.config import ListenerSettings, Settings
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.admin.openapi_check import check_any_answer
from tests.harness import BrokerLoop
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE, HOST, wait_for
from tests.integration.wire import Prop

__all__ = ["PERSISTENT", "TOKEN", "HttpAnswer", "RealBroker", "populated"]

TOKEN = "test-token-0123456789"


@dataclass
class HttpAnswer:
    """One HTTP answer: status and decoded body (JSON, text, or None when empty)."""

    status: int
    body: Any


class RealBroker:
    """A started Broker and its admin API on a private event loop thread (`uri_rate`
    requests/s per route, waiting up to `rate_wait` s); `auth_store` defaults to SQLite
    in `tmp_path`. `stop` closes the clients made by `client`, the API and the broker."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        uri_rate: float = 10_000.0,
        rate_wait: float = 0.0,
        auth_store: AuthStore | None = None,
    ) -> None:
        self.storage = MemoryStorage()
        self.store = auth_store if auth_store is not None else SqliteAuthStore(tmp_path / "a.db")
        settings = Settings(listener=ListenerSettings(host=HOST, port=0))
        self.running = BrokerLoop(lambda: Broker(settings, self.storage, self.store))
        self.loop = self.running.loop
        self.broker = self.running.broker
        self.clients: list[RawClient] = []
        self.connected: dict[str, RawClient] = {}
        """The last client made by `client` for each client id."""
        self.port = self.broker.port
        self.admin = AdminServer(
            BrokerAdmin(self.broker),
            host=HOST,
            port=0,
            token=TOKEN,
            uri_rate=uri_rate,
            rate_wait=rate_wait,
        )
        self.call(self.admin.start())

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the broker's loop (the stores live there) and return its result."""
        return self.running.call(coro)

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        try:
            self.call(self.admin.close())
        finally:
            self.running.stop()

    # --- broker state, read on its loop ----------------------------------------------------

    def online(self, client_id: str) -> bool | None:
        """Whether `client_id`'s session has a connection (None: no session)."""

        async def read() -> bool | None:
            session = self.broker.hub.sessions.get(client_id)
            return None if session is None else session.client is not None

        result: bool | None = self.call(read())
        return result

    def stored_retained(self) -> list[tuple[str, str]]:
        """(tenant, topic) of every retained message in storage, sorted."""
        rows = self.call(self.storage.load_retained(time.time()))
        return sorted((tenant, message.topic) for tenant, message in rows)

    # --- MQTT ------------------------------------------------------------------------------

    def client(self, client_id: str, tenant: str | None = None, **connect: Any) -> RawClient:
        """A connected MQTT 5.0 client, anonymous, in `tenant` (None: the default one);
        `connect` as RawClient.connect takes it."""
        client = RawClient(self.port)
        self.clients.append(client)
        props = list(connect.pop("props", []))
        if tenant is not None:
            props.append((Prop.USER_PROPERTY, ("tenant", tenant)))
        client.connect(client_id, props=props, **connect)
        self.connected[client_id] = client
        return client

    # --- HTTP ------------------------------------------------------------------------------

    def http(self, method: str, path: str, body: Any = None, **params: str | int) -> HttpAnswer:
        """`method path?params` with the token and a JSON `body` (urllib, blocking); the
        answer is checked against the OpenAPI document before it is returned."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.admin.url + path + query, data, method=method)
        request.add_header("Authorization", f"Bearer {TOKEN}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=DEADLINE) as response:
                status, raw, headers = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            status, raw, headers = error.code, error.read(), error.headers
        url_path = urllib.parse.urlsplit(path).path
        if not raw:
            check_any_answer(method, url_path, status, None)
            return HttpAnswer(status, None)
        if headers.get_content_type() != "application/json":
            return HttpAnswer(status, raw.decode())
        decoded = json.loads(raw)
        check_any_answer(method, url_path, status, decoded)
        return HttpAnswer(status, decoded)

    def ok(self, method: str, path: str, body: Any = None, **params: str | int) -> Any:
        """The answer's body, asserting a 2xx status."""
        answer = self.http(method, path, body, **params)
        assert 200 <= answer.status < 300, (method, path, answer)
        return answer.body


PERSISTENT = [(Prop.SESSION_EXPIRY_INTERVAL, 600)]


def populated(real: RealBroker) -> None:
    """Three sessions in two tenants with a subscription each, and three retained
    messages: c1 (acme, online, `a/+` QoS 1), c2 (acme, persistent and offline, `b/#`
    QoS 2), d1 (default, online, `x` QoS 0); retained `a/1` in acme, `a/1` and `z` in
    default."""
    c1 = real.client("c1", "acme")
    c1.subscribe(("a/+", 1))
    c2 = real.client("c2", "acme", clean=False, props=PERSISTENT)
    c2.subscribe(("b/#", 2))
    c2.publish("a/1", b"hi", qos=1, retain=True)
    c1.receive_messages(1)  # live, and acknowledged: nothing stays in flight
    c2.disconnect()
    d1 = real.client("d1")
    d1.subscribe(("x", 0))
    d1.publish("a/1", b"hi", qos=1, retain=True)
    d1.publish("z", b"hi", qos=1, retain=True)
    wait_for(lambda: real.online("c2") is False, what="c2 to go offline")
