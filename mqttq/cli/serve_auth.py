"""The authentication provider chain of `mqttq serve`, built from `[auth]`: the settings
become plain values here (the providers sit below the settings tree), secrets are read
from the environment, and the chain's decisions are added to the admin API's /metrics."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from mqttq.auth.providers.base import AuthProvider
from mqttq.auth.providers.chain import ProviderChain
from mqttq.auth.providers.credentials import CredentialsProvider
from mqttq.auth.providers.jwks import JwksError, JwtKeys
from mqttq.auth.providers.jwt import JwtClaims, JwtProvider
from mqttq.errors import ConfigError

if TYPE_CHECKING:
    from mqttq.auth.authenticator import Authenticator
    from mqttq.broker.server import Broker
    from mqttq.cli.serve_admin import AdminHandle
    from mqttq.config import Settings
    from mqttq.config.schema import AuthSettings

__all__ = ["AuthDecisionCollector", "build_chain", "expand_env", "start_auth"]

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(text: str, env: dict[str, str] | os._Environ[str], key: str) -> str:
    """`text` with each `${NAME}` replaced by that environment variable; ConfigError
    naming `key` when one is not set."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ConfigError(key, f"environment variable {name} is not set; export it")
        return env[name]

    return _ENV_REFERENCE.sub(value, text)


def build_chain(
    auth: AuthSettings,
    authenticator: Authenticator,
    env: dict[str, str] | os._Environ[str] = os.environ,
) -> ProviderChain:
    """The providers of `auth.providers` in order ("blocked" is set on the chain by the
    blocked-clients service, "scram" lives in the protocol layer: both are left out
    here). Raises ConfigError naming the key when a secret or header cannot be read."""
    providers: list[AuthProvider] = []
    for name in auth.providers:
        if name == "credentials":
            providers.append(CredentialsProvider(authenticator))
        elif name == "jwt":
            providers.append(_jwt_provider(auth, env))
        elif name == "http":
            providers.append(_http_provider(auth, env))
        elif name == "x509":
            from mqttq.auth.providers.x509 import X509Provider  # noqa: PLC0415

            providers.append(X509Provider(authenticator.store, cn_regex=auth.x509.cn_regex))
    return ProviderChain(providers, cache_ttl=auth.cache_ttl)


def _jwt_provider(auth: AuthSettings, env: dict[str, str] | os._Environ[str]) -> JwtProvider:
    jwt = auth.jwt
    secret = None
    if jwt.secret_env:
        text = env.get(jwt.secret_env)
        if not text:
            raise ConfigError(
                "auth.jwt.secret_env",
                f"environment variable {jwt.secret_env} is not set; export the HS* secret",
            )
        secret = text.encode("utf-8")
    keys = JwtKeys(
        public_key_file=jwt.public_key_file,
        jwks_file=jwt.jwks_file,
        jwks_url=jwt.jwks_url,
        refresh=jwt.jwks_refresh,
    )
    claims = JwtClaims(
        client_id=jwt.client_id_claim,
        username=jwt.username_claim,
        tenant=jwt.tenant_claim,
        client_type=jwt.client_type_claim,
        publish_acl=jwt.publish_claim,
        subscribe_acl=jwt.subscribe_claim,
    )
    return JwtProvider(
        algorithms=jwt.algorithms,
        secret=secret,
        keys=keys,
        token_field=jwt.token_field,
        issuer=jwt.issuer,
        audience=jwt.audience,
        leeway=jwt.leeway,
        claims=claims,
    )


def _http_provider(auth: AuthSettings, env: dict[str, str] | os._Environ[str]) -> AuthProvider:
    from mqttq.auth.providers.http import HttpProvider  # noqa: PLC0415

    http = auth.http
    headers = {}
    for header in http.headers:
        name, _, value = header.partition(":")
        headers[name.strip()] = expand_env(value.strip(), env, "auth.http.headers")
    return HttpProvider(
        http.url,
        timeout=http.timeout,
        headers=headers,
        on_error=http.on_error,
        error_log_interval=http.error_log_interval,
    )


async def start_auth(broker: Broker, settings: Settings) -> ProviderChain:
    """Build the chain, open its providers and put it in front of the broker's CONNECTs
    (the blocked list, when its service set one, stays first). Raises ConfigError for a
    key file or secret that cannot be used."""
    authenticator = broker.authenticator
    chain = build_chain(settings.auth, authenticator)
    try:
        await chain.open()
    except JwksError as exc:
        await chain.close()
        raise ConfigError("auth.jwt.public_key_file", str(exc)) from None
    previous = authenticator.chain
    blocked = None if previous is None else previous.provider("blocked")
    if blocked is not None:
        chain.set_blocked(blocked)
    authenticator.chain = chain
    return chain


class AuthDecisionCollector:
    """`mqttq_auth_decisions_total{provider,outcome}` and `mqttq_auth_cache_hits_total`,
    read from the chain at scrape time."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    def collect(self) -> Iterator[Metric]:
        """The chain's counts now (the chain of the moment: it may be replaced)."""
        chain = self.authenticator.chain
        decisions = CounterMetricFamily(
            "mqttq_auth_decisions",
            "CONNECT authentication answers, by provider and outcome (allow, deny, skip, error).",
            labels=["provider", "outcome"],
        )
        hits = CounterMetricFamily(
            "mqttq_auth_cache_hits", "Authentication answers taken from the chain's cache."
        )
        if chain is not None:
            for (provider, outcome), count in sorted(chain.statistics().items()):
                decisions.add_metric([provider, outcome], count)
            hits.add_metric([], chain.cache_hits)
        yield decisions
        yield hits


def add_auth_metrics(admin: AdminHandle | None, authenticator: Authenticator) -> None:
    """Add the chain's families to the admin API's /metrics registry (when it runs)."""
    if admin is not None:
        admin.server.add_collector(AuthDecisionCollector(authenticator))
