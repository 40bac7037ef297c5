"""Real aiohttp servers on 127.0.0.1 port 0 for the http sink's tests: `Receiver` records
every request it gets and answers from a script of statuses, optionally holding requests
(a slow server) or echoing a header back in the answer (a server that leaks it)."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy


@dataclass(frozen=True)
class Received:
    """One request as the server got it, and the status it answered."""

    method: str
    path: str
    headers: CIMultiDictProxy[str]
    body: bytes
    peer: tuple[str, int]
    status: int

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """An HTTP(S) server that records requests. It answers `statuses` in order, then
    `default`; `answer(request_body)` may pick a status per request instead. With `hold`,
    a request waits until `release()` (or until `hold_until_in_flight` requests wait at
    once, which releases them all and every later one)."""

    def __init__(
        self,
        *,
        statuses: Sequence[int] = (),
        default: int = 200,
        answer: Callable[[bytes], int] | None = None,
        hold: bool = False,
        hold_until_in_flight: int = 0,
        echo_header: str = "",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.received: list[Received] = []
        self.max_in_flight = 0
        self._statuses = list(statuses)
        self._default = default
        self._answer = answer
        self._hold = hold or hold_until_in_flight > 0
        self._hold_until = hold_until_in_flight
        self._echo_header = echo_header
        self._ssl = ssl_context
        self._released = asyncio.Event()
        self._in_flight = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self._ssl is not None else "http"

    def url(self, path: str = "/ingest") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def release(self) -> None:
        self._released.set()

    async def start(self, port: int = 0) -> None:
        """Listen on `port` (0: a free one, then `self.port`); the same port again after
        `stop()` brings the same server back."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=self._ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.release()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Receiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_received(self, count: int) -> None:
        """Until at least `count` requests were recorded."""
        while len(self.received) < count:
            await asyncio.sleep(0.01)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self._hold:
                if self._hold_until and self._in_flight >= self._hold_until:
                    self.release()
                await self._released.wait()
        finally:
            self._in_flight -= 1
        if self._answer is not None:
            status = self._answer(body)
        elif self._statuses:
            status = self._statuses.pop(0)
        else:
            status = self._default
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.received.append(
            Received(request.method, request.path, request.headers, body, tuple(peer or ()), status)
        )
        text = "ok" if status < 300 else f"refused: {request.headers.get(self._echo_header, 'no')}"
        return web.Response(status=status, text=text)
