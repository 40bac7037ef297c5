"""What a report gives back, and the four ways it is shown: a rich table, JSON, files, a chart.

A report is a list of `Section`s, each a DataFrame computed by the report's transforms:
- `summary`: one row, printed as a two-column table (field, value), a JSON object;
- `rows`: a few rows (the largest clients, a histogram, the differences), printed up to
  `shown` rows, a JSON list (all of them);
- `data`: one row per client, too many to print: written only by `--out`.

`collect` runs the Spark jobs once per summary/rows section; the files of `--out` are written
from those collected rows (no second read of the source) and, for `data` sections, by Spark
itself from the DataFrame (one CSV or Parquet file per section, under DIR/<section>/).
A column named `*_s` holds seconds (printed as `3d04h`), `*_bytes` bytes (printed as `1.2 MiB`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console
from rich.table import Table

from mqttq.spark.reports import ReportError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SHOWN: Final = 20
"""Rows of a `rows` section printed on a terminal (--json and --out have them all)."""


class SectionKind(StrEnum):
    SUMMARY = "summary"
    ROWS = "rows"
    DATA = "data"


class OutFormat(StrEnum):
    csv = "csv"
    parquet = "parquet"


@dataclass(frozen=True)
class Section:
    """One part of a report: its name (the JSON key and the --out directory), its title on
    a terminal, and the DataFrame that computes it."""

    name: str
    title: str
    frame: DataFrame
    kind: SectionKind = SectionKind.ROWS
    shown: int = SHOWN


@dataclass(frozen=True)
class Chart:
    """A bar chart of one `rows` section: `x` labels the bars, `y` is their height."""

    section: str
    x: str
    y: str
    title: str
    x_label: str
    y_label: str


@dataclass
class Report:
    """A report's sections, its chart and its verdict."""

    name: str
    title: str
    sections: list[Section]
    chart: Chart | None = None
    verdict: Callable[[dict[str, Any]], str | None] | None = None
    """Given the collected summary row: the line that makes the CLI exit 1 (e.g. the
    differences migration-check found), or None."""
    empty: tuple[str, str] | None = None
    """(summary column, message): when the column is 0 the source is empty, and `collect`
    raises ReportError(message) instead of showing a report of nothing."""
    collected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def section(self, name: str) -> Section:
        return next(s for s in self.sections if s.name == name)

    def collect(self) -> None:
        """Run the jobs of every summary and rows section (once); ReportError when the
        source turns out empty (`empty`)."""
        for section in self.sections:
            if section.kind is not SectionKind.DATA and section.name not in self.collected:
                self.collected[section.name] = [row.asDict() for row in section.frame.collect()]
                if section.kind is SectionKind.SUMMARY and self.empty is not None:
                    column, message = self.empty
                    if not (self.collected[section.name] or [{}])[0].get(column):
                        raise ReportError(message)

    @property
    def problem(self) -> str | None:
        """The verdict on the collected summary (None: nothing wrong, or no verdict)."""
        if self.verdict is None:
            return None
        rows = self.collected.get("summary") or [{}]
        return self.verdict(rows[0])

    def to_json(self) -> dict[str, Any]:
        """{"report": name, <section>: object (summary) or list (rows)}; data sections are
        left out (use --out)."""
        data: dict[str, Any] = {"report": self.name}
        for section in self.sections:
            if section.kind is SectionKind.DATA:
                continue
            rows = self.collected[section.name]
            data[section.name] = (
                (rows[0] if rows else {}) if section.kind is SectionKind.SUMMARY else rows
            )
        return data


# --- terminal --------------------------------------------------------------------------------


