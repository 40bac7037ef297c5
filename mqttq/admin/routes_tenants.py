"""Admin API handlers for tenants and their quotas, and for the node limits.

A PUT carries any subset of the five quota fields; the others keep the stored value (else
the default tenant quota, or the node's current limits). The node limits also hold
`max_tcp_connection_rate` (new TCP connections per second, a node-only limit: tenants are
known only after CONNECT). The whole body is validated before the backend is called, so
a bad field changes nothing. Routes: mqttq.admin.api_table."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mqttq.admin.backend import AdminBackend
from mqttq.admin.call import Call
from mqttq.admin.shapes import tenant_json
from mqttq.admin.validation import ApiError, parse_rate, tenant_name
from mqttq.auth.model import DEFAULT_TENANT, Tenant
from mqttq.limits.quota import QUOTA_FIELDS, Quota

__all__ = [
    "TCP_RATE_FIELD",
    "delete_tenant",
    "get_limits",
    "get_tenant",
    "list_tenants",
    "put_limits",
    "put_tenant",
    "tenant_json",
]

TCP_RATE_FIELD = "max_tcp_connection_rate"
"""The node limit beside the quota fields in GET/PUT /api/v1/limits."""


def _stored_json(backend: AdminBackend, tenant: Tenant) -> dict[str, Any]:
    return tenant_json(tenant.name, tenant.quota, tenant, backend.tenant_usage(tenant.name))


async def list_tenants(call: Call) -> web.StreamResponse:
    """The default quota and every stored tenant with its usage."""
    backend = call.backend
    tenants = await backend.list_tenants()
    return web.json_response(
        {
            "default_quota": backend.default_tenant_quota().to_dict(),
            "tenants": [_stored_json(backend, tenant) for tenant in tenants],
        }
    )


async def get_tenant(call: Call) -> web.StreamResponse:
    """One tenant: stored, `default`, or one in use on this node (else 404)."""
    backend = call.backend
    name = call.path("name")
    stored = await backend.get_tenant(name)
    if stored is not None:
        return web.json_response(_stored_json(backend, stored))
    usage = backend.tenant_usage(name)
    if name == DEFAULT_TENANT or any(usage.values()):
        return web.json_response(tenant_json(name, backend.default_tenant_quota(), None, usage))
    raise _no_tenant(name)


async def put_tenant(call: Call) -> web.StreamResponse:
    """Store and apply a subset of the tenant's quota fields."""
    backend = call.backend
    name = tenant_name(call.path("name"), "name")
    body = await call.body()
    stored = await backend.get_tenant(name)
    base = stored.quota if stored is not None else backend.default_tenant_quota()
    quota = Quota.from_mapping(body, base)
    return web.json_response(_stored_json(backend, await backend.put_tenant(name, quota)))


async def delete_tenant(call: Call) -> web.StreamResponse:
    """Remove the tenant's row (204; 404 naming `name`)."""
    name = call.path("name")
    if not await call.backend.delete_tenant(name):
        raise _no_tenant(name)
    return web.Response(status=204)


def _node_json(quota: Quota, tcp_rate: float) -> dict[str, Any]:
    return {"node": {**quota.to_dict(), TCP_RATE_FIELD: tcp_rate}}


async def get_limits(call: Call) -> web.StreamResponse:
    """The node's limits and TCP connection rate."""
    backend = call.backend
    return web.json_response(_node_json(backend.node_limits(), backend.tcp_connection_rate()))


async def put_limits(call: Call) -> web.StreamResponse:
    """Apply a subset of the node's limits; every field is checked before any applies."""
    backend = call.backend
    body = await call.body()
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
    return web.json_response(_node_json(quota, backend.set_tcp_connection_rate(tcp_rate)))


def _no_tenant(name: str) -> ApiError:
    return ApiError(404, f"no tenant {name!r}", "name")
