"""The OpenAPI 3.1 document of the admin API, as data (served at /openapi.json).

Its paths are made from the route table (mqttq.admin.api_table), as the server's routes
are: parameters, request bodies, answers and roles come from there; this module holds
the schemas the answers and bodies name.
The answers' schemas are closed (additionalProperties false) and list every field the
broker sends, so the conformance checks in tests/admin fail when a new field is not
documented here.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from mqttq import __version__
from mqttq.admin.api_table import ADMIN, PUBLIC, ROUTES, Route, answer, errors, ref
from mqttq.admin.openapi_integrations import INTEGRATION_SCHEMAS
from mqttq.admin.routes_tenants import TCP_RATE_FIELD
from mqttq.admin.validation import (
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


_ref = ref
_errors = errors
_json = answer


def _operation(route: Route) -> JSON:
    """One route's operation; every protected one may also answer 401, every admin one
    403, and all 429."""
    answers = dict(route.responses)
    public = route.role == PUBLIC
    if not public:
        answers.update(_errors(401))
    if route.role == ADMIN:
        answers.update(_errors(403))
    answers.update(_errors(429))
    operation: JSON = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
    }
    if route.params:
        operation["parameters"] = [param.openapi() for param in route.params]
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
    operation["responses"] = answers
    if public:
        operation["security"] = []
    return operation


def _paths(routes: tuple[Route, ...]) -> JSON:
    paths: JSON = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return paths


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
    "scram": {
        "type": "boolean",
        "writeOnly": True,
        "description": "true: also store SCRAM-SHA-256 and SCRAM-SHA-512 secrets made from "
        "the password given with it (MQTT 5 enhanced authentication); false: remove them. "
        "Left out, a new password renews the ones the credential has.",
    },
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
    "username": {
        "type": ["string", "null"],
        "description": "The username the connected client authenticated with; null offline "
        "or anonymous.",
    },
    "address": {
        "type": ["string", "null"],
        "description": "The connected client's address (host:port); null offline.",
    },
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
            "keep_alive": {
                "type": ["integer", "null"],
                "minimum": 0,
                "description": "The Keep Alive in force, in seconds (0: none); null offline.",
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
        [*_SESSION_PROPERTIES, "peer", "keep_alive", "write_buffer_bytes"],
    ),
    "SessionList": _object(
        {
            "items": {"type": "array", "items": _ref("Session")},
            "sessions": {
                "type": "array",
                "items": _ref("Session"),
                "description": "The same as `items` (the name before paging).",
            },
            "next_cursor": {
                "type": ["string", "null"],
                "description": "The `cursor` of the next page; null: this is the last.",
            },
            "total": {"type": "integer", "minimum": 0, "description": "Sessions that match."},
        },
        ["items", "sessions", "next_cursor", "total"],
    ),
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
            "payload_text": {
                "type": ["string", "null"],
                "description": "The payload as text when it is UTF-8; else null.",
            },
            "created_at": _NUMBER_OR_NULL,
            "expires_at": _NUMBER_OR_NULL,
        },
        [
            "tenant",
            "topic",
            "qos",
            "payload_size",
            "payload",
            "payload_text",
            "created_at",
            "expires_at",
        ],
    ),
    "RetainedList": _object(
        {"retained": {"type": "array", "items": _ref("Retained")}}, ["retained"]
    ),
    "Listener": _object(
        {
            "name": {"type": "string", "enum": ["tcp", "tls", "ws", "wss"]},
            "port": {"type": "integer"},
            "connections": {"type": "integer", "minimum": 0},
        },
        ["name", "port", "connections"],
    ),
    "Node": _object(
        {
            "version": {"type": "string"},
            "uptime_seconds": {"type": "number"},
            "started_at": {"type": "number", "description": "Seconds since the epoch."},
            "mode": {"type": "string", "enum": ["embedded", "distributed"]},
            "node_id": {"type": "string"},
            "listeners": {"type": "array", "items": _ref("Listener")},
            "limits": _object(
                {
                    "node": _ref("Quota"),
                    "max_tcp_connection_rate": {"type": "number", "minimum": 0},
                    "usage": _ref("Usage"),
                },
                ["node", "max_tcp_connection_rate", "usage"],
            ),
            "default_quota": _ref("Quota"),
            "tenants": {
                "type": "array",
                "items": _ref("Tenant"),
                "description": "Stored tenants and those in use on this node, by name.",
            },
        },
        [
            "version",
            "uptime_seconds",
            "started_at",
            "mode",
            "node_id",
            "listeners",
            "limits",
            "default_quota",
            "tenants",
        ],
    ),
    "Kafka": _object(
        {
            "distributed": {"type": "boolean", "description": "False: embedded, no Kafka."},
            "topic_prefix": {"type": ["string", "null"]},
            "topics": {
                "type": "array",
                "items": _object(
                    {
                        "name": {"type": "string"},
                        "partitions": {"type": "integer", "minimum": 0},
                        "end_offset": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "The end offsets of its partitions, summed.",
                        },
                    },
                    ["name", "partitions", "end_offset"],
                ),
            },
            "consumer_groups": {
                "type": "array",
                "items": _object(
                    {
                        "group": {"type": "string"},
                        "state": {"type": "string"},
                        "members": {"type": "integer", "minimum": 0},
                        "partitions": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Partitions it has committed offsets on.",
                        },
                        "lag": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Records not consumed yet, over those partitions.",
                        },
                    },
                    ["group", "state", "members", "partitions", "lag"],
                ),
            },
        },
        ["distributed", "topic_prefix", "topics", "consumer_groups"],
    ),
    "Credential": _object(
        {
            "username": {"type": "string"},
            **_CREDENTIAL_FIELDS,
            "scram": {
                "type": "array",
                "items": {"type": "string", "enum": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
                "description": "The SCRAM mechanisms the credential authenticates with "
                "(MQTT 5 enhanced authentication); empty without --scram.",
            },
            "x509_cn": {
                "type": ["string", "null"],
                "description": "An x509 credential's CN pattern; null for a password one.",
            },
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
            "scram",
            "x509_cn",
            "created_at",
            "updated_at",
        ],
    ),
    "CredentialList": _object(
        {"credentials": {"type": "array", "items": _ref("Credential")}}, ["credentials"]
    ),
    "CredentialCreate": {
        **_object(
            {
                "username": _USERNAME_SCHEMA,
                "password": _PASSWORD_SCHEMA,
                **_CREDENTIAL_FIELDS,
                "x509_cn": {
                    "type": "string",
                    "minLength": 1,
                    "description": "An x509 credential instead of a password one: clients "
                    "whose certificate CN (or its [auth.x509] cn_regex group) fully matches "
                    "this regular expression. No password then.",
                },
            },
            ["username"],
        ),
        "description": "A password is required unless `x509_cn` is given.",
    },
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
    "Forbidden": _json(
        _ref("Error"),
        "The caller's role may not do this (a viewer asking "
        "for a change); `field` is `Authorization`.",
    ),
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

_PATHS: Final[JSON] = _paths(ROUTES)
_ROUTE_SCHEMAS: Final[JSON] = {
    name: schema for route in ROUTES for name, schema in route.schemas.items()
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
            "blocked",
            "dashboard",
        )
    ],
    "paths": _PATHS,
    "components": {
        "schemas": _SCHEMAS | INTEGRATION_SCHEMAS | _ROUTE_SCHEMAS,
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
