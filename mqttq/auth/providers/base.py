"""The authentication provider port: what a provider is asked, and what it may answer.

A CONNECT is decided by an ordered chain of providers (`[auth] providers`, see
`mqttq.auth.providers.chain`). Each provider answers one of three things:

- an `Identity` (allow): who the client is, its tenant, client type and ACLs (already
  expanded: `mqttq.auth.acl.expand_acl` substitutes `%c` / `%u`); `Identity.expires_at`
  (Unix seconds) disconnects the client when it passes (a token's `exp`);
- an `AuthRefusal` (deny): the reason code of the CONNACK (0x86 bad credentials, 0x87 not
  authorized, 0x8A banned, 0x88 server unavailable; 3.x clients get return code 4 for 0x86
  and 5 for the others but 0x88, which is 3), a short `reason` for the metrics and a
  `message` for the log and the CONNACK reason string; the helpers below build them;
- `SKIP`: "not mine, ask the next provider". When every provider skips, the CONNECT is
  refused as bad credentials (0x86) when it carried a user name or password, else as not
  authorized (0x87).

A provider may raise `mqttq.auth.ports.AuthStoreError` when what it depends on cannot be
reached; the broker answers 0x88 Server unavailable (as for the credential store).

How to add a provider
---------------------
1. Write a class with the `AuthProvider` members (`name`, `cacheable`, `open`, `close`,
   `authenticate`) in a module of this package named for it (`jwt.py`, `http.py`, ...).
   `name` is the word used in `[auth] providers` and the `provider` label of
   `mqttq_auth_decisions_total`. `authenticate` must not block the loop (run slow work in a
   thread) and must never log the password.
2. `cacheable = True` lets the chain remember its allow / deny answers for `[auth]
   cache_ttl` seconds, keyed by the whole request (the password only as a keyed digest).
   Say False when an answer must take effect at once (the credential store, which keeps
   its own cache of verified hashes, and the blocked list).
3. Register the name in `mqttq.auth.providers.chain.PROVIDER_NAMES`, give it a settings
   table in `mqttq.config.schema` (`[auth.<name>]`), and build it from those settings in
   `mqttq.cli.serve_auth.build_chain` (providers take plain values, never the settings
   tree: `mqttq.auth` sits below `mqttq.config`).
4. The blocked-clients provider (name "blocked") is not built from the list: it is put in
   front of every chain with `ProviderChain.set_blocked(provider)` and asked first whether
   `providers` names it or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from mqttq.auth.identity import AuthRefusal, Identity
from mqttq.reasons import ReasonCode

__all__ = [
    "SKIP",
    "AuthProvider",
    "AuthRequest",
    "Decision",
    "Skip",
    "bad_credentials",
    "banned",
    "not_authorized",
    "unavailable",
]


class Skip:
    """The answer "not mine, ask the next provider" (use the `SKIP` singleton)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SKIP"


SKIP: Final = Skip()

Decision = Identity | AuthRefusal | Skip
"""What a provider answers: allow (an Identity), deny (an AuthRefusal) or SKIP."""


def _always_false() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """Everything a provider may decide on, for one CONNECT."""

    client_id: str
    """The client id (assigned by the broker when the CONNECT had an empty one)."""
    username: str | None
    password: bytes | None
    address: str
    """The client's IP address (no port), "" when unknown."""
    listener: str
    """The listener it came through: tcp, tls, ws or wss."""
    cert_cn: str | None = None
    """The CN of its verified TLS client certificate, None without one."""
    tenant_property: str | None = None
    """The CONNECT's `tenant` user property (5.0)."""
    protocol_level: int = 4
    """3 (MQTT 3.1), 4 (3.1.1) or 5."""
    authentication_method: str | None = None
    """The CONNECT's Authentication Method property (5.0 enhanced authentication)."""
    authentication_data: bytes | None = None
    """The CONNECT's Authentication Data property."""
    identity_as_username: bool = False
    """The listener takes the certificate's CN as the user name (no password asked)."""
    local_is_loopback: Callable[[], bool] = _always_false
    """Whether the connection is to a loopback address (asked only when it decides: a
    system call)."""


class AuthProvider(Protocol):
    """One way of deciding a CONNECT (see the module docstring)."""

    name: str
    """The name in `[auth] providers` and the `provider` label in the metrics."""
    cacheable: bool
    """Whether the chain may remember this provider's answers for `[auth] cache_ttl`."""

    async def open(self) -> None:
        """Acquire what the provider needs (an HTTP session, keys); called once at start."""
        ...

    async def close(self) -> None:
        """Release what `open` acquired."""
        ...

    async def authenticate(self, request: AuthRequest) -> Decision:
        """Allow (Identity), deny (AuthRefusal) or SKIP; may raise AuthStoreError."""
        ...


def bad_credentials(message: str, reason: str = "bad_credentials") -> AuthRefusal:
    """Deny with 0x86 Bad user name or password (3.x: return code 4)."""
    return AuthRefusal(ReasonCode.BAD_USER_NAME_OR_PASSWORD, reason, message)


def not_authorized(message: str, reason: str = "not_authorized") -> AuthRefusal:
    """Deny with 0x87 Not authorized (3.x: return code 5)."""
    return AuthRefusal(ReasonCode.NOT_AUTHORIZED, reason, message)


def banned(message: str, reason: str = "banned") -> AuthRefusal:
    """Deny with 0x8A Banned (3.x: return code 5)."""
    return AuthRefusal(ReasonCode.BANNED, reason, message)


def unavailable(message: str, reason: str = "unavailable") -> AuthRefusal:
    """Deny with 0x88 Server unavailable (3.x: return code 3)."""
    return AuthRefusal(ReasonCode.SERVER_UNAVAILABLE, reason, message)
