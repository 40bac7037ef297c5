"""AdminClient: a small synchronous JSON client of the admin HTTP API (mqttq.admin.server).

Used by `mqttq tenant`, `mqttq credentials` and `mqttq integration` when a broker is
running. Every route is reached by `call(operation_id, ...)`, from the route table
(mqttq.admin.api_table): its method and path, the path parameters filled in as single
segments and the query checked against the route's parameters; the named methods below
are that call for the routes those commands use. Each returns the decoded JSON body
(None for 204). A JSON error answer raises
AdminApiError with its status, message and field; a broker that cannot be reached raises
AdminUnreachable. Plain urllib: a CLI call makes a handful of requests, and importing no
HTTP library keeps it quick to start.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from http.client import HTTPException
from typing import Any, Final

from mqttq.admin.api_table import route_by_operation
from mqttq.errors import MqttqError

__all__ = ["AdminApiError", "AdminClient", "AdminUnreachable", "admin_url"]

JSON = dict[str, Any]

API: Final = "/api/v1"
TEST_TIMEOUT: Final = 60.0
"""Seconds `test_integration` waits for the broker to try the sink."""


def admin_url(host: str, port: int) -> str:
    """Where clients reach an admin API bound to host:port: `http://HOST:PORT`, a wildcard
    host as the loopback address, an IPv6 one in brackets."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class AdminApiError(MqttqError):
    """The API answered with an error status; `field` names what the API blames (every
    4xx names one: a body field, a parameter, `body`, `Authorization`, ...), else None."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(f"admin API: {message} (HTTP {status})")
        self.status = status
        self.message = message
        self.field = field


class AdminUnreachable(MqttqError):
    """No HTTP answer at `url` (refused, timed out, not HTTP)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the admin API at {url}: {reason}")
        self.url = url
        self.reason = reason


