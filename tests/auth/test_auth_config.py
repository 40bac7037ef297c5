"""`[auth]` provider settings: the issue's example loads as written; mistakes name the key."""

from __future__ import annotations

import pytest

from mqttq.config import parse_settings
from mqttq.errors import ConfigError

ISSUE_EXAMPLE = """
[auth]
providers = ["jwt", "credentials"]     # the order they are asked in
[auth.jwt]
algorithms = ["HS256"]
secret_env = "MQTTQ_JWT_SECRET"        # HS*: the secret's environment variable
# public_key_file / jwks_url for RS*/ES*; issuer, audience; claim names for tenant and ACLs
"""


def test_the_issue_example_loads_as_written() -> None:
    auth = parse_settings(ISSUE_EXAMPLE, {}, {}).auth
    assert auth.providers == ("jwt", "credentials")
    assert auth.jwt.algorithms == ("HS256",)
    assert auth.jwt.secret_env == "MQTTQ_JWT_SECRET"
    assert auth.cache_ttl == 60.0


def test_the_default_chain_is_the_credentials_alone() -> None:
    assert parse_settings(None, {}, {}).auth.providers == ("credentials",)


def test_providers_from_the_environment() -> None:
    env = {"MQTTQ_AUTH__PROVIDERS": "http,credentials", "MQTTQ_AUTH_HTTP__URL": "http://h/a"}
    auth = parse_settings(None, env, {}).auth
    assert auth.providers == ("http", "credentials")
    assert auth.http.url == "http://h/a"


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('[auth]\nproviders = ["jwtt"]\n', "auth.providers", "did you mean 'jwt'"),
        ('[auth]\nproviders = "jwt"\n', "auth.providers", "expected an array of strings"),
        ("[auth]\nproviders = []\n", "auth.providers", "at least one"),
        ('[auth]\nproviders = ["jwt", "jwt"]\n', "auth.providers", "twice"),
        ("[auth]\ncache_ttl = -1\n", "auth.cache_ttl", "0 or more"),
        ('[auth]\nproviders = ["jwt"]\n', "auth.jwt.algorithms", "must be set"),
        ('[auth.jwt]\nalgorithms = ["none"]\n', "auth.jwt.algorithms", "never accepted"),
        ('[auth.jwt]\nalgorithms = ["HS257"]\n', "auth.jwt.algorithms", "HS256"),
        (
            '[auth]\nproviders = ["jwt"]\n[auth.jwt]\nalgorithms = ["HS256"]\n',
            "auth.jwt.secret_env",
            "environment variable",
        ),
        (
            '[auth]\nproviders = ["jwt"]\n[auth.jwt]\nalgorithms = ["RS256"]\n',
            "auth.jwt.public_key_file",
            "jwks_url",
        ),
        ('[auth.jwt]\ntoken_field = "header"\n', "auth.jwt.token_field", "password, username"),
        ('[auth.jwt]\njwks_url = "ftp://x"\n', "auth.jwt.jwks_url", "http://"),
        ('[auth]\nproviders = ["http"]\n', "auth.http.url", "must be set"),
        ('[auth.http]\non_error = "allow"\n', "auth.http.on_error", "deny, skip"),
        ('[auth.http]\nheaders = ["no colon"]\n', "auth.http.headers", "Name: value"),
        ("[auth.http]\ntimeout = 0\n", "auth.http.timeout", "greater than 0"),
        ('[auth.x509]\ncn_regex = "dev-.*"\n', "auth.x509.cn_regex", "(?P<cn>"),
        ('[auth.x509]\ncn_regex = "("\n', "auth.x509.cn_regex", "regular expression"),
        ('[auth.jwt]\nalgoritms = ["HS256"]\n', "auth.jwt.algoritms", "auth.jwt.algorithms"),
    ],
)
def test_mistakes_name_the_key(text: str, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, {}, {})
    assert caught.value.key == key
    assert fragment in str(caught.value)
