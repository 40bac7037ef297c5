"""JwtKeys: the verification keys of the `jwt` provider, from a PEM file, a JWKS file or a
JWKS URL. A JWKS is re-read every `refresh` seconds, and sooner when a token names a key
id it does not hold (at most once per `MIN_REFETCH` seconds, so a stream of tokens with
made-up key ids cannot turn into a stream of fetches). A fetch that fails keeps the keys
already held and is logged once per refresh interval, with the number of failures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Final

import aiohttp
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from jwt import PyJWK, PyJWKSet
from jwt.exceptions import PyJWKError, PyJWKSetError

__all__ = ["JwksError", "JwtKeys"]

MIN_REFETCH: Final = 10.0
"""Seconds at least between two reads of a JWKS made for unknown key ids (or `refresh`,
when shorter)."""

logger = logging.getLogger("mqttq.auth.jwt")


class JwksError(Exception):
    """A JWKS cannot be read or parsed; the message says which and why."""


def parse_jwks(text: str | bytes, source: str) -> dict[str | None, PyJWK]:
    """Key id -> key of a JWKS document (keys without `kid` under None). Raises JwksError."""
    try:
        document = json.loads(text)
        keys = PyJWKSet.from_dict(document).keys
    except (ValueError, PyJWKSetError, PyJWKError) as exc:
        raise JwksError(f"{source}: not a usable JWKS: {exc}") from None
    return {key.key_id: key for key in keys}


class JwtKeys:
    """Where the `jwt` provider's asymmetric keys come from (any of the three; a key id
    is looked up in the JWKS, a token without one gets the PEM key or the only JWKS key)."""

    def __init__(
        self,
        *,
        public_key_file: str = "",
        jwks_file: str = "",
        jwks_url: str = "",
        refresh: float = 300.0,
        timeout: float = 5.0,
    ) -> None:
        self.public_key_file = public_key_file
        self.jwks_file = jwks_file
        self.jwks_url = jwks_url
        self.refresh = refresh
        self.timeout = timeout
        self.pem_key: Any = None
        self.jwks: dict[str | None, PyJWK] = {}
        self.fetches = 0
        self.failures = 0
        self._failures_unlogged = 0
        self._last_logged = -float("inf")
        self._last_read = -float("inf")
        self._reading: asyncio.Task[None] | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def dynamic(self) -> bool:
        """Whether the keys come from a JWKS (refreshed)."""
        return bool(self.jwks_file or self.jwks_url)

    async def open(self) -> None:
        """Read the PEM key (a bad one raises JwksError: a start-up error) and the JWKS
        (a failure is logged: the broker starts, and tokens are refused until a read
        succeeds), then refresh the JWKS every `refresh` seconds."""
        if self.public_key_file:
            try:
                pem = Path(self.public_key_file).read_bytes()
            except OSError as exc:
                raise JwksError(f"{self.public_key_file}: {exc.strerror}") from None
            try:
                self.pem_key = load_pem_public_key(pem)
            except (ValueError, UnsupportedAlgorithm):
                raise JwksError(f"{self.public_key_file}: not a PEM public key") from None
        if self.jwks_url:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        if self.dynamic:
            await self._read()
            self._refresher = asyncio.create_task(self._refresh_forever())

    async def close(self) -> None:
        """Stop refreshing and close the HTTP session."""
        for task in (self._refresher, self._reading):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._refresher = self._reading = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def key_for(self, kid: str | None) -> Any:
        """The key that verifies a token with key id `kid`; None when no key is held for
        it (after one early re-read of the JWKS for an unknown kid)."""
        key = self._held(kid)
        since = time.monotonic() - self._last_read
        if key is None and self.dynamic and since >= min(MIN_REFETCH, self.refresh):
            await self._read()
            key = self._held(kid)
        return key

    def _held(self, kid: str | None) -> Any:
        if kid is not None:
            found = self.jwks.get(kid)
            return None if found is None else found.key
        if self.pem_key is not None:
            return self.pem_key
        if len(self.jwks) == 1:
            return next(iter(self.jwks.values())).key
        return None

    async def _read(self) -> None:
        # One read at a time: concurrent CONNECTs with unknown kids share it.
        if self._reading is None or self._reading.done():
            self._reading = asyncio.create_task(self._read_now())
        await asyncio.shield(self._reading)

    async def _read_now(self) -> None:
        self._last_read = time.monotonic()
        self.fetches += 1
        try:
            if self.jwks_url:
                self.jwks = parse_jwks(await self._fetch(), self.jwks_url)
            else:
                self.jwks = parse_jwks(
                    await asyncio.to_thread(Path(self.jwks_file).read_bytes), self.jwks_file
                )
        except (JwksError, OSError, aiohttp.ClientError, TimeoutError) as exc:
            self.failures += 1
            self._failures_unlogged += 1
            now = time.monotonic()
            if now - self._last_logged >= self.refresh:
                logger.warning(
                    "jwt: cannot read the JWKS (%d failure(s) since the last report), "
                    "keeping the %d key(s) held: %s",
                    self._failures_unlogged,
                    len(self.jwks),
                    exc or type(exc).__name__,
                )
                self._last_logged = now
                self._failures_unlogged = 0

    async def _fetch(self) -> bytes:
        assert self._session is not None
        async with self._session.get(self.jwks_url) as response:
            if response.status != 200:
                raise JwksError(f"{self.jwks_url}: HTTP {response.status}")
            return await response.read()

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self.refresh)
            await self._read()
