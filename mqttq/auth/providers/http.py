"""The `http` provider: the user's own service decides, over one POST per CONNECT.

The request body is JSON: {"client_id", "username", "password" (as UTF-8 text, or
base64 under "password_base64" when it is not UTF-8), "address", "listener", "cert_cn",
"protocol"} (protocol: 3, 4 or 5). The answer:

- 200 with a JSON object: `"result"` decides, "allow" (the default), "deny" or "ignore"
  (SKIP: ask the next provider); an allow may carry "tenant", "client_type" (DEVICE or
  APPLICATION), "username" and "acl": {"publish": [...], "subscribe": [...]} (topic
  filters with %c/%u; a list left out is unrestricted);
- 4xx: deny (0x87 Not authorized; 3.x return code 5);
- a timeout, a 5xx, a body that is not such an object, or the service down: `on_error`,
  "deny" (0x87, reason "unavailable": never cached) or "skip". These failures are logged
  at most once per `error_log_interval` seconds, with the count since the last line.

One aiohttp session (its connection pool) serves every CONNECT.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

import aiohttp

from mqttq.auth.acl import expand_acl
from mqttq.auth.identity import Identity
from mqttq.auth.model import DEFAULT_TENANT, ClientType
from mqttq.auth.providers.base import SKIP, AuthRequest, Decision, not_authorized

__all__ = ["HttpProvider"]

logger = logging.getLogger("mqttq.auth.http")

_DENIED: Final = not_authorized("refused by the authentication service")
_FAILED: Final = not_authorized("the authentication service cannot answer", "unavailable")


class _ServiceError(Exception):
    """The service gave no usable answer (the message says what it gave)."""


class HttpProvider:
    """Asks `url` (see the module docstring)."""

    name = "http"
    cacheable = True

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        headers: Mapping[str, str] | None = None,
        on_error: str = "deny",
        error_log_interval: float = 60.0,
    ) -> None:
        """`headers` are sent as given (`${ENV}` already replaced); `on_error` is deny or
        skip (else ValueError)."""
        if on_error not in ("deny", "skip"):
            raise ValueError("on_error must be deny or skip")
        self.url = url
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.on_error = on_error
        self.error_log_interval = error_log_interval
        self.errors = 0
        """Calls that got no usable answer since start."""
        self._errors_unlogged = 0
        self._last_logged = -float("inf")
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Create the shared HTTP session."""
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            headers=self.headers,
            connector=aiohttp.TCPConnector(limit=256),
        )

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def authenticate(self, request: AuthRequest) -> Decision:
        """The service's answer (see the module docstring)."""
        if self._session is None:
            await self.open()
        try:
            status, body = await self._call(request)
        except (aiohttp.ClientError, TimeoutError, _ServiceError) as exc:
            return self._failed(exc)
        if 400 <= status < 500:
            return _DENIED
        if status != 200:
            return self._failed(_ServiceError(f"HTTP {status}"))
        try:
            return self._decision(body, request)
        except _ServiceError as exc:
            return self._failed(exc)

    async def _call(self, request: AuthRequest) -> tuple[int, bytes]:
        session = self._session
        assert session is not None
        async with session.post(self.url, json=_body(request)) as response:
            return response.status, await response.read()

    def _decision(self, body: bytes, request: AuthRequest) -> Decision:
        try:
            answer = json.loads(body)
        except ValueError:
            raise _ServiceError("a 200 whose body is not JSON") from None
        if not isinstance(answer, dict):
            raise _ServiceError("a 200 whose body is not a JSON object")
        result = answer.get("result", "allow")
        if result == "deny":
            return _DENIED
        if result == "ignore":
            return SKIP
        if result != "allow":
            raise _ServiceError(f'"result" {result!r} (allow, deny or ignore)')
        username = answer.get("username", request.username)
        tenant = answer.get("tenant", DEFAULT_TENANT)
        kind = answer.get("client_type", ClientType.DEVICE.value)
        acl = answer.get("acl", {})
        if (
            not (username is None or isinstance(username, str))
            or not isinstance(tenant, str)
            or not tenant
            or kind not in (ClientType.DEVICE.value, ClientType.APPLICATION.value)
            or not isinstance(acl, dict)
        ):
            raise _ServiceError("an allow with fields of the wrong type")
        lists: list[tuple[str, ...] | None] = []
        for name in ("publish", "subscribe"):
            filters: Any = acl.get(name)
            if filters is None:
                lists.append(None)
            elif isinstance(filters, list) and all(isinstance(f, str) for f in filters):
                lists.append(expand_acl(filters, request.client_id, username))
            else:
                raise _ServiceError(f'"acl.{name}" is not a list of strings')
        return Identity(username, tenant, ClientType(kind), lists[0], lists[1])

    def _failed(self, exc: BaseException) -> Decision:
        self.errors += 1
        self._errors_unlogged += 1
        now = time.monotonic()
        if now - self._last_logged >= self.error_log_interval:
            logger.warning(
                "http auth: %s gave no answer %d time(s) since the last report (%s); on_error = %s",
                self.url,
                self._errors_unlogged,
                _describe(exc),
                self.on_error,
            )
            self._last_logged = now
            self._errors_unlogged = 0
        return SKIP if self.on_error == "skip" else _FAILED


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def _body(request: AuthRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "client_id": request.client_id,
        "username": request.username,
        "address": request.address,
        "listener": request.listener,
        "cert_cn": request.cert_cn,
        "protocol": request.protocol_level,
    }
    password = request.password
    if password is None:
        body["password"] = None
    else:
        try:
            body["password"] = password.decode("utf-8")
        except UnicodeDecodeError:
            body["password"] = None
            body["password_base64"] = base64.b64encode(password).decode("ascii")
    return body
