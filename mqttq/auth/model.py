"""What the broker knows about a client's identity: its credential and its tenant."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from mqttq.auth.rules import AclRule
from mqttq.auth.scram import ScramSecret, password_tag
from mqttq.limits.quota import Quota

__all__ = ["DEFAULT_TENANT", "ClientType", "Credential", "Tenant"]

DEFAULT_TENANT: Final = "default"
"""The tenant of a client whose credentials and CONNECT name none."""


class ClientType(StrEnum):
    """TBMQ's two client kinds: DEVICE (queues in Redis) and APPLICATION (own Kafka topic)."""

    DEVICE = "DEVICE"
    APPLICATION = "APPLICATION"


@dataclass(frozen=True, slots=True)
class Credential:
    """One username's credential. `password_hash` is a salted slow hash
    (see mqttq.auth.passwords); the clear password is never stored."""

    username: str
    password_hash: str
    tenant: str = DEFAULT_TENANT
    client_type: ClientType = ClientType.DEVICE
    client_id_pattern: str | None = None
    """fnmatch-style pattern the CONNECT's client id must match (None: any)."""
    publish_acl: tuple[str, ...] = ("#",)
    """MQTT topic filters the client may publish to (empty: nothing)."""
    subscribe_acl: tuple[str, ...] = ("#",)
    """MQTT topic filters the client's subscriptions must fall within (empty: nothing)."""
    acl_rules: tuple[AclRule, ...] = ()
    """Ordered allow/deny rules (`mqttq.auth.rules`) a request must also pass when any
    are set: the first match decides, no match denies."""
    created_at: float = 0.0
    updated_at: float = 0.0
    scram: tuple[ScramSecret, ...] = ()
    """SCRAM secrets (one per mechanism: salt, iterations, StoredKey, ServerKey) for MQTT 5
    enhanced authentication; empty when the credential was added without `--scram`."""

    @property
    def scram_mechanisms(self) -> list[str]:
        """The SCRAM mechanisms this credential can authenticate with (for display)."""
        return [s.mechanism for s in self.scram if self.scram_secret(s.mechanism) is s]

    def scram_secret(self, mechanism: str) -> ScramSecret | None:
        """The stored SCRAM secret for `mechanism` (SCRAM-SHA-256 or -512), if any and if
        it was made for the current password (see `ScramSecret.password_tag`)."""
        for secret in self.scram:
            if secret.mechanism == mechanism:
                tag = secret.password_tag
                return secret if not tag or tag == password_tag(self.password_hash) else None
        return None


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant with its own quota (tenants without a row use `[mqtt_limit.tenant]`)."""

    name: str
    quota: Quota = field(default_factory=Quota)
    created_at: float = 0.0
    updated_at: float = 0.0
