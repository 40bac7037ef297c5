"""`mqttq session`: look at and manage the DEVICE persistent sessions kept in Redis.

Where: `--redis URL` (`--cluster` when it names a Redis Cluster node) and `--key-prefix`,
or the `[redis]` section (url, cluster, key_prefix) of a broker.toml given with `--config`;
the flags win over `MQTTQ_REDIS__*` variables, which win over the file. Every command prints
a table, or JSON with `--json`. A bad URL or value is checked as `mqttq serve` checks it: one
line on stderr and exit 2. Redis unreachable: one line on stderr and exit 1; a value that
cannot be read is reported and the command goes on.
The logic lives in `mqttq.storage.redis.inspect`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn
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
from mqttq.storage.redis.inspect import (
    RedisSessionsError,
    SessionAdmin,
    SessionDetail,
    SessionSummary,
    age_s,
    now_ms,
)

T = TypeVar("T")

session_app = typer.Typer(
    name="session",
    help="Look at and manage the DEVICE persistent sessions kept in Redis "
    "(TBMQ 2.x's layout: also those written by TBMQ).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ApplicationOption = Annotated[
    bool,
    typer.Option(
        "--application",
        help="APPLICATION sessions instead (their Kafka topic, committed offset, lag and "
        "unacknowledged ids), read through the [kafka] and storage sections of --config.",
    ),
]
ClientArgument = Annotated[str, typer.Argument(metavar="CLIENT", help="The client id.")]


class SortKey(StrEnum):
    client = "client"
    pending = "pending"
    age = "age"


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _run(main: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(main)
    except RedisSessionsError as exc:
        _fail(str(exc))


def _stdout() -> Console:
    return Console(highlight=False)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")


# --- formatting ------------------------------------------------------------------------


def human_duration(seconds: float | None) -> str:
    """`45s`, `5m03s`, `2h05m`, `3d04h` (rounded down); `-` for unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


RICH_ROWS: Final = 1000
"""Above this many rows `ls` prints plain aligned columns: rich takes ~1 ms a row."""
LS_COLUMNS: Final = (
    ("client id", False),
    ("pending", True),
    ("last id", True),
    ("oldest", True),
    ("newest", True),
    ("ttl", True),
    ("node", False),
    ("problems", False),
)


def _plain_columns(rows: Sequence[tuple[str, ...]]) -> str:
    """`rows` under the LS_COLUMNS headers, aligned with spaces, one line each."""
    lines = [tuple(header.upper() for header, _right in LS_COLUMNS), *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(LS_COLUMNS))]
    justified = (
        "  ".join(
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, (_header, right) in zip(line, widths, LS_COLUMNS, strict=True)
        ).rstrip()
        for line in lines
    )
    return "\n".join(justified) + "\n"


def _ttl(session: SessionSummary) -> str:
    newest = session.newest
    if newest is None or newest.state == "missing":
        return "-"
    return "none" if newest.ttl_ms is None else human_duration(newest.ttl_ms / 1000)


def _sorted(sessions: list[SessionSummary], sort: SortKey) -> list[SessionSummary]:
    by_id = sorted(sessions, key=lambda s: s.client_id)
    if sort is SortKey.pending:
        return sorted(by_id, key=lambda s: -s.pending)
    if sort is SortKey.age:
        # The oldest message first; sessions whose age is unknown last.
        return sorted(by_id, key=lambda s: s.oldest.time_ms or 2**63 if s.oldest else 2**63)
    return by_id


# --- commands ----------------------------------------------------------------------------


