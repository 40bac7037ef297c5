"""`mqttq tenant ls|show|set|rm`: tenants and their quotas.

Through a running broker's admin API (a change applies at once, to connected clients too)
or, when no broker runs, in the credential database directly (read at the broker's next
start or SIGHUP); see mqttq.cli.admin_target. A tenant without a stored quota uses
`[mqtt_limit.tenant]`. Every command prints a table, or the API's JSON with `--json`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, NoReturn

import typer

from mqttq.cli.admin_target import (
    AdminUrlOption,
    ConfigOption,
    DataDirOption,
    JsonOption,
    TokenOption,
    admin_session,
)
from mqttq.cli.admin_views import print_json, render_tenant, render_tenants, say
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, print_error
from mqttq.limits.quota import QUOTA_FIELDS, Quota, QuotaError

__all__ = ["parse_quota_fields", "tenant_app"]

tenant_app = typer.Typer(
    name="tenant",
    help="Tenants and their quotas (the tenant layer of the limits), through a running "
    "broker's admin API or, when none runs, in the credential database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The tenant's name.")]


def _quota_option(field: str, what: str) -> Any:
    flag = "--" + field.replace("_", "-")
    return typer.Option(flag, metavar="N", help=f"{what} ({field}).")


# Plain strings: the value is checked by Quota, so that an error names the field in one line.
ConnectionsOption = Annotated[
    str | None, _quota_option("max_connections_per_node", "Connections open at once")
]
ConnectionRateOption = Annotated[
    str | None, _quota_option("max_connection_rate", "New connections per second")
]
TopicsOption = Annotated[
    str | None, _quota_option("max_topics", "Distinct topics with a retained message or a filter")
]
SessionsOption = Annotated[
    str | None, _quota_option("max_sessions", "Sessions, persistent ones included")
]
PublishRateOption = Annotated[
    str | None, _quota_option("max_publish_rate", "PUBLISH packets per second")
]
FLAGS: Final = {field: "--" + field.replace("_", "-") for field in QUOTA_FIELDS}


def _fail(message: str, code: int) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def parse_quota_fields(given: dict[str, str | None]) -> dict[str, int | float]:
    """The quota fields given on the command line, as numbers, checked by Quota (the base
    does not change whether a value is valid). Raises QuotaError naming the field."""
    fields: dict[str, int | float] = {}
    for field, raw in given.items():
        if raw is None:
            continue
        text = raw.strip()
        try:
            fields[field] = int(text)
        except ValueError:
            try:
                fields[field] = float(text)
            except ValueError:
                raise QuotaError(field, f"must be a number, got {raw!r}") from None
    Quota().replace(**fields)
    return fields


@tenant_app.command("ls")
def ls_command(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """List the tenants with a stored quota (and, from a running broker, those with
    clients on it): quota fields and, from a broker, current usage."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        data = target.list_tenants()
    if as_json:
        print_json(data)
    else:
        render_tenants(data)


@tenant_app.command("show")
def show_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Show one tenant: its quota (stored, or the default), and its usage when a broker
    runs."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        tenant = target.get_tenant(name)
        if tenant is None:
            raise CliError(
                f"no tenant {name!r}: it has no stored quota (and no clients); "
                f"give it one with 'mqttq tenant set {name} ...'",
                EXIT_FAILURE,
            )
    if as_json:
        print_json(tenant)
    else:
        render_tenant(tenant)


@tenant_app.command("set")
def set_command(
    name: NameArgument,
    *,
    max_connections_per_node: ConnectionsOption = None,
    max_connection_rate: ConnectionRateOption = None,
    max_topics: TopicsOption = None,
    max_sessions: SessionsOption = None,
    max_publish_rate: PublishRateOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Store the tenant's quota: only the fields given change; the others keep their
    stored value, else the default quota (mqtt_limit.tenant). Through a running broker
    the new quota applies at once, to connected clients too."""
    if not name:
        _fail("the tenant name is empty", EXIT_CONFIG)
    given = {
        "max_connections_per_node": max_connections_per_node,
        "max_connection_rate": max_connection_rate,
        "max_topics": max_topics,
        "max_sessions": max_sessions,
        "max_publish_rate": max_publish_rate,
    }
    try:
        fields = parse_quota_fields(given)
    except QuotaError as exc:
        _fail(f"{FLAGS.get(exc.field, exc.field)} ({exc.field}): {exc.problem}", EXIT_CONFIG)
    if not fields:
        _fail(f"nothing to change: give at least one of {', '.join(FLAGS.values())}", EXIT_CONFIG)
    with admin_session(config, data_dir, admin_url, token) as target:
        tenant = target.put_tenant(name, fields)
    if as_json:
        print_json(tenant)
    else:
        render_tenant(tenant)


@tenant_app.command("rm")
def rm_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    admin_url: AdminUrlOption = None,
    token: TokenOption = None,
) -> None:
    """Remove the tenant's stored quota: its clients fall back to the default quota
    (credentials naming the tenant stay)."""
    with admin_session(config, data_dir, admin_url, token, creates=False) as target:
        if not target.delete_tenant(name):
            raise CliError(
                f"no tenant {name!r} has a stored quota; 'mqttq tenant ls' lists them",
                EXIT_FAILURE,
            )
    if as_json:
        print_json({"name": name, "removed": True})
    else:
        say(f"tenant {name!r} removed; its clients now use the default quota")
