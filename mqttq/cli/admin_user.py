"""`mqttq admin-user add|rm|passwd|ls`: the people who log in to the dashboard.

Admin users live with the credentials (the settings' auth store: `auth.db` in the data dir,
or PostgreSQL), found from `--config` and `--data-dir` exactly as `mqttq credentials` finds
them. The command always writes the database itself, also while a broker runs: a broker
reads the table at each login, so a new user or password counts at once, and a removed
user's next request after their session ends is refused (a session already open lives until
it expires or the user logs out). Passwords come from MQTTQ_ADMIN_PASSWORD when set, else
from a hidden prompt (asked twice); neither a password nor a hash is ever printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mqttq.auth.admin_users import (
    AdminUser,
    AdminUserExists,
    AdminUserStore,
    Role,
    check_admin_username,
    new_admin_user,
)
from mqttq.auth.passwords import hash_password
from mqttq.cli.admin_target import ConfigOption, DataDirOption, JsonOption
from mqttq.cli.admin_views import note, print_json, say
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, explain, print_error
from mqttq.cli.serve_admin import AUTH_DB_NAME
from mqttq.config import Settings, load_settings
from mqttq.errors import ConfigError

__all__ = ["ADMIN_PASSWORD_ENV", "admin_user_app", "admin_user_store"]

T = TypeVar("T")

ADMIN_PASSWORD_ENV = "MQTTQ_ADMIN_PASSWORD"

admin_user_app = typer.Typer(
    name="admin-user",
    help="Dashboard users (user name, password, role viewer|admin), kept with the "
    "credentials; works whether or not the broker runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The user name to log in with.")]


def admin_user_store(settings: Settings) -> AdminUserStore:
    """The admin user store the settings name (not opened): the `mqtt_admin_users` table
    of SQLite `<data_dir>/auth.db`, or of PostgreSQL when `auth.store = "postgres"`."""
    if settings.auth.store == "postgres":
        if not settings.postgres.url:
            raise ConfigError("postgres.url", 'must be set when auth.store = "postgres"')
        from mqttq.storage.postgres.admin_users import PostgresAdminUserStore  # noqa: PLC0415

        return PostgresAdminUserStore(settings.postgres.url)
    from mqttq.storage.sqlite.admin_users import SqliteAdminUserStore  # noqa: PLC0415

    return SqliteAdminUserStore(settings.storage.data_dir / AUTH_DB_NAME)


class _Session:
    """An open store on a private event loop, for the length of one command."""

    def __init__(self, store: AdminUserStore, runner: asyncio.Runner) -> None:
        self.store = store
        self._runner = runner

    def run(self, step: Callable[[AdminUserStore], Awaitable[T]]) -> T:
        async def call() -> T:
            return await step(self.store)

        return self._runner.run(call())


def _where(settings: Settings) -> str:
    if settings.auth.store == "postgres":
        return "the PostgreSQL database in [postgres] url"
    return str(settings.storage.data_dir / AUTH_DB_NAME)


@contextlib.contextmanager
def _open(config: Path | None, data_dir: str | None, *, creates: bool) -> Iterator[_Session | None]:
    """Load the settings like `mqttq serve`, open the store (None: an embedded database
    that does not exist while `creates` is false: nothing stored) and run the block; a
    failure a user can fix ends the command with one line on stderr."""
    settings: Settings | None = None
    try:
        settings = load_settings(config, os.environ, {"storage.data_dir": data_dir})
        path = settings.storage.data_dir / AUTH_DB_NAME
        if settings.auth.store != "postgres" and not creates and not path.exists():
            note(f"no {path}: no admin users stored yet")
            yield None
            return
        store = admin_user_store(settings)
        note(f"admin users in {_where(settings)}")
        with asyncio.Runner() as runner:
            runner.run(store.open())
            try:
                yield _Session(store, runner)
            finally:
                runner.run(store.close())
    except Exception as exc:
        explained = explain(exc, settings)
        if explained is None:
            raise
        message, code = explained
        print_error(message)
        raise typer.Exit(code) from None


def _fail(message: str, code: int) -> NoReturn:
    print_error(message)
    raise typer.Exit(code)


def _check_name(name: str) -> None:
    problem = check_admin_username(name)
    if problem is not None:
        _fail(f"NAME {name!r}: {problem}; choose another user name", EXIT_CONFIG)


def _read_password() -> str:
    """MQTTQ_ADMIN_PASSWORD when set, else asked twice on a terminal with no echo."""
    value = os.environ.get(ADMIN_PASSWORD_ENV)
    if value is None:
        if not sys.stdin.isatty():
            _fail(
                f"no password: set {ADMIN_PASSWORD_ENV} or run on a terminal to be asked",
                EXIT_CONFIG,
            )
        value = str(typer.prompt("password", hide_input=True, confirmation_prompt=True))
    if not value:
        _fail(f"the password is empty; set {ADMIN_PASSWORD_ENV} to a non-empty one", EXIT_CONFIG)
    return value


def _unknown(name: str) -> CliError:
    return CliError(f"no admin user {name!r}; 'mqttq admin-user ls' lists them", EXIT_FAILURE)


@admin_user_app.command("add")
def add_command(
    name: NameArgument,
    *,
    role: Annotated[
        Role,
        typer.Option("--role", case_sensitive=False, help="viewer (read only) or admin."),
    ],
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Add a dashboard user; the password comes from MQTTQ_ADMIN_PASSWORD, else a hidden
    prompt (asked twice). Refused when the name exists."""
    _check_name(name)
    with _open(config, data_dir, creates=True) as session:
        assert session is not None
        if session.run(lambda store: store.get_admin_user(name)) is not None:
            raise CliError(
                f"admin user {name!r} already exists; use 'mqttq admin-user passwd' or 'rm' first",
                EXIT_FAILURE,
            )
        user = new_admin_user(name, _read_password(), role, time.time())
        try:
            session.run(lambda store: store.add_admin_user(user))
        except AdminUserExists:
            raise CliError(
                f"admin user {name!r} already exists; use 'mqttq admin-user passwd' or 'rm' first",
                EXIT_FAILURE,
            ) from None
    if as_json:
        print_json(user.public())
    else:
        say(f"admin user {name!r} added ({role})")


