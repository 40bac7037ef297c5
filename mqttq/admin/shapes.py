"""The admin API's JSON objects for credentials and tenants, made in one place for the
HTTP routes and for the CLI's no-broker path (which must print the same shapes). No HTTP
here: the CLI imports it without aiohttp."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqttq.auth.model import Credential, Tenant
from mqttq.auth.providers.x509 import x509_pattern
from mqttq.auth.rules import rule_dict
from mqttq.limits.quota import Quota

__all__ = ["credential_json", "tenant_json"]


def credential_json(credential: Credential) -> dict[str, Any]:
    """The API's credential object: every field but the password hash and the SCRAM
    secrets (`scram` names their mechanisms; `x509_cn` is the CN pattern of an x509
    credential, null for a password one)."""
    return {
        "username": credential.username,
        "tenant": credential.tenant,
        "client_type": str(credential.client_type),
        "client_id_pattern": credential.client_id_pattern,
        "publish_acl": list(credential.publish_acl),
        "subscribe_acl": list(credential.subscribe_acl),
        "acl_rules": [rule_dict(rule) for rule in credential.acl_rules],
        "scram": credential.scram_mechanisms,
        "x509_cn": x509_pattern(credential),
        "created_at": credential.created_at,
        "updated_at": credential.updated_at,
    }


def tenant_json(
    name: str,
    quota: Quota,
    stored: Tenant | None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The API's tenant object: `stored` is the tenant's row (None: it has none and uses
    `quota`, the default); `usage` is None when no broker was asked."""
    return {
        "name": name,
        "quota": quota.to_dict(),
        "stored": stored is not None,
        "usage": None if usage is None else dict(usage),
        "created_at": None if stored is None else stored.created_at,
        "updated_at": None if stored is None else stored.updated_at,
    }
