"""`mqttq integration ls|show|add|rm|pause|resume|test`: integrations (issue 33).

Through a running broker's admin API (a change applies at once), or, when no broker runs,
in the integration store (applied at the broker's next start); see
mqttq.cli.integration_target. Every command prints a table or line, or the API's JSON with
`--json`. Bad input (a key the spec check refuses, a `--set` that is not KEY=VALUE) is one
line naming the key and exit 2; a failure of the work (no such integration, a name taken,
a sink that refuses the test) one line and exit 1.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from mqttq.cli.admin_target import AdminUrlOption, ConfigOption, DataDirOption, TokenOption
from mqttq.cli.admin_views import (
    JSON,
    note,
    print_json,
    render_integration,
    render_integrations,
    say,
)
from mqttq.cli.errors import EXIT_CONFIG, CliError, print_error
from mqttq.cli.integration_target import IntegrationTarget, integration_session

__all__ = ["integration_app", "parse_set", "parse_value", "read_spec_file"]

integration_app = typer.Typer(
    name="integration",
    help="Integrations: durable consumers of the broker's messages that deliver them to an "
    "HTTP webhook, Kafka, PostgreSQL or another MQTT broker; through a running broker's "
    "admin API or, when none runs, in the integration store.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The integration's name.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (the admin API's shapes).")]


def _fail(message: str, code: int = EXIT_CONFIG) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _missing(name: str) -> CliError:
    return CliError(f"no integration named {name!r}; 'mqttq integration ls' lists them")


# --- building a table from the command line ------------------------------------------------


def parse_value(text: str) -> Any:
    """`text` as a TOML value when it is one (`10`, `true`, `["a", "b"]`, `"quoted"`,
    `{a = 1}`), else the text itself (`http://host/x`, `Bearer ${TOKEN}`)."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def parse_set(table: dict[str, Any], assignment: str) -> None:
    """Apply one `--set KEY=VALUE` to `table`; a dotted KEY sets a key of a nested table
    (`headers.Authorization=...`). CliError (exit 2) naming the option when malformed."""
    key, sep, text = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise CliError(f"--set: expected KEY=VALUE, got {assignment!r}", EXIT_CONFIG)
    path = key.split(".")
    if any(not part for part in path):
        raise CliError(f"--set {key}: a key part is empty", EXIT_CONFIG)
    if path[0] in ("name", "type", "filters"):
        raise CliError(
            f"--set {key}: give it as {'NAME' if path[0] == 'name' else '--' + path[0][:-1]}",
            EXIT_CONFIG,
        )
    node = table
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise CliError(f"--set {key}: {part!r} is not a table", EXIT_CONFIG)
        node = child
    node[path[-1]] = parse_value(text)


def read_spec_file(path: Path) -> list[dict[str, Any]]:
    """The integration tables of a spec file: JSON (an object, or an array of them) or
    TOML (one table, or `[[integration]]` tables as in broker.toml), by its suffix."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CliError(f"--from-file {path}: {reason}", EXIT_CONFIG) from None
    data: Any
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = tomllib.loads(text)
            if isinstance(data.get("integration"), list):
                data = data["integration"]
    except ValueError as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise CliError(f"--from-file {path}: not valid: {exc}", EXIT_CONFIG) from None
    tables = data if isinstance(data, list) else [data]
    if not tables or not all(isinstance(table, dict) for table in tables):
        raise CliError(
            f"--from-file {path}: expected an integration table (or a list of them)",
            EXIT_CONFIG,
        )
    return tables


# --- commands ------------------------------------------------------------------------------


@integration_app.command("ls")
def ls_command(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """List the integrations: type, state, lag, delivered, retried, dead-lettered, and the
    last error and when (counters only from a running broker)."""
    with integration_session(config, data_dir, admin_url, token) as target:
        statuses = target.list_integrations()
    if as_json:
        print_json(statuses)
    else:
        render_integrations(statuses)


@integration_app.command("show")
def show_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Show one integration: every setting (secrets as ***) and what it did."""
    with integration_session(config, data_dir, admin_url, token) as target:
        status = target.get_integration(name)
        if status is None:
            raise _missing(name)
    _print(status, as_json)


