"""Authenticator: a CONNECT's user name and password -> the client's Identity, or a refusal.

Anonymous clients (no user name) are let in by the `[auth] anonymous` setting: "always",
"loopback" (only on a connection to a loopback address) or "never"; their tenant is the
CONNECT's `tenant` user property, else `default`, and their ACLs are unrestricted. A tenant
that any credential names is closed to anonymous clients that name it (0x87): they would
otherwise read and write its whole namespace, past every ACL of its real clients. A client
with a user name must have a credential and its password; its tenant is the credential's
(a `tenant` property is ignored: a client cannot move itself into another tenant) and its
ACLs are the credential's, expanded with its client id and user name. A user name that has
no credential is refused even where anonymous clients are allowed: a typo never silently
becomes an anonymous login.

scrypt takes tens of milliseconds, so it runs in a worker thread, and successful
verifications are remembered: a reconnect storm after a broker restart costs one scrypt
per credential, not one per connection. A remembered verification counts only while the
stored hash is the one it was made against, so a password change takes effect at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from mqttq.auth.acl import client_id_allowed
from mqttq.auth.identity import AuthRefusal, Identity, credential_identity
from mqttq.auth.model import DEFAULT_TENANT, ClientType
from mqttq.auth.passwords import verify_password
from mqttq.auth.ports import AuthStore
from mqttq.auth.rules import AclRule, AclRules
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.auth.providers.chain import ProviderChain

__all__ = ["ANONYMOUS_MODES", "AuthRefusal", "Authenticator", "Identity", "credential_identity"]

ANONYMOUS_MODES: Final = ("always", "loopback", "never")
CACHE_SIZE: Final = 4096
"""Successful verifications remembered (least recently used forgotten first)."""

BAD_CREDENTIALS: Final = "bad_credentials"
NOT_AUTHORIZED: Final = "not_authorized"

# The hash of a random password nobody knows: verified against when the user name is
# unknown, so that an unknown user takes as long to refuse as a wrong password and the
# timing does not tell which user names exist.
_DUMMY_HASH: Final = (
    "scrypt$16384$8$1$PswWEUmWTQcS1wwhQi86wg==$B+m18Q4+ltSVh+DEltlrjC65aXkWLGsPDmmR5sKslnA="
)


_WRONG = AuthRefusal(
    ReasonCode.BAD_USER_NAME_OR_PASSWORD, BAD_CREDENTIALS, "bad user name or password"
)
_NO_ANONYMOUS = AuthRefusal(
    ReasonCode.NOT_AUTHORIZED, NOT_AUTHORIZED, "anonymous connections are not allowed here"
)
_ANONYMOUS = Identity(None, DEFAULT_TENANT, ClientType.DEVICE, None, None)
"""A client without credentials, user name, tenant property or anonymous rules: shared."""

_CLIENT_ID = AuthRefusal(
    ReasonCode.NOT_AUTHORIZED, NOT_AUTHORIZED, "client id not allowed for this user name"
)
_CLOSED_TENANT = AuthRefusal(
    ReasonCode.NOT_AUTHORIZED,
    NOT_AUTHORIZED,
    "this tenant admits only clients with credentials",
)


def _password_text(password: bytes | None) -> str | None:
    """The password as text; None when it is missing or not UTF-8 (no credential's
    password can be either: they are set as text)."""
    if password is None:
        return None
    try:
        return password.decode("utf-8")
    except UnicodeDecodeError:
        return None


class Authenticator:
    """Decides CONNECTs against `store` (see the module docstring for the rules)."""

    __slots__ = (
        "_anonymous",
        "_anonymous_rules",
        "_cache",
        "_key",
        "_pending",
        "chain",
        "expiry_checks",
        "store",
    )

    def __init__(
        self, store: AuthStore, *, anonymous: str, anonymous_acl: tuple[AclRule, ...] = ()
    ) -> None:
        """`anonymous` is one of ANONYMOUS_MODES (else ValueError); `anonymous_acl` is
        the rule list of clients without credentials (empty: unrestricted)."""
        if anonymous not in ANONYMOUS_MODES:
            raise ValueError(f"anonymous must be one of {', '.join(ANONYMOUS_MODES)}")
        self.store = store
        self._anonymous = anonymous
        self._anonymous_rules = AclRules(anonymous_acl) if anonymous_acl else None
        # (username, keyed digest of the password) -> the stored hash it verified against.
        # The digest is keyed with a per-process secret so the cache in memory holds no
        # fast unsalted hash of anyone's password.
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[tuple[str, bytes], str] = OrderedDict()
        # Verifications running now, shared by concurrent CONNECTs with the same secret.
        self._pending: dict[tuple[str, bytes, str], asyncio.Future[bool]] = {}
        self.chain: ProviderChain | None = None
        """The providers asked for a CONNECT (`[auth] providers`, set by `mqttq serve`);
        None: the credential store alone (`mqttq.broker.connection.admission`)."""
        self.expiry_checks: dict[str, float] = {}
        """Client id -> when its connection is next looked at because its identity
        expires (a token's `exp`; `mqttq.broker.connection.admission`)."""

    def invalidate(self, username: str | None = None) -> None:
        """Forget remembered verifications (of one user name, or all), and the chain's
        remembered x509 answers (a changed credential may be an x509 one)."""
        if self.chain is not None:
            self.chain.forget("x509")
        if username is None:
            self._cache.clear()
            return
        for key in [key for key in self._cache if key[0] == username]:
            del self._cache[key]

    async def authenticate(
        self,
        *,
        username: str | None,
        password: bytes | None,
        client_id: str,
        tenant_property: str | None,
        local_is_loopback: Callable[[], bool],
    ) -> Identity | AuthRefusal:
        """The client's Identity, or why it is refused. Raises AuthStoreError when the
        store cannot be read (the broker answers 0x88 Server unavailable).
        `local_is_loopback` is asked only when it decides (an anonymous client under
        `anonymous = "loopback"`): it costs a system call and an address parse."""
        if username is None:
            if not (
                self._anonymous == "always"
                or (self._anonymous == "loopback" and local_is_loopback())
            ):
                return _NO_ANONYMOUS
            if tenant_property and await self.store.tenant_has_credentials(tenant_property):
                return replace(_CLOSED_TENANT, tenant=tenant_property)
            return self._anonymous_identity(None, client_id, tenant_property)
        credential = await self.store.get_credential(username)
        text = _password_text(password)
        if text is None:
            # Refused at once whether the user name exists or not (no timing difference).
            return _WRONG
        if credential is None:
            await asyncio.to_thread(verify_password, text, _DUMMY_HASH)
            return _WRONG
        if not await self._verified(username, text, credential.password_hash):
            return replace(_WRONG, tenant=credential.tenant)
        if not client_id_allowed(credential.client_id_pattern, client_id):
            return replace(_CLIENT_ID, tenant=credential.tenant)
        return credential_identity(credential, client_id, username)

    async def authenticate_certificate(
        self, *, username: str, client_id: str, tenant_property: str | None
    ) -> Identity | AuthRefusal:
        """The Identity of a client whose verified TLS certificate names it `username`
        (its CN; `identity_as_username`): no password is asked for. With a credential of
        that user name, its tenant, client id pattern and ACLs apply; without one, the
        client is in the tenant it names (one no credential holds) with the rules of
        anonymous clients. Raises AuthStoreError when the store cannot be read."""
        credential = await self.store.get_credential(username)
        if credential is None:
            if tenant_property and await self.store.tenant_has_credentials(tenant_property):
                return replace(_CLOSED_TENANT, tenant=tenant_property)
            return self._anonymous_identity(username, client_id, tenant_property)
        if not client_id_allowed(credential.client_id_pattern, client_id):
            return replace(_CLIENT_ID, tenant=credential.tenant)
        return credential_identity(credential, client_id, username)

    def _anonymous_identity(
        self, username: str | None, client_id: str, tenant_property: str | None
    ) -> Identity:
        rules = self._anonymous_rules
        if username is None and tenant_property is None and rules is None:
            return _ANONYMOUS  # the same for every such client: one shared object
        return Identity(
            username,
            tenant_property or DEFAULT_TENANT,
            ClientType.DEVICE,
            None,
            None,
            None if rules is None else rules.expanded(client_id, username),
        )

    async def _verified(self, username: str, text: str, password_hash: str) -> bool:
        digest = hmac.new(self._key, text.encode("utf-8"), hashlib.sha256).digest()
        key = (username, digest)
        if self._cache.get(key) == password_hash:
            self._cache.move_to_end(key)
            return True
        running = (username, digest, password_hash)
        future = self._pending.get(running)
        if future is None:
            future = asyncio.ensure_future(asyncio.to_thread(verify_password, text, password_hash))
            self._pending[running] = future
            future.add_done_callback(lambda _done: self._pending.pop(running, None))
        # shield: one client giving up must not cancel the check others are waiting for.
        ok = await asyncio.shield(future)
        if ok:
            self._cache[key] = password_hash
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return ok
