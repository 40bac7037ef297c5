"""The end-to-end tests' webhook: a real HTTP/1.1 server (http.server's ThreadingHTTPServer,
keep-alive) on 127.0.0.1 in a background thread, so that a synchronous test can drive a
`mqttq serve` subprocess and read what reached the server. It records every request's JSON
body with the status it answered; `answer(body)` picks the status (default 200). `stop()`
takes it away; `start()` listens again on the same port (a sink that went down comes back).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.integration.waiting import DEADLINE, HOST, wait_for
from tests.services import free_port

Answer = Callable[[Any], int]


@dataclass(frozen=True)
class Request:
    """One request as the server got it: its decoded JSON body and the status answered."""

    path: str
    body: Any
    status: int


class HttpReceiver:
    """See the module docstring. `port` is chosen once (a free one unless given) and kept
    across `stop()` / `start()`; the server is not listening until `start()`."""

    def __init__(self, answer: Answer | None = None, *, port: int = 0) -> None:
        self.port = port or free_port()
        self.requests: list[Request] = []
        self._answer = answer or (lambda _body: 200)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, path: str = "/ingest") -> str:
        return f"http://{HOST}:{self.port}{path}"

    def start(self) -> HttpReceiver:
        assert self._server is None, "already listening"
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the sink's connector expects

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                status = receiver._answer(body)
                with receiver._lock:
                    receiver.requests.append(Request(self.path, body, status))
                reply = b"ok" if status < 300 else b"refused"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads `requests`, not stderr."""

        server = ThreadingHTTPServer((HOST, self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (connections being served finish their request)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(DEADLINE)
            self._thread = None

    def accepted(self) -> list[Any]:
        """The bodies answered 2xx, in arrival order (one envelope each, or an array)."""
        with self._lock:
            return [r.body for r in self.requests if 200 <= r.status < 300]

    def envelopes(self) -> list[dict[str, Any]]:
        """Every accepted envelope in arrival order (arrays flattened)."""
        found: list[dict[str, Any]] = []
        for body in self.accepted():
            found.extend(body if isinstance(body, list) else [body])
        return found

    def payloads(self) -> list[str]:
        """The `payload` of every accepted envelope, in arrival order."""
        return [str(item["payload"]) for item in self.envelopes()]

    def wait_payloads(self, expected: set[str], *, timeout: float = DEADLINE) -> list[str]:
        """Wait until each of `expected` was accepted at least once; every payload so far."""
        wait_for(
            lambda: expected <= set(self.payloads()),
            timeout=timeout,
            what=f"{sorted(expected - set(self.payloads()))[:10]} at the receiver",
        )
        return self.payloads()


def first_arrivals(payloads: list[str]) -> list[str]:
    """`payloads` with every repeat removed: the order in which each first arrived."""
    seen: set[str] = set()
    order: list[str] = []
    for payload in payloads:
        if payload not in seen:
            seen.add(payload)
            order.append(payload)
    return order


def duplicates(payloads: list[str]) -> int:
    """How many deliveries were repeats of an earlier one."""
    return len(payloads) - len(set(payloads))
