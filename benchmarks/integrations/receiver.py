"""The HTTP receiver of the integration benchmarks: a process of its own (not a test).

An aiohttp server on 127.0.0.1 that answers 204 to every POST on /ingest and counts what
came: a JSON array body (the http sink's `body = "array"`) counts its elements, any other
body one message. It notes the wall-clock time (time.time()) of the first and the last
request, and the distinct Idempotency-Key values, so that a redelivered batch shows as a
duplicate request. GET /stats answers {"messages", "requests", "duplicate_requests",
"first", "last"}. Once it listens it prints `port=<n>` on stdout.

    python benchmarks/integrations/receiver.py [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Counts:
    """What the receiver saw."""

    messages: int = 0
    requests: int = 0
    duplicate_requests: int = 0
    first: float = 0.0
    last: float = 0.0
    keys: set[str] = field(default_factory=set)

    def json(self) -> dict[str, object]:
        return {
            "messages": self.messages,
            "requests": self.requests,
            "duplicate_requests": self.duplicate_requests,
            "first": self.first,
            "last": self.last,
        }


def make_app(counts: Counts) -> web.Application:
    """/ingest counts a delivery, /stats tells the counts."""

    async def ingest(request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        messages = len(json.loads(body)) if body[:1] == b"[" else 1
        key = request.headers.get("Idempotency-Key", "")
        if key and key in counts.keys:
            counts.duplicate_requests += 1
        counts.keys.add(key)
        if not counts.requests:
            counts.first = now
        counts.last = now
        counts.requests += 1
        counts.messages += messages
        return web.Response(status=204)

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(counts.json())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/ingest", ingest)
    app.router.add_get("/stats", stats)
    return app


async def serve(port: int) -> None:
    runner = web.AppRunner(make_app(Counts()), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = runner.addresses[0][1]  # the port bound when asked for port 0
    sys.stdout.write(f"port={bound}\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        import uvloop  # noqa: PLC0415

        uvloop.run(serve(args.port))
    except ImportError:
        asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
