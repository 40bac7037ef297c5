"""`mqttq credentials add|ls|show|rm|passwd`: the username/password credentials clients
connect with (and, with `--scram`, the SCRAM secrets of MQTT 5 enhanced authentication),
their tenant, client type, client id pattern and ACLs.

Through a running broker's admin API or, when none runs, in the credential database
directly (see mqttq.cli.admin_target). Passwords are stored as salted slow hashes
(mqttq.auth.passwords); neither a password nor a hash is ever printed. Every command
prints a table, or the API's JSON with `--json`.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, NoReturn

import typer

from mqttq.auth.model import ClientType
from mqttq.auth.ports import CredentialExists
from mqttq.auth.providers.x509 import x509_hash
from mqttq.auth.rules import parse_rule, rule_dict
from mqttq.cli.admin_target import (
    AdminTarget,
    AdminUrlOption,
    ConfigOption,
    DataDirOption,
    JsonOption,
    TokenOption,
    admin_session,
)
from mqttq.cli.admin_views import print_json, render_credential, render_credentials, say
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, print_error
from mqttq.errors import ProtocolError
from mqttq.routing.topics import validate_topic_filter

__all__ = ["credentials_app"]

credentials_app = typer.Typer(
    name="credentials",
    help="Client credentials (username, password, tenant, client type, client id pattern, "
    "publish/subscribe ACLs), through a running broker's admin API or, when none runs, in "
    "the credential database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

UsernameArgument = Annotated[
    str, typer.Argument(metavar="USERNAME", help="The user name clients send in CONNECT.")
]
PasswordOption = Annotated[
    str | None,
    typer.Option(
        "--password",
        metavar="PASSWORD",
        help="The password (visible to other users in the process list: prefer "
        "--password-stdin or the prompt).",
    ),
]
PasswordStdinOption = Annotated[
    bool,
    typer.Option("--password-stdin", help="Read the password from the first line of stdin."),
]
ScramOption = Annotated[
    bool,
    typer.Option(
        "--scram",
        help="Also store SCRAM-SHA-256 and SCRAM-SHA-512 secrets made from the password "
        "(salt, 4096 iterations, StoredKey, ServerKey; never the password) for MQTT 5 "
        "enhanced authentication.",
    ),
]


def _fail(message: str, code: int) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _read_password(password: str | None, from_stdin: bool) -> str:
    """--password, else the first line of stdin, else asked twice on a terminal (hidden)."""
    if password is not None and from_stdin:
        _fail("give --password or --password-stdin, not both", EXIT_CONFIG)
    if from_stdin:
        value = sys.stdin.readline().removesuffix("\n").removesuffix("\r")
    elif password is not None:
        value = password
    elif sys.stdin.isatty():
        value = str(typer.prompt("password", hide_input=True, confirmation_prompt=True))
    else:
        _fail(
            "no password: pass --password-stdin (or --password), or run on a terminal to be asked",
            EXIT_CONFIG,
        )
    if not value:
        _fail("the password is empty", EXIT_CONFIG)
    return value


def _check_acl(flag: str, filters: list[str]) -> None:
    for topic_filter in filters:
        try:
            validate_topic_filter(topic_filter)
        except ProtocolError as exc:
            _fail(f"{flag} {topic_filter!r}: not a valid topic filter: {exc.message}", EXIT_CONFIG)


def _parse_rule_flag(text: str) -> dict[str, str]:
    words = text.split()
    if len(words) != 3:
        _fail(
            f"--rule {text!r}: give 'PERMISSION ACTION FILTER', e.g. 'deny subscribe a/#'",
            EXIT_CONFIG,
        )
    table = dict(zip(("permission", "action", "topic"), words, strict=True))
    try:
        return rule_dict(parse_rule(table))
    except ValueError as exc:
        _fail(f"--rule {text!r}: {exc}", EXIT_CONFIG)


def _unknown(username: str) -> CliError:
    return CliError(f"no credential {username!r}; 'mqttq credentials ls' lists them", EXIT_FAILURE)


def _exists(username: str) -> CliError:
    return CliError(
        f"credential {username!r} already exists; use 'mqttq credentials passwd' or 'rm' first",
        EXIT_FAILURE,
    )


@credentials_app.command("add")
def add_command(
    username: UsernameArgument,
    *,
    password: PasswordOption = None,
    password_stdin: PasswordStdinOption = False,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="TENANT", help="The client's tenant (default: default)."),
    ] = None,
    client_type: Annotated[
        ClientType | None,
        typer.Option(
            "--client-type",
            case_sensitive=False,
            help="DEVICE (offline queue in Redis or SQLite) or APPLICATION (default DEVICE).",
        ),
    ] = None,
    client_id_pattern: Annotated[
        str | None,
        typer.Option(
            "--client-id-pattern",
            metavar="PATTERN",
            help="fnmatch pattern the client id must match (sensor-*); default any.",
        ),
    ] = None,
    publish_acl: Annotated[
        list[str] | None,
        typer.Option(
            "--publish-acl",
            metavar="FILTER",
            help="Topic filter the client may publish to; repeat for more (default #).",
        ),
    ] = None,
    subscribe_acl: Annotated[
        list[str] | None,
        typer.Option(
            "--subscribe-acl",
            metavar="FILTER",
            help="Topic filter the client's subscriptions must fall within; repeat for more "
            "(default #).",
        ),
    ] = None,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            metavar="'PERMISSION ACTION FILTER'",
            help="An ACL rule such as 'deny subscribe test/#' (allow|deny, "
            "publish|subscribe|all); repeat in order: the first match decides, no match "
            "denies.",
        ),
    ] = None,
    x509_cn: Annotated[
        str | None,
        typer.Option(
            "--x509-cn",
            metavar="PATTERN",
            help="An x509 credential: clients whose certificate CN (or its [auth.x509] "
            "cn_regex group) fully matches this regular expression; no password.",
        ),
    ] = None,
    scram: ScramOption = False,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Add a credential; the password comes from --password, --password-stdin, or a
    hidden prompt (asked twice) on a terminal. Refused when the username exists. With
    --scram, MQTT 5 clients can also authenticate with SCRAM-SHA-256/512."""
    if not username:
        _fail("the username is empty", EXIT_CONFIG)
    if tenant is not None and not tenant:
        _fail("--tenant: the tenant name is empty", EXIT_CONFIG)
    if client_id_pattern is not None and not client_id_pattern:
        _fail("--client-id-pattern: the pattern is empty (leave it out to allow any)", EXIT_CONFIG)
    _check_acl("--publish-acl", publish_acl or [])
    _check_acl("--subscribe-acl", subscribe_acl or [])
    rules = None if rule is None else [_parse_rule_flag(text) for text in rule]
    if x509_cn is not None:
        if password is not None or password_stdin:
            _fail(
                "--x509-cn: an x509 credential has no password; leave --password out", EXIT_CONFIG
            )
        try:
            x509_hash(x509_cn)
        except ValueError as exc:
            _fail(f"--x509-cn {x509_cn!r}: {exc}", EXIT_CONFIG)
        if scram:
            _fail("--scram: an x509 credential has no password to make them from", EXIT_CONFIG)
    body: dict[str, Any] = {"username": username}
    if scram:
        body["scram"] = True
    optional = {
        "tenant": tenant,
        "client_type": None if client_type is None else str(client_type),
        "client_id_pattern": client_id_pattern,
        "publish_acl": publish_acl,
        "subscribe_acl": subscribe_acl,
        "acl_rules": rules,
    }
    body.update((key, value) for key, value in optional.items() if value is not None)
    with admin_session(config, data_dir, admin_url, token) as target:
        # Before asking for a password that would be thrown away.
        if target.get_credential(username) is not None:
            raise _exists(username)
        if x509_cn is None:
            body["password"] = _read_password(password, password_stdin)
        else:
            body["x509_cn"] = x509_cn
        credential = _add(target, body)
    if as_json:
        print_json(credential)
    else:
        render_credential(credential)


