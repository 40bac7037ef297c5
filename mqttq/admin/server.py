"""AdminServer: the admin HTTP API (aiohttp) on the broker's own event loop.

Every request passes three middlewares, outermost first:
- errors: turns every refusal into the JSON error `{"error": ..., "field": ...}` with its
  status (ApiError and QuotaError 400/401/404/429, CredentialExists 409, UnknownTenant 404,
  AuthStoreError 503); an unexpected exception is logged and answered 500 without detail.
  A 4xx always names the field to blame (`Authorization`, `body`, a parameter, `path` for
  an unknown route or a spent route budget, `method`); a 5xx names none (null);
- rate: one token bucket per route pattern (`/api/v1/sessions/{client_id}`, so varying
  the id does not dodge it) and client address, so a flood from one address cannot spend
  another caller's budget; a request waits up to `rate_wait` seconds for a token, then
  gets 429 with Retry-After. Refusals are counted per route for /metrics;
- authorize: every route declares the role it needs (mqttq.admin.api_table: public,
  viewer for reads, admin for changes); `AdminServer.authorize(request, role)` asks each
  authenticator in turn (the bearer token first: `Authorization: Bearer <token>` is an
  admin) for the caller, and answers 401 (with `WWW-Authenticate: Bearer`) when none
  knows it, 403 when its role is short of the route's. An extension (a browser login)
  appends its own authenticator to `AdminServer.authenticators`.

The rate limit comes before authentication so that a flood with a missing or wrong token
is refused and counted like any other: it bounds the work (and the token guesses) any
client gets per route, and /metrics shows the flood. /health and /openapi.json are
limited too, each on its own budget: they are the routes anyone may call, and their
answers cost the same event loop that serves MQTT clients; a monitor polling at a sane
rate never meets the limit."""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from aiohttp import web
from aiohttp.typedefs import Handler

from mqttq.admin.api_table import ADMIN, PUBLIC, VIEWER, Role, Route
from mqttq.admin.backend import AdminBackend, UnknownTenant
from mqttq.admin.call import PRINCIPAL_KEY, AdminContext, Principal
from mqttq.admin.client import admin_url
from mqttq.admin.dashboard.login import DASHBOARD_KEY, Dashboard
from mqttq.admin.metrics import AdminMetrics
from mqttq.admin.openapi import openapi_document
from mqttq.admin.routes import table_routes
from mqttq.admin.validation import ApiError
from mqttq.auth.ports import AuthStoreError, CredentialExists
from mqttq.config.schema import AdminSettings
from mqttq.limits.bucket import TokenBucket
from mqttq.limits.quota import QuotaError

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

    from mqttq.integrations.manager import IntegrationManager

__all__ = ["UNMATCHED_ROUTE", "AdminServer", "Authenticator", "UriRateLimit"]

log = logging.getLogger("mqttq.admin")

UNMATCHED_ROUTE: Final = "unmatched"
"""The rate-limit key (and metrics label) of requests that match no route."""
SHUTDOWN_TIMEOUT: Final = 2.0
"""Seconds `close` lets requests under way finish."""
_HTTP_ERROR_FIELDS: Final = {404: "path", 405: "method", 413: "body"}
"""The field aiohttp's own 4xx answers blame (else `path`: the router refused it)."""


Authenticator = Callable[[web.Request], Awaitable[Principal | None]]
"""Who made a request by one means (a token, a cookie, ...): None when the request
carries none of it, ApiError (401) when it carries a wrong one."""

_ROLE_RANK: Final[dict[Role, int]] = {PUBLIC: 0, VIEWER: 1, ADMIN: 2}

MAX_RATE_BUCKETS: Final = 10_000
"""(route, address) buckets kept; past it, the full (idle) ones are forgotten."""


