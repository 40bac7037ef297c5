"""Parsing and validating admin API input: JSON bodies, query strings, names and
credential fields. Everything a request carries is checked here before any handler calls
the backend, so a request with one bad field changes nothing. A problem raises ApiError
(400 unless said otherwise) naming the field: `body` when the body as a whole is wrong.
Quota bodies are checked by `Quota.from_mapping`, whose QuotaError names the field too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn

from mqttq.auth.model import ClientType
from mqttq.auth.rules import AclRule, parse_rule
from mqttq.errors import MqttqError, ProtocolError
from mqttq.routing.topics import validate_topic_filter, validate_topic_name

if TYPE_CHECKING:  # aiohttp only for annotations: the route table (and the CLI) import this
    from aiohttp import web

__all__ = [
    "CREDENTIAL_CREATE_FIELDS",
    "CREDENTIAL_UPDATE_FIELDS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_RATE",
    "MAX_TENANT_LENGTH",
    "MAX_USERNAME_LENGTH",
    "SESSION_STATES",
    "TENANT_PATTERN",
    "ApiError",
    "limit_value",
    "parse_credential_changes",
    "parse_limit",
    "parse_new_credential",
    "parse_rate",
    "read_object",
    "scram_for_write",
    "scram_request",
    "session_state",
    "tenant_name",
    "topic_name",
]

DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 10_000
MAX_USERNAME_LENGTH: Final = 256
SESSION_STATES: Final = ("connected", "offline")
MAX_RATE: Final = 2**62
"""The largest rate (per second) a body may set, as for quota fields."""
MAX_TENANT_LENGTH: Final = 128
TENANT_PATTERN: Final = "^[A-Za-z0-9_.-]+$"
_TENANT_RE: Final = re.compile(r"[A-Za-z0-9_.-]+")

CREDENTIAL_UPDATE_FIELDS: Final = (
    "password",
    "tenant",
    "client_type",
    "client_id_pattern",
    "publish_acl",
    "subscribe_acl",
    "acl_rules",
    "scram",
)
CREDENTIAL_CREATE_FIELDS: Final = ("username", *CREDENTIAL_UPDATE_FIELDS, "x509_cn")


class ApiError(MqttqError):
    """An answer other than success: `status`, a message, the offending `field` (a body
    field, a parameter, a header such as `Authorization`, or `body`) and extra response
    headers."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = dict(headers or {})


def _bad(field: str, message: str) -> NoReturn:
    raise ApiError(400, message, field)


# --- bodies ----------------------------------------------------------------------------


async def read_object(request: web.Request) -> dict[str, Any]:
    """The request's body as a JSON object. Refused (400): a Content-Type other than
    application/json (field `Content-Type`), bytes that are not UTF-8 JSON (NaN and
    Infinity included: they are not JSON) or a value that is not an object (field
    `body`)."""
    if request.content_type != "application/json":
        _bad(
            "Content-Type",
            f"Content-Type must be application/json, got {request.content_type!r}",
        )
    raw = await request.read()
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        _bad("body", f"body is not valid JSON: {exc}")
    if not isinstance(value, dict):
        _bad("body", f"body must be a JSON object, got {_kind(value)}")
    return value


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _only(body: Mapping[str, Any], allowed: Collection[str]) -> None:
    for key in body:
        if key not in allowed:
            _bad(key, f"unknown field; known fields: {', '.join(allowed)}")


# --- query strings (which parameters a route takes: mqttq.admin.api_table) ---------------


def parse_limit(params: Mapping[str, Any]) -> int:
    """The `limit` parameter: an integer 1..10000, 100 when absent."""
    raw = params.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    if isinstance(raw, int):  # already parsed by the route table
        return raw
    return limit_value(raw)


def limit_value(raw: str) -> int:
    """A `limit` query value: an integer 1..10000."""
    # The length bound keeps int() away from huge digit strings (it refuses > 4300 digits).
    if len(raw) > 10 or not raw.isascii() or not raw.isdigit():
        _bad("limit", f"must be an integer from 1 to {MAX_LIMIT}, got {raw!r}")
    limit = int(raw)
    if not 1 <= limit <= MAX_LIMIT:
        _bad("limit", f"must be an integer from 1 to {MAX_LIMIT}, got {limit}")
    return limit


def session_state(raw: str) -> str:
    """A `state` query value of the session list: `connected` or `offline`."""
    if raw not in SESSION_STATES:
        _bad("state", f"must be one of {', '.join(SESSION_STATES)}, got {raw!r}")
    return raw


def topic_name(value: str, field: str = "topic") -> str:
    """`value` when it is a valid MQTT topic name (no wildcards)."""
    try:
        validate_topic_name(value)
    except ProtocolError as exc:
        _bad(field, f"not a valid topic name: {exc.message}")
    return value


# --- numbers ---------------------------------------------------------------------------


