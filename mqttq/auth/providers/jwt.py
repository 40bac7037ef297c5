"""The `jwt` provider: a signed JSON Web Token in the CONNECT's password (or user name).

A field that holds no token-shaped text (three dot-separated parts) is not this
provider's: it skips, so a chain `["jwt", "credentials"]` lets password clients in too.
A token-shaped field must pass every check or the CONNECT is refused with 0x86 (3.x:
return code 4), like a wrong password: it parses (strict base64url, JSON, no `crit`
header); its `alg` is one of `algorithms` (`none` never is); its signature verifies
(PyJWT's algorithm, on `cryptography`) with the HS* secret or the RS*/ES*/PS* key (`kid`
chosen from the JWKS); `exp` is in the future and `nbf` in the past (both with
`leeway`); `iss` and `aud` are the configured ones when set; the client id claim, when
present, is the CONNECT's client id; the client type claim, when present, is DEVICE or
APPLICATION; the ACL claims, when present, are lists of strings. Each refusal's message
says which check failed (never anything of the token itself).

The Identity: the user name claim (else the CONNECT's user name), the tenant claim (else
`default`), the client type claim, the publish/subscribe ACL claims with `%c`/`%u`
expanded (absent: unrestricted), and `expires_at` = `exp` (the connection is closed
then)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from jwt.algorithms import Algorithm, get_default_algorithms
from jwt.exceptions import InvalidKeyError

from mqttq.auth.acl import expand_acl
from mqttq.auth.identity import AuthRefusal, Identity
from mqttq.auth.model import DEFAULT_TENANT, ClientType
from mqttq.auth.providers.base import SKIP, AuthRequest, Decision, bad_credentials
from mqttq.auth.providers.jwks import JwtKeys

__all__ = ["JwtClaims", "JwtProvider"]

_ALGORITHMS: Final[dict[str, Algorithm]] = {
    name: algorithm for name, algorithm in get_default_algorithms().items() if name != "none"
}
"""PyJWT's signature algorithms by JOSE name (never `none`)."""
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
_CLIENT_TYPES: Final[dict[object, ClientType]] = {kind.value: kind for kind in ClientType}

REASON: Final = "bad_token"
"""The refusal reason of every failed check (`mqttq_refusals_total{reason}`)."""


@dataclass(frozen=True, slots=True)
class JwtClaims:
    """The claim names read into the Identity."""

    client_id: str = "client_id"
    username: str = "sub"
    tenant: str = "tenant"
    client_type: str = "client_type"
    publish_acl: str = "publish_acl"
    subscribe_acl: str = "subscribe_acl"


def _refuse(why: str) -> AuthRefusal:
    return bad_credentials(f"invalid token: {why}", REASON)


_MALFORMED = _refuse("malformed")
_ALGORITHM = _refuse("algorithm not accepted")
_NO_KEY = _refuse("no key for it")
_SIGNATURE = _refuse("signature does not verify")
_EXPIRED = _refuse("expired")
_NOT_YET = _refuse("not valid yet (nbf)")
_ISSUER = _refuse("wrong issuer")
_AUDIENCE = _refuse("wrong audience")
_CLIENT_ID = _refuse("issued for another client id")
_CLAIMS = _refuse("claims of the wrong type")


