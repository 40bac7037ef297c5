"""The jwt provider's checks without a broker: each way a token can be wrong, and the
identity a good one gives (ACLs expanded, expiry kept)."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import jwt
import pytest

from mqttq.auth.authenticator import AuthRefusal, Identity
from mqttq.auth.model import ClientType
from mqttq.auth.providers.base import SKIP, AuthRequest, Decision
from mqttq.auth.providers.jwt import JwtProvider
from mqttq.reasons import ReasonCode

SECRET = b"a-unit-test-secret-of-32-bytes-ok!"


def provider(**options: object) -> JwtProvider:
    return JwtProvider(algorithms=["HS256"], secret=SECRET, **options)  # type: ignore[arg-type]


def ask(chosen: JwtProvider, token: str | bytes | None, client_id: str = "c1") -> Decision:
    password = token.encode() if isinstance(token, str) else token
    return asyncio.run(chosen.authenticate(AuthRequest(client_id, "u", password, "", "tcp")))


def sign(payload: dict[str, object], **headers: object) -> str:
    return jwt.encode(payload, SECRET, "HS256", headers=headers or None)


def refused(decision: Decision) -> str:
    assert isinstance(decision, AuthRefusal), decision
    assert decision.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    return decision.message.removeprefix("invalid token: ")


def test_a_good_token_gives_its_identity() -> None:
    exp = int(time.time()) + 60
    token = sign(
        {
            "exp": exp,
            "sub": "dev",
            "tenant": "acme",
            "client_type": "APPLICATION",
            "publish_acl": ["up/%c/#", "up/%u/x"],
        }
    )
    identity = ask(provider(), token)
    assert identity == Identity(
        "dev", "acme", ClientType.APPLICATION, ("up/c1/#", "up/dev/x"), None, expires_at=exp
    )


def test_not_a_token_is_skipped() -> None:
    assert ask(provider(), None) is SKIP
    assert ask(provider(), "plain password") is SKIP
    assert ask(provider(), b"\xff.\xfe.\xfd") is SKIP  # not ASCII: no token


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("a.b.c", "malformed"),
        (sign({}) + "*", "malformed"),  # a character outside base64url
        (sign({}, crit=["b64"]), "malformed"),
        (sign({"exp": "soon"}), "malformed"),
        (sign({"exp": 1}), "expired"),
        # A fixed time (2100-01-01): a token made from the clock would be another test id
        # on each xdist worker, and the workers would refuse to run different collections.
        (sign({"nbf": 4_102_444_800}), "not valid yet (nbf)"),
        (sign({"client_id": "c2"}), "issued for another client id"),
        (sign({"tenant": 7}), "claims of the wrong type"),
        (sign({"client_type": "ROBOT"}), "claims of the wrong type"),
        (sign({"publish_acl": "a/#"}), "claims of the wrong type"),
        (jwt.encode({}, SECRET * 2, "HS384"), "algorithm not accepted"),
    ],
)
def test_each_bad_token_is_refused_with_its_reason(token: str, why: str) -> None:
    assert refused(ask(provider(), token)) == why


def test_a_tampered_payload_does_not_verify() -> None:
    header, _, signature = sign({"sub": "dev"}).split(".")
    forged = base64.urlsafe_b64encode(json.dumps({"sub": "admin"}).encode()).rstrip(b"=")
    assert refused(ask(provider(), f"{header}.{forged.decode()}.{signature}")) == (
        "signature does not verify"
    )


def test_issuer_audience_and_leeway() -> None:
    strict = provider(issuer="https://id", audience="mqttq", leeway=30)
    now = time.time()
    good = {"iss": "https://id", "aud": ["other", "mqttq"], "exp": now - 10}
    assert isinstance(ask(strict, sign(good)), Identity)  # expired, but within the leeway
    assert refused(ask(strict, sign({**good, "exp": now - 60}))) == "expired"
    assert refused(ask(strict, sign({**good, "iss": "https://x"}))) == "wrong issuer"
    assert refused(ask(strict, sign({"iss": "https://id"}))) == "wrong audience"
    assert refused(ask(strict, sign({**good, "aud": "other"}))) == "wrong audience"


def test_none_is_never_an_algorithm() -> None:
    with pytest.raises(ValueError, match="none"):
        JwtProvider(algorithms=["HS256", "none"], secret=SECRET)
