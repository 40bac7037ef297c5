"""`mqttq cluster status`: the nodes of a distributed mqttq from their heartbeats in Redis
(`mqttq.cluster.status`): state, address, clients, sessions, consumer lag, last heartbeat.

Where: `--redis URL` (`--cluster` for a Redis Cluster node) and `--key-prefix`, or the
`[redis]` section of a broker.toml given with `--config`, as for `mqttq session`. Redis
unreachable: one line on stderr and exit 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from mqttq.cli.errors import EXIT_FAILURE, print_error
from mqttq.cli.options import (
    ClusterOption,
    ConfigOption,
    JsonOption,
    PrefixOption,
    RedisOption,
    resolve_target,
)
from mqttq.cli.session import human_duration
from mqttq.cluster.status import ClusterStatusError, read_cluster_status

__all__ = ["cluster_app"]

cluster_app = typer.Typer(
    name="cluster",
    help='Look at the nodes of a distributed mqttq (storage.log = "kafka") through their '
    "heartbeats in Redis.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_STATE_STYLES = {"alive": "green", "stale": "yellow", "gone": "red"}


@cluster_app.command("status")
def status_command(
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every node seen: alive, stale (missed a heartbeat) or gone (its keys expired: killed
    or cut off; listed for 10 minutes), with its clients, sessions and consumer lag."""
    target = resolve_target(redis, cluster, key_prefix, config)
    try:
        status = asyncio.run(
            read_cluster_status(target.url, cluster=target.cluster, key_prefix=target.key_prefix)
        )
    except ClusterStatusError as exc:
        print_error(str(exc))
        raise typer.Exit(EXIT_FAILURE) from None
    if as_json:
        sys.stdout.write(json.dumps(status, ensure_ascii=False) + "\n")
        return
    _print_table(status)


def _print_table(status: dict[str, Any]) -> None:
    # Piped: as wide as the rows need, never cut at 80 columns.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 250)
    nodes = status["nodes"]
    if not nodes:
        console.print("no nodes: none has sent a heartbeat to this Redis in the last 10 minutes")
        return
    table = Table(box=None, pad_edge=False)
    for header, right in (
        ("node", False),
        ("state", False),
        ("mqtt", False),
        ("clients", True),
        ("sessions", True),
        ("log lag", True),
        ("app lag", True),
        ("heartbeat", True),
        ("up", True),
        ("pid", True),
    ):
        table.add_column(header.upper(), justify="right" if right else "left")
    now = time.time()
    for node in nodes:
        state = node["state"]
        styled = f"[{_STATE_STYLES[state]}]{state}[/]"
        age = f"{node['heartbeat_age_s']:.1f}s ago"
        if state == "gone":
            table.add_row(node["node_id"], styled, "-", "-", "-", "-", "-", age, "-", "-")
            continue
        host = node["host"]
        shown = f"[{host}]" if ":" in host else host
        table.add_row(
            node["node_id"],
            styled,
            f"{shown}:{node['ports'].get('tcp', '-')}",
            str(node["connections"]),
            str(node["sessions"]),
            str(node["log_consumer_lag"]),
            str(node["app_consumer_lag"]),
            age,
            human_duration(now - node["started_at"]),
            str(node["pid"]),
        )
    console.print(table)
    console.print(
        f"{status['alive']} alive, {status['stale']} stale, {status['gone']} gone",
        style="dim",
    )
