"""Presenting a run: live progress while it runs, then a rich summary or JSON."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from mqttq.bench.workers import Snapshot


class LiveProgress:
    """A one-row live table (phase, elapsed, counts and rates), refreshed by `update`."""

    def __init__(self, console: Console, title: str) -> None:
        self._title = title
        self._live = Live(console=console, auto_refresh=False, transient=True)
        self._previous: Snapshot | None = None
        self._rates = (0.0, 0.0)

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._live.__exit__(exc_type, exc, tb)

    def update(self, snapshot: Snapshot) -> None:
        """Render `snapshot`, with rates from the change since the previous one."""
        previous = self._previous
        if previous is not None and snapshot.elapsed > previous.elapsed:
            dt = snapshot.elapsed - previous.elapsed
            self._rates = (
                (snapshot.published - previous.published) / dt,
                (snapshot.received - previous.received) / dt,
            )
        self._previous = snapshot
        table = Table(title=self._title, title_justify="left", expand=False)
        for column in ("phase", "elapsed", "published", "pub/s", "acked", "received", "recv/s"):
            table.add_column(column, justify="left" if column == "phase" else "right")
        received = f"{snapshot.received:,}"
        if snapshot.expected is not None:
            received += f" / {snapshot.expected:,}"
        table.add_row(
            snapshot.phase,
            f"{snapshot.elapsed:.1f} s",
            f"{snapshot.published:,}",
            f"{self._rates[0]:,.0f}",
            f"{snapshot.acknowledged:,}",
            received,
            f"{self._rates[1]:,.0f}",
        )
        self._live.update(table, refresh=True)


def to_json(result: dict[str, Any]) -> str:
    """The result as indented JSON (what `--json` prints)."""
    return json.dumps(result, indent=2)


def title(result: dict[str, Any]) -> str:
    """One line describing the run."""
    return (
        f"mqttq bench {result['scenario']}: {result['publishers']} pub -> "
        f"{result['subscribers']} sub, QoS {result['qos']}, MQTT {result['protocol']}, "
        f"{result['payload_bytes']} B, {result['broker']}"
    )


def render(result: dict[str, Any], console: Console) -> None:
    """Print the summary tables, then warnings and errors."""
    m = result["messages"]
    messages = Table(title="messages", title_justify="left")
    for column in ("published", "acked", "expected", "received", "lost", "dup", "out of order"):
        messages.add_column(column, justify="right")
    messages.add_row(
        *(
            f"{m[key]:,}"
            for key in (
                "published",
                "acknowledged",
                "expected",
                "received",
                "lost",
                "duplicates",
                "out_of_order",
            )
        )
    )

    r = result["rates"]
    rates = Table(title=f"rates over {result['measured_s']} s (msg/s)", title_justify="left")
    for column in ("published", "acknowledged", "received"):
        rates.add_column(column, justify="right")
    rates.add_row(
        f"{r['published_per_s']:,.0f}",
        f"{r['acknowledged_per_s']:,.0f}",
        f"{r['received_per_s']:,.0f}",
    )

    latency = Table(title="latency (ms)", title_justify="left")
    latency.add_column("")
    for column in ("count", "p50", "p95", "p99", "max", "mean"):
        latency.add_column(column, justify="right")
    for name, label in (("e2e", "end to end"), ("puback", "PUBACK/PUBCOMP")):
        h = result["latency_ms"][name]
        if h["count"]:
            latency.add_row(
                label,
                f"{h['count']:,}",
                *(f"{h[key]:.3f}" for key in ("p50", "p95", "p99", "max", "mean")),
            )

    tool = Table(title="tool (per worker)", title_justify="left")
    for column in ("worker", "cpu s", "cpu %", "max rss MiB"):
        tool.add_column(column, justify="right")
    for row in result["tool"]["workers"]:
        style = "bold red" if row["saturated"] else ""
        tool.add_row(
            str(row["worker"]),
            f"{row['cpu_s']:.2f}",
            f"{row['cpu_percent']:.0f}",
            f"{row['max_rss_mb']:.0f}",
            style=style,
        )

    parts: list[Any] = [Text(title(result), style="bold"), messages, rates, latency]
    persistent = result.get("persistent")
    if persistent is not None:
        drain = Table(title="persistent backlog", title_justify="left")
        for column in ("backlog", "sessions present", "drained subs", "drain s", "drain msg/s"):
            drain.add_column(column, justify="right")
        drain.add_row(
            f"{persistent['backlog']:,}",
            str(persistent["sessions_present"]),
            str(persistent["drained_subscribers"]),
            "-" if persistent["drain_s"] is None else f"{persistent['drain_s']:.3f}",
            "-" if persistent["drain_per_s"] is None else f"{persistent['drain_per_s']:,.0f}",
        )
        parts.append(drain)
    parts.append(tool)
    for warning in result["warnings"]:
        parts.append(Text(f"warning: {warning}", style="yellow"))
    for error in result["errors"][:10]:
        parts.append(Text(f"error: {error}", style="red"))
    if len(result["errors"]) > 10:
        parts.append(Text(f"... and {len(result['errors']) - 10} more errors", style="red"))
    console.print(Group(*parts))
