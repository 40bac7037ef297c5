"""Admin API handlers for tenants and their quotas, and for the node limits.

A PUT carries any subset of the five quota fields; the others keep the stored value (else
the default tenant quota, or the node's current limits). The node limits also hold
`max_tcp_connection_rate` (new TCP connections per second, a node-only limit: tenants are
known only after CONNECT). The whole body is validated before the backend is called, so
a bad field changes nothing."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mqttq.admin.backend import AdminBackend
from mqttq.admin.validation import ApiError, parse_rate, query_params, read_object, tenant_name
from mqttq.auth.model import DEFAULT_TENANT, Tenant
from mqttq.limits.quota import QUOTA_FIELDS, Quota

__all__ = ["TCP_RATE_FIELD", "tenant_json", "tenant_routes"]

API = "/api/v1"
TCP_RATE_FIELD = "max_tcp_connection_rate"
"""The node limit beside the quota fields in GET/PUT /api/v1/limits."""


def tenant_json(
    name: str, quota: Quota, stored: Tenant | None, usage: dict[str, Any]
) -> dict[str, Any]:
    """The API's tenant object; `stored` is the tenant's row (None: it has none and
    `quota` is the default)."""
    return {
        "name": name,
        "quota": quota.to_dict(),
        "stored": stored is not None,
        "usage": usage,
        "created_at": None if stored is None else stored.created_at,
        "updated_at": None if stored is None else stored.updated_at,
    }


def tenant_routes(backend: AdminBackend) -> list[web.RouteDef]:
    """The routes under /api/v1/tenants and /api/v1/limits."""

    def stored_json(tenant: Tenant) -> dict[str, Any]:
        return tenant_json(tenant.name, tenant.quota, tenant, backend.tenant_usage(tenant.name))

    async def list_tenants(request: web.Request) -> web.Response:
        query_params(request, ())
        tenants = await backend.list_tenants()
        return web.json_response(
            {
                "default_quota": backend.default_tenant_quota().to_dict(),
                "tenants": [stored_json(tenant) for tenant in tenants],
            }
        )

    async def get_tenant(request: web.Request) -> web.Response:
        query_params(request, ())
        name = request.match_info["name"]
        stored = await backend.get_tenant(name)
        if stored is not None:
            return web.json_response(stored_json(stored))
        usage = backend.tenant_usage(name)
        if name == DEFAULT_TENANT or any(usage.values()):
            return web.json_response(tenant_json(name, backend.default_tenant_quota(), None, usage))
        raise _no_tenant(name)

    async def put_tenant(request: web.Request) -> web.Response:
        query_params(request, ())
        name = tenant_name(request.match_info["name"], "name")
        body = await read_object(request)
        stored = await backend.get_tenant(name)
        base = stored.quota if stored is not None else backend.default_tenant_quota()
        quota = Quota.from_mapping(body, base)
        return web.json_response(stored_json(await backend.put_tenant(name, quota)))

    async def delete_tenant(request: web.Request) -> web.Response:
        query_params(request, ())
        name = request.match_info["name"]
        if not await backend.delete_tenant(name):
            raise _no_tenant(name)
        return web.Response(status=204)

    def node_json(quota: Quota, tcp_rate: float) -> dict[str, Any]:
        return {"node": {**quota.to_dict(), TCP_RATE_FIELD: tcp_rate}}

    async def get_limits(request: web.Request) -> web.Response:
        query_params(request, ())
        return web.json_response(node_json(backend.node_limits(), backend.tcp_connection_rate()))

    async def put_limits(request: web.Request) -> web.Response:
        query_params(request, ())
        body = await read_object(request)
        tcp_rate = backend.tcp_connection_rate()
        for key in body:
            if key not in QUOTA_FIELDS and key != TCP_RATE_FIELD:
                known = ", ".join((*QUOTA_FIELDS, TCP_RATE_FIELD))
                raise ApiError(400, f"unknown field; known fields: {known}", key)
        if TCP_RATE_FIELD in body:
            tcp_rate = parse_rate(TCP_RATE_FIELD, body.pop(TCP_RATE_FIELD))
        quota = Quota.from_mapping(body, backend.node_limits())
        # Both checked: neither change can fail now, so a bad field changed nothing.
        quota = backend.set_node_limits(quota)
        return web.json_response(node_json(quota, backend.set_tcp_connection_rate(tcp_rate)))

    return [
        web.get(f"{API}/tenants", list_tenants, allow_head=False),
        web.get(f"{API}/tenants/{{name}}", get_tenant, allow_head=False),
        web.put(f"{API}/tenants/{{name}}", put_tenant),
        web.delete(f"{API}/tenants/{{name}}", delete_tenant),
        web.get(f"{API}/limits", get_limits, allow_head=False),
        web.put(f"{API}/limits", put_limits),
    ]


def _no_tenant(name: str) -> ApiError:
    return ApiError(404, f"no tenant {name!r}", "name")
