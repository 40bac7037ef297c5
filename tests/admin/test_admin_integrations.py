"""The admin API's integration routes over real HTTP (issue 33): a started Broker, its
AdminServer with an IntegrationManager on the SQLite store and the MemoryRuntime, and real
aiohttp receivers as sinks. Every JSON answer is checked against the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mqttq.admin.broker_backend import BrokerAdmin
from mqttq.admin.openapi_integrations import COMMON_PROPERTIES, SINK_PROPERTIES
from mqttq.admin.server import AdminServer
from mqttq.broker.server import Broker
from mqttq.config import ListenerSettings, Settings
from mqttq.integrations.manager import IntegrationManager
from mqttq.integrations.memory import MemoryRuntime
from mqttq.integrations.record import Delivery
from mqttq.integrations.spec import COMMON_KEYS, SINK_TYPES
from mqttq.integrations.stores.sqlite import SqliteIntegrationStore
from mqttq.storage.memory import MemoryStorage
from tests.admin.conftest import Answer
from tests.admin.openapi_check import check_any_answer
from tests.integrations.http_receivers import Receiver

TOKEN = "integration-token-0123456789"
API = "/api/v1/integrations"


@dataclass
class Stack:
    """The running pieces of one test, all on the test's event loop."""

    server: AdminServer
    manager: IntegrationManager
    runtime: MemoryRuntime
    store: SqliteIntegrationStore
    http: aiohttp.ClientSession

    async def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = TOKEN
    ) -> Answer:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        async with self.http.request(method, self.server.url + path, **kwargs) as response:
            raw = await response.read()
            decoded: Any = None
            if raw:
                decoded = (
                    json.loads(raw)
                    if response.content_type == "application/json"
                    else raw.decode("utf-8")
                )
            answer = Answer(response.status, decoded, response.headers)
        if not raw or response.content_type == "application/json":
            url_path = urllib.parse.urlsplit(str(response.url)).path
            check_any_answer(method, url_path, answer.status, answer.body)
        return answer


@asynccontextmanager
async def stack(tmp_path: Path, *, with_manager: bool = True) -> AsyncIterator[Stack]:
    """A started broker (MemoryStorage), an IntegrationManager (SQLite store in tmp_path,
    MemoryRuntime) and the AdminServer serving both, on 127.0.0.1 port 0."""
    broker = Broker(Settings(listener=ListenerSettings(host="127.0.0.1", port=0)), MemoryStorage())
    await broker.start()
    store = SqliteIntegrationStore.in_data_dir(tmp_path / "data")
    await store.open()
    runtime = MemoryRuntime()
    manager = IntegrationManager(store, runtime)
    await manager.start()
    server = AdminServer(
        BrokerAdmin(broker),
        host="127.0.0.1",
        port=0,
        token=TOKEN,
        uri_rate=10_000.0,
        rate_wait=0.0,
        integrations=manager if with_manager else None,
    )
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            yield Stack(server, manager, runtime, store, http)
    finally:
        await server.close()
        await manager.stop()
        await store.close()
        await broker.shutdown()


def run(tmp_path: Path, scenario: Callable[[Stack], Awaitable[None]], **kwargs: Any) -> None:
    async def main() -> None:
        async with stack(tmp_path, **kwargs) as s:
            await scenario(s)

    asyncio.run(main())


def hook(receiver: Receiver, name: str = "hook", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "http",
        "filters": ["sensors/#"],
        "url": receiver.url(),
        "batch_size": 1,
        **extra,
    }


def delivery(topic: str, payload: bytes, seq: int) -> Delivery:
    now_ms = int(time.time() * 1000)
    return Delivery(topic, payload, client_id="c1", seq=seq, timestamp_ms=now_ms)


async def until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def assert_error(answer: Answer, status: int, field: str | None) -> None:
    assert answer.status == status, answer
    assert answer.body["field"] == field, answer.body
    assert isinstance(answer.body["error"], str) and answer.body["error"]


# --- CRUD ------------------------------------------------------------------------------------


