"""MkDocs hook: the admin API page, rendered from the OpenAPI document at build time.

docs/admin-api.md holds the hand-written introduction and the line ROUTES_MARKER; this hook
replaces that line with every route of `mqttq.admin.openapi.openapi_document()` (method,
path, summary, parameters, request body fields, responses), and adds the document itself to
the site as `openapi.json`, so the page can never describe routes the broker does not serve:
tests/admin/test_admin_openapi.py keeps the document equal to the routes.

Declared under `hooks:` in mkdocs.yml; runs in the process of `mkdocs build` or `serve`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROUTES_MARKER = "<!-- openapi-routes -->"
"""The line of docs/admin-api.md that the rendered routes replace."""

PAGE = "admin-api.md"
DOCUMENT = "openapi.json"
METHODS = ("get", "put", "post", "patch", "delete")

JSON = dict[str, Any]


def _document() -> JSON:
    # The document is plain data: read it from the sources, never from a mypyc build that
    # may be older than them (the build is the broker's business, not the docs').
    os.environ.setdefault("MQTTQ_PURE", "1")
    from mqttq.admin.openapi import openapi_document  # noqa: PLC0415 (after MQTTQ_PURE)

    return openapi_document()


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the OpenAPI document to the site, beside the page, for download."""
    text = json.dumps(_document(), indent=2) + "\n"
    files.append(File.generated(config, DOCUMENT, content=text))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace ROUTES_MARKER on the admin API page with the rendered routes."""
    if page.file.src_uri != PAGE:
        return markdown
    if ROUTES_MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its {ROUTES_MARKER} line")
    return markdown.replace(ROUTES_MARKER, render_routes(_document()))


def render_routes(document: JSON) -> str:
    """Markdown for every route of `document`, grouped by tag in the document's tag order."""
    resolver = _Resolver(document)
    by_tag: dict[str, list[str]] = {tag["name"]: [] for tag in document.get("tags", [])}
    for path, operations in document["paths"].items():
        for method in METHODS:
            operation = operations.get(method)
            if operation is None:
                continue
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append(_operation(method, path, operation, resolver))
    out: list[str] = []
    for tag, sections in by_tag.items():
        if sections:
            out.append(f"## {tag.capitalize()}\n")
            out.extend(sections)
    out.append(_schemas(document, resolver))
    return "\n".join(out)


def _schemas(document: JSON, resolve: _Resolver) -> str:
    """Every component schema with its fields: what the answers above hold."""
    lines = [
        "## Schemas\n",
        "The objects the routes above take and give back. Answers list every field the "
        "broker sends (their schemas are closed: `additionalProperties` is false).\n",
    ]
    for name, schema in document["components"]["schemas"].items():
        lines += [f"### `{name}` {{#{_anchor(name)}}}\n"]
        if schema.get("description"):
            lines += [_cell(schema["description"]), ""]
        properties: JSON = schema.get("properties", {})
        if not properties:
            lines += [f"Type: {_type(schema, resolve)}.", ""]
            continue
        required = set(schema.get("required", []))
        lines += ["| field | type | always there | description |", "|---|---|---|---|"]
        for field, spec in properties.items():
            lines.append(
                f"| `{field}` | {_type(spec, resolve)} | {'yes' if field in required else 'no'} "
                f"| {_cell(resolve(spec).get('description', ''))} |"
            )
        lines.append("")
    return "\n".join(lines)


def _anchor(schema_name: str) -> str:
    return f"schema-{schema_name.lower()}"


class _Resolver:
    """Follows `$ref`s inside one document (only local `#/...` references exist there)."""

    def __init__(self, document: JSON) -> None:
        self._document = document

    def __call__(self, node: JSON) -> JSON:
        while "$ref" in node:
            target: Any = self._document
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    @staticmethod
    def name(node: JSON) -> str | None:
        """The component name a `$ref` points to, if `node` is one."""
        ref = node.get("$ref")
        return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _operation(method: str, path: str, operation: JSON, resolve: _Resolver) -> str:
    needs_token = operation.get("security", [{}]) != []
    lines = [
        f"### `{method.upper()} {path}`\n",
        _cell(operation.get("summary", "")),
        "",
        "Needs the bearer token." if needs_token else "No token needed.",
        "",
    ]
    parameters = [resolve(p) for p in operation.get("parameters", [])]
    if parameters:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in parameters:
            required = "yes" if p.get("required") else "no"
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}), resolve)} "
                f"| {required} | {_cell(p.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body is not None:
        lines += _body(resolve(body), resolve)
    lines += ["| status | answer |", "|---|---|"]
    for status, response in sorted(operation["responses"].items()):
        lines.append(f"| {status} | {_answer(response, resolve)} |")
    lines.append("")
    return "\n".join(lines)


def _body(body: JSON, resolve: _Resolver) -> list[str]:
    schema_node = body["content"]["application/json"]["schema"]
    schema = resolve(schema_node)
    name = resolve.name(schema_node)
    intro = "Request body (JSON" + (f", {_link(name)}" if name else "") + ")"
    if schema.get("description"):
        intro += f": {_cell(schema['description'])}"
    lines = [intro, ""]
    properties: JSON = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, spec in properties.items():
            lines.append(
                f"| `{field}` | {_type(spec, resolve)} | {'yes' if field in required else 'no'} "
                f"| {_cell(resolve(spec).get('description', ''))} |"
            )
        lines.append("")
    return lines


def _answer(response: JSON, resolve: _Resolver) -> str:
    resolved = resolve(response)
    text = _cell(resolved.get("description", ""))
    content = resolved.get("content", {})
    for media_type, media in content.items():
        schema_node = media.get("schema", {})
        name = resolve.name(schema_node)
        kind = _link(name) if name else _type(schema_node, resolve)
        text += f" ({media_type}: {kind})" if media_type != "application/json" else f" ({kind})"
    return text


def _type(schema: JSON, resolve: _Resolver) -> str:
    name = _Resolver.name(schema)
    if name is not None:
        return _link(name)
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    if kind == "array" and "items" in schema:
        text = f"array of {_type(schema['items'], resolve)}"
    if "enum" in schema:
        text += ": " + ", ".join(
            f"`{v if isinstance(v, str) else json.dumps(v)}`" for v in schema["enum"]
        )
    bounds = [
        f"{label} {schema[key]}"
        for key, label in (("minimum", "≥"), ("maximum", "≤"), ("maxLength", "length ≤"))
        if key in schema
    ]
    if "default" in schema:
        bounds.append(f"default `{schema['default']}`")
    if bounds:
        text += " (" + ", ".join(bounds) + ")"
    return text


def _link(schema_name: str) -> str:
    return f"[`{schema_name}`](#{_anchor(schema_name)})"


def _cell(text: str) -> str:
    """Text that stays inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
