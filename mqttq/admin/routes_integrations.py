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

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from aiohttp import web

from mqttq.admin.call import Call
from mqttq.admin.validation import ApiError
from mqttq.errors import ConfigError
from mqttq.integrations.manager import IntegrationExists, UnknownIntegration
from mqttq.integrations.sink import SinkError
from mqttq.integrations.spec import SINK_TYPES

if TYPE_CHECKING:
    from mqttq.integrations.manager import IntegrationManager

__all__ = [
    "NOT_RUNNING",
    "create",
    "list_integrations",
    "pause",
    "remove",
    "resume",
    "show",
    "test",
    "update",
]

NOT_RUNNING: Final = "integrations are not running"
"""The 503 answer's error when the broker has no IntegrationManager."""

Handler = Callable[[Call], Awaitable[web.StreamResponse]]


def _manager(call: Call) -> IntegrationManager:
    integrations = call.context.integrations
    if integrations is None:
        raise _Unavailable()
    return integrations


def _handled(handler: Handler) -> Handler:
    """`handler` with the manager's refusals as the API's errors (503 without one)."""

    @functools.wraps(handler)
    async def run(call: Call) -> web.StreamResponse:
        try:
            return await handler(call)
        except _Unavailable:
            return _json_error(503, NOT_RUNNING)
        except UnknownIntegration as exc:
            raise ApiError(404, str(exc), "name") from None
        except IntegrationExists as exc:
            raise ApiError(409, str(exc), "name") from None
        except ConfigError as exc:
            raise ApiError(400, exc.problem, exc.key) from None

    return run


@_handled
async def list_integrations(call: Call) -> web.StreamResponse:
    """The status of every integration."""
    return web.json_response(_manager(call).statuses())


@_handled
async def create(call: Call) -> web.StreamResponse:
    """Check, store and start an integration (201)."""
    found = _manager(call)
    table = await call.body()
    return web.json_response(await found.create(table), status=201)


@_handled
async def show(call: Call) -> web.StreamResponse:
    """One integration's status."""
    return web.json_response(_manager(call).status(call.path("name")))


@_handled
async def update(call: Call) -> web.StreamResponse:
    """Replace some keys; restarted live."""
    found = _manager(call)
    changes = await call.body()
    return web.json_response(await found.update(call.path("name"), changes))


@_handled
async def remove(call: Call) -> web.StreamResponse:
    """Stop and delete an integration (204)."""
    await _manager(call).remove(call.path("name"))
    return web.Response(status=204)


@_handled
async def pause(call: Call) -> web.StreamResponse:
    """Pause deliveries."""
    return web.json_response(await _manager(call).pause(call.path("name")))


@_handled
async def resume(call: Call) -> web.StreamResponse:
    """Resume deliveries."""
    return web.json_response(await _manager(call).resume(call.path("name")))


@_handled
async def test(call: Call) -> web.StreamResponse:
    """Send one sample through a fresh sink: its answer, or 400 naming where the sink is."""
    found = _manager(call)
    name = call.path("name")
    try:
        answer = await found.test(name)
    except SinkError as exc:
        # Bad input as the issue has it: the field to fix is where the sink is.
        address = SINK_TYPES[found.status(name)["type"]].address
        return _json_error(400, str(exc) or type(exc).__name__, f"integration.{address}")
    return web.json_response({"answer": answer})


class _Unavailable(Exception):
    """No IntegrationManager: answered 503."""


def _json_error(status: int, message: str, field: str | None = None) -> web.Response:
    return web.json_response({"error": message, "field": field}, status=status)
