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
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from mqttq.admin.validation import ApiError, query_params

if TYPE_CHECKING:
    from mqttq.broker.sampler import Sampler

__all__ = ["MAX_SECONDS", "SERIES", "cluster_columns", "history_routes", "node_columns"]

MAX_SECONDS: Final = 3600
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


def _seconds(request: web.Request) -> int:
    given = query_params(request, ("seconds",)).get("seconds")
    if given is None:
        return MAX_SECONDS
    try:
        seconds = int(given)
    except ValueError:
        seconds = 0
    if not 1 <= seconds <= MAX_SECONDS:
        raise ApiError(
            400,
            f"must be a whole number of seconds from 1 to {MAX_SECONDS}, got {given!r}",
            "seconds",
        )
    return seconds


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value


def history_routes(sampler: Callable[[], Sampler | None]) -> list[web.RouteDef]:
    """GET /api/v1/history from the sampler `sampler()` returns (503 while it is None)."""

    async def history(request: web.Request) -> web.Response:
        seconds = _seconds(request)
        current = sampler()
        if current is None:
            raise ApiError(503, "this broker takes no samples (no sampler running)", "path")
        nodes = await current.history(seconds)
        return web.json_response(
            {
                "interval_s": _number(current.interval),
                "now": time.time(),
                "nodes": {node: node_columns(rows) for node, rows in sorted(nodes.items())},
                "cluster": cluster_columns(nodes, current.interval),
            }
        )

    return [web.get("/api/v1/history", history, allow_head=False)]
