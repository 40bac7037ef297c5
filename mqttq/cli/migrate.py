"""`mqttq migrate`: move TBMQ 1.x's DEVICE sessions from PostgreSQL into Redis.

`init-source` creates TBMQ 1.x's two tables (for trials and tests); `pg-to-redis` moves
every persistent DEVICE session's pending messages and counters into the Redis layout the
broker serves (`[storage] device = "redis"`). The work is done by `mqttq.migrate` (imported
inside the commands, so that `mqttq --help` does not load the PostgreSQL driver).

Where Redis is: `--redis URL` (`--cluster` for a node of a Redis Cluster) and `--key-prefix`,
else the `[redis]` section of `--config`, as for `mqttq session`; the queue limit and the
default TTL also come from that file (`mqtt.max_queued_messages`, `redis.default_ttl`) unless
given. PostgreSQL or Redis unreachable: one line on stderr, exit 1. A bad option: exit 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error
from mqttq.cli.migrate_report import print_report
from mqttq.cli.migrate_spark import (
    ConfOption,
    Engine,
    EngineOption,
    MasterOption,
    PartitionsOption,
    UiOption,
    run_spark,
    spark_only_options,
)
from mqttq.cli.options import (
    ClusterOption,
    ConfigOption,
    PrefixOption,
    RedisOption,
    ReportJsonOption,
    resolve_target,
)

if TYPE_CHECKING:
    from mqttq.migrate import MigrationOptions, MigrationReport

CRASH_AFTER_ENV: Final = "MQTTQ_TEST_MIGRATE_CRASH_AFTER"
"""Tests only: exit at once (status 75, like a kill -9) once this many clients are in Redis,
before their batch's session records and checkpoint are written."""
CRASH_STATUS: Final = 75

migrate_app = typer.Typer(
    name="migrate",
    help="Move TBMQ 1.x's persistent DEVICE sessions from PostgreSQL into Redis.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

PgOption = Annotated[
    str,
    typer.Option(
        "--pg",
        metavar="URL",
        envvar="MQTTQ_MIGRATE_PG",
        help="postgresql://USER:PASSWORD@HOST:PORT/DB of TBMQ 1.x's database "
        "(or a libpq key=value string).",
    ),
]


class ConflictChoice(StrEnum):
    FAIL = "fail"
    SKIP = "skip"
    REPLACE = "replace"


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


@migrate_app.command("init-source")
def init_source_command(pg: PgOption, as_json: ReportJsonOption = False) -> None:
    """Create TBMQ 1.x's tables exactly as TBMQ 1.x had them, for trials and tests.

    device_session_ctx (primary key client_id) and device_publish_msg (primary key
    client_id, serial_number; index idx_device_publish_msg_packet_id on client_id,
    packet_id). Tables that exist are kept as they are.
    """
    from mqttq.migrate import MigrateError, init_source  # noqa: PLC0415

    try:
        where = asyncio.run(init_source(pg))
    except MigrateError as exc:
        _fail(str(exc))
    if as_json:
        ready = {"database": where, "tables": ["device_session_ctx", "device_publish_msg"]}
        sys.stdout.write(json.dumps(ready) + "\n")
        return
    Console(highlight=False).print(
        f"TBMQ 1.x tables device_session_ctx and device_publish_msg are ready in {where}"
    )


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed or 0:,.0f} rows/s", style="progress.data.speed")


