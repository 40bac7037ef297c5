"""`mqttq bench`: load scenarios against any MQTT broker (a typer sub-app).

Each command builds a scenario plan and shared options, runs it with live progress on
stderr, and prints a summary (or, with --json, only the result JSON) on stdout.
Exit status: 0 when the run completed (its warnings are in the result), 2 for a bad option
and 1 when it could not run (broker unreachable, refused), each with one `mqttq: error:`
line on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from mqttq.bench import BenchError, BenchOptions, BenchUsageError, Plan, run_plan
from mqttq.bench import scenarios as sc
from mqttq.bench.report import LiveProgress, render, to_json
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error

bench_app = typer.Typer(
    name="bench",
    help="Measure an MQTT broker (mqttq or any other): throughput, latency, loss.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_PROTOCOLS = {"311": 4, "3.1.1": 4, "5": 5, "5.0": 5}
"""--protocol's values -> the CONNECT protocol level. The levels themselves are refused:
`--protocol 4` would read as "MQTT 4" and `3` (MQTT 3.1) is not spoken by the bench."""

Host = Annotated[str, typer.Option(help="Broker host.")]
Port = Annotated[int, typer.Option(help="Broker MQTT port.")]
Qos = Annotated[int, typer.Option(min=0, max=2, help="QoS of publishes and subscriptions.")]
Protocol = Annotated[
    str, typer.Option(metavar="VERSION", help="MQTT version: 311 (or 3.1.1) or 5 (or 5.0).")
]
PayloadSize = Annotated[
    int, typer.Option("--payload", help="Payload size in bytes (at least 19, the header).")
]
Rate = Annotated[
    float, typer.Option(help="Messages per second per publisher; 0 = as fast as possible.")
]
Duration = Annotated[
    float | None,
    typer.Option(help="Seconds of measured publishing (default: 10 unless --count)."),
]
Count = Annotated[int | None, typer.Option(help="Measured messages per publisher.")]
Warmup = Annotated[float, typer.Option(help="Seconds of publishing before measuring.")]
Inflight = Annotated[
    int | None,
    typer.Option(
        help="Unacknowledged QoS 1/2 messages per publisher, capped by the broker's Receive "
        "Maximum (default: 100; 20 for MQTT 3.1.1 at QoS 2)."
    ),
]
DrainTimeout = Annotated[
    float, typer.Option(help="Seconds to wait for acknowledgements and deliveries at the end.")
]
Workers = Annotated[
    int, typer.Option(help="Worker processes; 0 = 1 for small runs, up to 4 for many clients.")
]
Json = Annotated[bool, typer.Option("--json", help="Print only the result JSON.")]
Output = Annotated[Path | None, typer.Option(help="Also write the result JSON to this file.")]
Prefix = Annotated[str, typer.Option(help="First topic level of every bench topic.")]
Username = Annotated[str | None, typer.Option(help="CONNECT user name.")]
Password = Annotated[str | None, typer.Option(help="CONNECT password.")]
Publishers = Annotated[int, typer.Option(help="Number of publishers.")]
Subscribers = Annotated[int, typer.Option(help="Number of subscribers.")]


def _options(**values: Any) -> BenchOptions:
    given = str(values.pop("protocol")).strip()
    protocol = _PROTOCOLS.get(given)
    if protocol is None:
        raise BenchUsageError(f"--protocol must be 311 (or 3.1.1) or 5 (or 5.0), got {given!r}")
    duration = values.pop("duration")
    count = values.get("count")
    if duration is None and count is None:
        duration = 10.0
    return BenchOptions(protocol=protocol, duration=duration, **values)


def _fail(message: str, code: int) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _execute(
    build: Callable[[str], Plan], json_only: bool, output: Path | None, **values: Any
) -> None:
    err = Console(stderr=True)
    try:
        options = _options(**values)
        options.validate()
        plan = build(options.topic_prefix)
        warnings: list[str] = []
        if plan.persistent and options.qos == 0:
            warnings.append("QoS 0 messages are usually not queued for offline sessions")
        if json_only:
            result = run_plan(plan, options)
        else:
            label = (
                f"mqttq bench {plan.scenario} -> {options.host}:{options.port} "
                f"({options.worker_count(plan.clients)} worker(s), Ctrl-C stops early)"
            )
            with LiveProgress(err, label) as live:
                result = run_plan(plan, options, live.update)
        result["warnings"][:0] = warnings
    except BenchUsageError as exc:
        _fail(str(exc), EXIT_CONFIG)
    except BenchError as exc:
        _fail(str(exc), EXIT_FAILURE)
    text = to_json(result)
    if output is not None:
        output.write_text(text + "\n", encoding="utf-8")
    if json_only:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    else:
        render(result, Console())


@bench_app.command("p2p")
def p2p(
    *,
    pairs: Annotated[int, typer.Option(help="Publisher -> subscriber pairs.")] = 10,
    host: Host = "127.0.0.1",
    port: Port = 1883,
    qos: Qos = 1,
    protocol: Protocol = "5",
    payload: PayloadSize = 64,
    rate: Rate = 0.0,
    duration: Duration = None,
    count: Count = None,
    warmup: Warmup = 0.0,
    inflight: Inflight = None,
    drain_timeout: DrainTimeout = 10.0,
    workers: Workers = 0,
    json_only: Json = False,
    output: Output = None,
    topic_prefix: Prefix = "mqttq-bench",
    username: Username = None,
    password: Password = None,
    node_ports: Annotated[
        str,
        typer.Option(
            metavar="P1,P2,...",
            help="Several broker nodes on --host (a cluster): pair i connects to node i % n "
            "instead of --port.",
        ),
    ] = "",
    cross_nodes: Annotated[
        bool,
        typer.Option(
            "--cross-nodes",
            help="With --node-ports: subscriber i connects to node (i + 1) % n, so every "
            "pair's messages cross nodes.",
        ),
    ] = False,
) -> None:
    """N pairs: publisher i publishes on its own topic, only subscriber i receives it."""
    try:
        ports = tuple(int(p) for p in node_ports.split(",") if p.strip())
    except ValueError:
        _fail(f"--node-ports: expected P1,P2,..., got {node_ports!r}", EXIT_CONFIG)
    _execute(
        lambda prefix: sc.p2p(prefix, pairs),
        json_only,
        output,
        host=host,
        port=port,
        qos=qos,
        protocol=protocol,
        payload=payload,
        rate=rate,
        duration=duration,
        count=count,
        warmup=warmup,
        inflight=inflight,
        drain_timeout=drain_timeout,
        workers=workers,
        topic_prefix=topic_prefix,
        username=username,
        password=password,
        node_ports=ports,
        cross_nodes=cross_nodes,
    )


@bench_app.command("fan-in")
def fan_in(
    *,
    publishers: Publishers = 10,
    subscribers: Subscribers = 1,
    host: Host = "127.0.0.1",
    port: Port = 1883,
    qos: Qos = 1,
    protocol: Protocol = "5",
    payload: PayloadSize = 64,
    rate: Rate = 0.0,
    duration: Duration = None,
    count: Count = None,
    warmup: Warmup = 0.0,
    inflight: Inflight = None,
    drain_timeout: DrainTimeout = 10.0,
    workers: Workers = 0,
    json_only: Json = False,
    output: Output = None,
    topic_prefix: Prefix = "mqttq-bench",
    username: Username = None,
    password: Password = None,
) -> None:
    """P publishers on their own topics; each of S subscribers receives all on a wildcard."""
    _execute(
        lambda prefix: sc.fan_in(prefix, publishers, subscribers),
        json_only,
        output,
        host=host,
        port=port,
        qos=qos,
        protocol=protocol,
        payload=payload,
        rate=rate,
        duration=duration,
        count=count,
        warmup=warmup,
        inflight=inflight,
        drain_timeout=drain_timeout,
        workers=workers,
        topic_prefix=topic_prefix,
        username=username,
        password=password,
    )


@bench_app.command("fan-out")
def fan_out(
    *,
    publishers: Publishers = 1,
    subscribers: Subscribers = 10,
    host: Host = "127.0.0.1",
    port: Port = 1883,
    qos: Qos = 1,
    protocol: Protocol = "5",
    payload: PayloadSize = 64,
    rate: Rate = 0.0,
    duration: Duration = None,
    count: Count = None,
    warmup: Warmup = 0.0,
    inflight: Inflight = None,
    drain_timeout: DrainTimeout = 10.0,
    workers: Workers = 0,
    json_only: Json = False,
    output: Output = None,
    topic_prefix: Prefix = "mqttq-bench",
    username: Username = None,
    password: Password = None,
) -> None:
    """P publishers (default 1) on one topic; every one of S subscribers receives all."""
    _execute(
        lambda prefix: sc.fan_out(prefix, publishers, subscribers),
        json_only,
        output,
        host=host,
        port=port,
        qos=qos,
        protocol=protocol,
        payload=payload,
        rate=rate,
        duration=duration,
        count=count,
        warmup=warmup,
        inflight=inflight,
        drain_timeout=drain_timeout,
        workers=workers,
        topic_prefix=topic_prefix,
        username=username,
        password=password,
    )


@bench_app.command("persistent")
def persistent(
    *,
    publishers: Publishers = 1,
    subscribers: Subscribers = 10,
    messages: Annotated[int, typer.Option(help="Messages each publisher sends offline.")] = 100,
    host: Host = "127.0.0.1",
    port: Port = 1883,
    qos: Qos = 1,
    protocol: Protocol = "5",
    payload: PayloadSize = 64,
    rate: Rate = 0.0,
    inflight: Inflight = None,
    drain_timeout: DrainTimeout = 10.0,
    session_expiry: Annotated[
        int, typer.Option(help="MQTT 5 Session Expiry Interval of the subscribers (s).")
    ] = 300,
    workers: Workers = 0,
    json_only: Json = False,
    output: Output = None,
    topic_prefix: Prefix = "mqttq-bench",
    username: Username = None,
    password: Password = None,
) -> None:
    """S subscribers with persistent sessions subscribe and go offline; publishers send
    --messages each; the subscribers reconnect and the time to drain the backlog is measured."""
    _execute(
        lambda prefix: sc.persistent(prefix, publishers, subscribers),
        json_only,
        output,
        host=host,
        port=port,
        qos=qos,
        protocol=protocol,
        payload=payload,
        rate=rate,
        duration=None,
        count=messages,
        inflight=inflight,
        drain_timeout=drain_timeout,
        session_expiry=session_expiry,
        workers=workers,
        topic_prefix=topic_prefix,
        username=username,
        password=password,
    )


@bench_app.command("shared")
def shared(
    *,
    publishers: Publishers = 2,
    subscribers: Subscribers = 4,
    group: Annotated[str, typer.Option(help="Shared subscription group name.")] = "bench",
    host: Host = "127.0.0.1",
    port: Port = 1883,
    qos: Qos = 1,
    protocol: Protocol = "5",
    payload: PayloadSize = 64,
    rate: Rate = 0.0,
    duration: Duration = None,
    count: Count = None,
    warmup: Warmup = 0.0,
    inflight: Inflight = None,
    drain_timeout: DrainTimeout = 10.0,
    workers: Workers = 0,
    json_only: Json = False,
    output: Output = None,
    topic_prefix: Prefix = "mqttq-bench",
    username: Username = None,
    password: Password = None,
) -> None:
    """P publishers -> one $share/<group>/... subscription of S members; each message must
    reach exactly one member."""
    _execute(
        lambda prefix: sc.shared(prefix, publishers, subscribers, group),
        json_only,
        output,
        host=host,
        port=port,
        qos=qos,
        protocol=protocol,
        payload=payload,
        rate=rate,
        duration=duration,
        count=count,
        warmup=warmup,
        inflight=inflight,
        drain_timeout=drain_timeout,
        workers=workers,
        topic_prefix=topic_prefix,
        username=username,
        password=password,
    )


if __name__ == "__main__":
    bench_app(prog_name="mqttq bench")
