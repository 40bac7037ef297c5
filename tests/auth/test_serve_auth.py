"""The chain `mqttq serve` builds from `[auth]`: providers in the configured order, secrets
and header values read from the environment, a missing one named by its key."""

from __future__ import annotations

import pytest

from mqttq.auth.authenticator import Authenticator
from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.auth.providers.http import HttpProvider
from mqttq.auth.providers.jwt import JwtProvider
from mqttq.cli.serve_auth import build_chain
from mqttq.config import parse_settings
from mqttq.errors import ConfigError

CONFIG = """
[auth]
providers = ["http", "jwt", "x509", "credentials"]
cache_ttl = 5
[auth.jwt]
algorithms = ["HS256"]
secret_env = "JWT_SECRET"
[auth.http]
url = "http://127.0.0.1:1/auth"
headers = ["Authorization: Bearer ${HTTP_TOKEN}", "X-Fleet: plant-${PLANT}"]
"""


def authenticator() -> Authenticator:
    return Authenticator(EmptyAuthStore(), anonymous="never")


def test_the_chain_has_the_configured_order_and_environment_values() -> None:
    auth = parse_settings(CONFIG, {}, {}).auth
    env = {"JWT_SECRET": "s" * 32, "HTTP_TOKEN": "t0k", "PLANT": "7"}
    chain = build_chain(auth, authenticator(), env)
    assert chain.names == ("http", "jwt", "x509", "credentials")
    assert chain.cache_ttl == 5
    http = chain.provider("http")
    jwt = chain.provider("jwt")
    assert isinstance(http, HttpProvider)
    assert isinstance(jwt, JwtProvider)
    assert http.headers == {"Authorization": "Bearer t0k", "X-Fleet": "plant-7"}
    assert jwt.secret == b"s" * 32


@pytest.mark.parametrize(
    ("missing", "key"), [("JWT_SECRET", "auth.jwt.secret_env"), ("PLANT", "auth.http.headers")]
)
def test_a_missing_environment_variable_names_the_key(missing: str, key: str) -> None:
    auth = parse_settings(CONFIG, {}, {}).auth
    env = {"JWT_SECRET": "s" * 32, "HTTP_TOKEN": "t0k", "PLANT": "7"}
    del env[missing]
    with pytest.raises(ConfigError) as caught:
        build_chain(auth, authenticator(), env)
    assert caught.value.key == key
    assert missing in str(caught.value)
