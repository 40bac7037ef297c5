"""The OpenAPI document: structurally valid OpenAPI 3.1, in step with the routes the
server registers (no drift either way), and describing the bodies the API really sends
(checked with a small validator for the JSON Schema subset the document uses)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from mqttq.admin.broker_backend import BrokerAdmin
from mqttq.admin.routes import PUBLIC_PATHS
from mqttq.admin.routes_tenants import TCP_RATE_FIELD
from mqttq.admin.server import AdminServer
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.broker.server import Broker
from mqttq.config import Settings
from mqttq.limits.quota import QUOTA_FIELDS
from mqttq.storage.memory import MemoryStorage
from tests.admin.conftest import Api, RunAdmin
from tests.admin.openapi_check import (
    DOCUMENT,
    answer_schema,
    check,
    check_answer,
    operations,
    refs,
    resolve,
)
from tests.admin.real_broker import populated


def test_routes_and_document_match() -> None:
    server = AdminServer(
        BrokerAdmin(Broker(Settings(), MemoryStorage())),
        host="127.0.0.1",
        port=0,
        token="t",
        uri_rate=1.0,
        rate_wait=0.0,
    )
    registered = set()
    for route in server.app.router.routes():
        assert route.resource is not None
        registered.add((route.method, route.resource.canonical))
    documented = {(method.upper(), path) for path, method, _ in operations(DOCUMENT)}
    assert registered == documented


def test_document_is_structurally_valid_openapi_3_1() -> None:
    document = DOCUMENT
    json.dumps(document, allow_nan=False)  # serialisable as strict JSON
    assert re.fullmatch(r"3\.1\.\d+", document["openapi"])
    assert isinstance(document["info"]["title"], str) and document["info"]["title"]
    assert isinstance(document["info"]["version"], str) and document["info"]["version"]
    components = document["components"]
    assert set(components) <= {
        "schemas",
        "responses",
        "parameters",
        "requestBodies",
        "headers",
        "securitySchemes",
    }
    assert components["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": components["securitySchemes"]["bearerAuth"]["description"],
    }
    for requirement in document["security"]:
        assert set(requirement) <= set(components["securitySchemes"])
    for ref in refs(document):
        resolve(document, ref)

    operation_ids = []
    for path, method, operation in operations(document):
        where = f"{method.upper()} {path}"
        assert path.startswith("/"), where
        operation_ids.append(operation["operationId"])
        assert operation["summary"], where
        responses = operation["responses"]
        assert responses, where
        for status, response in responses.items():
            assert re.fullmatch(r"[1-5][0-9][0-9]", status), where
            body = resolve(document, response["$ref"]) if "$ref" in response else response
            assert body["description"], where
        templated = set(re.findall(r"{([^}]+)}", path))
        parameters = operation.get("parameters", [])
        in_path = {p["name"] for p in parameters if p["in"] == "path"}
        assert in_path == templated, where
        for parameter in parameters:
            assert parameter["in"] in {"query", "path", "header", "cookie"}, where
            assert "schema" in parameter, where
            if parameter["in"] == "path":
                assert parameter["required"] is True, where
        names = [(p["name"], p["in"]) for p in parameters]
        assert len(names) == len(set(names)), where

        public = path in PUBLIC_PATHS
        assert ("security" in operation and operation["security"] == []) is public, where
        # A protected route may refuse the bearer token; a public one never asks for it (a
        # public login form may still answer 401 of its own, but not this one).
        unauthorized = responses.get("401", {}).get("$ref", "").endswith("/Unauthorized")
        assert unauthorized is not public, where
        assert "429" in responses, where
        bodiless = ("/disconnect", "/pause", "/resume", "/test")  # actions named by the path
        takes_body = method in ("put", "post") and not path.endswith(bodiless)
        assert ("requestBody" in operation) is takes_body, where
        if takes_body:
            assert "400" in responses, where
            assert "application/json" in operation["requestBody"]["content"], where
    assert len(operation_ids) == len(set(operation_ids))


def test_schemas_name_the_fields_the_api_uses() -> None:
    schemas = DOCUMENT["components"]["schemas"]
    assert list(schemas["Quota"]["properties"]) == list(QUOTA_FIELDS)
    assert schemas["Quota"]["required"] == list(QUOTA_FIELDS)
    assert set(schemas["QuotaChange"]["properties"]) == set(QUOTA_FIELDS)
    node = [*QUOTA_FIELDS, TCP_RATE_FIELD]
    assert schemas["NodeQuota"]["required"] == node == list(schemas["NodeQuota"]["properties"])
    assert set(schemas["NodeQuotaChange"]["properties"]) == set(node)
    assert "password_hash" not in json.dumps(schemas)
    assert schemas["Error"]["required"] == ["error", "field"]
    # A 4xx always names its field; only a 5xx has none.
    assert schemas["Error"]["properties"]["field"]["type"] == "string"
    assert schemas["TokenError"]["properties"]["field"]["const"] == "Authorization"
    assert schemas["ServerError"]["properties"]["field"]["type"] == "null"


def test_every_schema_is_closed() -> None:
    # The answers are all ours: an undocumented field must fail the conformance checks.
    def objects(schema: Any, where: str) -> Any:
        if isinstance(schema, dict):
            if schema.get("type") == "object" and "properties" in schema:
                yield where, schema
            for key, item in schema.items():
                yield from objects(item, f"{where}.{key}")
        elif isinstance(schema, list):
            for index, item in enumerate(schema):
                yield from objects(item, f"{where}[{index}]")

    found = list(objects(DOCUMENT["components"]["schemas"], "schemas"))
    assert len(found) >= 20
    for where, schema in found:
        assert schema.get("additionalProperties") is False, where


def test_served_document_is_this_one(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.get("/openapi.json", token=None)
        assert answer.status == 200
        assert answer.body == DOCUMENT

    admin(scenario)


# --- answers against the document's schemas ------------------------------------------------


CALLS = [
    ("get", "/health", "/health", None, 200),
    ("get", "/api/v1/cluster", "/api/v1/cluster", None, 200),
    ("get", "/api/v1/sessions", "/api/v1/sessions", None, 200),
    ("get", "/api/v1/sessions/c1", "/api/v1/sessions/{client_id}", None, 200),
    ("get", "/api/v1/sessions/c2", "/api/v1/sessions/{client_id}", None, 200),
    ("get", "/api/v1/sessions/zz", "/api/v1/sessions/{client_id}", None, 404),
    (
        "post",
        "/api/v1/sessions/c1/disconnect",
        "/api/v1/sessions/{client_id}/disconnect",
        None,
        200,
    ),
    ("get", "/api/v1/subscriptions", "/api/v1/subscriptions", None, 200),
    ("get", "/api/v1/retained", "/api/v1/retained", None, 200),
    ("put", "/api/v1/tenants/acme", "/api/v1/tenants/{name}", {"max_topics": 3}, 200),
    ("put", "/api/v1/tenants/acme", "/api/v1/tenants/{name}", {"max_topics": -3}, 400),
    ("get", "/api/v1/tenants", "/api/v1/tenants", None, 200),
    ("get", "/api/v1/tenants/default", "/api/v1/tenants/{name}", None, 200),
    ("get", "/api/v1/limits", "/api/v1/limits", None, 200),
    ("put", "/api/v1/limits", "/api/v1/limits", {"max_sessions": 3}, 200),
    ("put", "/api/v1/limits", "/api/v1/limits", {"max_tcp_connection_rate": 5}, 200),
    ("put", "/api/v1/limits", "/api/v1/limits", {"max_tcp_connection_rate": -5}, 400),
    ("put", "/api/v1/limits", "/api/v1/limits", [], 400),
    ("get", "/api/v1/sessions?limit=0", "/api/v1/sessions", None, 400),
    ("delete", "/api/v1/retained?topic=nothing", "/api/v1/retained", None, 404),
    ("post", "/api/v1/credentials", "/api/v1/credentials", {"username": "u", "password": "p"}, 201),
    ("post", "/api/v1/credentials", "/api/v1/credentials", {"username": "u", "password": "p"}, 409),
    ("get", "/api/v1/credentials", "/api/v1/credentials", None, 200),
    ("get", "/api/v1/credentials/u", "/api/v1/credentials/{username}", None, 200),
    ("put", "/api/v1/credentials/u", "/api/v1/credentials/{username}", {"tenant": "t"}, 200),
    ("get", "/api/v1/credentials/x", "/api/v1/credentials/{username}", None, 404),
]


def test_answers_match_the_documented_schemas(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        for method, url, path, body, status in CALLS:
            kwargs: dict[str, Any] = {} if body is None else {"json": body}
            answer = await api.call(method.upper(), url, **kwargs)
            assert answer.status == status, (method, url, answer.body)
            check(answer_schema(path, method, status), answer.body, f"{method} {url}")
        unauthorized = await api.get("/api/v1/limits", token=None)
        check(answer_schema("/api/v1/limits", "get", 401), unauthorized.body)

    admin(scenario, setup=populated)


def test_store_failures_match_the_document(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        for method, url, body in (
            ("PUT", "/api/v1/tenants/acme", {}),
            ("POST", "/api/v1/credentials", {"username": "u", "password": "p"}),
        ):
            answer = await api.call(method, url, json=body)
            assert answer.status == 503
            check_answer(method, url, 503, answer.body)

    admin(scenario, auth_store=EmptyAuthStore())


def test_every_429_matches_the_document(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        for path, method, _ in operations(DOCUMENT):
            url = path.replace("{client_id}", "c1").replace("{name}", "acme")
            url = url.replace("{username}", "u")
            for _ in range(2):
                answer = await api.call(method.upper(), url, json={})
            assert answer.status == 429, (method, url)
            check_answer(method, url, 429, answer.body)

    admin(scenario, uri_rate=0.01, setup=populated)


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, True),
        ({"type": "object", "required": ["a"]}, {}),
        ({"type": "object", "properties": {}, "additionalProperties": False}, {"a": 1}),
        ({"type": "array", "items": {"type": "string"}}, [1]),
        ({"type": ["string", "null"]}, 1),
        ({"type": "integer", "minimum": 0}, -1),
        ({"type": "number", "maximum": 2}, 3),
        ({"type": "string", "minLength": 1}, ""),
        ({"const": "Authorization"}, "authorization"),
        ({"$ref": "#/components/schemas/Session"}, {"client_id": "c"}),
    ],
)
def test_the_checker_refuses_what_it_should(schema: dict[str, Any], value: Any) -> None:
    with pytest.raises(AssertionError):
        check(schema, value)
