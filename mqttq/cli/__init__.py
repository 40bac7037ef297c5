"""The `mqttq` command line: a typer app whose subcommands live in sibling modules.

`main()` owns what every command shares: a usage error (unknown option, bad value, missing
argument) is one line on stderr, `mqttq: error: ...`, exit 2, never typer's boxed panel;
and the help of every command reads its texts as plain prose (`tidy_help`).
"""

from __future__ import annotations

import difflib
import inspect
import sys
from typing import Annotated, ClassVar

import typer
import typer.main
from rich.markup import escape
from typer._click import Command, Context, exceptions
from typer.core import TyperGroup, TyperOption

from mqttq import __version__
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, print_error
from mqttq.cli.lazy_group import LazyCommand, LazyCommands, LazyGroup


class _Commands(LazyGroup):
    """The subcommands, imported when a command line names them (lazy_group.py): a start
    of `mqttq` imports one command's modules, not all of them."""

    LAZY: ClassVar[dict[str, LazyCommand]] = {
        "serve": LazyCommand("mqttq.cli.serve", "serve", help_attribute="SERVE_HELP"),
        "bench": LazyCommand("mqttq.cli.bench", "bench_app"),
        "session": LazyCommand("mqttq.cli.session", "session_app"),
        "migrate": LazyCommand("mqttq.cli.migrate", "migrate_app"),
        "report": LazyCommand("mqttq.cli.report", "report_app"),
        "tenant": LazyCommand("mqttq.cli.tenant", "tenant_app"),
        "credentials": LazyCommand("mqttq.cli.credentials", "credentials_app"),
        "cluster": LazyCommand("mqttq.cli.cluster", "cluster_app"),
        "integration": LazyCommand("mqttq.cli.integration", "integration_app"),
        "admin-user": LazyCommand("mqttq.cli.admin_user", "admin_user_app"),
        "blocked": LazyCommand("mqttq.cli.blocked", "blocked_app"),
        "lake": LazyCommand("mqttq.cli.lake", "lake_app"),
    }

    def on_load(self, command: Command) -> None:
        tidy_help(command)


app = typer.Typer(
    name="mqttq",
    help="mqttq: an MQTT 3.1 / 3.1.1 / 5.0 broker. "
    "Start it with 'mqttq serve'; 'mqttq serve --help' lists its settings.",
    cls=_Commands,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
    """Entry point of the `mqttq` script and of `python -m mqttq`.

    Exit status: what the command says (0 done, 1 its work failed, 2 bad input); 2 with one
    `mqttq: error:` line for a usage error; 130 on Ctrl+C; `--help` and `--version` 0.
    """
    command = typer.main.get_command(app)
    tidy_help(command)
    try:
        code = command.main(prog_name="mqttq", standalone_mode=False)
    except exceptions.NoArgsIsHelpError as exc:
        # `mqttq session` alone: the help (already printed by the rich formatter), exit 2.
        if exc.format_message():
            typer.echo(exc.format_message())
        code = exc.exit_code
    except exceptions.UsageError as exc:
        print_error(usage_message(exc))
        code = EXIT_CONFIG
    except exceptions.ClickException as exc:
        print_error(_one_line(exc.format_message()))
        code = exc.exit_code
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        code = EXIT_FAILURE
    # standalone_mode=False returns typer.Exit's code, or what the command returned (None).
    sys.exit(code if isinstance(code, int) else 0)


def usage_message(exc: exceptions.UsageError) -> str:
    """One line for a usage error: what is wrong, a close option name when there is one,
    and where the command's help is."""
    if isinstance(exc, exceptions.NoSuchOption):
        message = exc.message
        close = difflib.get_close_matches(
            exc.option_name.lstrip("-"),
            [name.lstrip("-") for name in exc.possibilities or ()],
            n=1,
        )
        if close:
            message += f" (did you mean --{close[0]}?)"
    else:
        # typer validates values with pydantic, whose messages may start "Value error, ".
        message = exc.format_message().replace(": Value error, ", ": ")
    text = _one_line(message).rstrip(".")
    text = text[:1].lower() + text[1:]
    if exc.ctx is not None:
        text += f"; see '{exc.ctx.command_path} --help'"
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def tidy_help(command: Command) -> None:
    """Make the help of `command` and every subcommand read as this project writes it.

    Help texts are plain prose wrapped at the source's width: a single line break is a
    space (typer's rich mode would keep it and break a sentence in two), and brackets are
    text (`[kafka]`), not rich markup. A flag shows no value type: typer's rich panel
    prints `<bool>` after `--json` although the flag takes no value.
    """
    if command.help:
        command.help = _prose(command.help)
    if command.short_help:
        command.short_help = _prose(command.short_help)
    # --help is made on first use, from a context's names: make it now to tidy it too.
    help_option = command.get_help_option(Context(command, **command.context_settings))
    for param in [*command.params, help_option]:
        if isinstance(param, TyperOption):
            if param.help:
                param.help = _prose(param.help)
            if param.is_flag and param.metavar is None:
                param.metavar = ""
    if isinstance(command, TyperGroup):
        # A lazy group's other commands are tidied as they are imported (`on_load`).
        commands = command.commands
        loaded = commands.loaded() if isinstance(commands, LazyCommands) else commands
        for sub in loaded.values():
            tidy_help(sub)


def _prose(text: str) -> str:
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        escape(paragraph if paragraph.startswith("\b") else paragraph.replace("\n", " "))
        for paragraph in paragraphs
    )


__all__ = ["app", "main", "tidy_help", "usage_message"]
