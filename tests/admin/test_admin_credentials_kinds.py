"""Credentials of the other kinds through the admin API (issue 35's CLI sends them): `scram`
stores SCRAM-SHA-256/512 secrets made from the password (checked here against RFC 5802's
StoredKey, computed without mqttq), renews them with a new password and removes them;
`x509_cn` makes an x509 credential, which has no password. Bad values name their field."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqttq.auth.model import Credential
from mqttq.auth.providers.x509 import x509_pattern
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.admin.real_broker import RealBroker

API = "/api/v1/credentials"


@pytest.fixture
def real(tmp_path: Path) -> Iterator[RealBroker]:
    running = RealBroker(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def stored(real: RealBroker, username: str) -> Credential:
    credential = real.call(real.store.get_credential(username))
    assert isinstance(credential, Credential)
    return credential


def proves(credential: Credential, password: str) -> list[str]:
    """The mechanisms whose usable secret a client knowing `password` can log in with:
    StoredKey = H(HMAC(Hi(password, salt, i), "Client Key")) [RFC 5802 section 3]."""
    valid = []
    for mechanism, name in (("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")):
        secret = credential.scram_secret(mechanism)
        if secret is None:
            continue
        salted = hashlib.pbkdf2_hmac(name, password.encode(), secret.salt, secret.iterations)
        client_key = hmac.new(salted, b"Client Key", name).digest()
        if hashlib.new(name, client_key).digest() == secret.stored_key:
            valid.append(mechanism)
    return valid


def refused(real: RealBroker, method: str, path: str, body: dict[str, Any]) -> tuple[int, str]:
    answer = real.http(method, path, body)
    return answer.status, answer.body["field"]


def test_scram_secrets_made_renewed_and_removed(real: RealBroker) -> None:
    real.ok("POST", API, {"username": "s", "password": "first", "scram": True})
    assert proves(stored(real, "s"), "first") == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    real.ok("PUT", f"{API}/s", {"password": "second"})
    assert proves(stored(real, "s"), "second") == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    real.ok("PUT", f"{API}/s", {"scram": False})
    assert stored(real, "s").scram == ()
    real.ok("PUT", f"{API}/s", {"password": "third", "scram": True})
    assert proves(stored(real, "s"), "third") == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    real.ok("POST", API, {"username": "plain", "password": "p"})
    assert stored(real, "plain").scram == ()


def test_bad_scram_requests_name_scram(real: RealBroker) -> None:
    real.ok("POST", API, {"username": "s", "password": "p"})
    assert refused(real, "PUT", f"{API}/s", {"scram": True}) == (400, "scram")
    assert refused(real, "PUT", f"{API}/s", {"scram": "yes"}) == (400, "scram")
    assert refused(real, "POST", API, {"username": "t", "password": "p", "scram": 1}) == (
        400,
        "scram",
    )
    assert stored(real, "s").scram == ()


def test_x509_credential_has_no_password(real: RealBroker) -> None:
    made = real.ok("POST", API, {"username": "cams", "x509_cn": "cam-[0-9]+", "tenant": "acme"})
    assert (made["username"], made["tenant"]) == ("cams", "acme")
    assert x509_pattern(stored(real, "cams")) == "cam-[0-9]+"
    with_password = {"username": "x", "x509_cn": "a", "password": "p"}
    assert refused(real, "POST", API, with_password) == (400, "password")
    assert refused(real, "POST", API, {"username": "x", "x509_cn": "("}) == (400, "x509_cn")
    assert refused(real, "POST", API, {"username": "x", "x509_cn": ""}) == (400, "x509_cn")
    with_scram = {"username": "x", "x509_cn": "a", "scram": True}
    assert refused(real, "POST", API, with_scram) == (400, "scram")
    assert refused(real, "POST", API, {"username": "x"}) == (400, "password")


def test_cli_without_a_broker_stores_the_same_kinds(tmp_path: Path) -> None:
    """`mqttq credentials add --scram` and `--x509-cn` with no broker running write the
    credential database directly, checked as the API checks them."""
    data = tmp_path / "data"

    def mqttq(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mqttq", "credentials", *args, "--data-dir", str(data)]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    made = mqttq("add", "s", "--password", "pw", "--scram")
    assert made.returncode == 0, made.stderr
    assert mqttq("add", "cams", "--x509-cn", "cam-[0-9]+").returncode == 0
    bad = mqttq("add", "x", "--x509-cn", "(")
    assert bad.returncode == 2
    assert bad.stderr.startswith("mqttq: error: --x509-cn '(': ")

    async def read() -> tuple[Credential | None, Credential | None]:
        store = SqliteAuthStore(data / "auth.db")
        await store.open()
        try:
            return await store.get_credential("s"), await store.get_credential("cams")
        finally:
            await store.close()

    scram, x509 = asyncio.run(read())
    assert scram is not None and x509 is not None
    assert proves(scram, "pw") == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert x509_pattern(x509) == "cam-[0-9]+"