def test_create_list_show_update_delete(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver() as receiver:
            assert (await s.call("GET", API)).body == []
            created = await s.call("POST", API, hook(receiver))
            assert created.status == 201
            assert created.body["name"] == "hook"
            assert created.body["state"] in ("starting", "running")
            assert created.body["origin"] == "api"
            assert [item.name for item in await s.store.load()] == ["hook"]

            # A message reaches the receiver through the backlog the runtime gave it.
            s.runtime.backlogs["hook"].add(delivery("sensors/a", b"21.5", 1))
            await receiver.wait_received(1)
            assert receiver.received[0].json()["payload"] == "21.5"
            await until(lambda: s.manager.status("hook")["delivered"] == 1)

            listed = await s.call("GET", API)
            assert listed.status == 200
            assert [item["name"] for item in listed.body] == ["hook"]
            entry = listed.body[0]
            assert {"name", "type", "state", "delivered", "failed", "dead_lettered", "lag"} <= set(
                entry
            )
            assert entry["delivered"] == 1 and entry["lag"] == 0

            shown = await s.call("GET", f"{API}/hook")
            assert shown.status == 200 and shown.body["url"] == receiver.url()

            updated = await s.call("PUT", f"{API}/hook", {"filters": ["sensors/+/temp"]})
            assert updated.status == 200
            assert updated.body["filters"] == ["sensors/+/temp"]
            stored = {item.name: item for item in await s.store.load()}
            assert stored["hook"].table["filters"] == ["sensors/+/temp"]

            removed = await s.call("DELETE", f"{API}/hook")
            assert removed.status == 204 and removed.body is None
            assert await s.store.load() == []
            assert "hook" not in s.runtime.backlogs
            assert (await s.call("GET", API)).body == []

    run(tmp_path, scenario)


def test_bad_tables_name_the_field_and_change_nothing(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver() as receiver:
            assert (await s.call("POST", API, hook(receiver))).status == 201
            cases = [
                ({**hook(receiver, "b1"), "filters": ["a/#/b"]}, "integration.filters"),
                ({**hook(receiver, "b2"), "type": "smtp"}, "integration.type"),
                ({**hook(receiver, "b3"), "url": "ftp://127.0.0.1/x"}, "integration.url"),
                ({**hook(receiver, "b4"), "batch_sise": 3}, "integration.batch_sise"),
                ({**hook(receiver, "b5"), "name": "Bad Name"}, "integration.name"),
                ({"type": "http"}, "integration.name"),
            ]
            for table, field in cases:
                assert_error(await s.call("POST", API, table), 400, field)
            assert_error(
                await s.call("PUT", f"{API}/hook", {"url": "mailto:x"}), 400, "integration.url"
            )
            assert_error(await s.call("POST", API, [1]), 400, "body")
            # Nothing changed: the good one still runs, with its URL.
            names = [item["name"] for item in (await s.call("GET", API)).body]
            assert names == ["hook"]
            assert (await s.call("GET", f"{API}/hook")).body["url"] == receiver.url()
            s.runtime.backlogs["hook"].add(delivery("sensors/a", b"1", 1))
            await receiver.wait_received(1)

    run(tmp_path, scenario)


def test_unknown_is_404_and_a_taken_name_409(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver() as receiver:
            for method, path in (
                ("GET", f"{API}/nope"),
                ("PUT", f"{API}/nope"),
                ("DELETE", f"{API}/nope"),
                ("POST", f"{API}/nope/pause"),
                ("POST", f"{API}/nope/resume"),
                ("POST", f"{API}/nope/test"),
            ):
                body = {"batch_size": 2} if method == "PUT" else None
                assert_error(await s.call(method, path, body), 404, "name")
            assert (await s.call("POST", API, hook(receiver))).status == 201
            assert_error(await s.call("POST", API, hook(receiver)), 409, "name")

    run(tmp_path, scenario)


def test_secrets_never_appear_and_stars_keep_them(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver() as receiver:
            table = hook(
                receiver,
                headers={"Authorization": "Bearer s3cr3t-value", "X-Plain": "shown"},
            )
            created = await s.call("POST", API, table)
            assert created.status == 201
            assert created.body["headers"] == {"Authorization": "***", "X-Plain": "shown"}
            for answer in (
                created,
                await s.call("GET", API),
                await s.call("GET", f"{API}/hook"),
            ):
                assert "s3cr3t-value" not in json.dumps(answer.body)
            # Sending the mask back keeps the stored secret; another header changes.
            changed = await s.call(
                "PUT",
                f"{API}/hook",
                {"headers": {"Authorization": "***", "X-Plain": "new"}},
            )
            assert changed.status == 200
            assert "s3cr3t-value" not in json.dumps(changed.body)
            stored = {item.name: item for item in await s.store.load()}
            assert stored["hook"].table["headers"] == {
                "Authorization": "Bearer s3cr3t-value",
                "X-Plain": "new",
            }
            s.runtime.backlogs["hook"].add(delivery("sensors/a", b"x", 1))
            await receiver.wait_received(1)
            assert receiver.received[0].headers["Authorization"] == "Bearer s3cr3t-value"
            assert receiver.received[0].headers["X-Plain"] == "new"

    run(tmp_path, scenario)


def test_pause_holds_deliveries_and_resume_sends_them(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver() as receiver:
            assert (await s.call("POST", API, hook(receiver))).status == 201
            paused = await s.call("POST", f"{API}/hook/pause")
            assert paused.status == 200 and paused.body["state"] == "paused"
            backlog = s.runtime.backlogs["hook"]
            backlog.add(delivery("sensors/a", b"1", 1))
            backlog.add(delivery("sensors/a", b"2", 2))
            listed = await s.call("GET", f"{API}/hook")
            assert listed.body["state"] == "paused"
            assert listed.body["lag"] == 2
            assert receiver.received == []
            assert [item.paused for item in await s.store.load()] == [True]

            resumed = await s.call("POST", f"{API}/hook/resume")
            assert resumed.status == 200 and resumed.body["state"] != "paused"
            await receiver.wait_received(2)
            assert [r.json()["payload"] for r in receiver.received] == ["1", "2"]
            assert [item.paused for item in await s.store.load()] == [False]

    run(tmp_path, scenario)


def test_test_answers_what_the_sink_said(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver() as ok, Receiver(default=503) as failing:
            assert (await s.call("POST", API, hook(ok, "good"))).status == 201
            assert (await s.call("POST", API, hook(failing, "bad"))).status == 201
            answered = await s.call("POST", f"{API}/good/test")
            assert answered.status == 200
            assert "200" in answered.body["answer"]
            assert ok.received[-1].json()["client_id"] == "mqttq-integration-test"

            refused = await s.call("POST", f"{API}/bad/test")
            assert_error(refused, 400, "integration.url")
            assert "503" in refused.body["error"]

            # Nothing listens on a port that was just closed: unreachable, still 400.
            port = ok.port
            await ok.stop()
            gone = await s.call("POST", f"{API}/good/test")
            assert_error(gone, 400, "integration.url")
            assert str(port) in gone.body["error"] or "connect" in gone.body["error"].lower()

    run(tmp_path, scenario)


def test_without_a_manager_every_route_is_503(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        for method, path in (
            ("GET", API),
            ("POST", API),
            ("GET", f"{API}/x"),
            ("PUT", f"{API}/x"),
            ("DELETE", f"{API}/x"),
            ("POST", f"{API}/x/pause"),
            ("POST", f"{API}/x/resume"),
            ("POST", f"{API}/x/test"),
        ):
            body = {} if method in ("PUT",) or (method == "POST" and path == API) else None
            answer = await s.call(method, path, body)
            assert answer.status == 503, (method, path)
            assert answer.body == {"error": "integrations are not running", "field": None}
        metrics = await s.call("GET", "/metrics")
        assert "mqttq_integration" not in metrics.body

    run(tmp_path, scenario, with_manager=False)


def test_routes_need_the_token(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        assert_error(await s.call("GET", API, token=None), 401, "Authorization")
        assert_error(await s.call("POST", f"{API}/x/test", token="wrong"), 401, "Authorization")

    run(tmp_path, scenario)


# --- /metrics --------------------------------------------------------------------------------


def _samples(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("mqttq_integration"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def test_metrics_per_integration(tmp_path: Path) -> None:
    async def scenario(s: Stack) -> None:
        async with Receiver(answer=lambda body: 400 if b"poison" in body else 200) as receiver:
            assert (await s.call("POST", API, hook(receiver))).status == 201
            backlog = s.runtime.backlogs["hook"]
            backlog.add(delivery("sensors/a", b"1", 1))
            backlog.add(delivery("sensors/a", b"poison", 2))
            backlog.add(delivery("sensors/a", b"3", 3))
            await until(lambda: s.manager.status("hook")["dead_lettered"] == 1)
            await until(lambda: s.manager.status("hook")["delivered"] == 2)
            assert (await s.call("POST", API, hook(receiver, "idle"))).status == 201
            assert (await s.call("POST", f"{API}/idle/pause")).status == 200
            s.runtime.backlogs["idle"].add(delivery("sensors/b", b"w", 1))

            answer = await s.call("GET", "/metrics")
            assert answer.status == 200
            found = _samples(answer.body)
            hook_label = '{integration="hook"}'
            idle_label = '{integration="idle"}'
            assert found[f"mqttq_integration_delivered_total{hook_label}"] == 2
            assert found[f"mqttq_integration_dead_lettered_total{hook_label}"] == 1
            assert found[f"mqttq_integration_failed_total{hook_label}"] == 0
            assert found[f"mqttq_integration_retried_total{hook_label}"] == 0
            assert found[f"mqttq_integration_lag{hook_label}"] == 0
            assert found[f"mqttq_integration_lag{idle_label}"] == 1
            assert found[f"mqttq_integration_up{hook_label}"] == 1
            assert found[f"mqttq_integration_up{idle_label}"] == 0
            assert "# TYPE mqttq_integration_delivery_latency_seconds histogram" in answer.body
            count = 'mqttq_integration_delivery_latency_seconds_count{integration="hook"}'
            assert found[count] == 2
            inf = 'mqttq_integration_delivery_latency_seconds_bucket{integration="hook",le="+Inf"}'
            assert found[inf] == 2
            # Cumulative buckets: never decreasing, ending at the count.
            buckets = [
                value
                for name, value in found.items()
                if name.startswith("mqttq_integration_delivery_latency_seconds_bucket")
                and 'integration="hook"' in name
            ]
            assert buckets == sorted(buckets) and buckets[-1] == 2

    run(tmp_path, scenario)


# --- the document ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SINK_TYPES))
def test_documented_keys_are_the_sinks_keys(kind: str) -> None:
    assert set(COMMON_PROPERTIES) == set(COMMON_KEYS)
    assert set(SINK_PROPERTIES[kind]) == set(SINK_TYPES[kind].settings_class().KEYS)
