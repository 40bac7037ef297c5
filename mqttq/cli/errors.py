"""Turning the errors a user can fix into one line on stderr and an exit code.

An error a user can act on (bad config, port taken, unwritable data dir) gets one line that
says what to do, never a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import socket
import sqlite3
from typing import Final

from rich.console import Console
from rich.text import Text

from mqttq.auth.ports import AuthStoreError
from mqttq.config import Settings
from mqttq.errors import ConfigError, MqttqError, StorageError

EXIT_FAILURE: Final = 1
"""The broker could not run: port taken, storage unusable, ..."""
EXIT_CONFIG: Final = 2
"""Bad configuration or command line (click uses 2 for usage errors too)."""


class CliError(MqttqError):
    """A failure the CLI itself detected, with the line to print and the exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def explain(exc: BaseException, settings: Settings | None = None) -> tuple[str, int] | None:
    """One line for `exc` saying what went wrong and what to do, and the exit code.

    None when `exc` is not an error a user can fix (a bug): let it propagate.
    `settings` (when built) names the listener address in bind errors.
    """
    if isinstance(exc, CliError):
        return str(exc), exc.exit_code
    if isinstance(exc, ConfigError):
        return str(exc), EXIT_CONFIG
    if isinstance(exc, StorageError):
        if str(exc).startswith("kafka:"):
            return (
                f"storage failed: {exc}; check [kafka] bootstrap_servers (kafka.bootstrap_servers)",
                EXIT_FAILURE,
            )
        if str(exc).startswith("redis:"):
            return f"storage failed: {exc}; check [redis] url (redis.url)", EXIT_FAILURE
        return f"storage failed: {exc}; check --data-dir (storage.data_dir)", EXIT_FAILURE
    if isinstance(exc, AuthStoreError):
        if str(exc).startswith("postgres:"):
            return f"{exc}; check [postgres] url (postgres.url)", EXIT_FAILURE
        return f"{exc}; check --data-dir (storage.data_dir)", EXIT_FAILURE
    if isinstance(exc, sqlite3.Error):
        where = f" in {settings.storage.data_dir}" if settings is not None else ""
        return (
            f"cannot use the SQLite database{where}: {exc}; check --data-dir (storage.data_dir)",
            EXIT_FAILURE,
        )
    if isinstance(exc, OSError):
        return _explain_os_error(exc, settings), EXIT_FAILURE
    if isinstance(exc, MqttqError):
        return str(exc), EXIT_FAILURE
    return None


def _explain_os_error(exc: OSError, settings: Settings | None) -> str:
    address = "the listener address"
    host = "the host"
    if settings is not None:
        host = settings.listener.host
        shown = f"[{host}]" if ":" in host else host
        address = f"{shown}:{settings.listener.port}"
    if isinstance(exc, socket.gaierror):
        return (
            f"cannot resolve listener host {host!r}: {exc.strerror}; check --host (listener.host)"
        )
    if exc.filename is not None:
        # A file system error: the data dir or the ready file.
        return f"{exc.filename}: {exc.strerror}; check --data-dir (storage.data_dir)"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {address}: address already in use; stop the other server "
            "or choose another port with --port (listener.port)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {address}: {host} is not an address of this machine; "
            "choose another with --host (listener.host)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on {address}: permission denied; ports below 1024 need "
            "privileges, choose --port 1883 or above (listener.port)"
        )
    return f"cannot start: {exc.strerror or exc}"


def print_error(message: str) -> None:
    """Write `mqttq: error: <message>` to stderr as one line (red on a terminal)."""
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(Text.assemble(("mqttq: error: ", "bold red"), message))