@session_app.command("ls")
def ls_command(
    *,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    pattern: Annotated[
        str | None,
        typer.Option("--pattern", metavar="GLOB", help="Only client ids matching this glob."),
    ] = None,
    sort: Annotated[
        SortKey,
        typer.Option(
            "--sort", metavar="KEY", help="client (by id), pending (most first) or age (oldest)."
        ),
    ] = SortKey.client,
    as_json: JsonOption = False,
    application: ApplicationOption = False,
) -> None:
    """List every session that has queued messages.

    Per session: pending count, last packet id, the age of its oldest and newest message,
    the TTL of the newest, the broker node it is connected to, and any value that cannot
    be read. Beyond 1,000 sessions the table is printed as plain aligned columns. With
    --application: the APPLICATION sessions and their Kafka topics instead.
    """
    if application:
        _app_ls(config, pattern, as_json)
        return
    target = resolve_target(redis, cluster, key_prefix, config)
    err = Console(stderr=True)

    async def main() -> list[SessionSummary]:
        async with SessionAdmin(target) as admin:
            if not err.is_terminal or as_json:
                return await admin.list_sessions(pattern)
            with Progress(
                SpinnerColumn(), TextColumn("{task.description}"), console=err, transient=True
            ) as progress:
                task = progress.add_task("scanning sessions")
                return await admin.list_sessions(
                    pattern,
                    lambda n: progress.update(task, description=f"scanning sessions: {n:,}"),
                )

    sessions = _sorted(_run(main()), sort)
    now = now_ms()
    if as_json:
        _print_json([s.to_json(now) for s in sessions])
        return
    rows = [
        (
            s.client_id,
            str(s.pending),
            "-" if s.last_packet_id is None else str(s.last_packet_id),
            human_duration(age_s(s.oldest.time_ms if s.oldest else None, now)),
            human_duration(age_s(s.newest.time_ms if s.newest else None, now)),
            _ttl(s),
            s.connected or "-",
            "; ".join(s.problems),
        )
        for s in sessions
    ]
    console = _stdout()
    if len(rows) <= RICH_ROWS:
        table = Table()
        for header, right in LS_COLUMNS:
            table.add_column(header, justify="right" if right else "left", no_wrap=True)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    else:
        sys.stdout.write(_plain_columns(rows))
    total = sum(s.pending for s in sessions)
    console.print(f"{len(sessions)} sessions, {total} messages in {target.describe()}")


@session_app.command("inspect")
def inspect_command(
    client_id: ClientArgument,
    *,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    application: ApplicationOption = False,
) -> None:
    """Show one session in detail.

    Its keys, entries by state (PUBLISH, PUBREL, expired), serials and packet ids, ages,
    TTLs, the node it is connected to, the memory its keys use, and unreadable entries.
    With --application: an APPLICATION session's topic, offsets, lag and unacked ids.
    """
    if application:
        _app_inspect(config, client_id, as_json)
        return
    target = resolve_target(redis, cluster, key_prefix, config)

    async def main() -> SessionDetail:
        async with SessionAdmin(target) as admin:
            return await admin.inspect(client_id)

    detail = _run(main())
    data = detail.to_json(now_ms())
    if as_json:
        _print_json(data)
        return
    table = Table("field", "value", title=f"session {client_id!r}", title_justify="left")
    rows = [
        ("queue key", data["keys"]["messages"]),
        ("pending", f"{data['pending']} ({data['publish']} PUBLISH, {data['pubrel']} PUBREL)"),
        ("expired references", str(data["missing"])),
        ("serials", _range(data["first_serial"], data["last_serial"])),
        ("packet ids", _range(data["first_packet_id"], data["last_packet_id"])),
        ("last packet id (counter)", _value(data["last_packet_id_counter"])),
        ("last serial (counter)", _value(data["last_serial_counter"])),
        ("oldest message", human_duration(data["oldest_age_s"])),
        ("newest message", human_duration(data["newest_age_s"])),
        ("ttl", f"{human_duration(data['min_ttl_s'])} .. {human_duration(data['max_ttl_s'])}"),
        ("connected", data["connected"] or "-"),
    ]
    memory = data["memory_bytes"]
    rows.append(
        (
            "memory",
            f"{memory['total']:,} bytes (messages {memory['messages']:,}, "
            f"set {memory['queue_set']:,}, counters {memory['counters']:,})",
        )
    )
    for field, value in rows:
        table.add_row(field, value)
    console = _stdout()
    console.print(table)
    if data["problems"]:
        problems = Table("key", "problem", title="unreadable entries", title_justify="left")
        for problem in data["problems"]:
            problems.add_row(problem["key"], problem["error"])
        console.print(problems)