def _add(target: AdminTarget, body: dict[str, Any]) -> dict[str, Any]:
    # Another process may have added the username since the check above.
    try:
        return target.add_credential(body)
    except CredentialExists:
        raise _exists(str(body["username"])) from None


@credentials_app.command("ls")
def ls_command(
    *,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="TENANT", help="Only the credentials of this tenant."),
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """List the credentials, ordered by username."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        credentials = target.list_credentials(tenant)
    if as_json:
        print_json({"credentials": credentials})
    else:
        render_credentials(credentials)


@credentials_app.command("show")
def show_command(
    username: UsernameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Show one credential (everything but the password)."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        credential = target.get_credential(username)
        if credential is None:
            raise _unknown(username)
    if as_json:
        print_json(credential)
    else:
        render_credential(credential)


@credentials_app.command("rm")
def rm_command(
    username: UsernameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Remove a credential: clients can no longer connect with it (connected ones stay
    connected)."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        if not target.delete_credential(username):
            raise _unknown(username)
    if as_json:
        print_json({"username": username, "removed": True})
    else:
        say(f"credential {username!r} removed")


@credentials_app.command("passwd")
def passwd_command(
    username: UsernameArgument,
    *,
    password: PasswordOption = None,
    password_stdin: PasswordStdinOption = False,
    scram: ScramOption = False,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Set a new password (from --password, --password-stdin, or a hidden prompt). SCRAM
    secrets the credential has are made again from it; --scram adds them."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        if target.get_credential(username) is None:
            raise _unknown(username)
        change: dict[str, Any] = {"password": _read_password(password, password_stdin)}
        if scram:
            change["scram"] = True
        credential = target.update_credential(username, change)
        if credential is None:
            raise _unknown(username)
    if as_json:
        print_json(credential)
    else:
        say(f"password of {username!r} changed")
