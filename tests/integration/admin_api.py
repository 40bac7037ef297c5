"""A minimal admin-API client for the end-to-end tests: finds a running `mqttq serve`'s
API through <data_dir>/admin.json and its token in <data_dir>/admin-token, and speaks
JSON over real HTTP (urllib; deliberately not mqttq's own client)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.waiting import wait_for

CREDENTIAL_KEYS = frozenset(
    {
        "username",
        "tenant",
        "client_type",
        "client_id_pattern",
        "scram",
        "x509_cn",
        "publish_acl",
        "subscribe_acl",
        "acl_rules",
        "created_at",
        "updated_at",
    }
)
"""The fields of a credential as the admin API (and `mqttq credentials --json`) shows it:
never a password or its hash."""


class AdminApi:
    """Calls return (status, decoded JSON body or text)."""

    def __init__(self, data_dir: Path, token: str | None = None) -> None:
        discovery = wait_for(
            lambda: _read_json(data_dir / "admin.json"), what="the admin API discovery file"
        )
        self.url = str(discovery["url"])
        self.token = token if token is not None else (data_dir / "admin-token").read_text().strip()

    def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token if token is not None else self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, _decode(response.read(), response.headers)
        except urllib.error.HTTPError as error:
            return error.code, _decode(error.read(), error.headers)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        """The call's body, asserting a 2xx status."""
        status, payload = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path} -> {status} {payload}"
        return payload

    def add_credential(self, username: str, password: str, **fields: Any) -> Any:
        return self.ok(
            "POST", "/api/v1/credentials", {"username": username, "password": password, **fields}
        )

    def set_tenant(self, name: str, **quota: Any) -> Any:
        return self.ok("PUT", f"/api/v1/tenants/{name}", quota)

    def metrics(self) -> str:
        status, text = self.call("GET", "/metrics")
        assert status == 200, text
        return str(text)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _decode(raw: bytes, headers: Any) -> Any:
    if not raw:
        return None
    if "json" in (headers.get("Content-Type") or ""):
        return json.loads(raw)
    return raw.decode()


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of sample `name{labels}` in Prometheus text, None when absent."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None
