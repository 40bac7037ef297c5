"""The PROXY protocol, `[sys]` and `[events]` keys: defaults, and mistakes named by key."""

from __future__ import annotations

import pytest

from mqttq.config import parse_settings
from mqttq.errors import ConfigError


def test_defaults() -> None:
    settings = parse_settings(None, {}, {})
    assert settings.listener.proxy_protocol is False
    assert settings.listener.ws.proxy_protocol is False
    assert settings.listener.proxy_trusted == ("127.0.0.1/32", "::1/128")
    assert settings.listener.proxy_header_timeout == 5.0
    assert settings.sys.interval == 0
    assert settings.events.kinds == ()
    assert settings.events.topic == "$events/{kind}/{client_id}"


def test_from_the_file_and_the_environment() -> None:
    text = (
        '[listener]\nproxy_protocol = true\nproxy_trusted = ["10.0.0.0/8"]\n'
        "[listener.ws]\nproxy_protocol = true\n"
        '[sys]\ninterval = 10\n[events]\nkinds = ["connected"]\n'
    )
    settings = parse_settings(text, {"MQTTQ_LISTENER__PROXY_TRUSTED": "10.1.0.0/16, ::1"}, {})
    assert settings.listener.proxy_protocol is True
    assert settings.listener.ws.proxy_protocol is True
    assert settings.listener.proxy_trusted == ("10.1.0.0/16", "::1")
    assert settings.sys.interval == 10.0
    assert settings.events.kinds == ("connected",)


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[listener]\nproxy_trusted = ["10.0.0.300/8"]\n', "listener.proxy_trusted", "CIDR"),
        ('[listener]\nproxy_trusted = "10.0.0.0/8"\n', "listener.proxy_trusted", "array"),
        ("[listener]\nproxy_header_timeout = 0\n", "listener.proxy_header_timeout", "greater"),
        ("[listener.tls]\nproxy_protocol = true\n", "listener.tls.proxy_protocol", "unknown"),
        ("[sys]\ninterval = -1\n", "sys.interval", "0 or more"),
        ('[events]\ntopic = "events/{kind}"\n', "events.topic", "{client_id}"),
        ('[events]\ntopic = "e/+/{kind}/{client_id}"\n', "events.topic", "'+'"),
    ],
)
def test_mistakes_name_the_key(text: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, {}, {})
    assert caught.value.key == key
    assert words in str(caught.value)
