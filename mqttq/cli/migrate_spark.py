"""`mqttq migrate pg-to-redis --engine spark`: the Spark options and the run.

pyspark is imported only here, and only when `--engine spark` is chosen: `mqttq --help`
and the local engine work without the `spark` extra. Without it, `--engine spark` says in
one line how to install it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.console import Console

if TYPE_CHECKING:
    from mqttq.migrate import MigrationOptions, MigrationReport


class Engine(StrEnum):
    LOCAL = "local"
    SPARK = "spark"


APP_NAME: Final = "mqttq migrate pg-to-redis"

EngineOption = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="local: this process (fastest on one host, see README); spark: a Spark job "
        "(--master), partitions by client hash written by the executors.",
    ),
]
MasterOption = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master for --engine spark: local[*] (default), local[N], "
        "spark://HOST:PORT, yarn, k8s://...",
    ),
]
ConfOption = Annotated[
    list[str] | None,
    typer.Option(
        "--conf", metavar="KEY=VALUE", help="A Spark property for --engine spark (repeatable)."
    ),
]
UiOption = Annotated[
    bool, typer.Option("--ui", help="Run Spark's web UI (--engine spark; off by default).")
]
PartitionsOption = Annotated[
    int | None,
    typer.Option(
        "--partitions",
        metavar="N",
        help="Partitions of the source by client hash (--engine spark; default: 2 per core).",
    ),
]


def spark_only_options(
    master: str | None, conf: list[str] | None, ui: bool, partitions: int | None
) -> list[str]:
    """The Spark-only options given (to refuse them with --engine local)."""
    given = [("--master", master is not None), ("--conf", bool(conf)), ("--ui", ui)]
    given.append(("--partitions", partitions is not None))
    return [name for name, present in given if present]


def run_spark(
    options: MigrationOptions,
    *,
    master: str | None,
    conf: list[str] | None,
    ui: bool,
    partitions: int | None,
    bar_console: Console | None,
) -> MigrationReport:
    """The migration on Spark (SparkError or MigrateError: one line for the operator)."""
    from mqttq.spark.session import (  # noqa: PLC0415 (imports no pyspark itself)
        POSTGRES_JDBC,
        SparkOptions,
        parse_conf,
        require_pyspark,
        spark_session,
    )

    require_pyspark()
    spark_options = SparkOptions(
        master=master or "local[*]",
        conf=parse_conf(conf or []),
        ui=ui,
        app_name=APP_NAME,
        packages=(POSTGRES_JDBC,),
    )
    from mqttq.spark.migrate_job import SparkMigration  # noqa: PLC0415 (loads the job)

    with spark_session(spark_options) as spark:
        job = SparkMigration(spark, options, partitions=partitions, console=bar_console)
        return job.run()
