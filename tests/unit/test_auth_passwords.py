"""mqttq.auth.passwords: scrypt hashes that describe themselves."""

from __future__ import annotations

import base64
import hashlib

import pytest

from mqttq.auth.passwords import hash_password, verify_password


@pytest.fixture(scope="module")
def encoded() -> str:
    return hash_password("s3cret pässword")


def test_round_trip(encoded: str) -> None:
    assert verify_password("s3cret pässword", encoded)


def test_encoding_names_scheme_and_parameters(encoded: str) -> None:
    scheme, n, r, p, salt, key = encoded.split("$")
    assert (scheme, n, r, p) == ("scrypt", "16384", "8", "1")
    assert len(base64.b64decode(salt)) == 16
    assert len(base64.b64decode(key)) == 32


@pytest.mark.parametrize("wrong", ["", "s3cret", "s3cret pässword ", "S3cret pässword"])
def test_wrong_password(encoded: str, wrong: str) -> None:
    assert not verify_password(wrong, encoded)


def test_salt_differs_per_hash() -> None:
    first, second = hash_password("same"), hash_password("same")
    assert first != second
    assert first.split("$")[4] != second.split("$")[4]
    assert verify_password("same", first)
    assert verify_password("same", second)


def test_empty_password_round_trips() -> None:
    encoded = hash_password("")
    assert verify_password("", encoded)
    assert not verify_password("x", encoded)


def test_parameters_are_read_from_the_encoding() -> None:
    # A hash made with other (cheaper) parameters still verifies: costs can change later.
    salt = b"0123456789abcdef"
    key = hashlib.scrypt(b"pw", salt=salt, n=1024, r=4, p=2, dklen=24)
    encoded = f"scrypt$1024$4$2${base64.b64encode(salt).decode()}${base64.b64encode(key).decode()}"
    assert verify_password("pw", encoded)
    assert not verify_password("pW", encoded)


def test_unencodable_password_is_refused(encoded: str) -> None:
    assert not verify_password("\ud800", encoded)
    with pytest.raises(UnicodeEncodeError):
        hash_password("\ud800")


def _replace(encoded: str, index: int, value: str) -> str:
    parts = encoded.split("$")
    parts[index] = value
    return "$".join(parts)


MALFORMED = [
    "",
    "scrypt",
    "plain-text-password",
    "bcrypt$2b$12$abcdefghijklmnopqrstuv",
    "scrypt$16384$8$1$c2FsdA==",  # no key
    "scrypt$$8$1$AAAAAAAAAAA=$AAAAAAAAAAAAAAAAAAAAAA==",
]


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_encodings_are_false(bad: str) -> None:
    assert verify_password("anything", bad) is False


@pytest.mark.parametrize(
    ("index", "value"),
    [
        (0, "SCRYPT"),  # unknown scheme (case matters)
        (0, "argon2"),
        (1, "16383"),  # n not a power of two
        (1, "1"),
        (1, "0"),
        (1, "-16384"),
        (1, "0x4000"),
        (1, " 16384"),
        (1, "1073741824"),  # asks for 1 TiB of memory
        (2, "0"),
        (2, "abc"),
        (3, "0"),
        (3, "99"),  # p out of bounds
        (4, "not base64!"),
        (4, ""),  # empty salt
        (4, "c2FsdA=="),  # 4-byte salt: too short
        (5, ""),  # empty key would compare equal to an empty candidate
        (5, "AAAA"),  # 3-byte key: too short
        (5, "%%%%"),
    ],
)
def test_altered_encodings_are_false(encoded: str, index: int, value: str) -> None:
    assert verify_password("s3cret pässword", _replace(encoded, index, value)) is False


def test_extra_field_is_false(encoded: str) -> None:
    assert verify_password("s3cret pässword", encoded + "$x") is False


def test_tampered_key_is_false(encoded: str) -> None:
    key = bytearray(base64.b64decode(encoded.split("$")[5]))
    key[0] ^= 1
    assert not verify_password(
        "s3cret pässword", _replace(encoded, 5, base64.b64encode(key).decode())
    )
