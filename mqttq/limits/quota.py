"""Quota: the five limits of one layer (the node, or one tenant), and their validation.

The same five fields describe the node layer (`[mqtt_limit.cluster]` in broker.toml) and a
tenant's quota (`[mqtt_limit.tenant]` for tenants without their own, the tenants table, the
admin API, `mqttq tenant set`). A value is never silently ignored: a bad one raises
QuotaError naming the field, and nothing is applied.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mqttq.errors import MqttqError

__all__ = ["DEFAULT_NODE_QUOTA", "QUOTA_FIELDS", "Quota", "QuotaError"]


class QuotaError(MqttqError):
    """A quota value is invalid; `field` names it (as in the API and broker.toml)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Quota:
    """Count limits refuse at once (never limit + 1); rate limits are token buckets
    (messages or connections per second; 0 refuses everything)."""

    max_connections_per_node: int = 10_000_000
    """Connections open at once."""
    max_connection_rate: float = 100_000.0
    """New MQTT connections (CONNECTs) per second."""
    max_topics: int = 5_000_000
    """Distinct topic names and filters that have a retained message or a subscription."""
    max_sessions: int = 50_000_000
    """Sessions, online or not (a persistent session counts after its connection closed)."""
    max_publish_rate: float = 1_000_000.0
    """PUBLISH packets per second (all QoS)."""

    def to_dict(self) -> dict[str, int | float]:
        """The fields as a plain dict (JSON, TOML, database rows)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: Quota | None = None) -> Quota:
        """A Quota from `data`; fields missing from `data` come from `base` (or the
        defaults). Raises QuotaError for an unknown field, a wrong type, a negative, NaN
        or infinite value."""
        values: dict[str, Any] = (base or cls()).to_dict()
        for key, raw in data.items():
            kind = _KINDS.get(key)
            if kind is None:
                known = ", ".join(QUOTA_FIELDS)
                raise QuotaError(key, f"unknown quota field; known fields: {known}")
            values[key] = _check(key, kind, raw)
        return cls(**values)

    def replace(self, **changes: Any) -> Quota:
        """A copy with `changes` applied, validated like `from_mapping`."""
        return Quota.from_mapping(changes, base=self)


QUOTA_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Quota))
_KINDS: Final[dict[str, type]] = {
    "max_connections_per_node": int,
    "max_connection_rate": float,
    "max_topics": int,
    "max_sessions": int,
    "max_publish_rate": float,
}
_MAX_COUNT: Final = 2**62

DEFAULT_NODE_QUOTA: Final = Quota()


def _check(key: str, kind: type, raw: Any) -> int | float:
    # bool is an int in Python; `max_topics = true` is still a mistake.
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        word = "an integer" if kind is int else "a number"
        raise QuotaError(key, f"must be {word}, got {raw!r}")
    if kind is int and isinstance(raw, float):
        if not raw.is_integer():
            raise QuotaError(key, f"must be an integer, got {raw!r}")
        raw = int(raw)
    if isinstance(raw, float) and not math.isfinite(raw):
        raise QuotaError(key, f"must be a finite number, got {raw!r}")
    if raw < 0:
        raise QuotaError(key, f"must be 0 or more, got {raw!r}")
    if raw > _MAX_COUNT:
        raise QuotaError(key, f"must be at most {_MAX_COUNT}, got {raw!r}")
    return kind(raw)  # type: ignore[no-any-return]
