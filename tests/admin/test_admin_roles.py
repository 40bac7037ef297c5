"""Roles from the route table (issue 34): a caller holding only `viewer` may make every read
and is refused every change with 403 naming `Authorization`, before the handler runs; the
OpenAPI document lists 403 on the admin routes and on no viewer route. The viewer is given
by an extra authenticator appended to the server, as a browser login is."""

from __future__ import annotations

import re

from aiohttp import web

from mqttq.admin.api_table import ADMIN, PUBLIC, ROUTES, VIEWER
from mqttq.admin.call import Principal
from mqttq.admin.openapi import openapi_document
from tests.admin.conftest import DoubleApi, RunDouble

VIEWER_HEADER = "X-Test-Viewer"


async def viewer_header(request: web.Request) -> Principal | None:
    """A viewer named by the test header; None without it."""
    name = request.headers.get(VIEWER_HEADER)
    return None if name is None else Principal(name, VIEWER, "test")


def concrete(path: str) -> str:
    return re.sub(r"{[^}]+}", "x", path)


def test_a_viewer_reads_everything_and_changes_nothing(admin_double: RunDouble) -> None:
    async def scenario(api: DoubleApi) -> None:
        api.server.authenticators.append(viewer_header)
        seen = {VIEWER: 0, ADMIN: 0}
        for route in ROUTES:
            if route.role == PUBLIC:
                continue
            url = concrete(route.path)
            answer = await api.call(
                route.method, url, json={}, token=None, headers={VIEWER_HEADER: "ann"}
            )
            where = (route.method, route.path, answer.status, answer.body)
            if route.role == ADMIN:
                assert answer.status == 403, where
                assert answer.body["field"] == "Authorization", where
                assert "admin role" in answer.body["error"], where
            else:
                assert answer.status not in (401, 403), where
            seen[route.role] += 1
        assert seen[VIEWER] > 10 and seen[ADMIN] > 10
        # With no credentials at all, nothing but the public routes is served.
        assert (await api.call("GET", "/api/v1/sessions", token=None)).status == 401

    admin_double(scenario)


def test_the_document_lists_403_on_the_admin_routes_only() -> None:
    paths = openapi_document()["paths"]
    for route in ROUTES:
        if route.role == PUBLIC:
            continue  # it may refuse for reasons of its own (a form from another origin)
        responses = paths[route.path][route.method.lower()]["responses"]
        assert ("403" in responses) is (route.role == ADMIN), (route.method, route.path)