def parse_rate(field: str, value: Any) -> float:
    """`value` when it is a rate per second: a JSON number from 0 to MAX_RATE (0 refuses
    everything), as the quota's rate fields are checked."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _bad(field, f"must be a number, got {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        _bad(field, f"must be a finite number, got {value!r}")
    if value < 0:
        _bad(field, f"must be 0 or more, got {value!r}")
    if value > MAX_RATE:
        _bad(field, f"must be at most {MAX_RATE}, got {value!r}")
    return float(value)


# --- names -----------------------------------------------------------------------------


def tenant_name(value: Any, field: str = "tenant") -> str:
    """`value` when it is a tenant name: 1..128 characters of A-Z a-z 0-9 _ . -"""
    if not isinstance(value, str):
        _bad(field, f"must be a string, got {_kind(value)}")
    if not value or len(value) > MAX_TENANT_LENGTH or _TENANT_RE.fullmatch(value) is None:
        _bad(field, f"must be 1 to {MAX_TENANT_LENGTH} characters of A-Z a-z 0-9 _ . -")
    return value


def _username(value: Any) -> str:
    if not isinstance(value, str):
        _bad("username", f"must be a string, got {_kind(value)}")
    if not value or len(value) > MAX_USERNAME_LENGTH:
        _bad("username", f"must be 1 to {MAX_USERNAME_LENGTH} characters")
    if any(char.isspace() for char in value):
        _bad("username", "must not contain whitespace")
    return _text("username", value)


def _password(value: Any) -> str:
    if not isinstance(value, str) or not value:
        _bad("password", "must be a non-empty string")
    return _text("password", value)


def _text(field: str, value: str) -> str:
    """`value` when it can be stored as UTF-8 (JSON lets lone surrogates through)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _bad(field, "must be valid Unicode text (no lone surrogates)")
    return value


# --- credentials -----------------------------------------------------------------------


def parse_new_credential(body: Mapping[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """A POST /credentials body as (username, password, other Credential fields given).
    username is required, and a password unless `x509_cn` is given: an x509 credential
    (clients whose certificate CN matches that regular expression) has no password, and
    its `password_hash` comes among the fields. `scram` is read by `scram_request`."""
    _only(body, CREDENTIAL_CREATE_FIELDS)
    if "username" not in body:
        _bad("username", "required")
    username = _username(body["username"])
    x509_hash: str | None = None
    password: str | None = None
    if "x509_cn" in body:
        if "password" in body:
            _bad("password", "an x509 credential has no password; leave it out")
        if body.get("scram") is True:
            _bad("scram", "an x509 credential has no password to make SCRAM secrets from")
        x509_hash = _x509_hash(body["x509_cn"])
    elif "password" not in body:
        _bad("password", "required")
    else:
        password = _password(body["password"])
    rest = {
        key: value for key, value in body.items() if key not in ("username", "password", "x509_cn")
    }
    _, changes = parse_credential_changes(rest)
    if x509_hash is not None:
        changes["password_hash"] = x509_hash
    return username, password, changes


def _x509_hash(value: Any) -> str:
    if not isinstance(value, str) or not value:
        _bad("x509_cn", "must be a non-empty regular expression over the certificate's CN")
    from mqttq.auth.providers.x509 import x509_hash  # noqa: PLC0415 (only x509 credentials)

    try:
        return x509_hash(_text("x509_cn", value))
    except ValueError as exc:
        _bad("x509_cn", str(exc))


def scram_request(body: Mapping[str, Any]) -> bool | None:
    """The body's `scram` field: True makes SCRAM secrets from the password given with it,
    False removes the credential's, absent (None) keeps them (made again for a new
    password)."""
    if "scram" not in body:
        return None
    value = body["scram"]
    if not isinstance(value, bool):
        _bad("scram", f"must be true or false, got {_kind(value)}")
    return value


def scram_for_write(
    requested: bool | None, password: str | None, password_hash: str, existing: tuple[Any, ...]
) -> tuple[Any, ...] | None:
    """The SCRAM secrets a credential write stores (None: leave them as they are), from
    mqttq.auth.scram.secrets_for_write; slow (salted, iterated): call it off the event
    loop. A refusal names `scram`."""
    from mqttq.auth.scram import ScramError, secrets_for_write  # noqa: PLC0415

    try:
        return secrets_for_write(requested, password, password_hash, existing)
    except ScramError as exc:
        _bad("scram", str(exc))


def parse_credential_changes(body: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A PUT /credentials/{username} body as (new password or None, Credential fields to
    change, typed as the Credential holds them)."""
    _only(body, CREDENTIAL_UPDATE_FIELDS)
    scram_request(body)  # checked here, applied by the caller
    password: str | None = None
    changes: dict[str, Any] = {}
    if "password" in body:
        password = _password(body["password"])
    if "tenant" in body:
        changes["tenant"] = tenant_name(body["tenant"])
    if "client_type" in body:
        kind = body["client_type"]
        choices = [member.value for member in ClientType]
        if not isinstance(kind, str) or kind not in choices:
            _bad("client_type", f"must be one of {', '.join(choices)}, got {kind!r}")
        changes["client_type"] = ClientType(kind)
    if "client_id_pattern" in body:
        pattern = body["client_id_pattern"]
        if pattern is not None and (not isinstance(pattern, str) or not pattern):
            _bad("client_id_pattern", "must be a non-empty string, or null for any client id")
        changes["client_id_pattern"] = (
            None if pattern is None else _text("client_id_pattern", pattern)
        )
    for field in ("publish_acl", "subscribe_acl"):
        if field in body:
            changes[field] = _acl(field, body[field])
    if "acl_rules" in body:
        changes["acl_rules"] = _rules(body["acl_rules"])
    return password, changes


def _rules(value: Any) -> tuple[AclRule, ...]:
    if not isinstance(value, list):
        _bad("acl_rules", f"must be a list of rule objects, got {_kind(value)}")
    rules = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            _bad("acl_rules", f"item {index} must be an object, got {_kind(item)}")
        try:
            rules.append(parse_rule(item))
        except ValueError as exc:
            _bad("acl_rules", f"item {index}: {exc}")
    return tuple(rules)


def _acl(field: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        _bad(field, f"must be a list of MQTT topic filters, got {_kind(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            _bad(field, f"item {index} must be a string, got {_kind(item)}")
        try:
            validate_topic_filter(item)
        except ProtocolError as exc:
            _bad(field, f"item {index} ({item!r}) is not a valid topic filter: {exc.message}")
    return tuple(value)


def _kind(value: Any) -> str:
    """The JSON type name of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
