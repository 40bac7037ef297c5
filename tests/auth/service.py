"""A real HTTP service for the auth tests: aiohttp on 127.0.0.1 port 0, in a thread of its
own, serving a JWKS document and an authentication endpoint whose behaviour the test sets
(grant, deny, slow, broken); it records every request body it received."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

__all__ = ["AuthService", "closed_port"]

Answer = Callable[[dict[str, Any]], tuple[int, Any]]
"""The request body -> (status, JSON body)."""


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AuthService:
    """The service; `answer` decides /auth, `jwks` is what /jwks serves, `delay` seconds
    are waited before each /auth answer. `requests` holds the /auth bodies received and
    `jwks_requests` counts the /jwks reads."""

    def __init__(self) -> None:
        self.answer: Answer = lambda body: (200, {"result": "allow"})
        self.jwks: dict[str, Any] = {"keys": []}
        self.jwks_status = 200
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.jwks_requests = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the test auth service did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/auth", self._auth)
        app.router.add_get("/jwks", self._jwks)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _auth(self, request: web.Request) -> web.Response:
        body = await request.json()
        body["_headers"] = dict(request.headers)
        self.requests.append(body)
        if self.delay:
            await asyncio.sleep(self.delay)
        status, answer = self.answer(body)
        return web.Response(status=status, text=json.dumps(answer), content_type="application/json")

    async def _jwks(self, request: web.Request) -> web.Response:
        self.jwks_requests += 1
        return web.Response(
            status=self.jwks_status, text=json.dumps(self.jwks), content_type="application/json"
        )

    def close(self) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
