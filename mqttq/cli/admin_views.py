"""How `mqttq tenant`, `mqttq credentials` and `mqttq integration` show tenants,
credentials and integrations.

Both commands print the admin API's JSON shapes (`--json`) or rich tables built from them,
whether the data came from a running broker's API or straight from the database: direct
mode turns model objects into the same shapes (`mqttq.admin.shapes`), so
the two modes print the same thing. Notes about where a command went go to stderr, so
stdout holds only the result.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mqttq.limits.quota import QUOTA_FIELDS

__all__ = [
    "JSON",
    "QUOTA_LABELS",
    "note",
    "print_json",
    "render_credential",
    "render_credentials",
    "render_integration",
    "render_integrations",
    "render_tenant",
    "render_tenants",
    "say",
]

JSON = dict[str, Any]

QUOTA_LABELS: Final = {
    "max_connections_per_node": "max conns",
    "max_connection_rate": "conn/s",
    "max_topics": "max topics",
    "max_sessions": "max sessions",
    "max_publish_rate": "publish/s",
}
"""Short column headers of the five quota fields, in QUOTA_FIELDS order."""
USAGE_FIELDS: Final = ("connections", "sessions", "topics")


# --- JSON shapes (those of the admin API) ---------------------------------------------------


# --- output ---------------------------------------------------------------------------------


def print_json(data: Any) -> None:
    """`data` as one line of JSON on stdout."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")


def note(message: str) -> None:
    """A dim line on stderr (where a command went), never mixed into stdout."""
    Console(stderr=True, soft_wrap=True, highlight=False).print(Text(message, style="dim"))


def say(message: str) -> None:
    """A one-line result on stdout (`tenant 'acme' removed`)."""
    _stdout().print(Text(message))


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}"


def _time(value: Any) -> str:
    """Seconds since the epoch as local time; anything else (a string) as given."""
    if isinstance(value, bool) or value is None or value == 0:
        return "-"
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _acl(filters: Sequence[str] | None) -> str:
    if filters is None:
        return "-"
    return "\n".join(filters) if filters else "(nothing)"


def _rules(rules: Sequence[Mapping[str, Any]] | None) -> str:
    if not rules:
        return "(none)"
    return "\n".join(
        f"{rule.get('permission')} {rule.get('action')} {rule.get('topic')}" for rule in rules
    )


_UNITS: Final = ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"))


