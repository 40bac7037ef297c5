"""Every route of the admin API, declared once: method, path, parameters, body schema,
answers, handler and the role it needs.

Three things are made from this table and nothing else:
- the server's routes (mqttq.admin.routes): each handler is called with the query already
  checked against the route's parameters (an unknown, repeated or bad one is 400 naming
  it; a required one missing is 400 `required`), the body read as a JSON object when the
  route takes one, and the caller authorized for the route's role;
- the OpenAPI document (mqttq.admin.openapi): paths, parameters, request bodies, answers;
- the CLI's client (mqttq.admin.client `AdminClient.call(operation_id, ...)`).

This module imports no HTTP library (the CLI imports it): a handler is named as
`"module:function"`, a module under mqttq.admin unless the name starts with `mqttq.`, and
resolved when the server starts. A handler is `async def handler(call: Call) ->
web.StreamResponse` (mqttq.admin.call).

Adding a route is one entry in ROUTES (use `get`/`post`/`put`/`delete`), its handler, and,
for a new answer object, its schema in `schemas=` (merged into the document's
components).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from mqttq.admin.dashboard.params import seconds_value
from mqttq.admin.openapi_blocked import BLOCKED_SCHEMAS
from mqttq.admin.validation import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    TENANT_PATTERN,
    limit_value,
    session_state,
)

__all__ = [
    "ADMIN",
    "API",
    "PUBLIC",
    "ROUTES",
    "VIEWER",
    "Param",
    "Role",
    "Route",
    "answer",
    "delete",
    "errors",
    "get",
    "post",
    "put",
    "ref",
    "route_by_operation",
]

JSON = dict[str, Any]
Role = Literal["public", "viewer", "admin"]

PUBLIC: Final[Role] = "public"
"""No credentials needed (/health, /openapi.json)."""
VIEWER: Final[Role] = "viewer"
"""Reads: any authenticated caller."""
ADMIN: Final[Role] = "admin"
"""Changes: callers with the admin role (the bearer token has it)."""

API: Final = "/api/v1"

ERROR_RESPONSES: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
    503: "StoreUnavailable",
}
"""Error status -> the document's shared response (components/responses)."""


def ref(name: str) -> JSON:
    """A reference to the document's schema `name`."""
    return {"$ref": f"#/components/schemas/{name}"}


def answer(schema: JSON | str, description: str) -> JSON:
    """A JSON answer of `schema` (a schema, or the name of one in the components)."""
    body = ref(schema) if isinstance(schema, str) else schema
    return {"description": description, "content": {"application/json": {"schema": body}}}


def errors(*statuses: int) -> JSON:
    """The shared error answers of `statuses`."""
    return {
        str(status): {"$ref": f"#/components/responses/{ERROR_RESPONSES[status]}"}
        for status in statuses
    }


NO_CONTENT: Final = {"204": {"description": "Done; no body."}}


@dataclass(frozen=True, slots=True)
class Param:
    """A path or query parameter. A query value is given to the handler as `parse`
    returns it (the string itself when None; `parse` raises ApiError naming the
    parameter). An empty query value counts as not given."""

    name: str
    description: str
    schema: JSON = field(default_factory=lambda: {"type": "string"})
    where: Literal["query", "path"] = "query"
    required: bool = False
    parse: Callable[[str], Any] | None = None

    def openapi(self) -> JSON:
        """The parameter object of the OpenAPI document."""
        return {
            "name": self.name,
            "in": self.where,
            "required": self.required or self.where == "path",
            "description": self.description,
            "schema": self.schema,
        }


def path_param(name: str, description: str) -> Param:
    """A `{name}` segment of the path."""
    return Param(name, description, where="path")


