"""The `x509` provider: a verified client certificate's CN matched to an x509 credential.

An x509 credential is a Credential whose `password_hash` is `x509$<pattern>` (so it can
never be used with a password: `verify_password` knows no such scheme): the pattern is
a regular expression matched in full against the CN (or, with `cn_regex`, against what
its named group `cn` captures). The credential gives the tenant, client type, client id
pattern and ACLs (`%c`, `%u` expanded; `%u` is the CN). A credential whose user name is
the CN itself is tried first (one lookup), then every x509 credential, in user-name
order; the first whose pattern matches decides. A connection without a certificate, or
whose CN no credential matches, is not this provider's (SKIP)."""

from __future__ import annotations

import re
import time
from typing import Final

from mqttq.auth.acl import client_id_allowed
from mqttq.auth.identity import Identity, credential_identity
from mqttq.auth.model import Credential
from mqttq.auth.ports import AuthStore
from mqttq.auth.providers.base import SKIP, AuthRequest, Decision, not_authorized

__all__ = ["X509_SCHEME", "X509Provider", "x509_hash", "x509_pattern"]

X509_SCHEME: Final = "x509$"
LIST_TTL: Final = 5.0
"""Seconds the list of x509 credentials is kept between reads of the store."""

_CLIENT_ID = not_authorized("client id not allowed for this certificate")


def x509_hash(pattern: str) -> str:
    """The `password_hash` of an x509 credential whose CN pattern is `pattern`; raises
    ValueError when it is not a regular expression."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return X509_SCHEME + pattern


def x509_pattern(credential: Credential) -> str | None:
    """The CN pattern of an x509 credential; None for a password credential."""
    stored = credential.password_hash
    return stored[len(X509_SCHEME) :] if stored.startswith(X509_SCHEME) else None


class X509Provider:
    """Decides clients with a verified certificate against the x509 credentials."""

    name = "x509"
    cacheable = True

    def __init__(self, store: AuthStore, *, cn_regex: str = "") -> None:
        """`cn_regex`: a regular expression with a named group `cn` (empty: the whole CN)."""
        self.store = store
        self.cn_regex = re.compile(cn_regex) if cn_regex else None
        self._listed: list[tuple[re.Pattern[str], Credential]] = []
        self._listed_at = -float("inf")

    async def open(self) -> None:
        """Nothing to open: the broker opens the store."""

    async def close(self) -> None:
        """Forget the listed credentials."""
        self.forget()

    def forget(self) -> None:
        """Read the x509 credentials again at the next CONNECT (one was changed)."""
        self._listed = []
        self._listed_at = -float("inf")

    async def authenticate(self, request: AuthRequest) -> Decision:
        """Allow with the matching credential's identity; SKIP without a certificate or a
        match; raises AuthStoreError when the store cannot be read."""
        common_name = request.cert_cn
        if common_name is None:
            return SKIP
        subject = common_name
        if self.cn_regex is not None:
            match = self.cn_regex.fullmatch(common_name)
            if match is None or match.group("cn") is None:
                return SKIP
            subject = match.group("cn")
        credential = await self._matching(subject)
        if credential is None:
            return SKIP
        if not client_id_allowed(credential.client_id_pattern, request.client_id):
            return _CLIENT_ID
        identity: Identity = credential_identity(credential, request.client_id, common_name)
        return identity

    async def _matching(self, subject: str) -> Credential | None:
        direct = await self.store.get_credential(subject)
        if direct is not None:
            pattern = x509_pattern(direct)
            if pattern is not None and re.fullmatch(pattern, subject):
                return direct
        now = time.monotonic()
        if now - self._listed_at >= LIST_TTL:
            listed = []
            for credential in await self.store.list_credentials():
                pattern = x509_pattern(credential)
                if pattern is not None:
                    try:
                        listed.append((re.compile(pattern), credential))
                    except re.error:
                        continue  # written past x509_hash: it can match nothing
            self._listed = listed
            self._listed_at = now
        for compiled, credential in self._listed:
            if compiled.fullmatch(subject):
                return credential
        return None
