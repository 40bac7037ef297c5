"""Checking answers against the admin API's OpenAPI document: `check(schema, value)`
validates the JSON Schema subset the document uses, `answer_schema` finds the documented
schema of one answer, `route_of` the documented path a concrete URL matches."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

from mqttq.admin.openapi import openapi_document

__all__ = [
    "DOCUMENT",
    "HTTP_METHODS",
    "answer_schema",
    "check",
    "check_answer",
    "check_any_answer",
    "operations",
    "refs",
    "resolve",
    "route_of",
]

HTTP_METHODS: Final = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
DOCUMENT: Final = openapi_document()


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
        assert value == schema["const"], f"{where}: {value!r} is not {schema['const']!r}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema:
            assert value >= schema["minimum"], f"{where}: {value!r} < {schema['minimum']}"
        if "maximum" in schema:
            assert value <= schema["maximum"], f"{where}: {value!r} > {schema['maximum']}"
    if isinstance(value, str) and "minLength" in schema:
        assert len(value) >= schema["minLength"], f"{where}: {value!r} is too short"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, f"{where}: {name} missing"
        for name, item in value.items():
            if name in properties:
                check(properties[name], item, f"{where}.{name}")
            else:
                closed = schema.get("additionalProperties", True) is False
                assert not closed, f"{where}.{name}: not in the document"
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
    """The documented JSON schema of `method path`'s `status` answer (AssertionError when
    that status is not documented, or documented without a JSON body)."""
    responses = DOCUMENT["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path}: {status} is not documented"
    response = responses[str(status)]
    if "$ref" in response:
        response = resolve(DOCUMENT, response["$ref"])
    assert "content" in response, f"{method.upper()} {path}: {status} has no body"
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


_TEMPLATES: Final = [
    (re.compile("[^/]+".join(map(re.escape, re.split(r"{[^}]+}", path)))), path)
    for path in DOCUMENT["paths"]
]


def route_of(url_path: str) -> str:
    """The documented path (`/api/v1/sessions/{client_id}`) that `url_path` matches."""
    path = _documented(url_path)
    if path is None:
        raise AssertionError(f"{url_path} matches no documented path")
    return path


def _documented(url_path: str) -> str | None:
    for pattern, path in _TEMPLATES:
        if pattern.fullmatch(url_path):
            return path
    return None


_ANY_ROUTE_STATUSES: Final = frozenset({405, 413})
"""Answers any route may give that operations do not list (a wrong method, a body over
the size limit): plain errors."""


def check_answer(method: str, url_path: str, status: int, body: Any) -> None:
    """`body` (decoded JSON; None when empty) is what the document says `method url_path`
    answers with `status`."""
    path = route_of(url_path)
    where = f"{method.upper()} {url_path} -> {status}"
    if body is None:
        responses = DOCUMENT["paths"][path][method.lower()]["responses"]
        assert str(status) in responses, f"{where}: status not documented"
        response = responses[str(status)]
        assert "content" not in response and "$ref" not in response, f"{where}: body expected"
        return
    check(answer_schema(path, method.lower(), status), body, where)


def check_any_answer(method: str, url_path: str, status: int, body: Any) -> None:
    """Like `check_answer`, for any request a test sends: a JSON error to an unknown
    path (404, or 401/429 before the router is asked) or of a status any route may give
    (405, 413) must still be the documented Error object."""
    path = _documented(url_path)
    operation = None if path is None else DOCUMENT["paths"][path].get(method.lower())
    if operation is None or status in _ANY_ROUTE_STATUSES:
        assert status >= 400, f"{method.upper()} {url_path} -> {status}: not documented"
        check(resolve(DOCUMENT, "#/components/schemas/Error"), body, f"{method} {url_path}")
        return
    check_answer(method, url_path, status, body)
