"""Checks across keys, made once every key alone has passed its own check: a TLS listener
has its certificate and key, a provider named in `auth.providers` has what it needs, a
Kafka message log has its brokers, the low watermark sits below the high one.
"""

from __future__ import annotations

from typing import Any

from mqttq.config.keys import TLS_LISTENERS
from mqttq.config.schema import AuthSettings, KafkaApplicationSettings
from mqttq.errors import ConfigError

__all__ = ["check_together"]


def check_together(values: dict[str, dict[str, Any]]) -> None:
    """Checks that involve more than one key (each key alone is already valid)."""
    for name in TLS_LISTENERS:
        section = values[name]
        if not section.get("enabled"):
            continue
        for key in ("certfile", "keyfile"):
            if not section.get(key, "").strip():
                raise ConfigError(f"{name}.{key}", f"must be set when [{name}] is present")
        if section.get("identity_as_username") and not section.get("cafile", "").strip():
            raise ConfigError(
                f"{name}.identity_as_username",
                f"needs {name}.cafile (client certificates are only asked for with a CA)",
            )
    _check_auth(values)
    if (
        values["storage"].get("log", "none") == "kafka"
        and not values["kafka"].get("bootstrap_servers", "").strip()
    ):
        raise ConfigError(
            "kafka.bootstrap_servers",
            'must be set when storage.log = "kafka" (e.g. bootstrap_servers = "127.0.0.1:9092")',
        )
    app = values["kafka.application"]
    defaults = KafkaApplicationSettings()
    low = app.get("low_watermark", defaults.low_watermark)
    high = app.get("high_watermark", defaults.high_watermark)
    if low >= high:
        raise ConfigError(
            "kafka.application.low_watermark",
            f"must be below kafka.application.high_watermark ({high}), got {low}",
        )


def _check_auth(values: dict[str, dict[str, Any]]) -> None:
    """The providers named in `auth.providers` have what they need."""
    providers = values["auth"].get("providers", AuthSettings().providers)
    if "jwt" in providers:
        jwt = values["auth.jwt"]
        algorithms = jwt.get("algorithms", ())
        if not algorithms:
            raise ConfigError(
                "auth.jwt.algorithms", 'must be set when auth.providers has "jwt" (e.g. ["HS256"])'
            )
        if any(name.startswith("HS") for name in algorithms) and not jwt.get("secret_env"):
            raise ConfigError(
                "auth.jwt.secret_env", "must name the secret's environment variable for HS*"
            )
        asymmetric = [name for name in algorithms if not name.startswith("HS")]
        keys = [k for k in ("public_key_file", "jwks_file", "jwks_url") if jwt.get(k)]
        if asymmetric and not keys:
            raise ConfigError(
                "auth.jwt.public_key_file",
                f"one of public_key_file, jwks_file or jwks_url must be set for {asymmetric[0]}",
            )
    if "http" in providers and not values["auth.http"].get("url", "").strip():
        raise ConfigError("auth.http.url", 'must be set when auth.providers has "http"')