class UriRateLimit:
    """One token bucket per route pattern and client address: `rate` requests/s, burst
    `max(1, rate)`; a request waits for a token up to `max_wait` seconds, else is refused
    (counted in `refused[route]`). Memory is bounded: past MAX_RATE_BUCKETS buckets, the
    full ones (of callers idle for a while) are dropped; a dropped bucket would be created
    full again, so forgetting it changes no answer."""

    __slots__ = ("buckets", "max_wait", "rate", "refused")

    def __init__(self, rate: float, max_wait: float, routes: list[str]) -> None:
        if not (math.isfinite(rate) and rate >= 0.0):
            raise ValueError(f"uri_rate must be a finite number >= 0, got {rate!r}")
        if not (math.isfinite(max_wait) and max_wait >= 0.0):
            raise ValueError(f"rate_wait must be a finite number >= 0, got {max_wait!r}")
        self.rate = rate
        self.max_wait = max_wait
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        self.refused: dict[str, int] = dict.fromkeys(routes, 0)

    def set_rate(self, rate: float, max_wait: float) -> None:
        """New rate (burst `max(1, rate)`) and wait bound for every route, at once; the
        tokens each route has gathered are kept (capped to the new burst)."""
        if not (math.isfinite(rate) and rate >= 0.0):
            raise ValueError(f"uri_rate must be a finite number >= 0, got {rate!r}")
        if not (math.isfinite(max_wait) and max_wait >= 0.0):
            raise ValueError(f"rate_wait must be a finite number >= 0, got {max_wait!r}")
        now = asyncio.get_running_loop().time()
        self.rate = rate
        self.max_wait = max_wait
        for bucket in self.buckets.values():
            bucket.set_rate(rate, max(1.0, rate), now)

    async def admit(self, route: str, address: str = "") -> None:
        """Return once the request from `address` may proceed; raise ApiError 429
        (Retry-After) when it would wait longer than `max_wait`."""
        now = asyncio.get_running_loop().time()
        key = (route, address)
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= MAX_RATE_BUCKETS:
                self._forget_full(now)
            bucket = self.buckets[key] = TokenBucket(self.rate, max(1.0, self.rate), now)
        wait = bucket.reserve(now, self.max_wait)
        if wait is None:
            self.refused[route] = self.refused.get(route, 0) + 1
            delay = bucket.delay(now)
            retry = 1 if not math.isfinite(delay) else max(1, math.ceil(delay))
            raise ApiError(
                429,
                f"too many requests to {route}; at most {self.rate:g} per second",
                "path",
                {"Retry-After": str(retry)},
            )
        if wait > 0.0:
            await asyncio.sleep(wait)

    def _forget_full(self, now: float) -> None:
        full = [key for key, bucket in self.buckets.items() if bucket.level(now) >= bucket.capacity]
        for key in full:
            del self.buckets[key]


