"""What a node publishes about itself at every heartbeat, and the pure arithmetic over the
records of many nodes: which are alive, stale or gone, and the counts per tenant that the
other live nodes hold (what this node's tenant limits add to its own exact counts)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "COUNT_FIELDS",
    "STALE_AFTER_INTERVALS",
    "TTL_INTERVALS",
    "NodeRecord",
    "NodeState",
    "decode_counts",
    "encode_counts",
    "node_state",
    "sum_counts",
]

COUNT_FIELDS: Final = ("connections", "sessions", "topics")
"""The tenant counts shared across nodes, in their order in Redis."""
TTL_INTERVALS: Final = 3
"""A node's keys live this many heartbeat intervals after its last beat."""
STALE_AFTER_INTERVALS: Final = 2
"""A node whose last beat is older than this many intervals has missed one: stale."""


class NodeState(StrEnum):
    """How a node looks from its last heartbeat."""

    ALIVE = "alive"
    STALE = "stale"
    """Missed at least one heartbeat; its keys have not expired yet."""
    GONE = "gone"
    """Its keys expired (killed, or cut off from Redis); only the index remembers it."""


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node's heartbeat: who it is, where it listens, and what it holds now."""

    node_id: str
    host: str
    ports: dict[str, int]
    """Bound port of every MQTT listener by name (tcp, tls, ws, wss)."""
    pid: int
    started_at: float
    """Seconds since the epoch."""
    heartbeat_at: float
    """Seconds since the epoch, on the node's clock."""
    interval_ms: int
    connections: int = 0
    sessions: int = 0
    log_consumer_lag: int = 0
    """Records of `<prefix>msg.all` this node's consumer has not read yet."""
    app_consumer_lag: int = 0
    """Records of APPLICATION clients' topics not consumed yet (sum over its clients)."""
    admin_url: str = ""
    tenants: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tenant -> counts held on this node (from the node's tenants key)."""

    def to_hash(self) -> dict[str, str]:
        """The fields of the node's Redis HASH (tenants live in their own key)."""
        values = asdict(self)
        del values["tenants"]
        values["ports"] = json.dumps(self.ports, sort_keys=True)
        return {name: str(value) for name, value in values.items()}

    @classmethod
    def from_hash(
        cls, raw: Mapping[bytes, bytes], tenants: Mapping[str, dict[str, int]] | None = None
    ) -> NodeRecord | None:
        """The record in a Redis HASH reply; None when it is missing or unreadable."""
        text = {key.decode(): value.decode() for key, value in raw.items()}
        try:
            ports = json.loads(text["ports"])
            return cls(
                node_id=text["node_id"],
                host=text["host"],
                ports={str(name): int(port) for name, port in ports.items()},
                pid=int(text["pid"]),
                started_at=float(text["started_at"]),
                heartbeat_at=float(text["heartbeat_at"]),
                interval_ms=int(text["interval_ms"]),
                connections=int(text.get("connections", 0)),
                sessions=int(text.get("sessions", 0)),
                log_consumer_lag=int(text.get("log_consumer_lag", 0)),
                app_consumer_lag=int(text.get("app_consumer_lag", 0)),
                admin_url=text.get("admin_url", ""),
                tenants=dict(tenants or {}),
            )
        except (KeyError, ValueError, TypeError, AttributeError):
            return None

    def to_json(self, now: float) -> dict[str, Any]:
        """The record as `mqttq cluster status --json` and /api/v1/cluster show it."""
        values = asdict(self)
        values["heartbeat_age_s"] = round(max(0.0, now - self.heartbeat_at), 3)
        values["state"] = node_state(self.heartbeat_at, self.interval_ms, now).value
        return values


def node_state(heartbeat_at: float | None, interval_ms: int, now: float) -> NodeState:
    """ALIVE, STALE (silent for more than `STALE_AFTER_INTERVALS` intervals) or GONE (no
    record: `heartbeat_at` None, or silent past the keys' TTL)."""
    if heartbeat_at is None:
        return NodeState.GONE
    age_ms = (now - heartbeat_at) * 1000
    if age_ms > TTL_INTERVALS * interval_ms:
        return NodeState.GONE
    if age_ms > STALE_AFTER_INTERVALS * interval_ms:
        return NodeState.STALE
    return NodeState.ALIVE


def encode_counts(counts: Mapping[str, int]) -> str:
    """`{"connections": c, "sessions": s, "topics": t}` as the JSON list `[c, s, t]`."""
    return json.dumps([int(counts.get(name, 0)) for name in COUNT_FIELDS])


def decode_counts(raw: bytes | str) -> dict[str, int] | None:
    """The counts `encode_counts` wrote; None when the value is not three integers >= 0."""
    try:
        values = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if (
        not isinstance(values, list)
        or len(values) != len(COUNT_FIELDS)
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
    ):
        return None
    return dict(zip(COUNT_FIELDS, values, strict=True))


def sum_counts(
    nodes: Iterable[tuple[str, Mapping[str, Mapping[str, int]]]], *, exclude: str
) -> dict[str, dict[str, int]]:
    """Per tenant, the counts held by every node in `nodes` (node id, tenant -> counts) but
    `exclude` (this node: its own counts are exact in memory). Tenants whose sum is zero
    are left out; a node listed twice counts once (its last entry)."""
    latest = {node_id: tenants for node_id, tenants in nodes if node_id != exclude}
    total: dict[str, dict[str, int]] = {}
    for tenants in latest.values():
        for tenant, counts in tenants.items():
            into = total.setdefault(tenant, dict.fromkeys(COUNT_FIELDS, 0))
            for name in COUNT_FIELDS:
                into[name] += max(0, counts.get(name, 0))
    return {t: c for t, c in total.items() if any(c.values())}