@integration_app.command("add")
def add_command(
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="The name: lowercase letters, digits and '-' (not with --from-file).",
        ),
    ] = None,
    *,
    kind: Annotated[
        str | None,
        typer.Option("--type", metavar="TYPE", help="http, kafka, postgres or mqtt."),
    ] = None,
    filters: Annotated[
        list[str] | None,
        typer.Option("--filter", metavar="FILTER", help="A topic filter (repeatable)."),
    ] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="A key of the integration (repeatable): url=http://..., batch_size=100, "
            "headers.Authorization='Bearer ${TOKEN}'. VALUE is read as a TOML value when it "
            "is one, else as a string; ${NAME} is expanded from the broker's environment.",
        ),
    ] = None,
    create_table: Annotated[
        bool,
        typer.Option("--create-table", help="postgres: create the table if it is missing."),
    ] = False,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            metavar="PATH",
            help="Add the integration(s) of this file: .json (an object or an array) or "
            ".toml (one table, or [[integration]] tables).",
        ),
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Add an integration: checked (a mistake names the key), stored, and started at once
    by a running broker (else at its next start)."""
    tables = _tables(
        name,
        kind,
        filters=filters,
        settings=settings,
        create_table=create_table,
        from_file=from_file,
    )
    added: list[JSON] = []
    with integration_session(config, data_dir, admin_url, token, creates=True) as target:
        for table in tables:
            added.append(target.add_integration(table))
        _later(target)
    if as_json:
        print_json(added[0] if from_file is None else added)
        return
    for status in added:
        render_integration(status)


def _tables(
    name: str | None,
    kind: str | None,
    *,
    filters: list[str] | None,
    settings: list[str] | None,
    create_table: bool,
    from_file: Path | None,
) -> list[dict[str, Any]]:
    if from_file is not None:
        if name or kind or filters or settings or create_table:
            _fail("--from-file takes no NAME, --type, --filter, --set or --create-table")
        try:
            return read_spec_file(from_file)
        except CliError as exc:
            _fail(str(exc), exc.exit_code)
    if not name:
        _fail("give the integration's NAME (or --from-file PATH)")
    if not kind:
        _fail("give its --type: http, kafka, postgres or mqtt")
    table: dict[str, Any] = {"name": name, "type": kind}
    if filters:
        table["filters"] = list(filters)
    for assignment in settings or ():
        try:
            parse_set(table, assignment)
        except CliError as exc:
            _fail(str(exc), exc.exit_code)
    if create_table:
        table["create_table"] = True
    return [table]


@integration_app.command("rm")
def rm_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Remove an integration: it stops, and what waits in its backlog is deleted."""
    with integration_session(config, data_dir, admin_url, token) as target:
        if not target.remove_integration(name):
            raise _missing(name)
        _later(target)
    if as_json:
        print_json({"name": name, "removed": True})
    else:
        say(f"integration {name!r} removed")


def _pause(name: str, paused: bool, as_json: bool, where: tuple[Any, ...]) -> None:
    with integration_session(*where) as target:
        status = target.pause_integration(name, paused)
        if status is None:
            raise _missing(name)
        _later(target)
    if as_json:
        print_json(status)
        return
    what = "paused" if paused else "resumed"
    say(f"integration {name!r} {what} (state {status.get('state')})")


@integration_app.command("pause")
def pause_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Pause an integration: nothing is sent after the batch in progress; its backlog keeps
    filling (and survives restarts) until it is resumed."""
    _pause(name, True, as_json, (config, data_dir, admin_url, token))


@integration_app.command("resume")
def resume_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Resume a paused integration, from the oldest message waiting."""
    _pause(name, False, as_json, (config, data_dir, admin_url, token))


@integration_app.command("test")
def test_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Send one sample message through a fresh sink of the integration and print what the
    sink answered (exit 1 with its reason when it fails). Through a running broker the
    broker sends it (with its environment); otherwise this command does."""
    with integration_session(config, data_dir, admin_url, token) as target:
        answer = target.test_integration(name)
        if answer is None:
            raise _missing(name)
    if as_json:
        print_json({"name": name, "answer": answer})
    else:
        say(answer)


def _print(status: JSON, as_json: bool) -> None:
    if as_json:
        print_json(status)
    else:
        render_integration(status)


def _later(target: IntegrationTarget) -> None:
    """On stderr, after a change in the store: when it takes effect."""
    if not target.live:
        note("stored; a broker applies it at its next start")
