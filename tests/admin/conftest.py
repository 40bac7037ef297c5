"""Fixtures of the admin HTTP tests: a real AdminServer on 127.0.0.1 port 0 over a
BackendDouble (real SqliteAuthStore in tmp_path), driven by a real aiohttp client.

pytest-asyncio is not used: each test calls `admin(scenario)`, which runs the async
`scenario(api)` in its own event loop with the server started and everything closed after.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mqttq.admin.server import AdminServer
from mqttq.auth.sqlite_store import SqliteAuthStore
from tests.admin.backend_double import BackendDouble

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
_UNSET: Any = object()


@dataclass
class Answer:
    """One HTTP answer: status, decoded body (JSON, text, or None when empty), headers."""

    status: int
    body: Any
    headers: Mapping[str, str]


@dataclass
class Api:
    backend: BackendDouble
    server: AdminServer
    http: aiohttp.ClientSession

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
            return Answer(response.status, _decode(response.content_type, raw), response.headers)

    async def get(self, path: str, **kwargs: Any) -> Answer:
        return await self.call("GET", path, **kwargs)


def _decode(content_type: str, raw: bytes) -> Any:
    if not raw:
        return None
    if content_type == "application/json":
        return json.loads(raw)
    return raw.decode("utf-8")


Scenario = Callable[[Api], Awaitable[None]]
RunAdmin = Callable[..., None]


@pytest.fixture
def admin(tmp_path: Path) -> RunAdmin:
    """`admin(scenario, uri_rate=..., rate_wait=..., backend=...)` runs `scenario(api)`
    against a started server; a fresh event loop per call."""

    def run(
        scenario: Scenario,
        *,
        uri_rate: float = 10_000.0,
        rate_wait: float = 0.0,
        setup: Callable[[BackendDouble], None] | None = None,
    ) -> None:
        async def main() -> None:
            store = SqliteAuthStore(tmp_path / "auth.db")
            await store.open()
            backend = BackendDouble(store)
            if setup is not None:
                setup(backend)
            server = AdminServer(
                backend,
                host="127.0.0.1",
                port=0,
                token=TOKEN,
                uri_rate=uri_rate,
                rate_wait=rate_wait,
            )
            await server.start()
            try:
                async with aiohttp.ClientSession() as http:
                    await scenario(Api(backend, server, http))
            finally:
                await server.close()
                await store.close()

        asyncio.run(main())

    return run