def _value(value: int | None) -> str:
    return "-" if value is None else str(value)


def _range(first: int | None, last: int | None) -> str:
    return "-" if first is None else f"{first} .. {last}"


@session_app.command("dump")
def dump_command(
    client_id: ClientArgument,
    *,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    decode: Annotated[
        bool, typer.Option("--decode", help="Payloads that are UTF-8 as text, not base64.")
    ] = False,
) -> None:
    """Print the session's messages in delivery order, as JSON lines.

    Each line holds `serial` and `key`, then the stored TBMQ fields (payload in base64, or
    as text with --decode when it is UTF-8); `error` instead where an entry cannot be read.
    """
    target = resolve_target(redis, cluster, key_prefix, config)

    async def main() -> None:
        async with SessionAdmin(target) as admin:
            async for line in admin.dump(client_id, decode=decode):
                _print_json(line)

    _run(main())


@session_app.command("trim")
def trim_command(
    client_id: ClientArgument,
    *,
    keep: Annotated[int, typer.Option("--keep", min=0, help="Entries to keep (the newest).")],
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Drop the oldest messages beyond --keep, atomically (one Lua script)."""
    target = resolve_target(redis, cluster, key_prefix, config)

    async def main() -> tuple[int, int]:
        async with SessionAdmin(target) as admin:
            return await admin.trim(client_id, keep)

    removed, left = _run(main())
    if as_json:
        _print_json({"client_id": client_id, "removed": removed, "left": left})
    else:
        _stdout().print(f"client {client_id!r}: removed {removed} messages, {left} left")


@session_app.command("rm")
def rm_command(
    client_id: ClientArgument,
    *,
    redis: RedisOption = None,
    cluster: ClusterOption = None,
    key_prefix: PrefixOption = None,
    config: ConfigOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Remove it even while the client is connected.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove every key of the session (queue, messages, counters).

    Refused while the broker marks the client connected, unless --force.
    """
    target = resolve_target(redis, cluster, key_prefix, config)

    async def main() -> tuple[int, int]:
        async with SessionAdmin(target) as admin:
            return await admin.remove(client_id, force=force)

    messages, others = _run(main())
    if as_json:
        _print_json({"client_id": client_id, "messages": messages, "keys": messages + others})
    else:
        _stdout().print(
            f"client {client_id!r}: removed {messages} messages ({messages + others} keys)"
        )


if __name__ == "__main__":
    session_app(prog_name="mqttq session")


def _app_ls(config: Path | None, pattern: str | None, as_json: bool) -> None:
    from mqttq.cli import app_sessions as views  # noqa: PLC0415 (Kafka loaded only here)

    settings = _settings(config)
    sessions = views.run(views.list_app_sessions(settings, pattern))
    if as_json:
        _print_json([view.to_json() for view in sessions])
        return
    views.print_table(views.app_table(sessions))
    total = sum(view.lag or 0 for view in sessions)
    _stdout().print(f"{len(sessions)} APPLICATION sessions, {total} messages not consumed")


def _app_inspect(config: Path | None, client_id: str, as_json: bool) -> None:
    from mqttq.cli import app_sessions as views  # noqa: PLC0415

    settings = _settings(config)
    view = views.run(views.inspect_app_session(settings, client_id))
    if as_json:
        _print_json(view.to_json())
        return
    views.print_table(views.app_detail(view))


def _settings(config: Path | None) -> Any:
    from mqttq.cli import app_sessions as views  # noqa: PLC0415
    from mqttq.cli.errors import CliError  # noqa: PLC0415

    try:
        return views.load(config)
    except CliError as exc:
        _fail(str(exc), exc.exit_code)
