"""What a route handler of the admin API is given (mqttq.admin.api_table): the request,
its query already checked against the route's parameters, who is calling, and the
broker's services.

A handler is `async def handler(call: Call) -> web.StreamResponse`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from mqttq.admin.validation import read_object

if TYPE_CHECKING:
    from mqttq.admin.api_table import Role
    from mqttq.admin.backend import AdminBackend
    from mqttq.integrations.manager import IntegrationManager

__all__ = ["PRINCIPAL_KEY", "AdminContext", "Call", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who makes a request: `name` (`token` for the bearer token), the `role` it holds
    (viewer or admin; public for an anonymous call of a public route) and `via`, how it
    proved it (`token`, `anonymous`, or what an extension adds, e.g. a cookie)."""

    name: str
    role: Role
    via: str


@dataclass(frozen=True, slots=True)
class AdminContext:
    """The services every handler may use: the broker (`backend`), its integrations
    (None: not running), the /metrics body and the OpenAPI document."""

    backend: AdminBackend
    integrations: IntegrationManager | None
    render_metrics: Callable[[], bytes]
    document: dict[str, Any]


@dataclass(slots=True)
class Call:
    """One request to one route: `query` holds the route's query parameters given (each
    parsed as the route declares), `principal` the authorized caller."""

    request: web.Request
    query: dict[str, Any]
    principal: Principal
    context: AdminContext

    @property
    def backend(self) -> AdminBackend:
        """The broker."""
        return self.context.backend

    def path(self, name: str) -> str:
        """The `{name}` segment of the path."""
        return self.request.match_info[name]

    async def body(self) -> dict[str, Any]:
        """The request's body as a JSON object (400 naming `Content-Type` or `body`
        otherwise); read when the handler asks, so that its own checks come first."""
        return await read_object(self.request)


PRINCIPAL_KEY: Final = web.RequestKey("mqttq.principal", Principal)
"""Where the server's authorize step leaves the Principal on the request."""
