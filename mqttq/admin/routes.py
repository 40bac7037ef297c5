"""Every route of the admin API: health, the OpenAPI document and /metrics here, the
rest in routes_sessions, routes_tenants and routes_credentials. The OpenAPI document
(mqttq.admin.openapi) lists the same routes; a test keeps the two in step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from aiohttp import web

from mqttq.admin.backend import AdminBackend
from mqttq.admin.metrics import CONTENT_TYPE
from mqttq.admin.openapi import openapi_document
from mqttq.admin.routes_credentials import credential_routes
from mqttq.admin.routes_sessions import session_routes
from mqttq.admin.routes_tenants import tenant_routes
from mqttq.admin.validation import query_params
from mqttq.cluster.status import ClusterStatusError

__all__ = ["PUBLIC_PATHS", "admin_routes"]

PUBLIC_PATHS: Final = frozenset({"/health", "/openapi.json"})
"""Route patterns served without the bearer token."""


def admin_routes(backend: AdminBackend, render_metrics: Callable[[], bytes]) -> list[web.RouteDef]:
    """Every route; `render_metrics` returns the /metrics body (Prometheus text)."""
    document = openapi_document()

    # No query check on these three: monitoring tools may add parameters of their own.
    async def health(request: web.Request) -> web.Response:
        return web.json_response(backend.health())

    async def openapi(request: web.Request) -> web.Response:
        return web.json_response(document)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=render_metrics(), headers={"Content-Type": CONTENT_TYPE})

    async def cluster(request: web.Request) -> web.Response:
        query_params(request, ())
        try:
            return web.json_response(await backend.cluster_status())
        except ClusterStatusError as exc:
            return web.json_response({"error": str(exc), "field": None}, status=503)

    return [
        web.get("/health", health, allow_head=False),
        web.get("/api/v1/cluster", cluster, allow_head=False),
        web.get("/openapi.json", openapi, allow_head=False),
        web.get("/metrics", metrics, allow_head=False),
        *session_routes(backend),
        *tenant_routes(backend),
        *credential_routes(backend),
    ]
