"""The OpenAPI document: structurally valid OpenAPI 3.1, in step with the routes the
server registers (no drift either way), and describing the bodies the API really sends
(checked with a small validator for the JSON Schema subset the document uses)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from mqttq.admin.openapi import openapi_document
from mqttq.admin.routes import PUBLIC_PATHS
from mqttq.admin.server import AdminServer
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.limits.quota import QUOTA_FIELDS
from tests.admin.backend_double import BackendDouble, populated
from tests.admin.conftest import Api, RunAdmin

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
DOCUMENT = openapi_document()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield path, method, operation


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        assert part in node, f"unresolved $ref {ref}"
        node = node[part]
    return node


def test_routes_and_document_match() -> None:
    server = AdminServer(
        BackendDouble(EmptyAuthStore()),
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
        assert ("401" in responses) is not public, where
        assert "429" in responses, where
        takes_body = method in ("put", "post") and not path.endswith("/disconnect")
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
    assert "password_hash" not in json.dumps(schemas)
    assert schemas["Error"]["required"] == ["error", "field"]


def test_served_document_is_this_one(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answer = await api.get("/openapi.json", token=None)
        assert answer.status == 200
        assert answer.body == DOCUMENT

    admin(scenario)


# --- answers against the document's schemas ------------------------------------------------


def check(schema: dict[str, Any], value: Any, where: str = "$") -> None:
    """Validate `value` against the JSON Schema subset the document uses."""
    if "$ref" in schema:
        check(resolve(DOCUMENT, schema["$ref"]), value, where)
        return
    if "oneOf" in schema:
        matched = 0
        for option in schema["oneOf"]:
            try:
                check(option, value, where)
            except AssertionError:
                continue
            matched += 1
        assert matched == 1, f"{where}: {value!r} matches {matched} oneOf options"
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert any(_is(kind, value) for kind in kinds), f"{where}: {value!r} is not {kinds}"
    if "const" in schema:
        assert value == schema["const"], where
    if "enum" in schema:
        assert value in schema["enum"], where
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, f"{where}: {name} missing"
        for name, item in value.items():
            if name in properties:
                check(properties[name], item, f"{where}.{name}")
            else:
                assert schema.get("additionalProperties", True) is not False, f"{where}.{name}"
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            check(schema["items"], item, f"{where}[{index}]")


def _is(kind: str, value: Any) -> bool:
    return {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
    }[kind]


def answer_schema(path: str, method: str, status: int) -> dict[str, Any]:
    response = DOCUMENT["paths"][path][method]["responses"][str(status)]
    if "$ref" in response:
        response = resolve(DOCUMENT, response["$ref"])
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


CALLS = [
    ("get", "/health", "/health", None, 200),
    ("get", "/api/v1/sessions", "/api/v1/sessions", None, 200),
    ("get", "/api/v1/sessions/c1", "/api/v1/sessions/{client_id}", None, 200),
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


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, True),
        ({"type": "object", "required": ["a"]}, {}),
        ({"type": "object", "properties": {}, "additionalProperties": False}, {"a": 1}),
        ({"type": "array", "items": {"type": "string"}}, [1]),
        ({"type": ["string", "null"]}, 1),
    ],
)
def test_the_checker_refuses_what_it_should(schema: dict[str, Any], value: Any) -> None:
    with pytest.raises(AssertionError):
        check(schema, value)
