"""The `jwt` provider: a signed JSON Web Token in the CONNECT's password (or user name).

A field that holds no token-shaped text (three dot-separated parts) is not this
provider's: it skips, so a chain `["jwt", "credentials"]` lets password clients in too.
A token-shaped field must pass every check or the CONNECT is refused with 0x86 (3.x:
return code 4), like a wrong password: it parses; its `alg` is one of `algorithms`
(`none` never is); its signature verifies with the HS* secret or the RS*/ES*/PS* key
(`kid` chosen from the JWKS); `exp` is in the future and `nbf` in the past (both with
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import jwt as pyjwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidSignatureError,
    InvalidTokenError,
)

from mqttq.auth.acl import expand_acl
from mqttq.auth.authenticator import AuthRefusal, Identity
from mqttq.auth.model import DEFAULT_TENANT, ClientType
from mqttq.auth.providers.base import SKIP, AuthRequest, Decision, bad_credentials
from mqttq.auth.providers.jwks import JwtKeys

__all__ = ["JwtClaims", "JwtProvider"]

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
        try:
            claims = pyjwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=self.issuer or None,
                audience=self.audience or None,
                leeway=self.leeway,
                options={"verify_aud": bool(self.audience), "require": self._required()},
            )
        except ExpiredSignatureError:
            return _EXPIRED
        except ImmatureSignatureError:
            return _NOT_YET
        except InvalidIssuerError:
            return _ISSUER
        except InvalidAudienceError:
            return _AUDIENCE
        except InvalidSignatureError:
            return _SIGNATURE
        except InvalidTokenError:
            return _MALFORMED
        return self._identity(claims, request)

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

    def _required(self) -> list[str]:
        required = []
        if self.issuer:
            required.append("iss")
        if self.audience:
            required.append("aud")
        return required

    def _identity(self, claims: dict[str, Any], request: AuthRequest) -> Decision:
        names = self.claims
        client_id = claims.get(names.client_id)
        if client_id is not None and client_id != request.client_id:
            return _CLIENT_ID
        username = claims.get(names.username)
        if username is None and self.token_field == "password":
            username = request.username
        tenant = claims.get(names.tenant, DEFAULT_TENANT)
        kind = claims.get(names.client_type, ClientType.DEVICE.value)
        publish = claims.get(names.publish_acl)
        subscribe = claims.get(names.subscribe_acl)
        expires = claims.get("exp")
        if (
            not (username is None or isinstance(username, str))
            or not isinstance(tenant, str)
            or not tenant
            or kind not in (ClientType.DEVICE.value, ClientType.APPLICATION.value)
            or not (publish is None or _strings(publish))
            or not (subscribe is None or _strings(subscribe))
        ):
            return _CLAIMS
        return Identity(
            username=username,
            tenant=tenant,
            client_type=ClientType(kind),
            publish_acl=None
            if publish is None
            else expand_acl(publish, request.client_id, username),
            subscribe_acl=None
            if subscribe is None
            else expand_acl(subscribe, request.client_id, username),
            expires_at=float(expires) if isinstance(expires, int | float) else None,
        )


def _header(token: str) -> dict[str, Any] | None:
    """The token's JOSE header, None when it is not base64url JSON of an object. Read
    here, not with `jwt.get_unverified_header`: PyJWT checks each segment character by
    character in Python, which costs more than the RS256 signature check; `jwt.decode`
    still parses and checks the whole token."""
    segment = token.partition(".")[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        return None
    return header if isinstance(header, dict) else None


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
