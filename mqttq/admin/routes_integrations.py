"""Admin API handlers for integrations (issue 33): list, create, show, change, remove,
pause, resume and test, all through the broker's `IntegrationManager`, never past it.

Answers are the manager's statuses: the public spec (every secret "***") and what the
integration did. Refusals name the field as every 4xx of the API does: a table the spec
check refuses is 400 with the key (`integration.url`), an unknown name 404 (`name`), a
name taken 409 (`name`); a test whose sink fails is 400 with the sink's reason, naming
its address key (`integration.url`, ...). When the
broker runs no manager (integrations not wired), every route answers 503.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from aiohttp import web

from mqttq.admin.validation import ApiError, query_params, read_object
from mqttq.errors import ConfigError
from mqttq.integrations.manager import IntegrationExists, UnknownIntegration
from mqttq.integrations.sink import SinkError
from mqttq.integrations.spec import SINK_TYPES

if TYPE_CHECKING:
    from mqttq.integrations.manager import IntegrationManager

__all__ = ["NOT_RUNNING", "integration_routes"]

API: Final = "/api/v1/integrations"
NOT_RUNNING: Final = "integrations are not running"
"""The 503 answer's error when the broker has no IntegrationManager."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def integration_routes(integrations: IntegrationManager | None) -> list[web.RouteDef]:
    """The routes under /api/v1/integrations, served by `integrations` (None: 503)."""

    def manager() -> IntegrationManager:
        if integrations is None:
            raise _Unavailable()
        return integrations

    def handled(handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            query_params(request, ())
            try:
                return await handler(request)
            except _Unavailable:
                return _json_error(503, NOT_RUNNING)
            except UnknownIntegration as exc:
                raise ApiError(404, str(exc), "name") from None
            except IntegrationExists as exc:
                raise ApiError(409, str(exc), "name") from None
            except ConfigError as exc:
                raise ApiError(400, exc.problem, exc.key) from None

        return run

    async def list_integrations(request: web.Request) -> web.StreamResponse:
        return web.json_response(manager().statuses())

    async def create(request: web.Request) -> web.StreamResponse:
        found = manager()
        table = await read_object(request)
        return web.json_response(await found.create(table), status=201)

    async def show(request: web.Request) -> web.StreamResponse:
        return web.json_response(manager().status(request.match_info["name"]))

    async def update(request: web.Request) -> web.StreamResponse:
        found = manager()
        changes = await read_object(request)
        return web.json_response(await found.update(request.match_info["name"], changes))

    async def remove(request: web.Request) -> web.StreamResponse:
        await manager().remove(request.match_info["name"])
        return web.Response(status=204)

    async def pause(request: web.Request) -> web.StreamResponse:
        return web.json_response(await manager().pause(request.match_info["name"]))

    async def resume(request: web.Request) -> web.StreamResponse:
        return web.json_response(await manager().resume(request.match_info["name"]))

    async def test(request: web.Request) -> web.StreamResponse:
        found = manager()
        name = request.match_info["name"]
        try:
            answer = await found.test(name)
        except SinkError as exc:
            # Bad input as the issue has it: the field to fix is where the sink is.
            address = SINK_TYPES[found.status(name)["type"]].address
            return _json_error(400, str(exc) or type(exc).__name__, f"integration.{address}")
        return web.json_response({"answer": answer})

    item = f"{API}/{{name}}"
    return [
        web.get(API, handled(list_integrations), allow_head=False),
        web.post(API, handled(create)),
        web.get(item, handled(show), allow_head=False),
        web.put(item, handled(update)),
        web.delete(item, handled(remove)),
        web.post(f"{item}/pause", handled(pause)),
        web.post(f"{item}/resume", handled(resume)),
        web.post(f"{item}/test", handled(test)),
    ]


class _Unavailable(Exception):
    """No IntegrationManager: answered 503."""


def _json_error(status: int, message: str, field: str | None = None) -> web.Response:
    return web.json_response({"error": message, "field": field}, status=status)
