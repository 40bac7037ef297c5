"""`mqttq lake ...`: the data lake of issue 36 (the work is in `mqttq.lake`).

- `run --lake DIR` (`--config broker.toml` or `--bootstrap-servers`): stream the Kafka log
  into the lake; `--available-now` writes what the log holds and stops.
- `compact --lake DIR`: merge the small files of closed partitions (safe while `run` writes).
- `expire --lake DIR --older-than 90d`: drop partitions older than that.

Other `lake` commands live in their own modules and are registered at the end of this
file, one line per command.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer
from rich.console import Console

from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error
from mqttq.cli.report import ConfOption, MasterOption, UiOption

__all__ = ["lake_app", "parse_duration"]

lake_app = typer.Typer(
    name="lake",
    help="The data lake: every message of the Kafka log as partitioned Parquet, on Spark "
    "(needs the spark extra: pip install -e '.[spark]').",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

LakeOption = Annotated[
    Path, typer.Option("--lake", metavar="DIR", help="The lake directory (created if missing).")
]
JsonLinesOption = Annotated[
    bool, typer.Option("--json", help="One JSON object per line on stdout instead of text.")
]
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, option: str) -> float:
    """`30s`, `5m`, `90d`, `1.5h`, `250ms` (a bare number is seconds) as seconds; exit 2
    naming `option` otherwise."""
    match = _DURATION.match(text.strip())
    if not match or float(match.group(1)) <= 0:
        _fail(f"bad {option} {text!r}: expected a positive duration such as 30s, 5m, 90d", 2)
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _kafka_and_schemas(
    config: Path | None, bootstrap: str | None, topic: str | None
) -> tuple[str, str, Any]:
    """(bootstrap servers, the log topic, the raw [lake] table) from the options and the
    config file; exit 2 when Kafka cannot be found."""
    from mqttq.config import load_settings  # noqa: PLC0415
    from mqttq.errors import ConfigError  # noqa: PLC0415
    from mqttq.storage.kafka.message_log import MSG_ALL  # noqa: PLC0415

    lake_table: Any = {}
    prefix = "tbmq."
    servers = bootstrap or ""
    if config is not None:
        try:
            settings = load_settings(config, {}, {})
        except ConfigError as exc:
            _fail(str(exc), EXIT_CONFIG)
        servers = bootstrap or settings.kafka.bootstrap_servers
        prefix = settings.kafka.topic_prefix
        lake_table = getattr(settings, "lake", {}) or {}
    if not servers:
        _fail(
            "no Kafka to read: give --bootstrap-servers HOST:PORT or a --config whose "
            "[kafka] section has bootstrap_servers",
            EXIT_CONFIG,
        )
    return servers, topic or f"{prefix}{MSG_ALL}", lake_table


@lake_app.command("run")
def run(  # noqa: PLR0917 (one parameter per option)
    lake: LakeOption,
    config: Annotated[
        Path | None,
        typer.Option("--config", metavar="PATH", help="broker.toml: [kafka] and [lake.schema]."),
    ] = None,
    bootstrap_servers: Annotated[
        str | None,
        typer.Option("--bootstrap-servers", metavar="HOST:PORT", help="Kafka (else --config's)."),
    ] = None,
    topic: Annotated[
        str | None,
        typer.Option("--topic", help="The log topic (default: <kafka.topic_prefix>msg.all)."),
    ] = None,
    available_now: Annotated[
        bool, typer.Option("--available-now", help="Write what the log holds now, then stop.")
    ] = False,
    trigger: Annotated[
        str, typer.Option("--trigger", metavar="DURATION", help="Interval between batches.")
    ] = "30s",
    hourly: Annotated[
        bool, typer.Option("--hourly", help="Partition by hour too (when creating the lake).")
    ] = False,
    fmt: Annotated[
        str, typer.Option("--format", metavar="parquet|delta", help="The table format.")
    ] = "parquet",
    infer: Annotated[
        bool,
        typer.Option("--infer", help="Typed columns from a sample of JSON payloads (all topics)."),
    ] = False,
    max_offsets: Annotated[
        int | None,
        typer.Option(
            "--max-offsets-per-trigger", min=1, metavar="N", help="Records per batch at most."
        ),
    ] = None,
    master: MasterOption = "local[*]",
    conf: ConfOption = None,
    ui: UiOption = False,
    as_json: JsonLinesOption = False,
) -> None:
    """Stream the broker's Kafka log into the lake (Parquet by tenant and date), exactly
    once across restarts; one status line per batch."""
    from mqttq.lake.decode import parse_typed_schemas  # noqa: PLC0415
    from mqttq.lake.layout import LakeError  # noqa: PLC0415

    if fmt not in ("parquet", "delta"):
        _fail(f"bad --format {fmt!r}: expected parquet or delta", EXIT_CONFIG)
    trigger_seconds = parse_duration(trigger, "--trigger")
    servers, log_topic, lake_table = _kafka_and_schemas(config, bootstrap_servers, topic)
    try:
        schemas = parse_typed_schemas(lake_table.get("schema", {}))
    except LakeError as exc:
        _fail(str(exc), EXIT_CONFIG)
    from mqttq.spark.session import SparkError, SparkOptions, parse_conf  # noqa: PLC0415

    try:
        user_conf = parse_conf(conf or [])
    except SparkError as exc:
        _fail(str(exc), EXIT_CONFIG)
    from mqttq.lake.stream import (  # noqa: PLC0415
        RunOptions,
        check_kafka,
        lake_packages,
        open_lake,
        stream_conf,
    )

    try:
        info = open_lake(lake, hourly=hourly, fmt=fmt)
    except LakeError as exc:
        _fail(str(exc), EXIT_CONFIG)
    try:
        check_kafka(servers, log_topic)
    except LakeError as exc:
        _fail(str(exc))
    options = RunOptions(
        lake=lake,
        bootstrap_servers=servers,
        topic=log_topic,
        trigger_seconds=trigger_seconds,
        available_now=available_now,
        hourly=info.hourly,
        format=info.format,
        schemas=schemas,
        max_offsets_per_trigger=max_offsets,
    )
    spark_options = SparkOptions(
        master=master,
        conf=(*stream_conf(info.format), *user_conf),
        ui=ui,
        app_name="mqttq-lake",
        packages=lake_packages(info.format),
    )
    _run(options, spark_options, info, infer=infer, as_json=as_json)


def _run(options: Any, spark_options: Any, info: Any, *, infer: bool, as_json: bool) -> None:
    """Start Spark, settle the typed columns, stream until done or signalled; one line and
    exit 1 when Spark or a batch fails."""
    from dataclasses import replace  # noqa: PLC0415

    from mqttq.lake.layout import LakeError  # noqa: PLC0415
    from mqttq.lake.stream import (  # noqa: PLC0415
        infer_schema,
        load_inferred,
        run_stream,
        save_inferred,
    )
    from mqttq.spark.session import SparkError, build_session, spark_error_line  # noqa: PLC0415

    console = Console(highlight=False, stderr=False)
    emit = _json_line if as_json else _printer(console)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        spark = build_session(spark_options)
    except SparkError as exc:
        _fail(str(exc), EXIT_CONFIG if "bad --" in str(exc) else EXIT_FAILURE)
    try:
        if not options.schemas:
            inferred = load_inferred(options.lake)
            if inferred is None and infer:
                inferred = infer_schema(spark, options)
                save_inferred(options.lake, inferred)
            if inferred is not None and inferred.columns:
                options = replace(options, schemas=(inferred,))
        emit(
            {
                "event": "started",
                "lake": str(options.lake),
                "topic": options.topic,
                "typed_columns": [c for s in options.schemas for c, _ in s.columns],
            }
        )
        totals = run_stream(spark, options, info, emit, stop)
    except LakeError as exc:
        _fail(str(exc))
    except Exception as exc:  # Spark's own failures: one line, exit 1
        if isinstance(exc, typer.Exit):
            raise
        _fail(f"the lake stream failed: {spark_error_line(exc)}")
    finally:
        spark.stop()
    emit(
        {
            "event": "stopped",
            "batches": totals.batches,
            "messages": totals.messages,
            "quarantined": totals.quarantined,
            "untyped": totals.untyped,
        }
    )


def _json_line(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _printer(console: Console) -> Any:
    def emit(event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "batch":
            lag = event.get("lag")
            console.print(
                f"batch {event['batch']}: {event['messages']:,} messages"
                f" ({event['quarantined']:,} quarantined, {event['untyped']:,} untyped)"
                f" · {event['processed_rate']:,.0f} msg/s"
                f" · {event['batch_seconds']}s"
                f" · lag {'?' if lag is None else f'{lag:,}'}"
            )
        elif kind == "started":
            console.print(f"streaming {event['topic']} into {event['lake']}")
        elif kind == "stopped":
            console.print(
                f"stopped after {event['batches']} batches: {event['messages']:,} messages, "
                f"{event['quarantined']:,} quarantined, {event['untyped']:,} untyped"
            )
        else:
            console.print(json.dumps(event))

    return emit


@lake_app.command("compact")
def compact(
    lake: LakeOption,
    target_rows: Annotated[
        int, typer.Option("--target-rows", min=1, help="Rows per compacted file at most.")
    ] = 5_000_000,
    as_json: JsonLinesOption = False,
) -> None:
    """Merge the files of each closed partition (before the current day, or hour) into
    few; safe while `lake run` writes (swapped in atomically, readers never see a row twice)."""
    from mqttq.lake.compact import compact_delta, compact_lake  # noqa: PLC0415
    from mqttq.lake.layout import LakeError  # noqa: PLC0415

    try:
        if _is_delta(lake):
            with _delta_session(lake, "mqttq lake compact") as spark:
                files = compact_delta(spark, lake)
            if as_json:
                _json_line({"event": "compacted", "format": "delta", **files})
            else:
                Console(highlight=False).print(
                    f"compacted (Delta OPTIMIZE): {files['files_removed']} files "
                    f"into {files['files_added']}"
                )
            return
        result = compact_lake(lake, target_rows=target_rows)
    except LakeError as exc:
        _fail(str(exc))
    if as_json:
        _json_line({"event": "compacted", **result})
    else:
        Console(highlight=False).print(
            f"compacted {result['partitions']} partitions: {result['files_before']} files "
            f"into {result['files_after']}"
        )


@lake_app.command("expire")
def expire(
    lake: LakeOption,
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="DURATION", help="e.g. 90d, 12h.")
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    as_json: JsonLinesOption = False,
) -> None:
    """Delete the partitions (messages and quarantine) whose whole day, or hour, is older
    than --older-than; safe while `lake run` writes."""
    from mqttq.lake.expire import expire_delta, expire_lake  # noqa: PLC0415
    from mqttq.lake.layout import LakeError  # noqa: PLC0415

    seconds = parse_duration(older_than, "--older-than")
    try:
        if _is_delta(lake):
            if dry_run:
                _fail("--dry-run lists Parquet partitions; a Delta lake's are rows: leave it out")
            with _delta_session(lake, "mqttq lake expire") as spark:
                deleted = expire_delta(spark, lake, seconds)
            console = Console(highlight=False)
            if as_json:
                _json_line({"event": "expired", "dry_run": False, "rows": deleted})
            else:
                console.print(f"deleted {deleted} rows (Delta: DELETE, then VACUUM)")
            return
        removed = expire_lake(lake, seconds, dry_run=dry_run)
    except LakeError as exc:
        _fail(str(exc))
    if as_json:
        _json_line({"event": "expired", "dry_run": dry_run, "partitions": removed})
    else:
        console = Console(highlight=False)
        verb = "would delete" if dry_run else "deleted"
        console.print(f"{verb} {len(removed)} partitions")
        for path in removed:
            console.print(f"  {path}")


# Other lake commands: one registration line each.
from mqttq.cli import lake_query  # noqa: E402 (registered after lake_app exists)

lake_app.command("query")(lake_query.query_command)
from mqttq.cli import lake_replay  # noqa: E402

lake_app.command("replay")(lake_replay.replay_command)


def _is_delta(lake: Path) -> bool:
    from mqttq.lake.layout import read_lake_info  # noqa: PLC0415

    info = read_lake_info(lake)
    return info is not None and info.format == "delta"


@contextmanager
def _delta_session(lake: Path, app_name: str) -> Iterator[Any]:
    """A Spark session with Delta's package and settings (compact and expire of a Delta
    lake are Delta commands: OPTIMIZE, DELETE, VACUUM); one line on a Spark failure."""
    from mqttq.lake.stream import reader_extras, stream_conf  # noqa: PLC0415
    from mqttq.spark.session import SparkError, SparkOptions, spark_session  # noqa: PLC0415

    packages, conf = reader_extras(lake)
    options = SparkOptions(
        master="local[*]",
        conf=(*stream_conf(), *conf),
        ui=False,
        app_name=app_name,
        packages=packages,
    )
    try:
        with spark_session(options) as spark:
            yield spark
    except SparkError as exc:
        _fail(str(exc))