@admin_user_app.command("rm")
def rm_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Remove a dashboard user (an open browser session ends at its next expiry)."""
    with _open(config, data_dir, creates=False) as session:
        if session is None or not session.run(lambda store: store.delete_admin_user(name)):
            raise _unknown(name)
    if as_json:
        print_json({"username": name, "removed": True})
    else:
        say(f"admin user {name!r} removed")


@admin_user_app.command("passwd")
def passwd_command(
    name: NameArgument,
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Set a new password (from MQTTQ_ADMIN_PASSWORD, else a hidden prompt)."""
    with _open(config, data_dir, creates=False) as session:
        if session is None or session.run(lambda store: store.get_admin_user(name)) is None:
            raise _unknown(name)
        encoded = hash_password(_read_password())
        if not session.run(lambda store: store.set_admin_password(name, encoded)):
            raise _unknown(name)
    if as_json:
        print_json({"username": name, "password_changed": True})
    else:
        say(f"password of admin user {name!r} changed")


@admin_user_app.command("ls")
def ls_command(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """List the dashboard users, ordered by name (never a password or hash)."""
    with _open(config, data_dir, creates=False) as session:
        users: list[AdminUser] = (
            [] if session is None else session.run(lambda store: store.list_admin_users())
        )
    if as_json:
        print_json({"admin_users": [user.public() for user in users]})
        return
    table = Table()
    table.add_column("username", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("created", no_wrap=True)
    for user in users:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(user.created_at))
        table.add_row(user.username, str(user.role), created)
    console = Console(highlight=False, soft_wrap=True)
    console.print(table)
    console.print(Text(f"{len(users)} admin user" + ("" if len(users) == 1 else "s")))
