"""Admin API handlers for sessions, subscriptions and retained messages (read, disconnect,
remove, delete). The backend answers with JSON-ready values; these handlers choose the
status and wrap lists in their named object. Their routes, parameters included, are
declared in mqttq.admin.api_table."""

from __future__ import annotations

from aiohttp import web

from mqttq.admin.backend import SessionFilter
from mqttq.admin.call import Call
from mqttq.admin.validation import ApiError, parse_limit, tenant_name, topic_name
from mqttq.auth.model import DEFAULT_TENANT

__all__ = [
    "delete_retained",
    "disconnect_session",
    "get_session",
    "list_retained",
    "list_sessions",
    "list_subscriptions",
    "remove_session",
]


async def list_sessions(call: Call) -> web.StreamResponse:
    """A page of sessions: `items` (also `sessions`, as before paging), `next_cursor`,
    `total`."""
    query = call.query
    where = SessionFilter(
        tenant=query.get("tenant"),
        prefix=query.get("prefix"),
        user=query.get("user"),
        address=query.get("address"),
        state=query.get("state"),
    )
    page = await call.backend.list_sessions(where, parse_limit(query), query.get("cursor"))
    return web.json_response({"sessions": page["items"], **page})


async def get_session(call: Call) -> web.StreamResponse:
    """One session in detail (404 naming `client_id`)."""
    client_id = call.path("client_id")
    session = await call.backend.get_session(client_id)
    if session is None:
        raise _no_session(client_id)
    return web.json_response(session)


async def disconnect_session(call: Call) -> web.StreamResponse:
    """Close the client's connection; `{"disconnected": false}` when it was offline."""
    client_id = call.path("client_id")
    backend = call.backend
    if backend.disconnect_session(client_id):
        return web.json_response({"disconnected": True})
    if not backend.has_session(client_id):
        raise _no_session(client_id)
    return web.json_response({"disconnected": False})


async def remove_session(call: Call) -> web.StreamResponse:
    """Delete the session (204)."""
    client_id = call.path("client_id")
    if not await call.backend.remove_session(client_id):
        raise _no_session(client_id)
    return web.Response(status=204)


async def list_subscriptions(call: Call) -> web.StreamResponse:
    """Subscriptions by tenant, client and filter."""
    query = call.query
    subscriptions = call.backend.list_subscriptions(
        query.get("tenant"),
        query.get("client_id"),
        parse_limit(query),
        query.get("topic_filter"),
        query.get("filter_prefix"),
    )
    return web.json_response({"subscriptions": subscriptions})


async def list_retained(call: Call) -> web.StreamResponse:
    """Retained messages by tenant and topic prefix."""
    query = call.query
    retained = call.backend.list_retained(
        query.get("tenant"), parse_limit(query), query.get("prefix")
    )
    return web.json_response({"retained": retained})


async def delete_retained(call: Call) -> web.StreamResponse:
    """Delete one topic's retained message, on every node (204; 404 naming `topic`)."""
    query = call.query
    tenant = tenant_name(query.get("tenant", DEFAULT_TENANT))
    topic = topic_name(query["topic"])
    if not await call.backend.delete_retained(tenant, topic):
        raise ApiError(404, f"no retained message on {topic!r} in tenant {tenant!r}", "topic")
    return web.Response(status=204)


def _no_session(client_id: str) -> ApiError:
    return ApiError(404, f"no session with client id {client_id!r}", "client_id")
