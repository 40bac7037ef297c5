"""The OpenAPI schemas of the blocked-clients routes (mqttq.admin.routes_blocked): an
entry, the body that adds one, the list, and the failed-connections log."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["BLOCKED_SCHEMAS"]

_TIME: Final = {"type": "number", "description": "Seconds since the epoch."}
_ENTRY: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "kind", "value", "match_on", "reason", "created_at", "expires_at"],
    "properties": {
        "id": {"type": "string", "description": "12 hex digits, derived from the selector."},
        "kind": {"type": "string", "enum": ["client_id", "username", "address", "regex"]},
        "value": {
            "type": "string",
            "description": "The client id, user name, network (canonical CIDR) or pattern.",
        },
        "match_on": {
            "type": ["string", "null"],
            "enum": ["client_id", "username", None],
            "description": "What a regex is matched against (re.fullmatch); null otherwise.",
        },
        "reason": {"type": "string"},
        "created_at": _TIME,
        "expires_at": {"type": ["number", "null"], "description": "Null: never expires."},
    },
}
_NEW_ENTRY: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Exactly one of client_id, username, address, regex.",
    "properties": {
        "client_id": {"type": "string"},
        "username": {"type": "string"},
        "address": {"type": "string", "description": "An IP address or CIDR network."},
        "regex": {"type": "string"},
        "match_on": {"type": "string", "enum": ["client_id", "username"]},
        "reason": {"type": "string"},
        "expires_in": {
            "type": ["number", "string"],
            "description": 'Seconds, or a duration such as "90s", "30m", "1h", "7d", "1h30m".',
        },
    },
}
_FAILED: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "client_id",
        "address",
        "username",
        "listener",
        "protocol_level",
        "reason",
        "reason_code",
        "message",
        "at",
    ],
    "properties": {
        "client_id": {"type": "string"},
        "address": {"type": "string"},
        "username": {"type": ["string", "null"]},
        "listener": {"type": "string"},
        "protocol_level": {"type": "integer"},
        "reason": {"type": "string", "description": "bad_credentials, blocked, ..."},
        "reason_code": {"type": "integer", "description": "The CONNACK's reason code."},
        "message": {"type": "string"},
        "at": _TIME,
    },
}

BLOCKED_SCHEMAS: Final[dict[str, Any]] = {
    "BlockedEntry": _ENTRY,
    "BlockedEntryNew": _NEW_ENTRY,
    "BlockedList": {
        "type": "object",
        "additionalProperties": False,
        "required": ["blocked"],
        "properties": {
            "blocked": {"type": "array", "items": {"$ref": "#/components/schemas/BlockedEntry"}}
        },
    },
    "FailedConnectionList": {
        "type": "object",
        "additionalProperties": False,
        "required": ["failed_connections", "total", "kept"],
        "properties": {
            "failed_connections": {"type": "array", "items": _FAILED},
            "total": {"type": "integer", "description": "Refused since the broker started."},
            "kept": {"type": "integer", "description": "How many are kept at most."},
        },
    },
}
