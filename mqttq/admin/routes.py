"""The server's routes, made from the route table (mqttq.admin.api_table): each table entry
becomes one aiohttp route whose handler gets a `Call` with the query checked against the
entry's parameters. The OpenAPI document is made from the same table, so the two cannot
drift."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from aiohttp import web

from mqttq.admin.api_table import PUBLIC, ROUTES, Param, Route
from mqttq.admin.call import PRINCIPAL_KEY, AdminContext, Call, Principal
from mqttq.admin.validation import ApiError

__all__ = ["PUBLIC_PATHS", "Handler", "check_query", "resolve_handler", "table_routes"]

Handler = Callable[[Call], Awaitable[web.StreamResponse]]

PUBLIC_PATHS: Final = frozenset(route.path for route in ROUTES if route.role == PUBLIC)
"""Route patterns served without credentials."""

_ANONYMOUS: Final = Principal("anonymous", PUBLIC, "anonymous")


def resolve_handler(name: str) -> Handler:
    """The function a table entry names (`module:function`, the module under mqttq.admin
    unless it starts with `mqttq.`)."""
    module_name, _, function = name.partition(":")
    if not module_name.startswith("mqttq."):
        module_name = f"mqttq.admin.{module_name}"
    handler: Handler = getattr(importlib.import_module(module_name), function)
    return handler


def table_routes(
    context: AdminContext, routes: Iterable[Route] = ROUTES
) -> tuple[list[web.RouteDef], dict[tuple[str, str], Route]]:
    """The aiohttp routes of `routes`, and each route by (method, path pattern)."""
    defs: list[web.RouteDef] = []
    by_key: dict[tuple[str, str], Route] = {}
    for route in routes:
        serve = _serve(route, context)
        if route.method == "GET":  # no implicit HEAD: only what the table declares
            defs.append(web.get(route.path, serve, allow_head=False))
        else:
            defs.append(web.route(route.method, route.path, serve))
        by_key[(route.method, route.path)] = route
    return defs, by_key


def _serve(route: Route, context: AdminContext) -> Callable[[web.Request], Awaitable[Any]]:
    handler = resolve_handler(route.handler)
    query = route.query

    async def run(request: web.Request) -> web.StreamResponse:
        values = {} if route.open_query else check_query(request.query, query)
        principal = request.get(PRINCIPAL_KEY, _ANONYMOUS)
        return await handler(Call(request, values, principal, context))

    return run


def check_query(given: Mapping[str, str], params: Iterable[Param]) -> dict[str, Any]:
    """The parameters of `params` that `given` holds with a non-empty value, each as its
    `parse` returns it. Refused (400, naming the parameter): an unknown or repeated one, a
    required one missing (`required`), a value its `parse` refuses."""
    declared = {param.name: param for param in params}
    values: dict[str, Any] = {}
    getall = getattr(given, "getall", None)
    for key in given:
        param = declared.get(key)
        if param is None:
            known = ", ".join(declared) or "none"
            raise ApiError(400, f"unknown query parameter; known parameters: {known}", key)
        found = getall(key) if getall is not None else [given[key]]
        if len(found) > 1:
            raise ApiError(400, "given more than once", key)
        if found[0]:
            values[key] = found[0] if param.parse is None else param.parse(found[0])
    for param in declared.values():
        if param.required and param.name not in values:
            raise ApiError(400, "required", param.name)
    return values
