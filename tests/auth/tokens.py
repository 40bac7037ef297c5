"""Real keys and signed tokens for the auth tests (made with `cryptography` and PyJWT)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

__all__ = ["KeyPair", "claims", "ec_pair", "jwks_of", "rsa_pair"]


class KeyPair:
    """A private key (to sign with) and its public key (PEM and JWK)."""

    def __init__(self, private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str) -> None:
        self.private = private
        self.kid = kid
        self.algorithm = "RS256" if isinstance(private, rsa.RSAPrivateKey) else "ES256"

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def write_pem(self, path: Path) -> Path:
        path.write_bytes(self.public_pem())
        return path

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            data = json.loads(RSAAlgorithm.to_jwk(public))
        else:
            data = json.loads(ECAlgorithm.to_jwk(public))
        data["kid"] = self.kid
        data["alg"] = self.algorithm
        return dict(data)

    def sign(self, payload: dict[str, Any], *, kid: bool = True) -> bytes:
        headers = {"kid": self.kid} if kid else None
        return jwt.encode(payload, self.private, self.algorithm, headers=headers).encode()


def rsa_pair(kid: str = "rsa-1") -> KeyPair:
    return KeyPair(rsa.generate_private_key(public_exponent=65537, key_size=2048), kid)


def ec_pair(kid: str = "ec-1") -> KeyPair:
    return KeyPair(ec.generate_private_key(ec.SECP256R1()), kid)


def jwks_of(*pairs: KeyPair) -> dict[str, Any]:
    return {"keys": [pair.jwk() for pair in pairs]}


def claims(lifetime: float = 3600, **extra: Any) -> dict[str, Any]:
    """Claims valid now for `lifetime` seconds, plus `extra`."""
    now = int(time.time())
    payload: dict[str, Any] = {"iat": now, "exp": now + int(lifetime)}
    payload.update(extra)
    return payload
