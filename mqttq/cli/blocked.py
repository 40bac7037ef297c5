"""`mqttq blocked add|ls|rm|failed`: blocked clients (by client id, user name, address or
CIDR, or a regular expression over the client id or the user name; each with an optional
expiry and a reason) and the failed-connections log.

Through a running broker's admin API (changes apply at once: the clients a new entry
matches are disconnected) or, when none runs, in the store directly (see
mqttq.cli.blocked_target). Every command prints a table, or the API's JSON with `--json`.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table

from mqttq.auth.blocked.entries import BlockedInputError, entry_from_body
from mqttq.cli.admin_target import (
    AdminUrlOption,
    ConfigOption,
    DataDirOption,
    JsonOption,
    TokenOption,
)
from mqttq.cli.admin_views import JSON, print_json, say
from mqttq.cli.blocked_target import blocked_session, input_error
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, print_error

__all__ = ["blocked_app"]

blocked_app = typer.Typer(
    name="blocked",
    help="Blocked clients (by client id, user name, address or CIDR, or a regular "
    "expression) and the log of refused CONNECTs, through a running broker's admin API or, "
    "when none runs, in the store directly.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ClientIdOption = Annotated[
    str | None, typer.Option("--client-id", metavar="ID", help="Block this client id.")
]
UsernameOption = Annotated[
    str | None, typer.Option("--username", metavar="USER", help="Block this user name.")
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address",
        metavar="CIDR",
        help="Block this IP address or network (10.0.0.0/8, 2001:db8::/32).",
    ),
]
RegexOption = Annotated[
    str | None,
    typer.Option(
        "--regex",
        metavar="RE",
        help="Block client ids (or user names, with --regex-on username) that this "
        "regular expression matches as a whole (Python re.fullmatch).",
    ),
]
RegexOnOption = Annotated[
    str | None,
    typer.Option(
        "--regex-on",
        metavar="clientid|username",
        help="What --regex is matched against (default: clientid).",
    ),
]


def _selector(
    client_id: str | None, username: str | None, address: str | None, regex: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        key: value
        for key, value in (
            ("client_id", client_id),
            ("username", username),
            ("address", address),
            ("regex", regex),
        )
        if value is not None
    }
    if len(body) != 1:
        raise CliError(
            "give exactly one of --client-id, --username, --address, --regex", EXIT_CONFIG
        )
    return body


def _regex_on(regex: str | None, regex_on: str | None) -> str | None:
    if regex_on is None:
        return None
    if regex is None:
        raise CliError("--regex-on: only with --regex", EXIT_CONFIG)
    value = regex_on.lower().replace("-", "").replace("_", "")
    if value == "clientid":
        return "client_id"
    if value == "username":
        return "username"
    raise CliError(f"--regex-on: {regex_on!r} is not clientid or username", EXIT_CONFIG)


def _fail(error: CliError) -> typer.Exit:
    print_error(str(error))
    return typer.Exit(error.exit_code)


@blocked_app.command("add")
def add_command(
    *,
    client_id: ClientIdOption = None,
    username: UsernameOption = None,
    address: AddressOption = None,
    regex: RegexOption = None,
    regex_on: RegexOnOption = None,
    expires_in: Annotated[
        str | None,
        typer.Option(
            "--expires-in",
            metavar="DURATION",
            help="Lift the block after this long (90s, 30m, 1h, 7d, 1h30m); default never.",
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", metavar="TEXT", help="Why (shown by ls, never to the client)."),
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Block a client id, user name, address or pattern: its CONNECTs are refused (0x8A
    Banned; 3.1.1: return code 5) and the connected clients it matches are disconnected.
    Adding the same selector again replaces its reason and expiry."""
    try:
        body = _selector(client_id, username, address, regex)
        match_on = _regex_on(regex, regex_on)
        if match_on is not None:
            body["match_on"] = match_on
        if reason:
            body["reason"] = reason
        if expires_in is not None:
            body["expires_in"] = expires_in
        entry_from_body(body, now=time.time())  # bad input: exit 2 before any connection
    except CliError as exc:
        raise _fail(exc) from None
    except BlockedInputError as exc:
        raise _fail(input_error(exc)) from None
    with blocked_session(config, data_dir, admin_url, token) as target:
        entry = target.add_blocked(body)
    if as_json:
        print_json(entry)
    else:
        _render([entry])


