"""The integration schemas of the OpenAPI document (mqttq.admin.openapi merges them).

An integration's object depends on its `type`: the keys every integration has, then its
sink's own keys (those of `SINK_TYPES[type].settings_class().KEYS`, listed here by hand so
that building the document never imports a sink and its client library;
tests/admin/test_admin_integrations.py checks the lists against the sinks). Each type's
schema is closed, as every other answer of the API, and `Integration` is one of them.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["INTEGRATION_SCHEMAS", "SINK_PROPERTIES", "STATUS_PROPERTIES"]

JSON = dict[str, Any]

_STRING: Final = {"type": "string"}
_STRING_OR_NULL: Final = {"type": ["string", "null"]}
_INTEGER: Final = {"type": "integer", "minimum": 0}
_BOOLEAN: Final = {"type": "boolean"}
_SECRET: Final = {"type": ["string", "null"], "description": 'Shown as "***".'}

COMMON_PROPERTIES: Final[JSON] = {
    "name": {"type": "string", "pattern": "^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"},
    "type": {"type": "string", "enum": ["http", "kafka", "postgres", "mqtt", "lake"]},
    "tenant": _STRING,
    "filters": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "description": "MQTT topic filters (+ and #; no $share).",
    },
    "payload_filter": {"type": "string", "description": "A predicate on the JSON payload."},
    "enabled": _BOOLEAN,
    "batch_size": {"type": "integer", "minimum": 1},
    "linger_ms": _INTEGER,
    "retry_initial_ms": {"type": "integer", "minimum": 1},
    "retry_max_ms": {"type": "integer", "minimum": 1},
    "max_in_flight": {"type": "integer", "minimum": 1},
    "max_backlog_mb": {
        "type": "integer",
        "minimum": 1,
        "description": "The backlog on disk at most, in MiB; past it messages drop (counted).",
    },
    "events": {
        "type": "array",
        "items": {
            "type": "string",
            "enum": [
                "connected",
                "disconnected",
                "subscribed",
                "unsubscribed",
                "session_expired",
                "message_dropped",
            ],
        },
    },
}
"""The keys every integration has (mqttq.integrations.spec.COMMON_KEYS)."""

STATUS_PROPERTIES: Final[JSON] = {
    "origin": {
        "type": "string",
        "enum": ["config", "api"],
        "description": "Where it was defined: a [[integration]] table of the config file, "
        "or the admin API / CLI.",
    },
    "state": {
        "type": "string",
        "enum": ["starting", "running", "retrying", "paused", "failed", "disabled", "stopped"],
        "description": "retrying: the sink is unavailable; failed: the sink cannot work as "
        "configured (see last_error).",
    },
    "delivered": {"type": "integer", "minimum": 0, "description": "Accepted by the sink."},
    "failed": {"type": "integer", "minimum": 0, "description": "Batches not taken (retried)."},
    "retried": {"type": "integer", "minimum": 0, "description": "Deliveries sent again."},
    "dead_lettered": {
        "type": "integer",
        "minimum": 0,
        "description": "Refused for good by the sink, sent to the dead-letter place.",
    },
    "dropped": {
        "type": "integer",
        "minimum": 0,
        "description": "Left the backlog undelivered: expired, or pushed out by a full backlog.",
    },
    "lag": {
        "type": "integer",
        "minimum": 0,
        "description": "Deliveries waiting (embedded: in memory and on disk).",
    },
    "last_error": _STRING_OR_NULL,
    "last_error_at": {"type": ["number", "null"], "description": "Seconds since the epoch."},
}
"""What an integration did, beside its spec (IntegrationManager.status)."""

SINK_PROPERTIES: Final[dict[str, JSON]] = {
    "lake": {
        "path": {"type": "string", "description": "The lake's directory (docs/lake.md)."},
        "hourly": _BOOLEAN,
        "roll_seconds": {"type": "integer", "minimum": 1, "maximum": 86400},
        "roll_rows": {"type": "integer", "minimum": 1},
        "roll_bytes": {"type": "integer", "minimum": 1024},
    },
    "http": {
        "url": {"type": "string", "description": 'http(s) URL; a password in it is "***".'},
        "method": {"type": "string", "enum": ["POST", "PUT"]},
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": 'Sensitive values (Authorization, tokens, keys) are "***".',
        },
        "body": {"type": "string", "enum": ["envelope", "array", "raw"]},
        "payload_encoding": {"type": "string", "enum": ["auto", "base64"]},
        "timeout_ms": {"type": "integer", "minimum": 1},
        "ca_file": _STRING_OR_NULL,
        "tls_verify": _BOOLEAN,
        "max_connections": {"type": "integer", "minimum": 1},
    },
    "kafka": {
        "bootstrap_servers": _STRING,
        "topic": {"type": "string", "description": "A template: iot.{tenant}.{topic_level_1}"},
        "key": _STRING,
        "value": {"type": "string", "enum": ["envelope", "raw"]},
        "payload_encoding": {"type": "string", "enum": ["auto", "base64"]},
        "headers": {"type": "boolean", "description": "MQTT properties as record headers."},
        "security_protocol": _STRING,
        "sasl_mechanism": _STRING_OR_NULL,
        "sasl_username": _STRING_OR_NULL,
        "sasl_password": _SECRET,
        "ssl_ca_location": _STRING_OR_NULL,
        "ssl_certificate_location": _STRING_OR_NULL,
        "ssl_key_location": _STRING_OR_NULL,
        "ssl_key_password": _SECRET,
        "acks": {"type": "string", "enum": ["all", "1", "0"]},
        "compression": _STRING,
        "timeout_ms": {"type": "integer", "minimum": 1},
        "max_message_bytes": {"type": "integer", "minimum": 1},
        "auto_create_topics": _BOOLEAN,
    },
    "postgres": {
        "url": {"type": "string", "description": 'postgresql:// URL; its password is "***".'},
        "table": _STRING,
        "columns": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Column name -> source (topic, client_id, payload, $.field, ...).",
        },
        "create_table": _BOOLEAN,
        "insert": _STRING,
        "on_conflict": _STRING,
        "timeout_ms": {"type": "integer", "minimum": 1},
    },
    "mqtt": {
        "host": _STRING,
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "direction": {"type": "string", "enum": ["out", "in"]},
        "remote_filters": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "topic_prefix": _STRING,
        "topic_rewrite": {
            "type": "object",
            "properties": {"from": _STRING, "to": _STRING},
            "additionalProperties": False,
        },
        "qos": {"type": "integer", "minimum": 0, "maximum": 2},
        "keep_alive": _INTEGER,
        "client_id": _STRING,
        "username": _STRING_OR_NULL,
        "password": _SECRET,
        "tls": _BOOLEAN,
        "ca_file": _STRING_OR_NULL,
        "cert_file": _STRING_OR_NULL,
        "key_file": _STRING_OR_NULL,
        "tls_verify": _BOOLEAN,
        "protocol_version": {"type": "integer", "enum": [4, 5]},
        "session_expiry_interval": _INTEGER,
        "max_inflight_messages": {"type": "integer", "minimum": 1},
    },
}
"""Each sink type's own keys (its settings class's KEYS), as given and as shown."""

_REQUIRED_STATUS: Final = [
    "name",
    "type",
    "tenant",
    "filters",
    "enabled",
    "origin",
    "state",
    "delivered",
    "failed",
    "retried",
    "dead_lettered",
    "dropped",
    "lag",
    "last_error",
    "last_error_at",
]


def _closed(properties: JSON, required: list[str], description: str) -> JSON:
    schema: JSON = {
        "type": "object",
        "description": description,
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _title(kind: str) -> str:
    return kind.capitalize()


def _status(kind: str) -> JSON:
    properties = {
        **COMMON_PROPERTIES,
        "type": {"type": "string", "const": kind},
        **SINK_PROPERTIES[kind],
        **STATUS_PROPERTIES,
    }
    return _closed(properties, _REQUIRED_STATUS, f"A {kind} integration and what it did.")


def _table(kind: str) -> JSON:
    properties = {
        **COMMON_PROPERTIES,
        "type": {"type": "string", "const": kind},
        **SINK_PROPERTIES[kind],
    }
    return _closed(properties, ["name", "type"], f"A {kind} integration's table.")


def _every_sink_key() -> JSON:
    merged: JSON = {}
    for properties in SINK_PROPERTIES.values():
        for key, schema in properties.items():
            if key in merged and merged[key] != schema:
                merged[key] = {"description": "Depends on the integration's type."}
            else:
                merged[key] = schema
    return merged


def _one_of(prefix: str) -> list[JSON]:
    return [{"$ref": f"#/components/schemas/{prefix}{_title(kind)}"} for kind in SINK_PROPERTIES]


INTEGRATION_SCHEMAS: Final[JSON] = {
    **{f"Integration{_title(kind)}": _status(kind) for kind in SINK_PROPERTIES},
    "Integration": {
        "description": 'An integration (its spec, secrets as "***") and what it did.',
        "oneOf": _one_of("Integration"),
    },
    "IntegrationList": {"type": "array", "items": {"$ref": "#/components/schemas/Integration"}},
    **{f"IntegrationTable{_title(kind)}": _table(kind) for kind in SINK_PROPERTIES},
    "IntegrationTable": {
        "description": "An [[integration]] table of broker.toml, as JSON; string values "
        "may hold ${NAME} references to environment variables (kept as written).",
        "oneOf": _one_of("IntegrationTable"),
    },
    "IntegrationChange": _closed(
        {**COMMON_PROPERTIES, **_every_sink_key()},
        [],
        'The keys to replace; "***" keeps the stored secret (in headers too), null '
        "removes a key; name cannot change.",
    ),
    "IntegrationTestAnswer": _closed(
        {"answer": {"type": "string", "description": "What the sink answered, one line."}},
        ["answer"],
        "The sample message was accepted.",
    ),
}