@dataclass(frozen=True, slots=True)
class Route:
    """One route (see the module docstring). `open_query`: any query is accepted and
    ignored (monitoring tools add parameters of their own)."""

    method: str
    path: str
    operation_id: str
    summary: str
    tag: str
    handler: str
    responses: JSON
    role: Role
    params: tuple[Param, ...] = ()
    body: str | None = None
    """The name of the request body's schema (a JSON object); None: no body."""
    open_query: bool = False
    schemas: JSON = field(default_factory=dict)
    """Schemas this route introduces into the document's components."""

    @property
    def query(self) -> tuple[Param, ...]:
        """The query parameters."""
        return tuple(param for param in self.params if param.where == "query")


def _route(method: str, default_role: Role) -> Callable[..., Route]:
    def make(  # noqa: PLR0917 (a route's fields, in the table's column order)
        path: str,
        operation_id: str,
        summary: str,
        tag: str,
        handler: str,
        responses: JSON,
        *,
        role: Role = default_role,
        params: tuple[Param, ...] = (),
        body: str | None = None,
        open_query: bool = False,
        schemas: JSON | None = None,
    ) -> Route:
        return Route(
            method,
            path,
            operation_id,
            summary,
            tag,
            handler,
            responses,
            role,
            params,
            body,
            open_query,
            schemas or {},
        )

    return make


get = _route("GET", VIEWER)
"""A read: role viewer unless said."""
post = _route("POST", ADMIN)
"""A change: role admin unless said."""
put = _route("PUT", ADMIN)
delete = _route("DELETE", ADMIN)


# --- parameters shared by several routes ------------------------------------------------