class AdminClient:
    """Calls the admin API at `url` (scheme, host and port: `http://127.0.0.1:18083`)
    with `Authorization: Bearer <token>`; each call waits at most `timeout` seconds."""

    def __init__(self, url: str, token: str, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        # No proxy from the environment: the admin API is usually on loopback, and a proxy
        # would see the bearer token.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # any route ---------------------------------------------------------------------------
    def call(
        self,
        operation_id: str,
        body: Mapping[str, Any] | None = None,
        *,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, str | int] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The route `operation_id` of the table with `path` filled into its `{name}`
        segments, `query` as its query string (ValueError for a parameter the route does
        not take) and `body` as its JSON body; the decoded answer (None for 204)."""
        route = route_by_operation(operation_id)
        url_path = route.path
        for name, value in (path or {}).items():
            url_path = url_path.replace(f"{{{name}}}", _segment(value))
        if "{" in url_path:
            raise ValueError(f"{operation_id}: path parameters missing in {url_path}")
        given = {key: str(value) for key, value in (query or {}).items()}
        known = {param.name for param in route.query}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"{operation_id} takes no query parameter {', '.join(unknown)}")
        if given:
            url_path += "?" + urllib.parse.urlencode(given)
        return self._call(
            route.method,
            url_path,
            None if body is None else dict(body),
            authorize=route.role != "public",
            timeout=timeout,
        )

    def call_object(
        self, operation_id: str, body: Mapping[str, Any] | None = None, **path: str
    ) -> JSON:
        """`call` for a route answering a JSON object; `path` fills its `{name}`
        segments."""
        value = self.call(operation_id, body, path=path)
        if not isinstance(value, dict):
            route = route_by_operation(operation_id)
            raise AdminApiError(
                200, f"{route.method} {route.path} answered {value!r}, not a JSON object"
            )
        return value

    # health ------------------------------------------------------------------------------
    def health(self) -> JSON:
        """GET /health (needs no token): status, version, uptime_seconds, mqtt_port."""
        return self.call_object("health")

    # tenants and limits ------------------------------------------------------------------
    def list_tenants(self) -> JSON:
        """GET /api/v1/tenants: {"default_quota": {...}, "tenants": [tenant, ...]}."""
        return self.call_object("listTenants")

    def get_tenant(self, name: str) -> JSON:
        """GET /api/v1/tenants/{name}: the tenant (404 raises AdminApiError)."""
        return self.call_object("getTenant", name=name)

    def put_tenant(self, name: str, fields: Mapping[str, Any]) -> JSON:
        """PUT /api/v1/tenants/{name} with a subset of the quota fields: the tenant as
        stored and applied."""
        return self.call_object("putTenant", fields, name=name)

    def delete_tenant(self, name: str) -> None:
        """DELETE /api/v1/tenants/{name} (404 raises AdminApiError)."""
        self.call("deleteTenant", path={"name": name})

    # credentials -------------------------------------------------------------------------
    def list_credentials(self, tenant: str | None = None) -> JSON:
        """GET /api/v1/credentials[?tenant=]: {"credentials": [credential, ...]}."""
        query = None if tenant is None else {"tenant": tenant}
        value = self.call("listCredentials", query=query)
        if not isinstance(value, dict):
            raise AdminApiError(200, f"GET {API}/credentials answered {value!r}, not an object")
        return value

    def get_credential(self, username: str) -> JSON:
        """GET /api/v1/credentials/{username} (404 raises AdminApiError)."""
        return self.call_object("getCredential", username=username)

    def add_credential(self, body: Mapping[str, Any]) -> JSON:
        """POST /api/v1/credentials: the credential created (409 when the username is
        taken)."""
        return self.call_object("addCredential", body)

    def put_credential(self, username: str, body: Mapping[str, Any]) -> JSON:
        """PUT /api/v1/credentials/{username} with the fields to change."""
        return self.call_object("putCredential", body, username=username)

    def delete_credential(self, username: str) -> None:
        """DELETE /api/v1/credentials/{username} (404 raises AdminApiError)."""
        self.call("deleteCredential", path={"username": username})

    # integrations ------------------------------------------------------------------------
    def list_integrations(self) -> list[JSON]:
        """GET /api/v1/integrations: the status of every integration, by name."""
        value = self.call("listIntegrations")
        if not isinstance(value, list):
            raise AdminApiError(200, f"GET {API}/integrations answered {value!r}, not an array")
        return value

    def get_integration(self, name: str) -> JSON:
        """GET /api/v1/integrations/{name}: its status (404 raises AdminApiError)."""
        return self.call_object("getIntegration", name=name)

    def add_integration(self, table: Mapping[str, Any]) -> JSON:
        """POST /api/v1/integrations with the integration's table: its status (400 names
        the key at fault, 409 when the name is taken)."""
        return self.call_object("addIntegration", table)

    def update_integration(self, name: str, changes: Mapping[str, Any]) -> JSON:
        """PUT /api/v1/integrations/{name} with the keys to replace ("***" keeps a
        secret, null removes a key): its status."""
        return self.call_object("putIntegration", changes, name=name)

    def delete_integration(self, name: str) -> None:
        """DELETE /api/v1/integrations/{name}: stopped, its backlog deleted."""
        self.call("deleteIntegration", path={"name": name})

    def pause_integration(self, name: str) -> JSON:
        """POST /api/v1/integrations/{name}/pause: its status."""
        return self.call_object("pauseIntegration", name=name)

    def resume_integration(self, name: str) -> JSON:
        """POST /api/v1/integrations/{name}/resume: its status."""
        return self.call_object("resumeIntegration", name=name)

    def test_integration(self, name: str) -> JSON:
        """POST /api/v1/integrations/{name}/test: {"answer": what the sink said}; a sink
        that fails raises AdminApiError with status 502 and the sink's reason. Waits up
        to TEST_TIMEOUT: the sink's own timeout decides how long the broker tries."""
        value = self.call(
            "testIntegration", path={"name": name}, timeout=max(self.timeout, TEST_TIMEOUT)
        )
        if not isinstance(value, dict):
            raise AdminApiError(200, f"POST {API}/integrations/.../test answered {value!r}")
        return value

    # transport ---------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        body: JSON | None = None,
        *,
        authorize: bool = True,
        timeout: float | None = None,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if authorize:
            request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            wait = self.timeout if timeout is None else timeout
            with self._opener.open(request, timeout=wait) as response:
                raw: bytes = response.read()
        except urllib.error.HTTPError as error:
            with error:
                raise _api_error(error.code, error.read(), error.reason) from None
        except urllib.error.URLError as error:
            raise AdminUnreachable(self.url, _reason(error.reason)) from None
        except (OSError, HTTPException) as error:
            # Timeouts and connections closed mid-answer surface here, not as URLError.
            raise AdminUnreachable(self.url, _reason(error)) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise AdminApiError(200, f"{method} {path} answered something not JSON") from None


def _segment(value: str) -> str:
    """`value` as one path segment: a `/` or `?` in a name must not change the route."""
    return urllib.parse.quote(value, safe="")


def _api_error(status: int, raw: bytes, reason: object) -> AdminApiError:
    message = str(reason) or f"HTTP {status}"
    field: str | None = None
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("error"), str):
            message = body["error"]
        if isinstance(body.get("field"), str):
            field = body["field"]
    return AdminApiError(status, message, field)


def _reason(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    if isinstance(reason, TimeoutError) or str(reason) == "timed out":
        return "timed out"
    return str(reason) or type(reason).__name__