@blocked_app.command("ls")
def ls_command(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """List the blocked-client entries in force (expired ones are left out), oldest first."""
    with blocked_session(config, data_dir, admin_url, token) as target:
        entries = target.list_blocked()
    if as_json:
        print_json({"blocked": entries})
    else:
        _render(entries)


@blocked_app.command("rm")
def rm_command(
    entry_id: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="The entry's id, as ls shows it."),
    ] = None,
    *,
    client_id: ClientIdOption = None,
    username: UsernameOption = None,
    address: AddressOption = None,
    regex: RegexOption = None,
    regex_on: RegexOnOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Lift a block: by the id ls shows, or by the selector it was added with."""
    try:
        given = [client_id, username, address, regex]
        if entry_id is None:
            body = _selector(client_id, username, address, regex)
            match_on = _regex_on(regex, regex_on)
            if match_on is not None:
                body["match_on"] = match_on
            entry_id = entry_from_body(body, now=time.time()).id
        elif any(value is not None for value in given):
            raise CliError("give an ID or a selector (--client-id, ...), not both", EXIT_CONFIG)
    except CliError as exc:
        raise _fail(exc) from None
    except BlockedInputError as exc:
        raise _fail(input_error(exc)) from None
    with blocked_session(config, data_dir, admin_url, token) as target:
        removed = target.remove_blocked(entry_id)
    if not removed:
        raise _fail(
            CliError(f"no blocked-client entry {entry_id!r}; 'mqttq blocked ls' lists them")
        )
    if as_json:
        print_json({"id": entry_id, "removed": True})
    else:
        say(f"blocked-client entry {entry_id} removed")


@blocked_app.command("failed")
def failed_command(
    *,
    client_id: Annotated[
        str | None, typer.Option("--client-id", metavar="ID", help="Only this client id's.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=10_000, help="At most this many, newest first.")
    ] = 100,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """The last refused CONNECTs of a running broker (client id, address, user name,
    reason, time), newest first; kept in its memory ([blocked] failed_connections)."""
    with blocked_session(config, data_dir, admin_url, token) as target:
        answer = target.failed_connections(client_id, limit)
    if answer is None:
        raise _fail(
            CliError(
                "no broker is running: the failed-connections log lives in a running "
                "broker's memory; start it, or pass --admin-url",
                EXIT_FAILURE,
            )
        )
    if as_json:
        print_json(answer)
    else:
        _render_failed(list(answer.get("failed_connections") or []))


# --- tables ----------------------------------------------------------------------------


def _when(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def _expires(value: Any) -> str:
    if value is None:
        return "never"
    left = float(value) - time.time()
    if left <= 0:
        return "expired"
    for unit, seconds in (("d", 86_400), ("h", 3600), ("m", 60)):
        if left >= seconds:
            return f"in {left / seconds:.0f}{unit}"
    return f"in {left:.0f}s"


def _render(entries: list[JSON]) -> None:
    console = Console(highlight=False, soft_wrap=True)
    if not entries:
        console.print("no blocked clients")
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("value")
    table.add_column("reason")
    table.add_column("expires", no_wrap=True)
    for entry in entries:
        kind = str(entry.get("kind"))
        if kind == "regex":
            kind = f"regex({entry.get('match_on')})"
        table.add_row(
            str(entry.get("id")),
            kind,
            str(entry.get("value")),
            str(entry.get("reason") or "-"),
            _expires(entry.get("expires_at")),
        )
    console.print(table)


def _render_failed(items: list[JSON]) -> None:
    console = Console(highlight=False, soft_wrap=True)
    if not items:
        console.print("no refused CONNECTs")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("time", "client id", "address", "user", "mqtt", "reason", "answer"):
        table.add_column(column, no_wrap=column in ("time", "mqtt", "answer"))
    for item in items:
        level = item.get("protocol_level")
        table.add_row(
            _short_time(item.get("at")),
            str(item.get("client_id")),
            str(item.get("address") or "-"),
            str(item.get("username") or "-"),
            _version(level),
            str(item.get("reason")),
            _answer(item.get("reason_code"), level),
        )
    console.print(table)


_RETURN_CODES: Final = {0x84: 1, 0x85: 2, 0x86: 4, 0x87: 5, 0x8A: 5}
"""A refusal's 5.0 reason code -> the 3.x CONNACK return code (others: 3)."""


def _answer(code: Any, level: Any) -> str:
    """What the client read: the 5.0 reason code, or the 3.x return code."""
    if not isinstance(code, int):
        return "-"
    if level == 5:
        return f"0x{code:02X}"
    return f"rc {_RETURN_CODES.get(code, 3)}"


def _short_time(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    return datetime.fromtimestamp(value).strftime("%m-%d %H:%M:%S")


def _version(level: Any) -> str:
    return {3: "3.1", 4: "3.1.1", 5: "5.0"}.get(level, str(level))
