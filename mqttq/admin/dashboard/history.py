"""`GET /api/v1/history?seconds=N`: the sampler's rows as columns, the shape uPlot plots.

`{"interval_s", "now", "nodes": {node_id: columns}, "cluster": columns}` where columns are
`{"t": [...], "<series>": [...], "dropped_by_reason": {reason: [...]}}`, every list as long
as `t`. `cluster` adds the nodes up per time step (the largest `kafka_produce_ms`), a node
without a row at a step adding nothing. A series a node never measures (`kafka_*` in
embedded mode) is null instead of a list. The contract: CONTRACT.md, "History".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from aiohttp import web

from mqttq.admin.call import Call
from mqttq.admin.dashboard.login import DASHBOARD_KEY
from mqttq.admin.dashboard.params import MAX_SECONDS
from mqttq.admin.validation import ApiError

__all__ = [
    "MAX_SECONDS",
    "SERIES",
    "cluster_columns",
    "history",
    "node_columns",
]

SERIES: Final = (
    "connections",
    "messages_in",
    "messages_out",
    "dropped",
    "backlog",
    "inbox",
    "kafka_produce_ms",
    "kafka_lag",
)
_OPTIONAL: Final = frozenset({"kafka_produce_ms", "kafka_lag"})
"""Series that are null as a whole when no row has a value."""

Row = Mapping[str, Any]
Columns = dict[str, Any]


def node_columns(rows: Sequence[Row]) -> Columns:
    """One node's rows (ascending `t`) as columns."""
    columns: Columns = {"t": [row["t"] for row in rows]}
    for key in SERIES:
        values = [row.get(key) for row in rows]
        columns[key] = None if key in _OPTIONAL and all(v is None for v in values) else values
    reasons = sorted({reason for row in rows for reason in (row.get("dropped_by_reason") or {})})
    columns["dropped_by_reason"] = {
        reason: [(row.get("dropped_by_reason") or {}).get(reason) for row in rows]
        for reason in reasons
    }
    return columns


def _add(values: Iterable[Any], combine: Callable[[Iterable[float]], float]) -> float | None:
    present = [v for v in values if isinstance(v, (int, float))]
    if not present:
        return None
    total = combine(present)
    return round(total, 3) if isinstance(total, float) else total


def cluster_columns(nodes: Mapping[str, Sequence[Row]], interval: float) -> Columns:
    """The nodes' rows added up per step (steps aligned to `interval`)."""
    by_step: dict[float, list[Row]] = {}
    for rows in nodes.values():
        for row in rows:
            step = round(row["t"] / interval) * interval
            by_step.setdefault(step, []).append(row)
    steps = sorted(by_step)
    columns: Columns = {"t": steps}
    for key in SERIES:
        combine: Callable[[Iterable[float]], float] = max if key == "kafka_produce_ms" else sum
        values = [_add((row.get(key) for row in by_step[step]), combine) for step in steps]
        columns[key] = None if key in _OPTIONAL and all(v is None for v in values) else values
    reasons = sorted(
        {
            reason
            for rows in nodes.values()
            for row in rows
            for reason in (row.get("dropped_by_reason") or {})
        }
    )
    columns["dropped_by_reason"] = {
        reason: [
            _add(((row.get("dropped_by_reason") or {}).get(reason) for row in by_step[step]), sum)
            for step in steps
        ]
        for reason in reasons
    }
    return columns


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value


async def history(call: Call) -> web.Response:
    """GET /api/v1/history: the last `seconds` (default MAX_SECONDS) of every node's
    samples as columns; 503 when this broker runs no sampler."""
    seconds: int = call.query.get("seconds", MAX_SECONDS)
    sampler = call.request.app[DASHBOARD_KEY].sampler
    if sampler is None:
        raise ApiError(503, "this broker takes no samples (no sampler running)", "path")
    nodes = await sampler.history(seconds)
    return web.json_response(
        {
            "interval_s": _number(sampler.interval),
            "now": time.time(),
            "nodes": {node: node_columns(rows) for node, rows in sorted(nodes.items())},
            "cluster": cluster_columns(nodes, sampler.interval),
        }
    )
