"""`mqttq report NAME`: reports computed on Spark (the work is in `mqttq.spark.reports`).

- `migration-plan --pg URL`: TBMQ 1.x's PostgreSQL before a migration.
- `sessions --redis URL` (`--cluster`, `--key-prefix`) or `sessions --sqlite PATH`: the
  DEVICE queues in Redis or in the embedded broker's database.
- `migration-check --pg URL --redis URL`: PostgreSQL and Redis after a migration, entry by
  entry; exit 1 when they differ.
- `traffic --lake DIR`: what the fleet published in a window, from the data lake (issue 36).

Every report prints rich tables on a terminal, or JSON with `--json`; `--out DIR` writes
every section (per client too) as CSV or Parquet (`--format`), `--chart PNG` draws the
histogram. Spark runs on `--master` (default `local[*]`) with `--conf key=value` passed
through; its web UI only with `--ui`. The sources are checked before Spark starts: a bad
URL, a missing table or an empty source is one line on stderr and exit 1; a bad option,
exit 2. pyspark is an optional extra: imported only once a report runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, NoReturn

import typer
from rich.console import Console

from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error
from mqttq.cli.migrate import PgOption
from mqttq.cli.options import (
    ClusterOption,
    ConfigOption,
    PrefixOption,
    RedisOption,
    ReportJsonOption,
    resolve_target,
)
from mqttq.cli.session import human_duration
from mqttq.spark.reports.output import OutFormat

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqttq.spark.reports.output import Report

DEFAULT_LIMIT: Final = 10_000
DEFAULT_TTL: Final = 604_800

report_app = typer.Typer(
    name="report",
    help="Reports on Spark over TBMQ 1.x's PostgreSQL, the Redis sessions, the embedded "
    "SQLite database or the data lake (needs the spark extra: pip install -e '.[spark]').",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

MasterOption = Annotated[
    str,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master: local[*], local[N], spark://HOST:PORT, yarn, k8s://...",
    ),
]
ConfOption = Annotated[
    list[str] | None,
    typer.Option("--conf", metavar="KEY=VALUE", help="A Spark property (repeatable)."),
]
UiOption = Annotated[bool, typer.Option("--ui", help="Run Spark's web UI (off by default).")]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        metavar="DIR",
        help="Also write every section, per-client rows included, under DIR/<section>/.",
    ),
]
ChartOption = Annotated[
    Path | None,
    typer.Option("--chart", metavar="PNG", help="Also draw the report's histogram as a PNG."),
]
TopOption = Annotated[int, typer.Option("--top", min=1, help="How many largest clients to list.")]
PartitionsOption = Annotated[
    int | None,
    typer.Option(
        "--partitions",
        min=1,
        help="Tasks reading the source (default: twice the cores Spark has).",
    ),
]
LimitOption = Annotated[
    int,
    typer.Option(
        "--limit",
        min=1,
        max=65535,
        help="The migration's per-client limit: messages kept per client (the newest).",
    ),
]
TtlOption = Annotated[
    int,
    typer.Option(
        "--default-ttl",
        metavar="SECONDS",
        min=1,
        help="The migration's TTL of a message without an expiry interval, from its time.",
    ),
]


@dataclass(frozen=True)
class Common:
    """The options every report takes."""

    master: str
    conf: list[str]
    ui: bool
    as_json: bool
    out: Path | None
    out_format: OutFormat
    chart: Path | None


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _now_ms() -> int:
    return int(time.time() * 1000)


def run_report(
    name: str,
    common: Common,
    check: Callable[[], None],
    build: Callable[[SparkSession, int], Report],
    *,
    jdbc: bool = False,
    extras: Callable[[], tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] | None = None,
) -> None:
    """Check the sources, start Spark, build and collect the report, write what was asked,
    print it; exit 1 with one line on any failure, or when the report's verdict says so.
    `extras` gives the Maven packages and settings the sources need (a Delta lake's)."""
    from mqttq.spark.session import SparkError, parse_conf, require_pyspark  # noqa: PLC0415

    try:
        require_pyspark()
        conf = parse_conf(common.conf)
    except SparkError as exc:
        _fail(str(exc), EXIT_CONFIG if "--conf" in str(exc) else EXIT_FAILURE)
    from mqttq.spark.reports import ReportError  # noqa: PLC0415

    try:
        check()
        packages: tuple[str, ...] = ()
        if extras is not None:
            packages, extra_conf = extras()
            conf = (*extra_conf, *conf)
        report = _run_on_spark(name, common, conf, build, jdbc=jdbc, packages=packages)
    except (ReportError, SparkError) as exc:
        _fail(str(exc))
    if common.as_json:
        from mqttq.spark.reports.output import dump_json  # noqa: PLC0415

        sys.stdout.write(dump_json(report) + "\n")
    else:
        from mqttq.spark.reports.output import print_report  # noqa: PLC0415

        console = Console(highlight=False)
        print_report(report, console, human_duration)
        if common.out is not None:
            console.print(f"sections written under {common.out} ({common.out_format.value})")
        if common.chart is not None:
            console.print(f"chart written to {common.chart}")
    problem = report.problem
    if problem is not None:
        _fail(problem)


def _run_on_spark(
    name: str,
    common: Common,
    conf: tuple[tuple[str, str], ...],
    build: Callable[[SparkSession, int], Report],
    *,
    jdbc: bool,
    packages: tuple[str, ...] = (),
) -> Report:
    from py4j.protocol import Py4JError  # noqa: PLC0415
    from pyspark import SparkContext  # noqa: PLC0415
    from pyspark.errors import PySparkException  # noqa: PLC0415

    from mqttq.spark.progress import stage_progress  # noqa: PLC0415
    from mqttq.spark.reports import ReportError  # noqa: PLC0415
    from mqttq.spark.reports.output import write_chart, write_out  # noqa: PLC0415
    from mqttq.spark.session import (  # noqa: PLC0415
        POSTGRES_JDBC,
        SparkOptions,
        build_session,
        spark_error_line,
    )

    # A session that already runs (a test's, a notebook's) is used and left running.
    owned = SparkContext._active_spark_context is None
    options = SparkOptions(
        master=common.master,
        conf=conf,
        ui=common.ui,
        app_name=f"mqttq report {name}",
        packages=((POSTGRES_JDBC,) if jdbc else ()) + packages,
    )
    err = Console(stderr=True)
    spark = build_session(options)
    try:
        with stage_progress(spark, err, f"report {name}", enabled=not common.as_json):
            report = build(spark, _now_ms())
            report.collect()
            if common.out is not None:
                write_out(spark, report, common.out, common.out_format)
        if common.chart is not None:
            write_chart(report, common.chart)
        return report
    except (PySparkException, Py4JError) as exc:
        raise ReportError(f"report {name} failed: {spark_error_line(exc)}") from exc
    finally:
        if owned:
            spark.stop()


def _partitions(spark: SparkSession, partitions: int | None) -> int:
    return partitions or max(2, spark.sparkContext.defaultParallelism * 2)


def _common(
    *,
    master: str,
    conf: list[str] | None,
    ui: bool,
    as_json: bool,
    out: Path | None,
    out_format: OutFormat,
    chart: Path | None,
) -> Common:
    return Common(master, conf or [], ui, as_json, out, out_format, chart)


FormatOption = Annotated[
    OutFormat, typer.Option("--format", help="File format of --out (CSV with a header).")
]


@report_app.command("migration-plan")
def migration_plan_command(
    *,
    pg: PgOption,
    limit: LimitOption = DEFAULT_LIMIT,
    default_ttl: TtlOption = DEFAULT_TTL,
    rate: Annotated[
        int,
        typer.Option(
            "--rate",
            metavar="ROWS_PER_S",
            min=1,
            help="Migration speed for the time estimate (docs/benchmarks.md: ~100,000 rows/s "
            "for mqttq migrate pg-to-redis on one host).",
        ),
    ] = 100_000,
    key_prefix: PrefixOption = None,
    top: TopOption = 10,
    partitions: PartitionsOption = None,
    master: MasterOption = "local[*]",
    conf: ConfOption = None,
    ui: UiOption = False,
    as_json: ReportJsonOption = False,
    out: OutOption = None,
    out_format: FormatOption = OutFormat.csv,
    chart: ChartOption = None,
) -> None:
    """Before a migration: what TBMQ 1.x's PostgreSQL holds and what pg-to-redis would do.

    Clients, rows, payload bytes, rows already expired, rows over the per-client --limit,
    PUBREL rows, clients whose serials passed 65535 (packet ids wrapped), the estimated
    Redis memory and migration time, the largest clients; --chart: clients by rows.
    """
    common = _common(
        master=master,
        conf=conf,
        ui=ui,
        as_json=as_json,
        out=out,
        out_format=out_format,
        chart=chart,
    )

    def check() -> None:
        from mqttq.spark.reports.pg_source import check_source  # noqa: PLC0415

        check_source(pg)

    def build(spark: SparkSession, now_ms: int) -> Report:
        from mqttq.spark.reports.migration_plan import migration_plan_report  # noqa: PLC0415
        from mqttq.spark.reports.pg_source import read_messages, read_sessions  # noqa: PLC0415

        n = _partitions(spark, partitions)
        return migration_plan_report(
            read_messages(spark, pg, n),
            read_sessions(spark, pg, n),
            limit=limit,
            default_ttl_s=default_ttl,
            now_ms=now_ms,
            rows_per_s=rate,
            key_prefix_length=len((key_prefix or "").encode()),
            top=top,
        )

    run_report("migration-plan", common, check, build, jdbc=True)


@report_app.command("sessions")
def sessions_command(
    *,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    sqlite: Annotated[
        Path | None,
        typer.Option(
            "--sqlite",
            metavar="PATH",
            help="The embedded broker's database (DATA_DIR/mqttq.sqlite3) instead of Redis.",
        ),
    ] = None,
    expiring_within: Annotated[
        int,
        typer.Option(
            "--expiring-within",
            metavar="SECONDS",
            min=0,
            help="Count the messages whose TTL ends within this many seconds.",
        ),
    ] = 3600,
    top: TopOption = 10,
    partitions: PartitionsOption = None,
    master: MasterOption = "local[*]",
    conf: ConfOption = None,
    ui: UiOption = False,
    as_json: ReportJsonOption = False,
    out: OutOption = None,
    out_format: FormatOption = OutFormat.csv,
    chart: ChartOption = None,
) -> None:
    """The DEVICE queues as they are, in Redis (or Redis Cluster) or the SQLite database.

    Per session: backlog, bytes, oldest message age, messages about to expire, entries
    waiting on a PUBREL; the totals, the largest queues, per tenant (SQLite knows each
    session's tenant); --chart: sessions by backlog.
    """
    common = _common(
        master=master,
        conf=conf,
        ui=ui,
        as_json=as_json,
        out=out,
        out_format=out_format,
        chart=chart,
    )
    if sqlite is not None and (redis is not None or cluster or config is not None):
        _fail("give either --sqlite or --redis/--cluster/--config, not both", EXIT_CONFIG)
    target = None if sqlite is not None else resolve_target(redis, cluster, key_prefix, config)

    def check() -> None:
        from mqttq.spark.reports.redis_source import master_urls  # noqa: PLC0415

        if target is not None:
            master_urls(target.url, target.cluster, prefix=target.key_prefix)

    def build(spark: SparkSession, now_ms: int) -> Report:
        from mqttq.spark.reports.redis_source import read_entries  # noqa: PLC0415
        from mqttq.spark.reports.sessions import sessions_report  # noqa: PLC0415
        from mqttq.spark.reports.sqlite_source import read_sqlite  # noqa: PLC0415

        if target is None:
            assert sqlite is not None
            entries, tenants = read_sqlite(spark, sqlite, now_ms)
            where = f"SQLite {sqlite}"
        else:
            entries = read_entries(
                spark,
                target.url,
                cluster=target.cluster,
                prefix=target.key_prefix,
                partitions=_partitions(spark, partitions),
            )
            tenants, where = None, target.describe()
        return sessions_report(
            entries,
            tenants,
            now_ms=now_ms,
            expiring_within_s=expiring_within,
            top=top,
            source=where,
            empty=f"no DEVICE session or queue in {where}",
        )

    run_report("sessions", common, check, build)


@report_app.command("migration-check")
def migration_check_command(
    *,
    pg: PgOption,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    limit: LimitOption = DEFAULT_LIMIT,
    default_ttl: TtlOption = DEFAULT_TTL,
    partitions: PartitionsOption = None,
    master: MasterOption = "local[*]",
    conf: ConfOption = None,
    ui: UiOption = False,
    as_json: ReportJsonOption = False,
    out: OutOption = None,
    out_format: FormatOption = OutFormat.csv,
) -> None:
    """After a migration: per client, the entries PostgreSQL expects against those in Redis.

    Expected: the newest --limit rows of each client that have not expired (the
    migration's rule; give the --limit and --default-ttl the migration used). Every client
    with an entry missing, an extra entry or another packet id is listed; exit 1 if any.
    """
    common = _common(
        master=master, conf=conf, ui=ui, as_json=as_json, out=out, out_format=out_format, chart=None
    )
    target = resolve_target(redis, cluster, key_prefix, config)

    def check() -> None:
        from mqttq.spark.reports.pg_source import check_source  # noqa: PLC0415
        from mqttq.spark.reports.redis_source import master_urls  # noqa: PLC0415

        check_source(pg)
        master_urls(target.url, target.cluster, prefix=target.key_prefix)

    def build(spark: SparkSession, now_ms: int) -> Report:
        from mqttq.spark.reports.migration_check import migration_check_report  # noqa: PLC0415
        from mqttq.spark.reports.pg_source import read_messages  # noqa: PLC0415
        from mqttq.spark.reports.redis_source import read_entries  # noqa: PLC0415

        n = _partitions(spark, partitions)
        entries = read_entries(
            spark, target.url, cluster=target.cluster, prefix=target.key_prefix, partitions=n
        )
        return migration_check_report(
            read_messages(spark, pg, n),
            entries,
            limit=limit,
            default_ttl_s=default_ttl,
            now_ms=now_ms,
            empty=f"no DEVICE queue in {target.describe()}: was the migration run?",
        )

    run_report("migration-check", common, check, build, jdbc=True)


@report_app.command("traffic")
def traffic_command(
    *,
    lake: Annotated[
        Path, typer.Option("--lake", metavar="DIR", help="The lake (mqttq lake run, lake sink).")
    ],
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME",
            help="Window start: ISO 8601 (UTC unless it says), a date, or a duration before "
            "--until such as 24h, 7d (default: 24h).",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", metavar="TIME", help="Window end, excluded (default: now)."),
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's messages.")
    ] = None,
    level: Annotated[
        int | None,
        typer.Option("--level", min=1, metavar="N", help="Group topics by their first N levels."),
    ] = None,
    top: TopOption = 10,
    master: MasterOption = "local[*]",
    conf: ConfOption = None,
    ui: UiOption = False,
    as_json: ReportJsonOption = False,
    out: OutOption = None,
    out_format: FormatOption = OutFormat.csv,
    chart: ChartOption = None,
) -> None:
    """What the fleet published in [--since, --until), from the data lake.

    Per tenant (usage for billing), topic and publisher: messages, payload bytes, QoS mix,
    retained, messages per hour; the top talkers; messages per UTC hour (--chart); the
    silent devices (published in the previous window of the same length, not in this one).
    """
    from mqttq.lake.window import parse_window  # noqa: PLC0415

    common = _common(
        master=master,
        conf=conf,
        ui=ui,
        as_json=as_json,
        out=out,
        out_format=out_format,
        chart=chart,
    )
    try:
        window = parse_window(since, until)
    except ValueError as exc:
        _fail(str(exc), EXIT_CONFIG)

    def check() -> None:
        from mqttq.lake.layout import LakeError  # noqa: PLC0415
        from mqttq.lake.query import check_lake  # noqa: PLC0415
        from mqttq.spark.reports import ReportError  # noqa: PLC0415

        try:
            check_lake(lake)
        except LakeError as exc:
            raise ReportError(str(exc)) from None

    def build(spark: SparkSession, now_ms: int) -> Report:
        from mqttq.lake.query import read_messages  # noqa: PLC0415
        from mqttq.lake.traffic import traffic_report  # noqa: PLC0415

        return traffic_report(
            read_messages(spark, lake, typed=False),
            window,
            level=level,
            tenant=tenant,
            top=top,
            source=f"the lake {lake}",
        )

    def extras() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        from mqttq.lake.stream import reader_extras  # noqa: PLC0415

        return reader_extras(lake)

    run_report("traffic", common, check, build, extras=extras)


if __name__ == "__main__":
    report_app(prog_name="mqttq report")