def _bytes(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{value:,} B" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"  # pragma: no cover (the loop returns at GiB)


def cell(name: str, value: Any, duration: Callable[[float | None], str]) -> str:
    """`value` of column `name` as printed in a table."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if name.endswith("_s"):
        return duration(float(value))
    if name.endswith("_bytes") and isinstance(value, int):
        return _bytes(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if math.isfinite(value) else str(value)
    return str(value)


def _label(name: str) -> str:
    return name.removesuffix("_s").replace("_", " ")


def print_report(report: Report, console: Console, duration: Callable[[float | None], str]) -> None:
    """The report as rich tables: each summary and rows section in order."""
    console.print(f"[bold]{report.title}[/bold]")
    for section in report.sections:
        if section.kind is SectionKind.DATA:
            continue
        rows = report.collected[section.name]
        if section.kind is SectionKind.SUMMARY:
            table = Table(title=section.title, title_justify="left", show_header=False)
            table.add_column("field")
            table.add_column("value", justify="right")
            for name, value in (rows[0] if rows else {}).items():
                table.add_row(_label(name), cell(name, value, duration))
            console.print(table)
            continue
        if not rows:
            console.print(f"{section.title}: none")
            continue
        columns = list(rows[0])
        table = Table(title=section.title, title_justify="left")
        for name in columns:
            numeric = isinstance(rows[0][name], int | float) and not isinstance(rows[0][name], bool)
            table.add_column(_label(name), justify="right" if numeric else "left")
        for row in rows[: section.shown]:
            table.add_row(*(cell(name, row[name], duration) for name in columns))
        console.print(table)
        if len(rows) > section.shown:
            console.print(f"... and {len(rows) - section.shown:,} more (--json or --out lists all)")


def dump_json(report: Report) -> str:
    """The report as one line of JSON."""
    return json.dumps(report.to_json(), ensure_ascii=False)


# --- files -----------------------------------------------------------------------------------


def write_out(spark: SparkSession, report: Report, directory: Path, fmt: OutFormat) -> list[Path]:
    """Every section under `directory/<section>/` (one part file, CSV with a header or
    Parquet); the paths written. Raises ReportError when the directory cannot be written."""
    written = []
    for section in report.sections:
        if section.kind is SectionKind.DATA:
            frame = section.frame.coalesce(1)
        else:
            frame = spark.createDataFrame(
                [tuple(row.values()) for row in report.collected[section.name]],
                schema=section.frame.schema,
            ).coalesce(1)
        path = directory / section.name
        writer = frame.write.mode("overwrite")
        try:
            if fmt is OutFormat.csv:
                writer.option("header", True).csv(str(path))
            else:
                writer.parquet(str(path))
        except Exception as exc:
            from mqttq.spark.session import spark_error_line  # noqa: PLC0415

            raise ReportError(f"cannot write {path}: {spark_error_line(exc)}") from exc
        written.append(path)
    return written


def write_chart(report: Report, path: Path) -> None:
    """The report's chart as a PNG (matplotlib, Agg backend: no display needed)."""
    chart = report.chart
    if chart is None:
        raise ReportError(f"report {report.name} has no chart")
    rows = report.collected[chart.section]
    labels = [str(row[chart.x]) for row in rows]
    heights = [row[chart.y] or 0 for row in rows]
    draw_bars(path, labels, heights, chart)


def draw_bars(path: Path, labels: Sequence[str], heights: Sequence[float], chart: Chart) -> None:
    """A bar chart with the count above each bar, 8 x 4.5 in at 100 dpi."""
    import matplotlib  # noqa: PLC0415 (optional: only --chart needs it)

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415

    figure, axes = pyplot.subplots(figsize=(8, 4.5), dpi=100)
    try:
        bars = axes.bar(range(len(labels)), heights, color="#3b75af")
        axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        axes.bar_label(bars, labels=[f"{h:,.0f}" for h in heights], fontsize=8)
        axes.set_title(chart.title)
        axes.set_xlabel(chart.x_label)
        axes.set_ylabel(chart.y_label)
        axes.spines[["top", "right"]].set_visible(False)
        axes.margins(y=0.12)
        figure.tight_layout()
        try:
            figure.savefig(path, format="png")
        except OSError as exc:
            raise ReportError(f"cannot write the chart {path}: {exc.strerror or exc}") from exc
    finally:
        pyplot.close(figure)
