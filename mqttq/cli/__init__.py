"""The `mqttq` command line: a typer app whose subcommands live in sibling modules."""

from __future__ import annotations

from typing import Annotated

import typer

from mqttq import __version__
from mqttq.cli.bench import bench_app
from mqttq.cli.cluster import cluster_app
from mqttq.cli.credentials import credentials_app
from mqttq.cli.migrate import migrate_app
from mqttq.cli.report import report_app
from mqttq.cli.serve import SERVE_HELP, serve
from mqttq.cli.session import session_app
from mqttq.cli.tenant import tenant_app

app = typer.Typer(
    name="mqttq",
    help="mqttq: an MQTT 3.1 / 3.1.1 / 5.0 broker. "
    "Start it with 'mqttq serve'; 'mqttq serve --help' lists its settings.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("serve", help=SERVE_HELP)(serve)
app.add_typer(bench_app, name="bench")
app.add_typer(session_app, name="session")
app.add_typer(migrate_app, name="migrate")
app.add_typer(report_app, name="report")
app.add_typer(tenant_app, name="tenant")
app.add_typer(credentials_app, name="credentials")
app.add_typer(cluster_app, name="cluster")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mqttq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Options that apply before any subcommand."""


def main() -> None:
    """Entry point of the `mqttq` script and of `python -m mqttq`."""
    app(prog_name="mqttq")


__all__ = ["app", "main"]
