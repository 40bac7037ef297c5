"""mqttq.auth.scram byte for byte against the RFCs' worked examples, and its stored form."""

from __future__ import annotations

import base64
import hmac

import pytest

from mqttq.auth.model import Credential
from mqttq.auth.scram import (
    MECHANISMS,
    ScramError,
    ScramServer,
    client_proof,
    make_secret,
    parse_client_final,
    parse_client_first,
    renewed_secrets,
    salted_password,
    scram_secrets,
    secret_from_text,
    secret_to_text,
    server_signature,
)
from mqttq.protocol.enhanced_auth import AUTHENTICATION_METHODS
from tests.scram.scram_client import ScramClient

# RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil".
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_server() -> ScramServer:
    secret = make_secret(
        "SCRAM-SHA-256", "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    )
    return ScramServer(
        "SCRAM-SHA-256",
        parse_client_first(RFC7677_CLIENT_FIRST),
        secret,
        decoy_key=b"decoy",
        server_nonce=RFC7677_SERVER_NONCE,
    )


def test_rfc7677_sha256_exchange_byte_for_byte() -> None:
    server = rfc7677_server()
    assert server.server_first() == RFC7677_SERVER_FIRST
    assert server.server_final(RFC7677_CLIENT_FINAL) == RFC7677_SERVER_FINAL


def test_rfc7677_wrong_proof_is_refused() -> None:
    server = rfc7677_server()
    server.server_first()
    tampered = RFC7677_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHza")
    with pytest.raises(ScramError, match="proof is wrong"):
        server.server_final(tampered)


def test_rfc5802_sha1_math() -> None:
    """RFC 5802 section 5: the proof and the server signature of its SHA-1 example."""
    salted = salted_password("sha1", "pencil", base64.b64decode("QSXCR+Q6sek8bf92"), 4096)
    auth_message = (
        "n=user,r=fyko+d2lbbFgONRv9qkxdawL,"
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096,"
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
    )
    proof = client_proof("sha1", salted, auth_message)
    assert base64.b64encode(proof) == b"v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    server_key = hmac.new(salted, b"Server Key", "sha1").digest()
    signature = server_signature("sha1", server_key, auth_message)
    assert base64.b64encode(signature) == b"rmF9pqV8S7suAoZWja4dJRkFsKQ="


def test_the_test_client_meets_the_rfc_vector() -> None:
    """The test helper's client side reproduces RFC 7677's client-final (it is what the
    end-to-end tests speak)."""
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == RFC7677_CLIENT_FIRST
    assert client.final(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert client.verify(RFC7677_SERVER_FINAL)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_secret_survives_its_stored_form(mechanism: str) -> None:
    secret = make_secret(mechanism, "s3cret pass")
    assert secret_from_text(secret_to_text(secret)) == secret
    assert "s3cret" not in secret_to_text(secret)


def test_mechanisms_are_the_protocol_layers_methods() -> None:
    assert frozenset(MECHANISMS) == AUTHENTICATION_METHODS


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SCRAM-SHA-256$4096$AAAA$AAAA", "five"),
        ("SCRAM-MD5$4096$AAAA$AAAA$AAAA", "unknown SCRAM mechanism"),
        ("SCRAM-SHA-256$12$AAAA$AAAA$AAAA", "out of bounds"),
        ("SCRAM-SHA-256$4096$!!$AAAA$AAAA", "not base64"),
        ("SCRAM-SHA-256$4096$AAAA$AAAA$AAAA", "wrong size"),
    ],
)
def test_a_bad_stored_secret_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScramError, match=message):
        secret_from_text(text)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"p=tls-unique,,n=user,r=abc", "channel binding is not supported"),
        (b"n,a=admin,n=user,r=abc", "authorization identities"),
        (b"x,,n=user,r=abc", "GS2 header"),
        (b"n,,m=ext,n=user,r=abc", "mandatory extensions"),
        (b"n,,n=user", "needs n= and r="),
        (b"n,,n=us\xc3\xa9r,r=abc", "printable ASCII"),
        (b"n,,n=u=2Xs,r=abc", "bad '=' escape"),
        (b"n,,n=,r=abc", "user name is empty"),
        (b"n,,n=user,r=a b", "nonce"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_client_first_refusals_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(ScramError, match=message):
        parse_client_first(data)


def test_escaped_user_names_are_read() -> None:
    assert parse_client_first(b"n,,n=a=2Cb=3Dc,r=xyz").username == "a,b=c"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"c=biws,r=abc", "no proof"),
        (b"c=biws,p=AAAA", "needs c= and r="),
        (b"c=*,r=abc,p=AAAA", "not base64"),
        (b"x=biws,r=abc,p=AAAA", "expected 'c='"),
    ],
)
def test_client_final_refusals_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(ScramError, match=message):
        parse_client_final(data)


def test_non_ascii_password_is_refused_clearly() -> None:
    with pytest.raises(ScramError, match="printable ASCII"):
        make_secret("SCRAM-SHA-256", "pässword")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_unknown_user_gets_a_stable_decoy_and_fails_at_the_proof(mechanism: str) -> None:
    first = parse_client_first(b"n,,n=ghost,r=abcdef")
    one = ScramServer(mechanism, first, None, decoy_key=b"k", server_nonce="x")
    two = ScramServer(mechanism, first, None, decoy_key=b"k", server_nonce="x")
    assert one.server_first() == two.server_first()  # same salt: no tell between tries
    client = ScramClient(mechanism, "ghost", "anything", nonce="abcdef")
    client.first()
    with pytest.raises(ScramError, match="proof is wrong"):
        one.server_final(client.final(one.server_first()))


def test_secrets_are_bound_to_the_password_hash() -> None:
    secrets = scram_secrets("pencil", "scrypt$one")
    assert [secret.mechanism for secret in secrets] == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    credential = Credential("user", "scrypt$one", scram=secrets)
    assert credential.scram_secret("SCRAM-SHA-256") == secrets[0]
    assert secret_from_text(secret_to_text(secrets[1])) == secrets[1]
    changed = Credential("user", "scrypt$two", scram=secrets)
    assert changed.scram_secret("SCRAM-SHA-256") is None
    renewed = renewed_secrets(secrets, "new", "scrypt$two")
    again = Credential("user", "scrypt$two", scram=renewed)
    assert again.scram_secret("SCRAM-SHA-512") == renewed[1]
    assert renewed[0].salt != secrets[0].salt
