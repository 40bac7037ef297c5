"""Fixtures of the admin HTTP tests, driven by a real aiohttp client:
- `admin(scenario, ...)`: a RealBroker (in-process Broker, MemoryStorage, SqliteAuthStore
  in tmp_path, AdminServer on 127.0.0.1 port 0, in a background thread);
- `admin_double(scenario, ...)`: an AdminServer over BackendDouble, only for the failures
  a real broker cannot be made to produce (see backend_double.py).

pytest-asyncio is not used: each test calls the runner, which runs the async
`scenario(api)` in its own event loop with the server started and everything closed after.
"""

from __future__ import annotations

import asyncio
import io
import json
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mqttq.admin.server import AdminServer
from mqttq.auth.ports import AuthStore
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.admin.backend_double import BackendDouble
from tests.admin.openapi_check import check_any_answer
from tests.admin.real_broker import TOKEN, RealBroker

AUTH = {"Authorization": f"Bearer {TOKEN}"}
_UNSET: Any = object()


@dataclass
class Answer:
    """One HTTP answer: status, decoded body (JSON, text, or None when empty), headers."""

    status: int
    body: Any
    headers: Mapping[str, str]


@dataclass
class Http:
    """Requests to `server` with the bearer token; with `conforming`, every answer is
    checked against the OpenAPI document as it arrives."""

    server: AdminServer
    http: aiohttp.ClientSession
    conforming = False

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = _UNSET,
        data: str | bytes | io.BytesIO | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        token: str | None = TOKEN,
    ) -> Answer:
        """`method path` with the bearer token (None: no Authorization header)."""
        sent = dict(headers or {})
        if token is not None:
            sent.setdefault("Authorization", f"Bearer {token}")
        kwargs: dict[str, Any] = {"headers": sent, "params": params}
        if json is not _UNSET:
            kwargs["json"] = json
        if data is not None:
            kwargs["data"] = data
        async with self.http.request(method, self.server.url + path, **kwargs) as response:
            raw = await response.read()
            answer = Answer(response.status, _decode(response.content_type, raw), response.headers)
        if self.conforming and (not raw or response.content_type == "application/json"):
            url_path = urllib.parse.urlsplit(str(response.url)).path
            check_any_answer(method, url_path, answer.status, answer.body)
        return answer

    async def get(self, path: str, **kwargs: Any) -> Answer:
        return await self.call("GET", path, **kwargs)


@dataclass
class Api(Http):
    """The API of `real`, a running broker (every answer checked: `conforming`)."""

    real: RealBroker
    conforming = True


@dataclass
class DoubleApi(Http):
    """The API over `backend`, a BackendDouble."""

    backend: BackendDouble


def _decode(content_type: str, raw: bytes) -> Any:
    if not raw:
        return None
    if content_type == "application/json":
        return json.loads(raw)
    return raw.decode("utf-8")


Scenario = Callable[[Api], Awaitable[None]]
RunAdmin = Callable[..., None]
DoubleScenario = Callable[[DoubleApi], Awaitable[None]]
RunDouble = Callable[..., None]


@pytest.fixture
def admin(tmp_path: Path) -> RunAdmin:
    """`admin(scenario, uri_rate=..., rate_wait=..., setup=..., auth_store=...)` starts a
    RealBroker, calls `setup(real)` (blocking: real MQTT clients), then runs
    `scenario(api)` in a fresh event loop; the broker stops after."""

    def run(
        scenario: Scenario,
        *,
        uri_rate: float = 10_000.0,
        rate_wait: float = 0.0,
        setup: Callable[[RealBroker], None] | None = None,
        auth_store: AuthStore | None = None,
    ) -> None:
        real = RealBroker(tmp_path, uri_rate=uri_rate, rate_wait=rate_wait, auth_store=auth_store)
        try:
            if setup is not None:
                setup(real)

            async def main() -> None:
                async with aiohttp.ClientSession() as http:
                    await scenario(Api(real.admin, http, real))

            asyncio.run(main())
        finally:
            real.stop()

    return run


@pytest.fixture
def admin_double(tmp_path: Path) -> RunDouble:
    """`admin_double(scenario)` runs `scenario(api)` against an AdminServer over a
    BackendDouble (SqliteAuthStore in tmp_path)."""

    def run(scenario: DoubleScenario) -> None:
        async def main() -> None:
            store = SqliteAuthStore(tmp_path / "double.db")
            await store.open()
            backend = BackendDouble(store)
            server = AdminServer(
                backend,
                host="127.0.0.1",
                port=0,
                token=TOKEN,
                uri_rate=10_000.0,
                rate_wait=0.0,
            )
            await server.start()
            try:
                async with aiohttp.ClientSession() as http:
                    await scenario(DoubleApi(server, http, backend))
            finally:
                await server.close()
                await store.close()

        asyncio.run(main())

    return run