TENANT_QUERY: Final = Param("tenant", "Only this tenant (empty: every tenant).")
LIMIT_QUERY: Final = Param(
    "limit",
    "At most this many items.",
    {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
    parse=limit_value,
)
CLIENT_ID: Final = path_param("client_id", "The session's MQTT client identifier.")
TENANT_NAME: Final = path_param("name", "The tenant's name.")
USERNAME: Final = path_param("username", "The credential's username.")
INTEGRATION_NAME: Final = path_param("name", "The integration's name.")
INTEGRATIONS_OFF: Final = {"503": {"$ref": "#/components/responses/IntegrationsOff"}}

_SESSION_QUERY: Final = (
    TENANT_QUERY,
    Param("prefix", "Only client ids starting with this."),
    Param("user", "Only clients connected with this username."),
    Param("address", "Only clients whose address (host:port) starts with this."),
    Param(
        "state",
        "Only connected sessions, or only offline ones.",
        {"type": "string", "enum": ["connected", "offline"]},
        parse=session_state,
    ),
    LIMIT_QUERY,
    Param("cursor", "Where the page starts: the `next_cursor` of the page before."),
)

_S = "routes_sessions:"
_T = "routes_tenants:"
_C = "routes_credentials:"
_I = "routes_integrations:"
_N = "routes_node:"
_D = "dashboard.login:"
_HTML: Final = {
    "200": {"description": "HTML.", "content": {"text/html": {"schema": {"type": "string"}}}}
}
_ME: Final = {
    "type": "object",
    "required": ["username", "role", "csrf_token"],
    "properties": {
        "username": {"type": "string"},
        "role": {"type": "string", "enum": ["viewer", "admin"]},
        "csrf_token": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}
_SERIES: Final = {"type": ["array", "null"], "items": {"type": ["number", "null"]}}
_COLUMNS: Final = {
    "type": "object",
    "required": ["t", "dropped_by_reason"],
    "properties": {
        "t": {"type": "array", "items": {"type": "number"}},
        **{
            name: _SERIES
            for name in (
                "connections",
                "messages_in",
                "messages_out",
                "dropped",
                "backlog",
                "inbox",
                "kafka_produce_ms",
                "kafka_lag",
            )
        },
        "dropped_by_reason": {"type": "object", "additionalProperties": _SERIES},
    },
    "additionalProperties": False,
}
_HISTORY: Final = {
    "type": "object",
    "required": ["interval_s", "now", "nodes", "cluster"],
    "properties": {
        "interval_s": {"type": "number"},
        "now": {"type": "number"},
        "nodes": {"type": "object", "additionalProperties": ref("HistoryColumns")},
        "cluster": ref("HistoryColumns"),
    },
    "additionalProperties": False,
}
_LOGIN: Final = {
    "type": "object",
    "required": ["username", "password"],
    "properties": {"username": {"type": "string"}, "password": {"type": "string"}},
    "additionalProperties": False,
}
_LOGOUT: Final = {
    "type": "object",
    "properties": {"csrf_token": {"type": "string"}},
    "additionalProperties": False,
}

ROUTES: Final[tuple[Route, ...]] = (
    get(
        "/health",
        "health",
        "Liveness: version, uptime and MQTT port (no token needed).",
        "service",
        "routes_node:health",
        {"200": answer("Health", "Serving.")},
        role=PUBLIC,
        open_query=True,
    ),
    get(
        "/openapi.json",
        "openapi",
        "This document (no token needed).",
        "service",
        _N + "openapi",
        {"200": answer({"type": "object"}, "The OpenAPI 3.1 document.")},
        role=PUBLIC,
        open_query=True,
    ),
    get(
        "/metrics",
        "metrics",
        "Prometheus metrics (text format 0.0.4).",
        "service",
        _N + "metrics",
        {
            "200": {
                "description": "Metrics.",
                "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
            }
        },
        open_query=True,
    ),
    get(
        f"{API}/cluster",
        "getCluster",
        "The nodes of the cluster from their heartbeats in Redis: clients, consumer "
        "lag, last heartbeat, state (503: Redis cannot be reached).",
        "cluster",
        _N + "cluster",
        {"200": answer("Cluster", "The nodes.")} | errors(400, 503),
    ),
    get(
        f"{API}/node",
        "getNode",
        "This node at a glance: version, uptime, mode, listeners, node limits and tenant "
        "quotas with their current usage.",
        "service",
        _N + "node",
        {"200": answer("Node", "The node.")} | errors(400, 503),
    ),
    get(
        f"{API}/kafka",
        "getKafka",
        "Distributed mode: the Kafka topics of the message log and of APPLICATION "
        "clients, and the consumer groups with their lag (503: Kafka cannot be reached).",
        "cluster",
        _N + "kafka",
        {"200": answer("Kafka", "Topics and consumer groups.")} | errors(400, 503),
    ),
    get(
        f"{API}/sessions",
        "listSessions",
        "Sessions, online or not, ordered by client id, a page at a time: `items` (also "
        "as `sessions`), the cursor of the next page (null: no more) and how many match.",
        "sessions",
        _S + "list_sessions",
        {"200": answer("SessionList", "Sessions.")} | errors(400),
        params=_SESSION_QUERY,
    ),
    get(
        f"{API}/sessions/{{client_id}}",
        "getSession",
        "One session with its subscriptions.",
        "sessions",
        _S + "get_session",
        {"200": answer("SessionDetail", "The session.")} | errors(400, 404),
        params=(CLIENT_ID,),
    ),
    delete(
        f"{API}/sessions/{{client_id}}",
        "removeSession",
        "Disconnect the client if connected and delete its session and queue.",
        "sessions",
        _S + "remove_session",
        NO_CONTENT | errors(400, 404),
        params=(CLIENT_ID,),
    ),
    post(
        f"{API}/sessions/{{client_id}}/disconnect",
        "disconnectSession",
        "Close the client's connection (5.0: DISCONNECT 0x98); the session stays.",
        "sessions",
        _S + "disconnect_session",
        {"200": answer("Disconnected", "Whether a connection was closed.")} | errors(400, 404),
        params=(CLIENT_ID,),
    ),
    get(
        f"{API}/subscriptions",
        "listSubscriptions",
        "Subscriptions of every session (or of one tenant, client or filter), by client id.",
        "sessions",
        _S + "list_subscriptions",
        {"200": answer("SubscriptionList", "Subscriptions.")} | errors(400),
        params=(
            TENANT_QUERY,
            Param("client_id", "Only this client's."),
            Param("topic_filter", "Only subscriptions to exactly this topic filter."),
            Param("filter_prefix", "Only subscriptions whose topic filter starts with this."),
            LIMIT_QUERY,
        ),
    ),
    get(
        f"{API}/retained",
        "listRetained",
        "Retained messages, by tenant and topic.",
        "retained",
        _S + "list_retained",
        {"200": answer("RetainedList", "Retained messages.")} | errors(400),
        params=(
            TENANT_QUERY,
            Param("prefix", "Only topics starting with this."),
            LIMIT_QUERY,
        ),
    ),
    delete(
        f"{API}/retained",
        "deleteRetained",
        "Remove the retained message of one topic (on every node of a cluster).",
        "retained",
        _S + "delete_retained",
        NO_CONTENT | errors(400, 404),
        params=(
            Param(
                "tenant",
                "The tenant.",
                {"type": "string", "pattern": TENANT_PATTERN, "default": "default"},
            ),
            Param("topic", "The topic name.", required=True),
        ),
    ),
    get(
        f"{API}/tenants",
        "listTenants",
        "The default quota and every stored tenant, with usage on this node.",
        "tenants",
        _T + "list_tenants",
        {"200": answer("TenantList", "Tenants.")} | errors(400),
    ),
    get(
        f"{API}/tenants/{{name}}",
        "getTenant",
        "One tenant (unstored ones: `default` or tenants in use on this node).",
        "tenants",
        _T + "get_tenant",
        {"200": answer("Tenant", "The tenant.")} | errors(400, 404),
        params=(TENANT_NAME,),
    ),
    put(
        f"{API}/tenants/{{name}}",
        "putTenant",
        "Store and apply the tenant's quota at once (a subset of fields).",
        "tenants",
        _T + "put_tenant",
        {"200": answer("Tenant", "The tenant as stored.")} | errors(400, 503),
        params=(TENANT_NAME,),
        body="QuotaChange",
    ),
    delete(
        f"{API}/tenants/{{name}}",
        "deleteTenant",
        "Remove the tenant's row; its clients fall back to the default quota.",
        "tenants",
        _T + "delete_tenant",
        NO_CONTENT | errors(400, 404, 503),
        params=(TENANT_NAME,),
    ),
    get(
        f"{API}/limits",
        "getLimits",
        "The node layer's limits and its TCP connection rate.",
        "limits",
        _T + "get_limits",
        {"200": answer("NodeLimits", "Node limits.")} | errors(400),
    ),
    put(
        f"{API}/limits",
        "putLimits",
        "Apply new node limits at once (not written to broker.toml).",
        "limits",
        _T + "put_limits",
        {"200": answer("NodeLimits", "Node limits now.")} | errors(400),
        body="NodeQuotaChange",
    ),
    get(
        f"{API}/credentials",
        "listCredentials",
        "Credentials, ordered by username (never the password hash).",
        "credentials",
        _C + "list_credentials",
        {"200": answer("CredentialList", "Credentials.")} | errors(400, 503),
        params=(TENANT_QUERY,),
    ),
    post(
        f"{API}/credentials",
        "addCredential",
        "Add a credential; the password is stored as a salted slow hash.",
        "credentials",
        _C + "add_credential",
        {"201": answer("Credential", "The credential.")} | errors(400, 409, 503),
        body="CredentialCreate",
    ),
    get(
        f"{API}/credentials/{{username}}",
        "getCredential",
        "One credential.",
        "credentials",
        _C + "get_credential",
        {"200": answer("Credential", "The credential.")} | errors(400, 404, 503),
        params=(USERNAME,),
    ),
    put(
        f"{API}/credentials/{{username}}",
        "putCredential",
        "Change some fields of a credential (password included).",
        "credentials",
        _C + "put_credential",
        {"200": answer("Credential", "The credential.")} | errors(400, 404, 503),
        params=(USERNAME,),
        body="CredentialChange",
    ),
    delete(
        f"{API}/credentials/{{username}}",
        "deleteCredential",
        "Remove a credential.",
        "credentials",
        _C + "delete_credential",
        NO_CONTENT | errors(400, 404, 503),
        params=(USERNAME,),
    ),
    get(
        f"{API}/integrations",
        "listIntegrations",
        'Every integration (secrets as "***") with its state, counters and lag.',
        "integrations",
        _I + "list_integrations",
        {"200": answer("IntegrationList", "Integrations, by name.")}
        | errors(400)
        | INTEGRATIONS_OFF,
    ),
    post(
        f"{API}/integrations",
        "addIntegration",
        "Check, store and start an integration (400 names the key at fault).",
        "integrations",
        _I + "create",
        {"201": answer("Integration", "The integration.")} | errors(400, 409) | INTEGRATIONS_OFF,
        body="IntegrationTable",
    ),
    get(
        f"{API}/integrations/{{name}}",
        "getIntegration",
        "One integration.",
        "integrations",
        _I + "show",
        {"200": answer("Integration", "The integration.")} | errors(400, 404) | INTEGRATIONS_OFF,
        params=(INTEGRATION_NAME,),
    ),
    put(
        f"{API}/integrations/{{name}}",
        "putIntegration",
        "Replace some keys and restart the integration live; its backlog is kept.",
        "integrations",
        _I + "update",
        {"200": answer("Integration", "The integration.")} | errors(400, 404) | INTEGRATIONS_OFF,
        params=(INTEGRATION_NAME,),
        body="IntegrationChange",
    ),
    delete(
        f"{API}/integrations/{{name}}",
        "deleteIntegration",
        "Stop the integration and delete it with its backlog.",
        "integrations",
        _I + "remove",
        NO_CONTENT | errors(400, 404) | INTEGRATIONS_OFF,
        params=(INTEGRATION_NAME,),
    ),
    post(
        f"{API}/integrations/{{name}}/pause",
        "pauseIntegration",
        "Send nothing after the batch in progress; the backlog keeps filling.",
        "integrations",
        _I + "pause",
        {"200": answer("Integration", "The integration.")} | errors(400, 404) | INTEGRATIONS_OFF,
        params=(INTEGRATION_NAME,),
    ),
    post(
        f"{API}/integrations/{{name}}/resume",
        "resumeIntegration",
        "Deliver again, from the oldest message waiting.",
        "integrations",
        _I + "resume",
        {"200": answer("Integration", "The integration.")} | errors(400, 404) | INTEGRATIONS_OFF,
        params=(INTEGRATION_NAME,),
    ),
    post(
        f"{API}/integrations/{{name}}/test",
        "testIntegration",
        "Send one sample message through a fresh sink and answer what the sink said "
        "(400: the sink did not accept it, with its reason, naming the key that says "
        "where the sink is, e.g. integration.url).",
        "integrations",
        _I + "test",
        {"200": answer("IntegrationTestAnswer", "The sink accepted the sample.")}
        | errors(400, 404)
        | INTEGRATIONS_OFF,
        params=(INTEGRATION_NAME,),
    ),
    # --- blocked clients and the failed-connections log (routes_blocked) -----------------
    get(
        f"{API}/blocked",
        "listBlocked",
        "The blocked-client entries in force (by client id, user name, address or CIDR, "
        "or a regular expression), oldest first.",
        "blocked",
        "routes_blocked:list_blocked",
        {"200": answer("BlockedList", "The entries.")} | errors(400, 503),
        schemas=BLOCKED_SCHEMAS,
    ),
    post(
        f"{API}/blocked",
        "addBlocked",
        "Block a client id, user name, address or pattern (the same selector again "
        "replaces its entry): its CONNECTs get 0x8A Banned, and the clients it matches are "
        "disconnected at once, on every node of a cluster. 400 names the field at fault (a "
        "bad CIDR, regex or duration).",
        "blocked",
        "routes_blocked:add_blocked",
        {"201": answer("BlockedEntry", "The entry.")} | errors(400, 503),
        body="BlockedEntryNew",
    ),
    delete(
        f"{API}/blocked/{{id}}",
        "deleteBlocked",
        "Lift a block.",
        "blocked",
        "routes_blocked:delete_blocked",
        NO_CONTENT | errors(400, 404, 503),
        params=(path_param("id", "The entry's id, as the list shows it."),),
    ),
    get(
        f"{API}/failed-connections",
        "listFailedConnections",
        "The last CONNECTs this broker refused (wrong password, blocked, not authorized, "
        "rate), newest first, kept in its memory ([blocked] failed_connections).",
        "blocked",
        "routes_blocked:list_failed_connections",
        {"200": answer("FailedConnectionList", "Refused CONNECTs.")} | errors(400, 503),
        params=(Param("client_id", "Only this client id's."), LIMIT_QUERY),
    ),
    # --- the dashboard (mqttq/admin/dashboard; its contract: CONTRACT.md there) ---------
    get(
        "/",
        "dashboard",
        "The dashboard page; the login page (HTML) when not logged in.",
        "dashboard",
        _D + "index",
        _HTML,
        role=PUBLIC,
        open_query=True,
    ),
    post(
        "/login",
        "login",
        "Log in (JSON, or the login page's form with the same fields): 303 to / with the "
        "session cookie; the login page (HTML) with the reason otherwise: 401 wrong user "
        "or password, 403 from another origin, 429 too many failures.",
        "dashboard",
        _D + "login",
        {"303": {"description": "Logged in; the mqttq_session cookie is set."}}
        | errors(400)
        | {status: _HTML["200"] for status in ("401", "403", "429")},
        role=PUBLIC,
        body="LoginBody",
        schemas={"LoginBody": _LOGIN},
    ),
    post(
        "/logout",
        "logout",
        "End the browser session (its CSRF token in X-CSRF-Token, or as csrf_token in a "
        "JSON or form body): 303 to /.",
        "dashboard",
        _D + "logout",
        {"303": {"description": "Logged out; the cookie is cleared."}} | errors(400, 403),
        role=PUBLIC,
        body="LogoutBody",
        schemas={"LogoutBody": _LOGOUT},
    ),
    get(
        "/static/{path}",
        "dashboardFile",
        "A file of the dashboard page (script, style, image).",
        "dashboard",
        _D + "static_file",
        {"200": {"description": "The file."}} | errors(404),
        role=PUBLIC,
        params=(path_param("path", "The file's name."),),
    ),
    get(
        f"{API}/me",
        "getMe",
        "Who is calling: user name, role, and the CSRF token a browser session sends in "
        "X-CSRF-Token with every change (null with the bearer token).",
        "dashboard",
        _D + "me",
        {"200": answer("Me", "The caller.")},
        schemas={"Me": _ME},
    ),
    get(
        f"{API}/history",
        "getHistory",
        "The sampler's last hour (or `seconds`) per node and for the cluster, as columns.",
        "dashboard",
        "dashboard.history:history",
        {"200": answer("History", "The history.")} | errors(400, 503),
        params=(
            Param(
                "seconds",
                "How far back (default 3600).",
                {"type": "integer", "minimum": 1, "maximum": 3600, "default": 3600},
                parse=seconds_value,
            ),
        ),
        schemas={"History": _HISTORY, "HistoryColumns": _COLUMNS},
    ),
)
"""Every route, in the order the document lists them."""


def route_by_operation(operation_id: str) -> Route:
    """The route of `operation_id` (KeyError when there is none)."""
    for route in ROUTES:
        if route.operation_id == operation_id:
            return route
    raise KeyError(operation_id)
