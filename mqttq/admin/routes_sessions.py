"""Admin API handlers for sessions, subscriptions and retained messages (read, disconnect,
remove). The backend answers with JSON-ready values; these handlers check the query and
path, choose the status and wrap lists in their named object."""

from __future__ import annotations

from aiohttp import web

from mqttq.admin.backend import AdminBackend
from mqttq.admin.validation import ApiError, parse_limit, query_params, tenant_name, topic_name
from mqttq.auth.model import DEFAULT_TENANT

__all__ = ["session_routes"]

API = "/api/v1"


def session_routes(backend: AdminBackend) -> list[web.RouteDef]:
    """The routes under /api/v1/sessions, /api/v1/subscriptions and /api/v1/retained."""

    async def list_sessions(request: web.Request) -> web.Response:
        params = query_params(request, ("tenant", "prefix", "limit"))
        limit = parse_limit(params)
        sessions = await backend.list_sessions(params.get("tenant"), params.get("prefix"), limit)
        return web.json_response({"sessions": sessions})

    async def get_session(request: web.Request) -> web.Response:
        query_params(request, ())
        client_id = request.match_info["client_id"]
        session = await backend.get_session(client_id)
        if session is None:
            raise _no_session(client_id)
        return web.json_response(session)

    async def disconnect_session(request: web.Request) -> web.Response:
        query_params(request, ())
        client_id = request.match_info["client_id"]
        if backend.disconnect_session(client_id):
            return web.json_response({"disconnected": True})
        # Not connected: is there a session at all? (Asked only now: reading a persistent
        # session in detail may touch storage.)
        if await backend.get_session(client_id) is None:
            raise _no_session(client_id)
        return web.json_response({"disconnected": False})

    async def remove_session(request: web.Request) -> web.Response:
        query_params(request, ())
        client_id = request.match_info["client_id"]
        if not await backend.remove_session(client_id):
            raise _no_session(client_id)
        return web.Response(status=204)

    async def list_subscriptions(request: web.Request) -> web.Response:
        params = query_params(request, ("tenant", "client_id", "limit"))
        limit = parse_limit(params)
        subscriptions = backend.list_subscriptions(
            params.get("tenant"), params.get("client_id"), limit
        )
        return web.json_response({"subscriptions": subscriptions})

    async def list_retained(request: web.Request) -> web.Response:
        params = query_params(request, ("tenant", "limit"))
        limit = parse_limit(params)
        return web.json_response({"retained": backend.list_retained(params.get("tenant"), limit)})

    async def delete_retained(request: web.Request) -> web.Response:
        params = query_params(request, ("tenant", "topic"))
        tenant = tenant_name(params.get("tenant", DEFAULT_TENANT))
        if "topic" not in params:
            raise ApiError(400, "required", "topic")
        topic = topic_name(params["topic"])
        if not await backend.delete_retained(tenant, topic):
            raise ApiError(404, f"no retained message on {topic!r} in tenant {tenant!r}", "topic")
        return web.Response(status=204)

    return [
        web.get(f"{API}/sessions", list_sessions, allow_head=False),
        web.get(f"{API}/sessions/{{client_id}}", get_session, allow_head=False),
        web.post(f"{API}/sessions/{{client_id}}/disconnect", disconnect_session),
        web.delete(f"{API}/sessions/{{client_id}}", remove_session),
        web.get(f"{API}/subscriptions", list_subscriptions, allow_head=False),
        web.get(f"{API}/retained", list_retained, allow_head=False),
        web.delete(f"{API}/retained", delete_retained),
    ]


def _no_session(client_id: str) -> ApiError:
    return ApiError(404, f"no session with client id {client_id!r}", "client_id")
