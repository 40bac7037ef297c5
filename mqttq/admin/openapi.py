"""The OpenAPI 3.1 document of the admin API, as data (served at /openapi.json).

It lists every route the server registers (mqttq.admin.routes), with its parameters,
request body and answers; tests/admin/test_admin_openapi.py fails when the two drift.
The answers' schemas are closed (additionalProperties false) and list every field the
broker sends, so the conformance checks in tests/admin fail when a new field is not
documented here.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from mqttq import __version__
from mqttq.admin.openapi_integrations import INTEGRATION_SCHEMAS
from mqttq.admin.routes_tenants import TCP_RATE_FIELD
from mqttq.admin.validation import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_RATE,
    MAX_TENANT_LENGTH,
    MAX_USERNAME_LENGTH,
    TENANT_PATTERN,
)
from mqttq.auth.model import ClientType
from mqttq.limits.quota import QUOTA_FIELDS

__all__ = ["OPENAPI_VERSION", "openapi_document"]

OPENAPI_VERSION: Final = "3.1.0"

JSON = dict[str, Any]

_CLIENT_TYPES: Final = [client_type.value for client_type in ClientType]
"""The `client_type` enum of credentials and sessions: every `ClientType`, in its order."""


def _ref(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: JSON, description: str) -> JSON:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> JSON:
    return {
        str(status): {"$ref": f"#/components/responses/{_ERROR_NAMES[status]}"}
        for status in statuses
    }


_ERROR_NAMES: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
    503: "StoreUnavailable",
}


def _query(name: str, description: str, schema: JSON, *, required: bool = False) -> JSON:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }


def _path(name: str, description: str) -> JSON:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _operation(
    operation_id: str,
    summary: str,
    responses: JSON,
    *,
    tag: str,
    parameters: list[JSON] | None = None,
    body: JSON | None = None,
    public: bool = False,
) -> JSON:
    """One operation; every protected one may also answer 401 and 429."""
    answers = dict(responses)
    if not public:
        answers.update(_errors(401))
    answers.update(_errors(429))
    operation: JSON = {"operationId": operation_id, "summary": summary, "tags": [tag]}
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    operation["responses"] = answers
    if public:
        operation["security"] = []
    return operation


_TENANT_QUERY: Final = _query(
    "tenant", "Only this tenant (empty: every tenant).", {"type": "string"}
)
_LIMIT_QUERY: Final = _query(
    "limit",
    "At most this many items.",
    {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
)
_CLIENT_ID: Final = _path("client_id", "The session's MQTT client identifier.")
_TENANT_NAME: Final = _path("name", "The tenant's name.")
_USERNAME: Final = _path("username", "The credential's username.")
_NO_CONTENT: Final = {"204": {"description": "Done; no body."}}

_QUOTA_PROPERTIES: Final = {
    "max_connections_per_node": {"type": "integer", "minimum": 0},
    "max_connection_rate": {"type": "number", "minimum": 0},
    "max_topics": {"type": "integer", "minimum": 0},
    "max_sessions": {"type": "integer", "minimum": 0},
    "max_publish_rate": {"type": "number", "minimum": 0},
}
_NODE_PROPERTIES: Final = {
    **_QUOTA_PROPERTIES,
    TCP_RATE_FIELD: {
        "type": "number",
        "minimum": 0,
        "maximum": MAX_RATE,
        "description": "New TCP connections per second, before any MQTT (node only).",
    },
}
_TOPIC_FILTERS: Final = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "description": "MQTT topic filters (+ and # wildcards, $share/...).",
}
_CREDENTIAL_FIELDS: Final = {
    "tenant": {"type": "string", "pattern": TENANT_PATTERN, "maxLength": MAX_TENANT_LENGTH},
    "client_type": {"type": "string", "enum": _CLIENT_TYPES},
    "client_id_pattern": {
        "type": ["string", "null"],
        "minLength": 1,
        "description": "fnmatch pattern the client id must match; null: any.",
    },
    "publish_acl": _TOPIC_FILTERS,
    "subscribe_acl": _TOPIC_FILTERS,
    "acl_rules": {
        "type": "array",
        "description": "Ordered allow/deny rules a request must also pass when any are "
        "set: the first match decides, no match denies.",
        "items": {
            "type": "object",
            "properties": {
                "permission": {"type": "string", "enum": ["allow", "deny"]},
                "action": {"type": "string", "enum": ["publish", "subscribe", "all"]},
                "topic": {"type": "string", "minLength": 1},
            },
            "required": ["permission", "action", "topic"],
            "additionalProperties": False,
        },
    },
}
_USERNAME_SCHEMA: Final = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_USERNAME_LENGTH,
    "pattern": r"^\S+$",
}
_PASSWORD_SCHEMA: Final = {"type": "string", "minLength": 1, "writeOnly": True}
_NUMBER_OR_NULL: Final = {"type": ["number", "null"]}


_SESSION_PROPERTIES: Final[JSON] = {
    "client_id": {"type": "string"},
    "tenant": {"type": "string"},
    "client_type": {"type": "string", "enum": _CLIENT_TYPES},
    "connected": {"type": "boolean"},
    "listener": {
        "type": ["string", "null"],
        "enum": ["tcp", "tls", "ws", "wss", None],
        "description": "The listener the connected client came through; null offline.",
    },
    "persistent": {"type": "boolean", "description": "Its session expiry interval is > 0."},
    "protocol_level": {"type": "integer", "description": "3 (3.1), 4 (3.1.1) or 5 (5.0)."},
    "expiry_interval": {"type": "integer", "minimum": 0, "description": "Seconds."},
    "subscriptions": {"type": "integer"},
    "queued": {
        "type": "integer",
        "minimum": 0,
        "description": "Messages the session holds for its client, not sent yet: while "
        "connected, those waiting for room in the client's Receive Maximum; while a "
        "persistent session is offline, every message stored for it (its stored_messages).",
    },
    "inflight": {"type": "integer", "minimum": 0, "description": "QoS 1/2 unacknowledged."},
    "disconnected_at": _NUMBER_OR_NULL,
}


def _object(properties: JSON, required: list[str] | None = None, *, closed: bool = True) -> JSON:
    schema: JSON = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


_SCHEMAS: Final[JSON] = {
    "Error": _object(
        {
            "error": {"type": "string", "description": "What went wrong."},
            "field": {
                "type": "string",
                "minLength": 1,
                "description": "What to blame: a body field, a parameter, `body` (the "
                "body as a whole), `Authorization`, `Content-Type`, `path` (an unknown "
                "route, or one whose request budget is spent) or `method`.",
            },
        },
        ["error", "field"],
    ),
    "TokenError": _object(
        {"error": {"type": "string"}, "field": {"type": "string", "const": "Authorization"}},
        ["error", "field"],
    ),
    "ServerError": _object(
        {
            "error": {"type": "string", "description": "What went wrong."},
            "field": {"type": "null", "description": "No input is to blame."},
        },
        ["error", "field"],
    ),
    "Health": _object(
        {
            "status": {"type": "string", "const": "ok"},
            "version": {"type": "string"},
            "uptime_seconds": {"type": "number"},
            "mqtt_port": {"type": ["integer", "null"]},
            "data_dir": {
                "type": "string",
                "description": "The broker's data dir (absolute): `mqttq credentials` and "
                "`mqttq tenant` run from another directory read the API token there (a file "
                "only its owner can read).",
            },
        },
        ["status", "version", "uptime_seconds", "mqtt_port"],
    ),
    "ClusterNode": _object(
        {
            "node_id": {"type": "string"},
            "state": {"type": "string", "enum": ["alive", "stale", "gone"]},
            "heartbeat_at": {"type": "number", "description": "Seconds since the epoch."},
            "heartbeat_age_s": {"type": "number"},
            "host": {"type": "string"},
            "ports": {"type": "object", "additionalProperties": {"type": "integer"}},
            "pid": {"type": "integer"},
            "started_at": {"type": "number"},
            "interval_ms": {"type": "integer"},
            "connections": {"type": "integer"},
            "sessions": {"type": "integer"},
            "log_consumer_lag": {"type": "integer"},
            "app_consumer_lag": {"type": "integer"},
            "admin_url": {"type": "string"},
            "tenants": {"type": "object", "additionalProperties": _ref("Usage")},
        },
        ["node_id", "state", "heartbeat_at", "heartbeat_age_s"],
    ),
    "Cluster": _object(
        {
            "distributed": {
                "type": "boolean",
                "description": "False: this broker is embedded (no nodes in Redis).",
            },
            "nodes": {"type": "array", "items": _ref("ClusterNode")},
            "alive": {"type": "integer"},
            "stale": {"type": "integer"},
            "gone": {"type": "integer"},
        },
        ["distributed", "nodes", "alive", "stale", "gone"],
    ),
    "Quota": _object(dict(_QUOTA_PROPERTIES), list(QUOTA_FIELDS)),
    "QuotaChange": {
        **_object(dict(_QUOTA_PROPERTIES)),
        "description": "Any subset of the quota fields; the others keep their value.",
    },
    "Usage": _object(
        {
            "connections": {"type": "integer"},
            "sessions": {"type": "integer"},
            "topics": {"type": "integer"},
        },
        ["connections", "sessions", "topics"],
    ),
    "Tenant": _object(
        {
            "name": {"type": "string"},
            "quota": _ref("Quota"),
            "stored": {"type": "boolean", "description": "False: no row, default quota."},
            "usage": _ref("Usage"),
            "created_at": _NUMBER_OR_NULL,
            "updated_at": _NUMBER_OR_NULL,
        },
        ["name", "quota", "stored", "usage", "created_at", "updated_at"],
    ),
    "TenantList": _object(
        {
            "default_quota": _ref("Quota"),
            "tenants": {"type": "array", "items": _ref("Tenant")},
        },
        ["default_quota", "tenants"],
    ),
    "NodeQuota": _object(dict(_NODE_PROPERTIES), list(_NODE_PROPERTIES)),
    "NodeQuotaChange": {
        **_object(dict(_NODE_PROPERTIES)),
        "description": "Any subset of the node's limits; the others keep their value.",
    },
    "NodeLimits": _object({"node": _ref("NodeQuota")}, ["node"]),
    "Session": _object(
        _SESSION_PROPERTIES
        | {"subscriptions": {"type": "integer", "description": "How many it has."}},
        list(_SESSION_PROPERTIES),
    ),
    "SessionDetail": _object(
        _SESSION_PROPERTIES
        | {
            "subscriptions": {"type": "array", "items": _ref("Subscription")},
            "peer": {
                "type": ["string", "null"],
                "description": "The client's address (host:port); null when offline.",
            },
            "stored_messages": {
                "type": "integer",
                "minimum": 0,
                "description": "Messages waiting in storage (persistent sessions only).",
            },
            "write_buffer_bytes": {
                "type": ["integer", "null"],
                "minimum": 0,
                "description": "Bytes waiting in the connection's write buffer; null when offline.",
            },
            "application": {
                "type": ["object", "null"],
                "description": "APPLICATION session with the Kafka log on: topic, "
                "committed_offset, end_offset, lag, unacked (offset, packet_id, kind), "
                "unacked_packet_ids, pack_offset, updated_at, connected, error.",
            },
        },
        [*_SESSION_PROPERTIES, "peer"],
    ),
    "SessionList": _object({"sessions": {"type": "array", "items": _ref("Session")}}, ["sessions"]),
    "Disconnected": _object(
        {"disconnected": {"type": "boolean", "description": "False: it was not connected."}},
        ["disconnected"],
    ),
    "Subscription": _object(
        {
            "client_id": {"type": "string"},
            "tenant": {"type": "string"},
            "topic_filter": {"type": "string"},
            "qos": {"type": "integer", "minimum": 0, "maximum": 2},
            "no_local": {"type": "boolean"},
            "retain_as_published": {"type": "boolean"},
            "retain_handling": {"type": "integer", "minimum": 0, "maximum": 2},
            "subscription_identifier": {"type": ["integer", "null"]},
        },
        [
            "client_id",
            "tenant",
            "topic_filter",
            "qos",
            "no_local",
            "retain_as_published",
            "retain_handling",
            "subscription_identifier",
        ],
    ),
    "SubscriptionList": _object(
        {"subscriptions": {"type": "array", "items": _ref("Subscription")}}, ["subscriptions"]
    ),
    "Retained": _object(
        {
            "tenant": {"type": "string"},
            "topic": {"type": "string"},
            "qos": {"type": "integer", "minimum": 0, "maximum": 2},
            "payload_size": {"type": "integer"},
            "payload": {"type": "string", "contentEncoding": "base64"},
            "created_at": _NUMBER_OR_NULL,
            "expires_at": _NUMBER_OR_NULL,
        },
        ["tenant", "topic", "qos", "payload_size", "payload", "created_at", "expires_at"],
    ),
    "RetainedList": _object(
        {"retained": {"type": "array", "items": _ref("Retained")}}, ["retained"]
    ),
    "Credential": _object(
        {
            "username": {"type": "string"},
            **_CREDENTIAL_FIELDS,
            "created_at": {"type": "number"},
            "updated_at": {"type": "number"},
        },
        [
            "username",
            "tenant",
            "client_type",
            "client_id_pattern",
            "publish_acl",
            "subscribe_acl",
            "acl_rules",
            "created_at",
            "updated_at",
        ],
    ),
    "CredentialList": _object(
        {"credentials": {"type": "array", "items": _ref("Credential")}}, ["credentials"]
    ),
    "CredentialCreate": _object(
        {"username": _USERNAME_SCHEMA, "password": _PASSWORD_SCHEMA, **_CREDENTIAL_FIELDS},
        ["username", "password"],
    ),
    "CredentialChange": {
        **_object({"password": _PASSWORD_SCHEMA, **_CREDENTIAL_FIELDS}),
        "description": "Any subset of the fields; a password is hashed again.",
    },
}

_RESPONSES: Final[JSON] = {
    "BadRequest": _json(_ref("Error"), "Invalid input; `field` names it (`body`: the body)."),
    "Unauthorized": {
        **_json(_ref("TokenError"), "Missing or wrong bearer token."),
        "headers": {"WWW-Authenticate": {"schema": {"type": "string", "const": "Bearer"}}},
    },
    "NotFound": _json(_ref("Error"), "No such item."),
    "Conflict": _json(_ref("Error"), "The username is taken."),
    "TooManyRequests": {
        **_json(_ref("Error"), "The route's request rate is exceeded; retry later."),
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait.",
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    },
    "StoreUnavailable": _json(_ref("ServerError"), "The credential store cannot be used."),
    "IntegrationsOff": _json(_ref("ServerError"), "The broker runs no integrations."),
}

_API = "/api/v1"
_INTEGRATION_NAME: Final = _path("name", "The integration's name.")
_INTEGRATIONS_OFF: Final = {"503": {"$ref": "#/components/responses/IntegrationsOff"}}

_PATHS: Final[JSON] = {
    "/health": {
        "get": _operation(
            "health",
            "Liveness: version, uptime and MQTT port (no token needed).",
            {"200": _json(_ref("Health"), "Serving.")},
            tag="service",
            public=True,
        )
    },
    "/openapi.json": {
        "get": _operation(
            "openapi",
            "This document (no token needed).",
            {"200": _json({"type": "object"}, "The OpenAPI 3.1 document.")},
            tag="service",
            public=True,
        )
    },
    "/metrics": {
        "get": _operation(
            "metrics",
            "Prometheus metrics (text format 0.0.4).",
            {
                "200": {
                    "description": "Metrics.",
                    "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
                }
            },
            tag="service",
        )
    },
    f"{_API}/cluster": {
        "get": _operation(
            "getCluster",
            "The nodes of the cluster from their heartbeats in Redis: clients, consumer "
            "lag, last heartbeat, state (503: Redis cannot be reached).",
            {"200": _json(_ref("Cluster"), "The nodes.")} | _errors(400, 503),
            tag="cluster",
        )
    },
    f"{_API}/sessions": {
        "get": _operation(
            "listSessions",
            "Sessions, online or not, ordered by client id.",
            {"200": _json(_ref("SessionList"), "Sessions.")} | _errors(400),
            tag="sessions",
            parameters=[
                _TENANT_QUERY,
                _query("prefix", "Only client ids starting with this.", {"type": "string"}),
                _LIMIT_QUERY,
            ],
        )
    },
    f"{_API}/sessions/{{client_id}}": {
        "get": _operation(
            "getSession",
            "One session with its subscriptions.",
            {"200": _json(_ref("SessionDetail"), "The session.")} | _errors(400, 404),
            tag="sessions",
            parameters=[_CLIENT_ID],
        ),
        "delete": _operation(
            "removeSession",
            "Disconnect the client if connected and delete its session and queue.",
            _NO_CONTENT | _errors(400, 404),
            tag="sessions",
            parameters=[_CLIENT_ID],
        ),
    },
    f"{_API}/sessions/{{client_id}}/disconnect": {
        "post": _operation(
            "disconnectSession",
            "Close the client's connection (5.0: DISCONNECT 0x98); the session stays.",
            {"200": _json(_ref("Disconnected"), "Whether a connection was closed.")}
            | _errors(400, 404),
            tag="sessions",
            parameters=[_CLIENT_ID],
        )
    },
    f"{_API}/subscriptions": {
        "get": _operation(
            "listSubscriptions",
            "Subscriptions of every session (or of one tenant or client), by client id.",
            {"200": _json(_ref("SubscriptionList"), "Subscriptions.")} | _errors(400),
            tag="sessions",
            parameters=[
                _TENANT_QUERY,
                _query("client_id", "Only this client's.", {"type": "string"}),
                _LIMIT_QUERY,
            ],
        )
    },
    f"{_API}/retained": {
        "get": _operation(
            "listRetained",
            "Retained messages, by tenant and topic.",
            {"200": _json(_ref("RetainedList"), "Retained messages.")} | _errors(400),
            tag="retained",
            parameters=[_TENANT_QUERY, _LIMIT_QUERY],
        ),
        "delete": _operation(
            "deleteRetained",
            "Remove the retained message of one topic.",
            _NO_CONTENT | _errors(400, 404),
            tag="retained",
            parameters=[
                _query(
                    "tenant",
                    "The tenant.",
                    {"type": "string", "pattern": TENANT_PATTERN, "default": "default"},
                ),
                _query("topic", "The topic name.", {"type": "string"}, required=True),
            ],
        ),
    },
    f"{_API}/tenants": {
        "get": _operation(
            "listTenants",
            "The default quota and every stored tenant, with usage on this node.",
            {"200": _json(_ref("TenantList"), "Tenants.")} | _errors(400),
            tag="tenants",
        )
    },
    f"{_API}/tenants/{{name}}": {
        "get": _operation(
            "getTenant",
            "One tenant (unstored ones: `default` or tenants in use on this node).",
            {"200": _json(_ref("Tenant"), "The tenant.")} | _errors(400, 404),
            tag="tenants",
            parameters=[_TENANT_NAME],
        ),
        "put": _operation(
            "putTenant",
            "Store and apply the tenant's quota at once (a subset of fields).",
            {"200": _json(_ref("Tenant"), "The tenant as stored.")} | _errors(400, 503),
            tag="tenants",
            parameters=[_TENANT_NAME],
            body=_ref("QuotaChange"),
        ),
        "delete": _operation(
            "deleteTenant",
            "Remove the tenant's row; its clients fall back to the default quota.",
            _NO_CONTENT | _errors(400, 404, 503),
            tag="tenants",
            parameters=[_TENANT_NAME],
        ),
    },
    f"{_API}/limits": {
        "get": _operation(
            "getLimits",
            "The node layer's limits and its TCP connection rate.",
            {"200": _json(_ref("NodeLimits"), "Node limits.")} | _errors(400),
            tag="limits",
        ),
        "put": _operation(
            "putLimits",
            "Apply new node limits at once (not written to broker.toml).",
            {"200": _json(_ref("NodeLimits"), "Node limits now.")} | _errors(400),
            tag="limits",
            body=_ref("NodeQuotaChange"),
        ),
    },
    f"{_API}/credentials": {
        "get": _operation(
            "listCredentials",
            "Credentials, ordered by username (never the password hash).",
            {"200": _json(_ref("CredentialList"), "Credentials.")} | _errors(400, 503),
            tag="credentials",
            parameters=[_TENANT_QUERY],
        ),
        "post": _operation(
            "addCredential",
            "Add a credential; the password is stored as a salted slow hash.",
            {"201": _json(_ref("Credential"), "The credential.")} | _errors(400, 409, 503),
            tag="credentials",
            body=_ref("CredentialCreate"),
        ),
    },
    f"{_API}/credentials/{{username}}": {
        "get": _operation(
            "getCredential",
            "One credential.",
            {"200": _json(_ref("Credential"), "The credential.")} | _errors(400, 404, 503),
            tag="credentials",
            parameters=[_USERNAME],
        ),
        "put": _operation(
            "putCredential",
            "Change some fields of a credential (password included).",
            {"200": _json(_ref("Credential"), "The credential.")} | _errors(400, 404, 503),
            tag="credentials",
            parameters=[_USERNAME],
            body=_ref("CredentialChange"),
        ),
        "delete": _operation(
            "deleteCredential",
            "Remove a credential.",
            _NO_CONTENT | _errors(400, 404, 503),
            tag="credentials",
            parameters=[_USERNAME],
        ),
    },
    f"{_API}/integrations": {
        "get": _operation(
            "listIntegrations",
            'Every integration (secrets as "***") with its state, counters and lag.',
            {"200": _json(_ref("IntegrationList"), "Integrations, by name.")}
            | _errors(400)
            | _INTEGRATIONS_OFF,
            tag="integrations",
        ),
        "post": _operation(
            "addIntegration",
            "Check, store and start an integration (400 names the key at fault).",
            {"201": _json(_ref("Integration"), "The integration.")}
            | _errors(400, 409)
            | _INTEGRATIONS_OFF,
            tag="integrations",
            body=_ref("IntegrationTable"),
        ),
    },
    f"{_API}/integrations/{{name}}": {
        "get": _operation(
            "getIntegration",
            "One integration.",
            {"200": _json(_ref("Integration"), "The integration.")}
            | _errors(400, 404)
            | _INTEGRATIONS_OFF,
            tag="integrations",
            parameters=[_INTEGRATION_NAME],
        ),
        "put": _operation(
            "putIntegration",
            "Replace some keys and restart the integration live; its backlog is kept.",
            {"200": _json(_ref("Integration"), "The integration.")}
            | _errors(400, 404)
            | _INTEGRATIONS_OFF,
            tag="integrations",
            parameters=[_INTEGRATION_NAME],
            body=_ref("IntegrationChange"),
        ),
        "delete": _operation(
            "deleteIntegration",
            "Stop the integration and delete it with its backlog.",
            _NO_CONTENT | _errors(400, 404) | _INTEGRATIONS_OFF,
            tag="integrations",
            parameters=[_INTEGRATION_NAME],
        ),
    },
    f"{_API}/integrations/{{name}}/pause": {
        "post": _operation(
            "pauseIntegration",
            "Send nothing after the batch in progress; the backlog keeps filling.",
            {"200": _json(_ref("Integration"), "The integration.")}
            | _errors(400, 404)
            | _INTEGRATIONS_OFF,
            tag="integrations",
            parameters=[_INTEGRATION_NAME],
        )
    },
    f"{_API}/integrations/{{name}}/resume": {
        "post": _operation(
            "resumeIntegration",
            "Deliver again, from the oldest message waiting.",
            {"200": _json(_ref("Integration"), "The integration.")}
            | _errors(400, 404)
            | _INTEGRATIONS_OFF,
            tag="integrations",
            parameters=[_INTEGRATION_NAME],
        )
    },
    f"{_API}/integrations/{{name}}/test": {
        "post": _operation(
            "testIntegration",
            "Send one sample message through a fresh sink and answer what the sink said "
            "(400: the sink did not accept it, with its reason, naming the key that says "
            "where the sink is, e.g. integration.url).",
            {"200": _json(_ref("IntegrationTestAnswer"), "The sink accepted the sample.")}
            | _errors(400, 404)
            | _INTEGRATIONS_OFF,
            tag="integrations",
            parameters=[_INTEGRATION_NAME],
        )
    },
}

_DOCUMENT: Final[JSON] = {
    "openapi": OPENAPI_VERSION,
    "info": {
        "title": "mqttq admin API",
        "version": __version__,
        "description": "Health, metrics, sessions, retained messages, tenants and their "
        "quotas, node limits, credentials and integrations of one mqttq broker. Errors are "
        '{"error": ..., "field": ...}.',
    },
    "servers": [{"url": "/"}],
    "security": [{"bearerAuth": []}],
    "tags": [
        {"name": name}
        for name in (
            "service",
            "cluster",
            "sessions",
            "retained",
            "tenants",
            "limits",
            "credentials",
            "integrations",
        )
    ],
    "paths": _PATHS,
    "components": {
        "schemas": _SCHEMAS | INTEGRATION_SCHEMAS,
        "responses": _RESPONSES,
        "securitySchemes": {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": "admin.token, or the generated <data_dir>/admin-token.",
            }
        },
    },
}


def openapi_document() -> JSON:
    """The document (a fresh copy the caller may change)."""
    return copy.deepcopy(_DOCUMENT)
