"""The jwt provider end to end: a real broker (`mqttq serve` in this process), tokens signed
in the test with real HS256, RS256 and ES256 keys, a JWKS file and a JWKS URL served by a
real aiohttp service; every bad token refused as a wrong password is, and counted."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import jwt
import pytest

from tests.auth.service import AuthService, closed_port
from tests.auth.tokens import claims, ec_pair, jwks_of, rsa_pair
from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import RC, SUBACK, assert_disconnected_with

pytestmark = pytest.mark.mqttq_only

MAXIMUM_CONNECT_TIME = 0xA0

SECRET = "a-test-secret-of-32-bytes-or-more!"
ISSUER = "https://id.example"
AUDIENCE = "mqttq"
HS_CONFIG = f"""
[auth]
anonymous = "never"
providers = ["jwt", "credentials"]
[auth.jwt]
algorithms = ["HS256"]
secret_env = "MQTTQ_TEST_JWT_SECRET"
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
"""


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQTTQ_TEST_JWT_SECRET", SECRET)


def hs256(**extra: object) -> bytes:
    payload = claims(iss=ISSUER, aud=AUDIENCE, **extra)
    return jwt.encode(payload, SECRET, "HS256").encode()


def test_a_good_hs256_token_connects_with_its_tenant_and_acls(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=HS_CONFIG)
    token = hs256(sub="dev-1", client_id="dev-1", tenant="acme", subscribe_acl=["devices/%c/#"])
    client = clients.raw(broker)
    assert client.connect("dev-1", password=token).reason_code == 0
    mine = client.subscribe(("devices/dev-1/#", 1))
    theirs = client.subscribe(("devices/dev-2/#", 1))
    assert (mine.type, mine.reason_codes) == (SUBACK, (1,))
    assert theirs.reason_codes == (RC.NOT_AUTHORIZED,)
    sessions = AdminApi(broker.data_dir).ok("GET", "/api/v1/sessions")
    assert [(s["client_id"], s["tenant"]) for s in sessions["sessions"]] == [("dev-1", "acme")]


def test_every_bad_token_is_refused_like_a_wrong_password_and_counted(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=HS_CONFIG)
    bystander = clients.raw(broker)
    assert bystander.connect("bystander", password=hs256()).reason_code == 0
    now = int(time.time())
    other = rsa_pair()
    good_claims = {"iss": ISSUER, "aud": AUDIENCE}
    bad = {
        "malformed": b"abc.def.ghi",
        "wrong key": jwt.encode(claims(**good_claims), "another-secret-of-32-bytes-long!", "HS256"),
        "wrong alg": jwt.encode(claims(**good_claims), SECRET * 2, "HS512"),
        "alg none": jwt.encode(claims(**good_claims), None, "none"),
        "rs256 not listed": other.sign(claims(**good_claims)),
        "expired": hs256(exp=now - 60),
        "nbf in the future": hs256(nbf=now + 3600),
        "wrong issuer": jwt.encode(
            claims(iss="https://evil.example", aud=AUDIENCE), SECRET, "HS256"
        ),
        "wrong audience": jwt.encode(claims(iss=ISSUER, aud="other"), SECRET, "HS256"),
        "other client id": hs256(client_id="someone-else"),
    }
    # 3.1.1 sends a password only with a user name [MQTT-3.1.2-22].
    for level, expected in ((5, RC.BAD_USER_NAME_OR_PASSWORD), (4, 4)):
        for what, token in bad.items():
            client = clients.raw(broker)
            password = token if isinstance(token, bytes) else token.encode()
            connack = client.connect(
                "c1", level=level, username="dev", password=password, expect_success=False
            )
            assert connack.reason_code == expected, (level, what, connack)
            client.wait_closed()
    bystander.ping()  # the others carry on
    metrics = AdminApi(broker.data_dir).metrics()
    denied = metric_value(metrics, "mqttq_auth_decisions_total", provider="jwt", outcome="deny")
    assert denied == 2 * len(bad)
    allowed = metric_value(metrics, "mqttq_auth_decisions_total", provider="jwt", outcome="allow")
    assert allowed == 1
    refused = metric_value(metrics, "mqttq_refusals_total", tenant="default", reason="bad_token")
    assert refused == 2 * len(bad)


def test_a_password_that_is_no_token_goes_on_to_the_credentials(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=HS_CONFIG)
    AdminApi(broker.data_dir).add_credential("alice", "s3cret")
    assert clients.raw(broker).connect("a", username="alice", password=b"s3cret").reason_code == 0
    refused = clients.raw(broker).connect(
        "b", username="alice", password=b"wrong", expect_success=False
    )
    assert refused.reason_code == RC.BAD_USER_NAME_OR_PASSWORD
    metrics = AdminApi(broker.data_dir).metrics()
    assert metric_value(metrics, "mqttq_auth_decisions_total", provider="jwt", outcome="skip") == 2


def test_rs256_from_a_pem_file_and_es256_from_a_jwks_file(
    broker_factory: BrokerFactory, clients: Clients, tmp_path: Path
) -> None:
    rsa_key = rsa_pair()
    ec_key = ec_pair()
    pem = rsa_key.write_pem(tmp_path / "public.pem")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(jwks_of(ec_key)))
    for config_keys, key in (
        (f'public_key_file = "{pem}"', rsa_key),
        (f'jwks_file = "{jwks}"', ec_key),
    ):
        broker = broker_factory(
            config=f'[auth]\nanonymous = "never"\nproviders = ["jwt"]\n'
            f'[auth.jwt]\nalgorithms = ["RS256", "ES256"]\n{config_keys}\n'
        )
        good = key.sign(claims(sub="u"), kid=key is ec_key)
        assert clients.raw(broker).connect("k", password=good).reason_code == 0
        wrong = (ec_key if key is rsa_key else rsa_key).sign(claims(sub="u"))
        refused = clients.raw(broker).connect("k2", password=wrong, expect_success=False)
        assert refused.reason_code == RC.BAD_USER_NAME_OR_PASSWORD


def test_a_jwks_url_is_fetched_and_refetched_for_a_new_key_id(
    broker_factory: BrokerFactory, clients: Clients, auth_service: AuthService
) -> None:
    first, second = rsa_pair("k1"), rsa_pair("k2")
    auth_service.jwks = jwks_of(first)
    broker = broker_factory(
        config='[auth]\nanonymous = "never"\nproviders = ["jwt"]\n'
        f'[auth.jwt]\nalgorithms = ["RS256"]\njwks_url = "{auth_service.url}/jwks"\n'
        "jwks_refresh = 1\n"
    )
    assert clients.raw(broker).connect("a", password=first.sign(claims())).reason_code == 0
    auth_service.jwks = jwks_of(first, second)  # the identity service rotates its keys

    def second_key_works() -> bool:
        client = clients.raw(broker)
        connack = client.connect("b", password=second.sign(claims()), expect_success=False)
        client.close()
        return connack.reason_code == 0

    wait_for(second_key_works, what="a token signed with the new key accepted")
    assert auth_service.jwks_requests >= 2


def test_a_token_in_the_user_name(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=HS_CONFIG + 'token_field = "username"\n')
    token = hs256(sub="from-token").decode()
    assert clients.raw(broker).connect("u", username=token).reason_code == 0


@pytest.mark.parametrize("level", [5, 4])
def test_an_expiring_token_disconnects_its_client_only(
    broker_factory: BrokerFactory, clients: Clients, level: int
) -> None:
    broker = broker_factory(config=HS_CONFIG)
    bystander = clients.raw(broker)
    assert bystander.connect("bystander", password=hs256()).reason_code == 0
    short = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 2}, SECRET, "HS256"
    ).encode()
    client = clients.raw(broker)
    connack = client.connect("short-lived", level=level, username="dev", password=short)
    assert connack.reason_code == 0
    packets = client.wait_closed()
    if level == 5:
        assert_disconnected_with(packets, MAXIMUM_CONNECT_TIME)
    else:
        assert packets == []  # 3.1.1 has no DISCONNECT from the server: a plain close
    bystander.ping()


def test_a_reconnect_with_a_fresh_token_is_not_cut_by_the_old_tokens_expiry(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=HS_CONFIG)
    base = {"iss": ISSUER, "aud": AUDIENCE}
    short = jwt.encode({**base, "exp": int(time.time()) + 3}, SECRET, "HS256").encode()
    first = clients.raw(broker)
    assert first.connect("device", password=short).reason_code == 0
    watcher = clients.raw(broker)  # the same short token: shows when it has expired
    assert watcher.connect("watcher", password=short).reason_code == 0
    second = clients.raw(broker)  # takes the session over with a token valid for an hour
    assert second.connect("device", clean=False, password=hs256()).reason_code == 0
    first.wait_closed()  # taken over
    assert_disconnected_with(watcher.wait_closed(), MAXIMUM_CONNECT_TIME)
    second.ping()  # the device on its fresh token was not cut


def test_a_jwks_that_cannot_be_fetched_refuses_tokens_and_is_logged_once(
    broker_factory: BrokerFactory, clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mqttq.auth.jwt")
    key = rsa_pair()
    broker = broker_factory(
        config='[auth]\nanonymous = "never"\nproviders = ["jwt"]\n'
        f'[auth.jwt]\nalgorithms = ["RS256"]\njwks_url = "http://127.0.0.1:{closed_port()}/jwks"\n'
    )
    for attempt in range(3):
        client = clients.raw(broker)
        connack = client.connect(f"c{attempt}", password=key.sign(claims()), expect_success=False)
        assert connack.reason_code == RC.BAD_USER_NAME_OR_PASSWORD
        client.wait_closed()
    lines = [r.getMessage() for r in caplog.records if r.name == "mqttq.auth.jwt"]
    assert len(lines) == 1, lines
    assert "cannot read the JWKS" in lines[0]
    metrics = AdminApi(broker.data_dir).metrics()
    assert metric_value(metrics, "mqttq_auth_decisions_total", provider="jwt", outcome="deny") == 3