class JwtProvider:
    """Verifies tokens (see the module docstring); `secret` is the HS* key, `keys` the
    asymmetric ones."""

    name = "jwt"
    cacheable = True

    def __init__(
        self,
        *,
        algorithms: Sequence[str],
        secret: bytes | None = None,
        keys: JwtKeys | None = None,
        token_field: str = "password",
        issuer: str = "",
        audience: str = "",
        leeway: float = 0.0,
        claims: JwtClaims | None = None,
    ) -> None:
        """Raises ValueError for `none` among `algorithms`, or an unknown `token_field`."""
        if any(name.lower() == "none" for name in algorithms):
            raise ValueError("the 'none' algorithm is never accepted")
        if token_field not in ("password", "username"):
            raise ValueError("token_field must be password or username")
        self.algorithms = frozenset(algorithms)
        self.secret = secret
        self.keys = keys if keys is not None else JwtKeys()
        self.token_field = token_field
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.claims = claims if claims is not None else JwtClaims()

    async def open(self) -> None:
        """Read the keys (see JwtKeys.open)."""
        await self.keys.open()

    async def close(self) -> None:
        """Stop refreshing the JWKS."""
        await self.keys.close()

    async def authenticate(self, request: AuthRequest) -> Decision:
        """Allow with the token's identity, deny (0x86) on any failed check, SKIP when
        the field holds no token."""
        token = self._token(request)
        if token is None or token.count(".") != 2:
            return SKIP
        header = _header(token)
        if header is None:
            return _MALFORMED
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            return _ALGORITHM
        if algorithm.startswith("HS"):
            key: Any = self.secret
        else:
            kid = header.get("kid")
            key = await self.keys.key_for(kid if isinstance(kid, str) else None)
        if key is None:
            return _NO_KEY
        claims = self._verified(token, header, algorithm, key)
        if isinstance(claims, AuthRefusal):
            return claims
        return self._identity(claims, request)

    def _verified(
        self, token: str, header: dict[str, Any], algorithm: str, key: Any
    ) -> dict[str, Any] | AuthRefusal:
        """The token's claims once its signature (PyJWT's algorithm, on `cryptography`)
        and its registered claims check out [RFC 7519 section 4.1], else the refusal."""
        header_part, payload_part, signature_part = token.split(".")
        try:
            claims = json.loads(_segment(payload_part))
            signature = _segment(signature_part)
        except (ValueError, binascii.Error):
            return _MALFORMED
        if not isinstance(claims, dict) or "crit" in header:
            return _MALFORMED  # no JWS extension is understood here [RFC 7515 4.1.11]
        verifier = _ALGORITHMS.get(algorithm)
        if verifier is None:
            return _ALGORITHM
        try:
            prepared = verifier.prepare_key(key)
        except (InvalidKeyError, ValueError, TypeError):
            return _NO_KEY
        signing_input = f"{header_part}.{payload_part}".encode("ascii")
        if not verifier.verify(signing_input, prepared, signature):
            return _SIGNATURE
        return self._check_claims(claims)

    def _check_claims(self, claims: dict[str, Any]) -> dict[str, Any] | AuthRefusal:
        now = time.time()
        leeway = self.leeway
        expires = claims.get("exp")
        if expires is not None:
            if not _number(expires):
                return _MALFORMED
            if expires <= now - leeway:
                return _EXPIRED
        not_before = claims.get("nbf")
        if not_before is not None:
            if not _number(not_before):
                return _MALFORMED
            if not_before > now + leeway:
                return _NOT_YET
        if self.issuer and claims.get("iss") != self.issuer:
            return _ISSUER
        if self.audience:
            audience = claims.get("aud")
            names = [audience] if isinstance(audience, str) else audience
            if not isinstance(names, list) or self.audience not in names:
                return _AUDIENCE
        return claims

    def _token(self, request: AuthRequest) -> str | None:
        if self.token_field == "username":
            return request.username
        password = request.password
        if password is None:
            return None
        try:
            return password.decode("ascii")
        except UnicodeDecodeError:
            return None

    def _identity(self, claims: dict[str, Any], request: AuthRequest) -> Decision:
        names = self.claims
        client_id = claims.get(names.client_id)
        if client_id is not None and client_id != request.client_id:
            return _CLIENT_ID
        username = claims.get(names.username)
        if username is None and self.token_field == "password":
            username = request.username
        tenant = claims.get(names.tenant, DEFAULT_TENANT)
        kind = _CLIENT_TYPES.get(claims.get(names.client_type, ClientType.DEVICE.value))
        publish = claims.get(names.publish_acl)
        subscribe = claims.get(names.subscribe_acl)
        expires = claims.get("exp")
        if (
            not (username is None or isinstance(username, str))
            or not isinstance(tenant, str)
            or not tenant
            or kind is None
            or not (publish is None or _strings(publish))
            or not (subscribe is None or _strings(subscribe))
        ):
            return _CLAIMS
        return Identity(
            username=username,
            tenant=tenant,
            client_type=kind,
            publish_acl=None
            if publish is None
            else expand_acl(publish, request.client_id, username),
            subscribe_acl=None
            if subscribe is None
            else expand_acl(subscribe, request.client_id, username),
            expires_at=None if expires is None else float(expires),
        )


def _segment(part: str) -> bytes:
    """A base64url segment without padding [RFC 7515 section 2], decoded; ValueError for
    any other character. (PyJWT's own parsing checks each character in Python, which cost
    more than the RS256 signature check: the token is parsed here, the signature checked
    by PyJWT's algorithm.)"""
    if _BASE64URL.fullmatch(part) is None:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _header(token: str) -> dict[str, Any] | None:
    """The token's JOSE header, None when it is not base64url JSON of an object."""
    try:
        header = json.loads(_segment(token.partition(".")[0]))
    except (ValueError, binascii.Error):
        return None
    return header if isinstance(header, dict) else None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
