"""The admin API's blocked clients and failed-connections log: `GET/POST /api/v1/blocked`,
`DELETE /api/v1/blocked/{id}`, `GET /api/v1/failed-connections`.

The routes are declared in `BLOCKED_ROUTES` in the table's style (mqttq.admin.api_table)
and joined to its ROUTES there. The handlers reach the broker's blocked list through the
backend's `blocked_clients()` (503 when the backend has none: a broker composed without
`mqttq serve`'s blocked list).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from aiohttp import web

from mqttq.admin.validation import ApiError
from mqttq.auth.blocked.entries import BlockedInputError, entry_from_body
from mqttq.auth.blocked.ports import BlockedStoreError
from mqttq.auth.blocked.service import BlockedClients

if TYPE_CHECKING:
    from mqttq.admin.call import Call

__all__ = [
    "add_blocked",
    "blocked_list",
    "delete_blocked",
    "list_blocked",
    "list_failed_connections",
]

NOT_AVAILABLE: Final = "blocked clients are not available on this broker"


def unavailable(message: str) -> web.Response:
    """The 503 answer (the document's ServerError: `field` null)."""
    return web.json_response({"error": message, "field": None}, status=503)


def blocked_list(call: Call) -> BlockedClients | None:
    """The broker's blocked list; None without one."""
    finder = getattr(call.backend, "blocked_clients", None)
    blocked = finder() if callable(finder) else None
    return blocked if isinstance(blocked, BlockedClients) else None


async def list_blocked(call: Call) -> web.StreamResponse:
    """The live entries, oldest first."""
    blocked = blocked_list(call)
    if blocked is None:
        return unavailable(NOT_AVAILABLE)
    entries = blocked.entries()
    return web.json_response({"blocked": [entry.to_json() for entry in entries]})


async def add_blocked(call: Call) -> web.StreamResponse:
    """Add (or replace, same selector) an entry: 201 with it; the clients it matches are
    disconnected at once. 400 naming the field (a bad CIDR, regex or duration)."""
    blocked = blocked_list(call)
    if blocked is None:
        return unavailable(NOT_AVAILABLE)
    body = await call.body()
    try:
        entry = entry_from_body(body, now=time.time())
    except BlockedInputError as exc:
        raise ApiError(400, exc.message, exc.field) from None
    try:
        await blocked.add(entry)
    except BlockedStoreError as exc:
        return unavailable(f"blocked-client store failed: {exc}")
    return web.json_response(entry.to_json(), status=201)


async def delete_blocked(call: Call) -> web.StreamResponse:
    """Remove the entry with this id (404 naming `id`)."""
    entry_id = call.path("id")
    blocked = blocked_list(call)
    if blocked is None:
        return unavailable(NOT_AVAILABLE)
    try:
        removed = await blocked.remove(entry_id)
    except BlockedStoreError as exc:
        return unavailable(f"blocked-client store failed: {exc}")
    if not removed:
        raise ApiError(404, f"no blocked-client entry {entry_id!r}", "id")
    return web.Response(status=204)


async def list_failed_connections(call: Call) -> web.StreamResponse:
    """The last refused CONNECTs, newest first (of one client id when asked)."""
    blocked = blocked_list(call)
    if blocked is None:
        return unavailable(NOT_AVAILABLE)
    log = blocked.failed
    client_id = call.query.get("client_id")
    limit = int(call.query.get("limit") or 100)
    items = log.recent(client_id=client_id, limit=limit)
    return web.json_response(
        {
            "failed_connections": [failed.to_json() for failed in items],
            "total": log.total,
            "kept": log.size,
        }
    )