def _compact(value: Any) -> str:
    """A limit for a narrow table, still exact: 10M, 2.5, 12,345 (a unit only when the
    value is a whole number of it)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == int(value):
        whole = int(value)
        for unit, suffix in _UNITS:
            if whole >= unit and whole % unit == 0:
                return f"{whole // unit:,}{suffix}"
    return _number(value)


# Columns of `tenant ls`: the count limits (with the usage when a broker gave it), then
# the rates.
_COUNT_COLUMNS: Final = (
    ("max_connections_per_node", "conns", "connections"),
    ("max_sessions", "sessions", "sessions"),
    ("max_topics", "topics", "topics"),
)
_RATE_COLUMNS: Final = (("max_connection_rate", "conn/s"), ("max_publish_rate", "publish/s"))


def render_tenants(data: Mapping[str, Any]) -> None:
    """The answer of `list_tenants` as a table: each count limit as `used / max` when a
    broker gave the usage, then the rates and the default quota."""
    tenants: list[Mapping[str, Any]] = list(data.get("tenants") or [])
    with_usage = any(isinstance(t.get("usage"), Mapping) for t in tenants)
    table = Table()
    table.add_column("tenant", overflow="fold", min_width=8)
    table.add_column("stored", no_wrap=True)
    for _field, header, _usage in _COUNT_COLUMNS:
        shown = f"{header}\nnow / max" if with_usage else f"{header}\nmax"
        table.add_column(shown, justify="right", no_wrap=True)
    for _field, header in _RATE_COLUMNS:
        table.add_column(f"{header}\nmax", justify="right", no_wrap=True)
    for tenant in tenants:
        quota = tenant.get("quota") or {}
        usage = tenant.get("usage")
        row = [str(tenant.get("name")), "yes" if tenant.get("stored") else "no"]
        for field, _header, name in _COUNT_COLUMNS:
            limit = _compact(quota.get(field))
            if isinstance(usage, Mapping):
                limit = f"{_number(usage.get(name))} / {limit}"
            row.append(limit)
        row += [_compact(quota.get(field)) for field, _header in _RATE_COLUMNS]
        table.add_row(*row)
    console = _stdout()
    console.print(table)
    default = data.get("default_quota") or {}
    described = ", ".join(
        f"{QUOTA_LABELS[field]} {_number(default.get(field))}" for field in QUOTA_FIELDS
    )
    console.print(
        f"{_count(len(tenants), 'tenant')}; tenants without a stored quota use: {described}"
    )


def render_tenant(tenant: Mapping[str, Any]) -> None:
    """One tenant as a field/value table (quota fields under their config names)."""
    table = Table("field", "value", title=f"tenant {tenant.get('name')!r}", title_justify="left")
    stored = tenant.get("stored")
    table.add_row("stored", "yes" if stored else "no (uses the default quota)")
    quota = tenant.get("quota") or {}
    for field in QUOTA_FIELDS:
        table.add_row(field, _number(quota.get(field)))
    usage = tenant.get("usage")
    if isinstance(usage, Mapping):
        for name in USAGE_FIELDS:
            table.add_row(f"{name} (now)", _number(usage.get(name)))
    table.add_row("created", _time(tenant.get("created_at")))
    table.add_row("updated", _time(tenant.get("updated_at")))
    _stdout().print(table)


def render_credentials(credentials: Sequence[Mapping[str, Any]]) -> None:
    """Credentials as a table, one row each (never a hash or password)."""
    table = Table()
    for header in ("username", "tenant", "type"):
        table.add_column(header, no_wrap=True)
    for header in ("client id", "publish", "subscribe"):
        table.add_column(header, overflow="fold")
    for credential in credentials:
        table.add_row(
            str(credential.get("username")),
            str(credential.get("tenant")),
            str(credential.get("client_type")),
            credential.get("client_id_pattern") or "any",
            _acl(credential.get("publish_acl")),
            _acl(credential.get("subscribe_acl")),
        )
    console = _stdout()
    console.print(table)
    console.print(_count(len(credentials), "credential"))


def render_credential(credential: Mapping[str, Any]) -> None:
    """One credential as a field/value table (never a hash or password)."""
    table = Table(
        "field",
        "value",
        title=f"credential {credential.get('username')!r}",
        title_justify="left",
    )
    table.add_row("tenant", str(credential.get("tenant")))
    table.add_row("client type", str(credential.get("client_type")))
    table.add_row("client id pattern", credential.get("client_id_pattern") or "any")
    table.add_row("publish acl", _acl(credential.get("publish_acl")))
    table.add_row("subscribe acl", _acl(credential.get("subscribe_acl")))
    table.add_row("acl rules", _rules(credential.get("acl_rules")))
    table.add_row("scram", ", ".join(credential.get("scram") or ()) or "none")
    if credential.get("x509_cn"):
        table.add_row("x509 cn", str(credential.get("x509_cn")))
    table.add_row("created", _time(credential.get("created_at")))
    table.add_row("updated", _time(credential.get("updated_at")))
    _stdout().print(table)


def _count(n: int, noun: str) -> str:
    """`1 credential`, `0 credentials`, `2 credentials`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# --- integrations ---------------------------------------------------------------------------

_STATUS_KEYS: Final = (
    "origin",
    "state",
    "lag",
    "delivered",
    "failed",
    "retried",
    "dead_lettered",
    "last_error",
    "last_error_at",
)
"""The status keys of an integration (what it did); the rest of its object is its spec."""


def _error_cell(status: Mapping[str, Any]) -> str:
    """The last error and when."""
    error = status.get("last_error")
    if not error:
        return "-"
    text = str(error)
    when = status.get("last_error_at")
    return f"{text} ({_time(when)})" if when else text


def render_integrations(statuses: Sequence[Mapping[str, Any]]) -> None:
    """Integrations as a table, one row each: type, state, lag, delivered, retried,
    dead-lettered (a dash where nothing is known: a store read while no broker runs has no
    counters); below it, each integration's last error with when."""
    table = Table()
    for header in ("name", "type", "state"):
        table.add_column(header, no_wrap=True)
    for header in ("lag", "delivered", "retried", "dead-lettered"):
        table.add_column(header, justify="right", no_wrap=True)
    for status in statuses:
        table.add_row(
            str(status.get("name")),
            str(status.get("type")),
            str(status.get("state")),
            _number(status.get("lag")),
            _number(status.get("delivered")),
            _number(status.get("retried")),
            _number(status.get("dead_lettered")),
        )
    console = _stdout()
    console.print(table)
    console.print(_count(len(statuses), "integration"))
    for status in statuses:
        if status.get("last_error"):
            console.print(f"{status.get('name')}: last error: {_error_cell(status)}")


def render_integration(status: Mapping[str, Any]) -> None:
    """One integration as a field/value table: its settings (secrets as ***) in the order
    the API gives them, then what it did."""
    table = Table(
        "field", "value", title=f"integration {status.get('name')!r}", title_justify="left"
    )
    for key, value in status.items():
        if key in _STATUS_KEYS or key == "name":
            continue
        table.add_row(key, _setting(value))
    for key in _STATUS_KEYS:
        if key == "last_error_at":
            continue
        if key == "last_error":
            table.add_row("last error", _error_cell(status))
        elif key in ("origin", "state"):
            table.add_row(key, str(status.get(key)))
        else:
            table.add_row(key.replace("_", "-"), _number(status.get(key)))
    _stdout().print(table)


def _setting(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
