"""Rows <-> model for both AuthStore adapters (SQLite and PostgreSQL).

Both adapters use the same two tables with the same columns, in this order:
`mqtt_client_credentials(username, password_hash, tenant, client_type, client_id_pattern,
publish_acl, subscribe_acl, acl_rules, created_at, updated_at, scram)` and
`mqtt_tenants(name, <the five Quota fields>, created_at, updated_at)`. Timestamps are
seconds since the epoch (floats), owned by the store: `created_at` is set by the first write
of a row and kept by every later one, `updated_at` is set by each write. ACLs are SQLite
JSON arrays and PostgreSQL text[]; `decode_acl` reads both; `acl_rules` is a JSON array of
{permission, action, topic} objects (text) in both; `scram` is a JSON array of
`mqttq.auth.scram.secret_to_text` strings (text, '[]' for none). A row that cannot be a
Credential or a Tenant (edited by hand) raises AuthStoreError naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from mqttq.auth.model import ClientType, Credential, Tenant
from mqttq.auth.ports import AuthStoreError
from mqttq.auth.rules import AclRule, parse_rule, rule_dict
from mqttq.auth.scram import ScramError, ScramSecret, secret_from_text, secret_to_text
from mqttq.limits.quota import QUOTA_FIELDS, Quota, QuotaError

__all__ = [
    "CREDENTIALS_TABLE",
    "CREDENTIAL_COLUMNS",
    "NOT_UTF8",
    "TENANTS_TABLE",
    "TENANT_COLUMNS",
    "credential_from_row",
    "credential_row",
    "decode_acl",
    "decode_rules",
    "decode_scram",
    "one_line",
    "rules_json",
    "tenant_from_row",
    "tenant_row",
    "upsert_sql",
]

CREDENTIALS_TABLE: Final = "mqtt_client_credentials"
TENANTS_TABLE: Final = "mqtt_tenants"
CREDENTIAL_COLUMNS: Final = (
    "username",
    "password_hash",
    "tenant",
    "client_type",
    "client_id_pattern",
    "publish_acl",
    "subscribe_acl",
    "acl_rules",
    "created_at",
    "updated_at",
    "scram",
)
TENANT_COLUMNS: Final = ("name", *QUOTA_FIELDS, "created_at", "updated_at")
NOT_UTF8: Final = "a value is not valid UTF-8 (it holds a lone surrogate); nothing was written"


def one_line(exc: BaseException) -> str:
    """`exc`'s message on one line (driver messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def upsert_sql(table: str, columns: Sequence[str], marker: str) -> str:
    """INSERT of every column (the first is the key) that, on a conflict, replaces every
    column but the key and `created_at`. `marker` is the driver's placeholder."""
    key = columns[0]
    values = ", ".join([marker] * len(columns))
    updates = ", ".join(
        f"{column} = excluded.{column}" for column in columns[1:] if column != "created_at"
    )
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values}) "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


def credential_row(
    credential: Credential, now: float, acl: Callable[[tuple[str, ...]], Any]
) -> tuple[Any, ...]:
    """The row of `credential` written at `now` (both timestamps; an update keeps the
    stored created_at). `acl` turns an ACL into the driver's value."""
    return (
        credential.username,
        credential.password_hash,
        credential.tenant,
        credential.client_type.value,
        credential.client_id_pattern,
        acl(credential.publish_acl),
        acl(credential.subscribe_acl),
        rules_json(credential.acl_rules),
        now,
        now,
        json.dumps([secret_to_text(secret) for secret in credential.scram]),
    )


def decode_scram(value: object, username: str) -> tuple[ScramSecret, ...]:
    """A `scram` column: a JSON array of stored SCRAM secrets."""
    try:
        items = json.loads(value) if isinstance(value, str) else None
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ScramError("not a list of strings")
        return tuple(secret_from_text(item) for item in items)
    except (ValueError, ScramError) as exc:
        raise AuthStoreError(
            f"credential {username!r}: stored SCRAM secrets are invalid: {exc}"
        ) from None


def rules_json(rules: Sequence[AclRule]) -> str:
    """The `acl_rules` column of `rules`."""
    return json.dumps([rule_dict(rule) for rule in rules], ensure_ascii=False)


def decode_rules(value: object, username: str) -> tuple[AclRule, ...]:
    """An `acl_rules` column: a JSON array of rule objects."""
    try:
        items = json.loads(value) if isinstance(value, str) else None
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ValueError("not a list of rule objects")
        return tuple(parse_rule(item) for item in items)
    except ValueError as exc:
        raise AuthStoreError(
            f"credential {username!r}: stored ACL rules are invalid: {exc}"
        ) from None


def decode_acl(value: object, username: str) -> tuple[str, ...]:
    """An ACL column: a JSON array (SQLite) or a list (PostgreSQL text[]) of strings."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AuthStoreError(f"credential {username!r}: stored ACL is not a list of filters")
    return tuple(value)


def credential_from_row(row: Sequence[Any]) -> Credential:
    """The Credential of a row with CREDENTIAL_COLUMNS."""
    username = str(row[0])
    try:
        client_type = ClientType(row[3])
    except ValueError:
        raise AuthStoreError(
            f"credential {username!r}: unknown stored client type {row[3]!r}"
        ) from None
    return Credential(
        username=username,
        password_hash=str(row[1]),
        tenant=str(row[2]),
        client_type=client_type,
        client_id_pattern=None if row[4] is None else str(row[4]),
        publish_acl=decode_acl(row[5], username),
        subscribe_acl=decode_acl(row[6], username),
        acl_rules=decode_rules(row[7], username),
        created_at=float(row[8]),
        updated_at=float(row[9]),
        scram=decode_scram(row[10], username),
    )


def tenant_row(tenant: Tenant, now: float) -> tuple[Any, ...]:
    """The row of `tenant` written at `now` (see `credential_row` for the timestamps)."""
    quota = tenant.quota.to_dict()
    return (tenant.name, *(quota[name] for name in QUOTA_FIELDS), now, now)


def tenant_from_row(row: Sequence[Any]) -> Tenant:
    """The Tenant of a row with TENANT_COLUMNS; its quota is validated like any other."""
    name = str(row[0])
    count = len(QUOTA_FIELDS)
    try:
        quota = Quota.from_mapping(dict(zip(QUOTA_FIELDS, row[1 : 1 + count], strict=True)))
    except QuotaError as exc:
        raise AuthStoreError(f"tenant {name!r}: stored quota is invalid: {exc}") from None
    return Tenant(
        name=name,
        quota=quota,
        created_at=float(row[1 + count]),
        updated_at=float(row[2 + count]),
    )
