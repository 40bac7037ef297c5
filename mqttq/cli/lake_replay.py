"""`mqttq lake replay --lake DIR --since T --until T --filter 'sensors/#' --host H --port P`:
archived messages published again into a broker, QoS 1, each publisher's messages in their
original order, MQTT 5.0 properties kept (the work is in `mqttq.lake.replay`; pyarrow, no
Spark; a Delta lake's current snapshot through `deltalake`), read piece by piece with at
most `--max-in-flight` PUBACKs outstanding. A progress bar on a terminal (its total counted
up front without loading the rows), or one JSON summary with `--json`. Bad options exit 2;
a lake or a broker that cannot be used, 1; a PUBACK that refuses a message, 1 (counted).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error
from mqttq.lake.replay import MAX_IN_FLIGHT, PIECE_ROWS

__all__ = ["replay_command"]


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def replay_command(
    *,
    lake: Annotated[Path, typer.Option("--lake", metavar="DIR", help="The lake directory.")],
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME",
            help="ISO 8601 (UTC unless it says), a date, or a duration before --until (24h).",
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", metavar="TIME", help="Excluded (default: now).")
    ] = None,
    topic_filter: Annotated[
        str, typer.Option("--filter", metavar="FILTER", help="Only topics this filter matches.")
    ] = "#",
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's.")] = None,
    prefix: Annotated[
        str, typer.Option("--prefix", help="Put before each topic (e.g. replay/).")
    ] = "",
    rate: Annotated[
        float, typer.Option("--rate", min=0, metavar="N", help="Messages per second (0: no limit).")
    ] = 0.0,
    host: Annotated[str, typer.Option("--host", help="The broker.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 1883,
    username: Annotated[str | None, typer.Option("--username")] = None,
    password: Annotated[
        str | None,
        typer.Option("--password", help="Or the MQTTQ_REPLAY_PASSWORD environment variable."),
    ] = None,
    keep_retain: Annotated[
        bool, typer.Option("--retain", help="Keep the retain flag (default: publish unretained).")
    ] = False,
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight",
            metavar="N",
            help="PUBLISHes waiting for their PUBACK, at most (1 to 65535).",
        ),
    ] = MAX_IN_FLIGHT,
    piece_rows: Annotated[
        int,
        typer.Option(
            "--piece-rows",
            metavar="N",
            help="Rows read from the lake at once, about (a bigger partition is cut by time).",
        ),
    ] = PIECE_ROWS,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON summary on stdout.")] = False,
) -> None:
    """Publish archived messages again into a broker (QoS 1, in each publisher's order)."""
    from mqttq.errors import ProtocolError  # noqa: PLC0415
    from mqttq.lake.layout import LakeError  # noqa: PLC0415
    from mqttq.lake.replay import ReplayOptions, Selection, publish  # noqa: PLC0415
    from mqttq.lake.window import parse_window  # noqa: PLC0415
    from mqttq.routing.topics import validate_topic_filter  # noqa: PLC0415

    if not 1 <= max_in_flight <= 65_535:
        _fail(f"bad --max-in-flight {max_in_flight}: give 1 to 65535", EXIT_CONFIG)
    if piece_rows < 1:
        _fail(f"bad --piece-rows {piece_rows}: give 1 or more", EXIT_CONFIG)
    try:
        window = parse_window(since, until)
        validate_topic_filter(topic_filter)
    except ValueError as exc:
        _fail(str(exc), EXIT_CONFIG)
    except ProtocolError as exc:
        _fail(f"bad --filter {topic_filter!r}: {exc}", EXIT_CONFIG)
    try:
        selection = Selection(lake, window, topic_filter, tenant=tenant, piece_rows=piece_rows)
        selected = selection.count()
    except LakeError as exc:
        _fail(str(exc))
    options = ReplayOptions(
        host=host,
        port=port,
        prefix=prefix,
        rate=rate,
        username=username,
        password=password if password is not None else os.environ.get("MQTTQ_REPLAY_PASSWORD"),
        keep_retain=keep_retain,
        max_in_flight=max_in_flight,
    )
    try:
        if as_json or not sys.stderr.isatty():
            result = asyncio.run(publish(selection.pieces(), options, selected=selected))
        else:
            with Progress(
                TextColumn("replay"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            ) as bar:
                task = bar.add_task("replay", total=selected)
                result = asyncio.run(
                    publish(
                        selection.pieces(),
                        options,
                        selected=selected,
                        progress=lambda n: bar.advance(task, n),
                    )
                )
    except LakeError as exc:
        _fail(str(exc))
    summary = {"event": "replayed", **result.to_json()}
    if as_json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        Console(highlight=False).print(
            f"replayed {result.published:,} of {result.selected:,} messages to {host}:{port} "
            f"in {summary['seconds']}s ({summary['rate']:,} msg/s)"
            + (f"; {result.refused:,} refused" if result.refused else "")
        )
    if result.refused:
        _fail(f"the broker refused {result.refused:,} messages (PUBACK >= 0x80)")
