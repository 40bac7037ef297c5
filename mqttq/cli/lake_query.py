"""`mqttq lake query --lake DIR "SELECT ..."`: Spark SQL over the lake.

The lake is the view `messages` (and `quarantine` when it has quarantined records); the
result is a rich table on a terminal (the first --limit rows), `--json` (a JSON array of
objects, every row) or `--csv` (a header, then every row). Binary values are base64 in JSON
and CSV, times are ISO 8601 UTC. A statement Spark cannot parse or resolve is one line on
stderr and exit 2; a lake that is missing or empty, exit 1.
"""

from __future__ import annotations

import base64
import csv
import json
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error
from mqttq.cli.report import ConfOption, MasterOption, UiOption

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["query_command", "to_plain"]


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def to_plain(value: Any) -> Any:
    """A Spark value as JSON can hold it: bytes as base64, times as ISO 8601 (UTC), rows
    and maps as objects, arrays as lists, decimals as strings."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.astimezone()
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "asDict"):
        return {k: to_plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value


def _csv_cell(value: Any) -> Any:
    plain = to_plain(value)
    if isinstance(plain, dict | list):
        return json.dumps(plain, ensure_ascii=False)
    return "" if plain is None else plain


def query_command(
    sql: Annotated[str, typer.Argument(metavar="SQL", help="A Spark SQL statement.")],
    *,
    lake: Annotated[Path, typer.Option("--lake", metavar="DIR", help="The lake directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array of rows.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="CSV with a header.")] = False,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="Rows shown in the table (JSON, CSV: all).")
    ] = 100,
    master: MasterOption = "local[*]",
    conf: ConfOption = None,
    ui: UiOption = False,
) -> None:
    """Spark SQL over the lake: the view `messages` (and `quarantine`)."""
    if as_json and as_csv:
        _fail("give --json or --csv, not both", EXIT_CONFIG)
    from mqttq.lake.layout import LakeError  # noqa: PLC0415
    from mqttq.lake.query import check_lake  # noqa: PLC0415
    from mqttq.spark.session import SparkError, parse_conf, require_pyspark  # noqa: PLC0415

    try:
        require_pyspark()
        pairs = parse_conf(conf or [])
        check_lake(lake)
    except SparkError as exc:
        _fail(str(exc), EXIT_CONFIG if "--conf" in str(exc) else EXIT_FAILURE)
    except LakeError as exc:
        _fail(str(exc))
    columns, rows = _run(sql, lake, master, pairs, ui)
    if as_json:
        sys.stdout.write(
            json.dumps(
                [{c: to_plain(v) for c, v in zip(columns, row, strict=True)} for row in rows],
                ensure_ascii=False,
            )
            + "\n"
        )
    elif as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_csv_cell(v) for v in row])
    else:
        _print_table(columns, rows, limit)


def _run(
    sql: str, lake: Path, master: str, conf: tuple[tuple[str, str], ...], ui: bool
) -> tuple[list[str], list[tuple[Any, ...]]]:
    from py4j.protocol import Py4JError  # noqa: PLC0415
    from pyspark import SparkContext  # noqa: PLC0415
    from pyspark.errors import PySparkException  # noqa: PLC0415

    from mqttq.lake.layout import LakeError  # noqa: PLC0415
    from mqttq.lake.query import run_sql  # noqa: PLC0415
    from mqttq.lake.stream import reader_extras  # noqa: PLC0415
    from mqttq.spark.session import (  # noqa: PLC0415
        SparkError,
        SparkOptions,
        build_session,
        spark_error_line,
    )

    owned = SparkContext._active_spark_context is None
    try:
        packages, extra_conf = reader_extras(lake)
        spark: SparkSession = build_session(
            SparkOptions(
                master=master,
                conf=(*extra_conf, *conf),
                ui=ui,
                app_name="mqttq lake query",
                packages=packages,
            )
        )
    except SparkError as exc:
        _fail(str(exc))
    try:
        try:
            frame = run_sql(spark, lake, sql)
        except LakeError as exc:
            _fail(str(exc), EXIT_CONFIG)
        try:
            rows = [tuple(row) for row in frame.collect()]
        except (PySparkException, Py4JError) as exc:
            _fail(f"the query failed: {spark_error_line(exc)}")
        return list(frame.columns), rows
    finally:
        if owned:
            spark.stop()


def _print_table(columns: list[str], rows: list[tuple[Any, ...]], limit: int) -> None:
    console = Console(highlight=False)
    table = Table()
    for name in columns:
        table.add_column(name)
    for row in rows[:limit]:
        table.add_row(*("-" if v is None else str(to_plain(v)) for v in row))
    console.print(table)
    more = f" ({limit:,} shown: --json or --csv gives all)" if len(rows) > limit else ""
    console.print(f"{len(rows):,} rows{more}")