class AdminServer:
    """The admin API of one broker, serving `backend` on host:port (port 0: a free one)
    once `start` returns, until `close`. Accepts `token` as bearer token; at most
    `uri_rate` requests/s per route, a request waiting up to `rate_wait` seconds.
    `integrations` serves /api/v1/integrations and their metrics (None: those routes
    answer 503 and /metrics has no integration families)."""

    def __init__(
        self,
        backend: AdminBackend,
        *,
        host: str,
        port: int,
        token: str,
        uri_rate: float,
        rate_wait: float,
        integrations: IntegrationManager | None = None,
    ) -> None:
        if not token:
            raise ValueError("the admin API needs a non-empty token")
        self.backend = backend
        self.host = host
        self._requested_port = port
        self._token = _encode(token)
        self.integrations = integrations
        self._metrics = AdminMetrics(backend, lambda: self.rate_limit.refused, integrations)
        self.dashboard = Dashboard(None, idle_timeout=AdminSettings().session_idle_timeout)
        """Browser logins and history (mqttq.admin.dashboard); `serve` configures it."""
        self.authenticators: list[Authenticator] = [self._bearer, self.dashboard.authenticate]
        """Asked in turn by `authorize`; the first that knows the caller decides."""
        self.app = web.Application(middlewares=[_errors, self._rate, self._authorize])
        self.app[DASHBOARD_KEY] = self.dashboard
        context = AdminContext(backend, integrations, self._metrics.render, openapi_document())
        routes, self.routes = table_routes(context)
        self.app.add_routes(routes)
        patterns = sorted({resource.canonical for resource in self.app.router.resources()})
        self.rate_limit = UriRateLimit(uri_rate, rate_wait, patterns)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    def add_collector(self, collector: Collector) -> None:
        """Serve `collector`'s metric families on /metrics too (see
        AdminMetrics.add_collector): the way other parts of the broker (the authentication
        chain, the PROXY protocol listeners) add their numbers."""
        self._metrics.add_collector(collector)

    async def start(self) -> None:
        """Bind and serve (on the running event loop). Raises OSError when the address
        cannot be bound (nothing is left listening then)."""
        if self._runner is not None:
            raise RuntimeError("AdminServer already started")
        runner = web.AppRunner(
            self.app, handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._requested_port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        log.debug("admin API serving", extra={"url": self.url})

    @property
    def port(self) -> int:
        """The port bound (after `start`)."""
        if self._port is None:
            raise RuntimeError("AdminServer not started")
        return self._port

    @property
    def url(self) -> str:
        """Where clients reach the API: `http://HOST:PORT` (a wildcard host becomes the
        loopback address)."""
        return admin_url(self.host, self.port)

    async def close(self) -> None:
        """Stop listening and close connections (requests under way get a moment to
        finish). Calling it again does nothing."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def authorize(self, request: web.Request, role: Role) -> Principal | web.Response:
        """The caller of `request` when it holds `role` (anyone for public routes), else
        the error to answer: 401 when no authenticator knows the caller, 403 when its
        role is short."""
        if role == PUBLIC:
            return Principal("anonymous", PUBLIC, "anonymous")
        try:
            for authenticate in self.authenticators:
                principal = await authenticate(request)
                if principal is not None:
                    break
            else:
                raise _unauthorized("missing or wrong bearer token")
        except ApiError as exc:
            return _error(exc.status, exc.message, exc.field, exc.headers)
        if _ROLE_RANK[principal.role] < _ROLE_RANK[role]:
            return _error(
                403,
                f"this needs the {role} role; {principal.name} is a {principal.role}",
                "Authorization",
            )
        return principal

    async def _bearer(self, request: web.Request) -> Principal | None:
        """The bearer token's holder (an admin); None without an Authorization header,
        401 with a wrong one."""
        header = request.headers.get("Authorization")
        if header is None:
            return None
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            _encode(given.strip()), self._token
        ):
            raise _unauthorized("missing or wrong bearer token")
        return Principal("token", ADMIN, "token")

    def route_of(self, request: web.Request) -> Route | None:
        """The table's route `request` matched (None: it matched none)."""
        resource = request.match_info.route.resource
        if resource is None:
            return None
        return self.routes.get((request.method, resource.canonical))

    @web.middleware
    async def _authorize(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        route = self.route_of(request)
        # A request matching no route still needs a caller: an unknown path answers 401
        # to strangers, so the routes cannot be mapped without the token.
        found = await self.authorize(request, VIEWER if route is None else route.role)
        if isinstance(found, web.Response):
            return found
        request[PRINCIPAL_KEY] = found
        return await handler(request)

    @web.middleware
    async def _rate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        await self.rate_limit.admit(_route_of(request), request.remote or "")
        return await handler(request)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except ApiError as exc:
        # A 5xx blames no input, whatever the raiser named.
        field = None if exc.status >= 500 else exc.field
        response = _error(exc.status, exc.message, field, exc.headers)
    except QuotaError as exc:
        response = _error(400, exc.problem, exc.field)
    except CredentialExists as exc:  # before AuthStoreError: it is one
        response = _error(409, str(exc), "username")
    except UnknownTenant as exc:
        response = _error(404, str(exc) or "unknown tenant", "name")
    except AuthStoreError as exc:
        response = _error(503, str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = exc.reason
        if exc.status == 404:
            message = f"no such route: {request.method} {request.path}"
        allow = exc.headers.get("Allow")
        field = None if exc.status >= 500 else _HTTP_ERROR_FIELDS.get(exc.status, "path")
        response = _error(exc.status, message, field, {"Allow": allow} if allow else None)
    except Exception:
        log.exception("admin API: %s %s failed", request.method, request.path)
        response = _error(500, "internal error")
    log.debug("admin API: %s %s -> %d", request.method, request.path, response.status)
    return response


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, "Authorization", {"WWW-Authenticate": "Bearer"})


def _error(
    status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response({"error": message, "field": field}, status=status, headers=headers)


def _route_of(request: web.Request) -> str:
    """The route pattern the request matched (UNMATCHED_ROUTE when none)."""
    resource = request.match_info.route.resource
    return UNMATCHED_ROUTE if resource is None else resource.canonical


def _encode(token: str) -> bytes:
    # surrogateescape: a header byte that is not UTF-8 must compare unequal, not raise.
    return token.encode("utf-8", "surrogateescape")
