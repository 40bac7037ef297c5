"""ProviderChain: asks the configured providers in order until one allows or denies.

The blocked-clients provider, when set, is asked first, before every configured one.
Answers of providers that allow it (`cacheable`) are remembered for `cache_ttl` seconds
(at most `cache_size` of them, least recently used forgotten first), keyed by the
provider and every field of the request, the password only as a digest keyed with a
per-process secret (so memory holds no fast unsalted hash of anyone's password). An
allow is never remembered past its `expires_at`; a refusal for a passing failure
(`reason == "unavailable"`) is never remembered. Every answer is counted by provider
and outcome (`statistics()`: allow, deny, skip, error) for
`mqttq_auth_decisions_total{provider,outcome}`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from mqttq.auth.identity import AuthRefusal, Identity
from mqttq.auth.ports import AuthStoreError
from mqttq.auth.providers.base import AuthProvider, AuthRequest, Decision, Skip
from mqttq.reasons import ReasonCode

__all__ = ["DEFAULT_CACHE_SIZE", "PROVIDER_NAMES", "ProviderChain"]

PROVIDER_NAMES: Final = ("blocked", "jwt", "http", "x509", "credentials", "scram")
"""The names `[auth] providers` may list."""
DEFAULT_CACHE_SIZE: Final = 10_000
OUTCOMES: Final = ("allow", "deny", "skip", "error")

_NOBODY_BAD = AuthRefusal(
    ReasonCode.BAD_USER_NAME_OR_PASSWORD,
    "bad_credentials",
    "bad user name or password",
)
_NOBODY_NOT_AUTHORIZED = AuthRefusal(
    ReasonCode.NOT_AUTHORIZED, "not_authorized", "no authentication provider accepted the client"
)

_RequestKey = tuple[str, str | None, bytes, str, str, str | None, str | None, int, str | None, bool]
_CacheKey = tuple[str, _RequestKey]


class ProviderChain:
    """The providers of `[auth] providers`, in order (see the module docstring)."""

    __slots__ = (
        "_blocked",
        "_cache",
        "_clock",
        "_counts",
        "_key",
        "cache_hits",
        "cache_size",
        "cache_ttl",
        "providers",
    )

    def __init__(
        self,
        providers: Sequence[AuthProvider],
        *,
        cache_ttl: float = 0.0,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`cache_ttl` seconds (0: nothing is remembered); `clock` gives Unix time."""
        self.providers = tuple(providers)
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self.cache_hits = 0
        self._blocked: AuthProvider | None = None
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[_CacheKey, tuple[float, Identity | AuthRefusal]] = OrderedDict()
        self._counts: dict[tuple[str, str], int] = {}

    @property
    def names(self) -> tuple[str, ...]:
        """The providers asked, in order (the blocked one first when set)."""
        blocked = () if self._blocked is None else (self._blocked.name,)
        return blocked + tuple(provider.name for provider in self.providers)

    def set_blocked(self, provider: AuthProvider | None) -> None:
        """Ask `provider` first, before every configured provider (None: no longer)."""
        self._blocked = provider

    def provider(self, name: str) -> AuthProvider | None:
        """The provider of that name in the chain, None without one."""
        for provider in self.providers:
            if provider.name == name:
                return provider
        blocked = self._blocked
        return blocked if blocked is not None and blocked.name == name else None

    async def open(self) -> None:
        """Open every configured provider (the blocked one is opened by its owner)."""
        for provider in self.providers:
            await provider.open()

    async def close(self) -> None:
        """Close every configured provider, then forget every remembered answer."""
        for provider in self.providers:
            await provider.close()
        self._cache.clear()

    def invalidate(self) -> None:
        """Forget every remembered answer (credentials or a provider's settings changed)."""
        self._cache.clear()

    def forget(self, name: str) -> None:
        """Forget the remembered answers of provider `name`, and let it forget what it
        keeps itself (its `forget()`, when it has one): what it answered may have changed
        (a credential it reads was changed or removed)."""
        for key in [key for key in self._cache if key[0] == name]:
            del self._cache[key]
        provider = self.provider(name)
        forget = getattr(provider, "forget", None)
        if callable(forget):
            forget()

    def statistics(self) -> dict[tuple[str, str], int]:
        """(provider, outcome) -> answers since start; outcomes allow, deny, skip, error."""
        return dict(self._counts)

    async def decide(self, request: AuthRequest) -> Identity | AuthRefusal:
        """The first allow or deny of the chain; when every provider skips, a refusal
        (0x86 with a user name or password, 0x87 without). Raises AuthStoreError (from a
        provider whose service is unreachable: the broker answers 0x88)."""
        blocked = self._blocked
        if blocked is not None:
            decision = await self._ask(blocked, request)
            if not isinstance(decision, Skip):
                return decision
        fields: _RequestKey | None = None
        for provider in self.providers:
            if provider.cacheable and self.cache_ttl > 0:
                if fields is None:
                    fields = self._request_key(request)
                key = (provider.name, fields)
                remembered = self._remembered(key)
                if remembered is not None:
                    self.cache_hits += 1
                    self._count(provider.name, _outcome(remembered))
                    return remembered
                decision = await self._ask(provider, request)
                if not isinstance(decision, Skip):
                    self._remember(key, decision)
                    return decision
                continue
            decision = await self._ask(provider, request)
            if not isinstance(decision, Skip):
                return decision
        if request.username is not None or request.password is not None:
            return _NOBODY_BAD
        return _NOBODY_NOT_AUTHORIZED

    async def _ask(self, provider: AuthProvider, request: AuthRequest) -> Decision:
        try:
            decision = await provider.authenticate(request)
        except AuthStoreError:
            self._count(provider.name, "error")
            raise
        self._count(provider.name, _outcome(decision))
        return decision

    def count(self, name: str, outcome: str) -> None:
        """Count one answer of a mechanism that decides outside the chain (`scram`: MQTT 5
        enhanced authentication) in `mqttq_auth_decisions_total{provider=name,outcome}`."""
        self._count(name, outcome)

    def _count(self, name: str, outcome: str) -> None:
        key = (name, outcome)
        self._counts[key] = self._counts.get(key, 0) + 1

    def _request_key(self, request: AuthRequest) -> _RequestKey:
        password = request.password
        digest = b"" if password is None else hmac.new(self._key, password, hashlib.sha256).digest()
        return (
            request.client_id,
            request.username,
            digest,
            request.address,
            request.listener,
            request.cert_cn,
            request.tenant_property,
            request.protocol_level,
            request.authentication_method,
            request.identity_as_username,
        )

    def _remembered(self, key: _CacheKey) -> Identity | AuthRefusal | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        until, decision = entry
        if self._clock() >= until:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return decision

    def _remember(self, key: _CacheKey, decision: Identity | AuthRefusal) -> None:
        until = self._clock() + self.cache_ttl
        if isinstance(decision, Identity):
            if decision.expires_at is not None:
                until = min(until, decision.expires_at)
        elif decision.reason == "unavailable":
            return
        cache = self._cache
        cache[key] = (until, decision)
        cache.move_to_end(key)
        while len(cache) > self.cache_size:
            cache.popitem(last=False)


def _outcome(decision: Decision) -> str:
    if isinstance(decision, Identity):
        return "allow"
    if isinstance(decision, AuthRefusal):
        return "deny"
    return "skip"
