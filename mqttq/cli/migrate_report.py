"""The summary table of `mqttq migrate pg-to-redis` (the --json form is the report's own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from mqttq.migrate import MigrationOptions, MigrationReport

SHOWN: Final = 20
"""Problems, conflicts and differences printed in the table output (--json has more)."""


def print_report(report: MigrationReport, options: MigrationOptions, redis: str) -> None:
    console = Console(highlight=False)
    verb = "would be " if report.dry_run else ""
    title = f"pg-to-redis{' (dry run)' if report.dry_run else ''} -> {redis}"
    table = Table("", "count", title=title, title_justify="left", show_header=False)
    rows: list[tuple[str, str]] = []
    if report.resumed_after:
        rows.append(("resumed after", report.resumed_after))
    if report.already_finished:
        rows.append(("already finished", "a previous run completed: nothing to resume"))
    replaced = f" ({report.clients_replaced:,} replaced)" if report.clients_replaced else ""
    by_reason = ", ".join(f"{k} {v:,}" for k, v in sorted(report.rejected_by_reason.items()))
    rows += [
        ("clients seen", f"{report.clients_seen:,}"),
        (f"clients {verb}migrated", f"{report.clients_migrated:,}{replaced}"),
        ("clients already migrated", f"{report.clients_already:,}"),
        ("clients skipped (in Redis)", f"{report.clients_skipped:,}"),
        ("clients in conflict", f"{report.conflicts_total:,}"),
        ("clients rejected", f"{report.clients_rejected:,}"),
        (f"messages {verb}migrated", f"{report.messages_migrated:,}"),
        ("messages skipped (expired)", f"{report.messages_expired:,}"),
        (f"messages trimmed (over --limit {options.limit})", f"{report.messages_trimmed:,}"),
        ("live messages not written", f"{report.messages_not_written:,}"),
        ("rows rejected", f"{report.rows_rejected:,}" + (f" ({by_reason})" if by_reason else "")),
    ]
    if options.sessions_db is not None and not report.dry_run:
        rows.append(
            (
                "session records",
                f"{report.sessions_written:,} written, {report.sessions_kept:,} existed",
            )
        )
    if options.rejects_path is not None:
        rows.append(
            ("rejects file", f"{report.problems_total:,} problem(s) in {options.rejects_path}")
        )
    rows.append(
        (
            "rows read",
            f"{report.rows_read:,} in {report.elapsed_s:.1f} s ({report.rows_per_s:,.0f} rows/s)",
        )
    )
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if report.problems:
        problems = Table("client id", "serial", "reason", "detail", title="rejected rows")
        for problem in report.problems[:SHOWN]:
            serial = "-" if problem.serial_number is None else str(problem.serial_number)
            problems.add_row(problem.client_id, serial, problem.reason.value, problem.detail)
        console.print(problems)
        _more(console, report.problems_total, SHOWN)
    if report.conflicts:
        console.print("client ids already in Redis: " + ", ".join(report.conflicts[:SHOWN]))
        _more(console, report.conflicts_total, SHOWN)
    verify = report.verify
    if verify is not None:
        console.print(
            f"verify: {verify.clients_checked:,} clients, {verify.clients_equal:,} equal, "
            f"{verify.clients_different:,} different, {verify.clients_not_compared:,} not "
            f"compared; {verify.messages_checked:,} messages"
        )
        if verify.differences:
            differences = Table("client id", "difference", title="differences")
            for item in verify.differences[:SHOWN]:
                differences.add_row(item["client_id"], item["difference"])
            console.print(differences)
            _more(console, verify.clients_different, SHOWN)


def _more(console: Console, total: int, shown: int) -> None:
    if total > shown:
        console.print(f"... and {total - shown:,} more (--json lists up to 1,000)")