class _Bar:
    """The progress bar on stderr (rows, rows/s, clients)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rows"),
            _RateColumn(),
            TextColumn("{task.fields[clients]:,} clients"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task: Any = None
        self.clients = 0

    def begin(self, description: str, total_rows: int | None) -> None:
        if self.task is not None:
            self.progress.update(self.task, total=self.progress.tasks[-1].completed)
        self.clients = 0
        self.task = self.progress.add_task(description, total=total_rows, clients=0)

    def advance(self, rows: int, clients: int) -> None:
        self.clients += clients
        self.progress.update(self.task, advance=rows, clients=self.clients)


def _first(*values: int | None) -> int:
    return next(value for value in values if value is not None)


def _config_defaults(config: Path | None) -> tuple[Any, Any]:
    """max_queued_messages and default_ttl from the config file, if it has them."""
    if config is None:
        return None, None
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        _fail(f"cannot read the config file {config}: {exc}", EXIT_CONFIG)
    limit = data.get("mqtt", {}).get("max_queued_messages")
    ttl = data.get("redis", {}).get("default_ttl")
    for key, value in (("mqtt.max_queued_messages", limit), ("redis.default_ttl", ttl)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            _fail(f"config key {key!r}: must be an integer, got {value!r}", EXIT_CONFIG)
    return limit, ttl


@migrate_app.command("pg-to-redis")
def pg_to_redis_command(
    *,
    pg: PgOption,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            help="Messages kept per client: the newest (default: mqtt.max_queued_messages "
            "of --config, else 10000, the broker's default); at most 65535.",
        ),
    ] = None,
    default_ttl: Annotated[
        int | None,
        typer.Option(
            "--default-ttl",
            metavar="SECONDS",
            help="Life of a message without an expiry interval, from its time "
            "(default: redis.default_ttl of --config, else 604800 = 7 days).",
        ),
    ] = None,
    clients: Annotated[
        str | None,
        typer.Option(
            "--clients",
            metavar="PATTERN",
            help="Only client ids matching this SQL LIKE pattern (% any run, _ one "
            "character, \\ escapes), e.g. 'sensor-%'.",
        ),
    ] = None,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            help="Rows fetched per round trip, and messages per Redis pipeline.",
        ),
    ] = 10_000,
    on_conflict: Annotated[
        ConflictChoice,
        typer.Option(
            "--on-conflict",
            help="A client id that already has a session in Redis: fail (list them, "
            "write nothing), skip (leave it) or replace (delete its queue first).",
        ),
    ] = ConflictChoice.FAIL,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Read and validate everything, write nothing.")
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Then compare PostgreSQL and Redis client by client (count, order, packet "
            "ids, payload hashes); exit 1 on any difference. With --dry-run: only compare.",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue after the last client the interrupted run completed. Without "
            "it a run starts over and skips the clients already migrated (their marker "
            "key {client_id}_migrated): a second full run writes nothing.",
        ),
    ] = False,
    allow_rejects: Annotated[
        bool,
        typer.Option(
            "--allow-rejects",
            help="Exit 0 even when clients were rejected for bad rows (they are still "
            "reported and not written).",
        ),
    ] = False,
    sessions_to: Annotated[
        Path | None,
        typer.Option(
            "--sessions-to",
            metavar="DATA_DIR",
            help="The broker's --data-dir: add a session record (no subscriptions) for each "
            "migrated client to its SQLite database, so that the broker resumes the "
            "session and delivers the queue. Run it while the broker is stopped.",
        ),
    ] = None,
    session_expiry: Annotated[
        int,
        typer.Option(
            "--session-expiry",
            metavar="SECONDS",
            help="Session expiry interval of those records (default: never).",
        ),
    ] = 0xFFFFFFFF,
    rejects: Annotated[
        Path | None,
        typer.Option(
            "--rejects",
            metavar="PATH",
            help="Write every rejected row's problem to PATH: Parquet when it ends in "
            ".parquet, else CSV.",
        ),
    ] = None,
    engine: EngineOption = Engine.LOCAL,
    master: MasterOption = None,
    conf: ConfOption = None,
    ui: UiOption = False,
    partitions: PartitionsOption = None,
    as_json: ReportJsonOption = False,
) -> None:
    """Move every persistent DEVICE session from TBMQ 1.x's PostgreSQL into Redis.

    Per client, its newest --limit messages in serial_number order become the ZSET
    {client_id}_messages (score = serial number) and one key per message,
    {client_id}_messages_<packet_id> (TBMQ's JSON, expiring at time + expiry interval,
    else + --default-ttl); already expired rows are skipped and counted.
    {client_id}_last_packet_id and {client_id}_last_serial_number come from
    device_session_ctx. Each client is written
    by one Lua script: whole or not at all. A client with a bad row (NULL or invalid
    value, duplicate packet id) is rejected whole and every bad row is reported.

    The broker keeps its sessions in SQLite and only the queues in Redis: a client that
    reconnects without a session record there gets a new session, whose queue the broker
    clears. Give --sessions-to the broker's data dir (with the broker stopped) so that it
    resumes the migrated sessions.

    --engine spark runs the same migration as a Spark job (--master, default local[*]):
    the source is read in --partitions partitions by a hash of the client id, and each
    partition is planned and written by an executor with the same rules, script and
    markers. Same result in Redis, key by key.
    """
    from mqttq.cli.serve import SQLITE_FILE_NAME  # noqa: PLC0415
    from mqttq.migrate import MigrateError, MigrationOptions, OnConflict  # noqa: PLC0415

    target = resolve_target(redis, cluster, key_prefix, config)
    config_limit, config_ttl = _config_defaults(config)
    options = MigrationOptions(
        pg_url=pg,
        redis_url=target.url,
        cluster=target.cluster,
        key_prefix=target.key_prefix,
        limit=_first(limit, config_limit, 10_000),
        default_ttl=_first(default_ttl, config_ttl, 604_800),
        clients=clients,
        batch_size=batch_size,
        on_conflict=OnConflict(on_conflict.value),
        dry_run=dry_run,
        verify=verify,
        resume=resume,
        sessions_db=None if sessions_to is None else sessions_to / SQLITE_FILE_NAME,
        session_expiry_interval=session_expiry,
        rejects_path=rejects,
    )
    try:
        options.check()
    except ValueError as exc:
        _fail(str(exc), EXIT_CONFIG)
    spark_only = spark_only_options(master, conf, ui, partitions)
    if engine is Engine.LOCAL and spark_only:
        _fail(f"{', '.join(spark_only)}: only with --engine spark", EXIT_CONFIG)
    if partitions is not None and partitions < 1:
        _fail(f"--partitions {partitions}: must be at least 1", EXIT_CONFIG)
    err = Console(stderr=True)
    show_bar = err.is_terminal and not as_json
    from mqttq.spark.session import SparkError, SparkUsageError  # noqa: PLC0415 (no pyspark)

    try:
        if engine is Engine.SPARK:
            report = run_spark(
                options,
                master=master,
                conf=conf,
                ui=ui,
                partitions=partitions,
                bar_console=err if show_bar else None,
            )
        else:
            report = _run(options, err if show_bar else None)
    except SparkError as exc:
        _fail(str(exc), EXIT_CONFIG if isinstance(exc, SparkUsageError) else EXIT_FAILURE)
    except MigrateError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted: run again with --resume to continue", 130)
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), ensure_ascii=False) + "\n")
    else:
        print_report(report, options, target.describe())
    _exit_status(report, allow_rejects)


def _run(options: MigrationOptions, bar_console: Console | None) -> MigrationReport:
    from mqttq.migrate import Migration  # noqa: PLC0415

    crash_after = os.environ.get(CRASH_AFTER_ENV)

    def after_batch(report: MigrationReport) -> None:
        if crash_after is not None and report.clients_migrated >= int(crash_after):
            sys.stdout.flush()
            os._exit(CRASH_STATUS)

    if bar_console is None:
        return asyncio.run(Migration(options, None, after_batch).run())
    bar = _Bar(bar_console)
    with bar.progress:
        return asyncio.run(Migration(options, bar, after_batch).run())


def _exit_status(report: MigrationReport, allow_rejects: bool) -> None:
    if report.refused:
        _fail(
            f"{report.conflicts_total} client id(s) already have a session in Redis; nothing "
            f"{'would be' if report.dry_run else 'was'} written. "
            "Choose --on-conflict skip or replace.",
        )
    problems = []
    if report.conflicts_total:
        problems.append(f"{report.conflicts_total} client(s) appeared in Redis meanwhile")
    if report.clients_rejected and not allow_rejects:
        problems.append(
            f"{report.clients_rejected} client(s) rejected for {report.rows_rejected} bad "
            "row(s) (--allow-rejects to accept)"
        )
    if report.verify is not None and not report.verify.ok:
        problems.append(f"{report.verify.clients_different} client(s) differ in Redis")
    if problems:
        _fail("; ".join(problems))


if __name__ == "__main__":
    migrate_app(prog_name="mqttq migrate")
