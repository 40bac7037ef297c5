"""Who an accepted client is (`Identity`), why a CONNECT is refused (`AuthRefusal`), and
the Identity a credential gives (`credential_identity`).

What every decider of a CONNECT answers with: the authenticator (mqttq.auth.authenticator)
and each authentication provider (mqttq.auth.providers) alike. Kept below both, so that a
provider names the answer it gives, not the authenticator that asks its chain.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqttq.auth.acl import expand_acl, may_publish, may_subscribe
from mqttq.auth.model import ClientType, Credential
from mqttq.auth.rules import AclRules
from mqttq.reasons import ReasonCode

__all__ = ["AuthRefusal", "Identity", "credential_identity"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who an accepted client is. `publish_acl` / `subscribe_acl` are the topic filters
    it may use, already expanded (`%c`, `%u`); None means unrestricted (anonymous).
    `rules`, when set, is an ordered allow/deny rule list that must allow a request
    too (`[[auth.anonymous_acl]]` for anonymous clients)."""

    username: str | None
    tenant: str
    client_type: ClientType
    publish_acl: tuple[str, ...] | None
    subscribe_acl: tuple[str, ...] | None
    rules: AclRules | None = None
    expires_at: float | None = None
    """Unix time at which the client's authentication ends (a token's `exp`): the
    connection is closed then (0xA0 Maximum connect time on 5.0). None: never."""

    def may_publish(self, topic: str) -> bool:
        """True when the allow list (if any) and the rules (if any) allow a PUBLISH."""
        if self.publish_acl is not None and not may_publish(self.publish_acl, topic):
            return False
        return self.rules is None or self.rules.may_publish(topic)

    def may_subscribe(self, topic_filter: str) -> bool:
        """True when the allow list (if any) and the rules (if any) allow the
        subscription."""
        if self.subscribe_acl is not None and not may_subscribe(self.subscribe_acl, topic_filter):
            return False
        return self.rules is None or self.rules.may_subscribe(topic_filter)


@dataclass(frozen=True, slots=True)
class AuthRefusal:
    """Why a CONNECT is refused: `reason_code` for the CONNACK (0x86 bad user name or
    password, 0x87 not authorized), `reason` for the refusal metrics, `message` for the
    log and the CONNACK reason string (it never says whether a user name exists)."""

    reason_code: ReasonCode
    reason: str
    message: str
    tenant: str | None = None
    """The tenant the refusal is counted under: the credential's when the user name has
    one, the tenant an anonymous client tried to join; None (the default tenant) else."""


def credential_identity(credential: Credential, client_id: str, username: str) -> Identity:
    """The Identity a credential gives: its tenant, type, allow lists and rules, with
    `%c` / `%u` expanded."""
    rules = credential.acl_rules
    return Identity(
        username=username,
        tenant=credential.tenant,
        client_type=credential.client_type,
        publish_acl=expand_acl(credential.publish_acl, client_id, username),
        subscribe_acl=expand_acl(credential.subscribe_acl, client_id, username),
        rules=AclRules(rules).expanded(client_id, username) if rules else None,
    )
