"""Where `mqttq blocked` does its work: a running broker's admin API, or the blocked-client
store itself.

The admin API when `--admin-url` names one or a running broker is found (as for
`mqttq credentials`: mqttq.cli.admin_target.running_api): a change applies at once (the
clients an entry matches are disconnected). Otherwise the store the broker reads: SQLite
`auth.db` in the data dir (embedded; a broker running on it without an admin API sees the
change within a second), or the compacted Kafka topic `<prefix>client.blocked` when the
settings name the Kafka message log (every node applies it as it reads it). The
failed-connections log lives in a running broker's memory: without one there is none.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import typer

from mqttq.admin.client import AdminApiError
from mqttq.auth.blocked.entries import BlockedInputError, entry_from_body
from mqttq.auth.blocked.ports import BlockedStore
from mqttq.cli.admin_target import ApiTarget, running_api
from mqttq.cli.admin_views import JSON, note
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, explain, print_error
from mqttq.cli.serve_blocked import blocked_store
from mqttq.config import Settings, load_settings
from mqttq.errors import ConfigError

__all__ = ["BlockedTarget", "blocked_session", "input_error"]


def input_error(exc: BlockedInputError) -> CliError:
    """The CLI's line for a bad entry: the flag of the field at fault."""
    flag = "--" + exc.field.replace("_", "-")
    if exc.field == "match_on":
        flag = "--regex-on"
    message = exc.message.removeprefix(f"{exc.field}: ")
    return CliError(f"{flag}: {message}", EXIT_CONFIG)


class BlockedTarget(Protocol):
    """What `mqttq blocked` asks of either target; answers are the admin API's shapes."""

    description: str
    live: bool

    def list_blocked(self) -> list[JSON]: ...

    def add_blocked(self, body: Mapping[str, Any]) -> JSON: ...

    def remove_blocked(self, entry_id: str) -> bool: ...

    def failed_connections(self, client_id: str | None, limit: int) -> JSON | None:
        """None: no broker runs, so there is no log."""
        ...


class ApiBlockedTarget:
    """A running broker's admin API."""

    live = True

    def __init__(self, api: ApiTarget) -> None:
        self.client = api.client
        self.description = api.description

    def _call(self, operation: str, body: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        try:
            return self.client.call(operation, body, **kw)
        except AdminApiError as exc:
            if exc.status == 400 and exc.field:
                raise input_error(BlockedInputError(exc.field, exc.message)) from None
            raise CliError(str(exc)) from None

    def list_blocked(self) -> list[JSON]:
        return list(self._call("listBlocked").get("blocked") or [])

    def add_blocked(self, body: Mapping[str, Any]) -> JSON:
        answer: JSON = self._call("addBlocked", body)
        return answer

    def remove_blocked(self, entry_id: str) -> bool:
        try:
            self.client.call("deleteBlocked", None, path={"id": entry_id})
        except AdminApiError as exc:
            if exc.status == 404:
                return False
            raise CliError(str(exc)) from None
        return True

    def failed_connections(self, client_id: str | None, limit: int) -> JSON | None:
        query: dict[str, str | int] = {"limit": limit}
        if client_id is not None:
            query["client_id"] = client_id
        answer: JSON = self._call("listFailedConnections", None, query=query)
        return answer


class StoreBlockedTarget:
    """The store itself (see the module docstring), on a private event loop; use as a
    context manager (opens and closes the store)."""

    live = False

    def __init__(self, store: BlockedStore, description: str) -> None:
        self.store = store
        self.description = description
        self._runner = asyncio.Runner()

    def __enter__(self) -> StoreBlockedTarget:
        self._runner.__enter__()
        try:
            self._runner.run(self.store.open())
        except BaseException:
            self._runner.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._runner.run(self.store.close())
        finally:
            self._runner.close()

    def list_blocked(self) -> list[JSON]:
        now = time.time()
        entries = self._runner.run(self.store.load())
        live = [entry for entry in entries if not entry.expired(now)]
        live.sort(key=lambda entry: (entry.created_at, entry.id))
        return [entry.to_json() for entry in live]

    def add_blocked(self, body: Mapping[str, Any]) -> JSON:
        entry = entry_from_body(dict(body), now=time.time())
        self._runner.run(self.store.put(entry))
        return entry.to_json()

    def remove_blocked(self, entry_id: str) -> bool:
        removed: bool = self._runner.run(self.store.delete(entry_id))
        return removed

    def failed_connections(self, client_id: str | None, limit: int) -> JSON | None:
        return None


@contextlib.contextmanager
def open_blocked(
    settings: Settings, admin_url: str | None, token: str | None
) -> Iterator[BlockedTarget]:
    """The target (see the module docstring), open for the block."""
    api, looked = running_api(settings, admin_url, token)
    if api is not None:
        yield ApiBlockedTarget(api)
        return
    store = blocked_store(settings)
    description = f"broker not running: using {store.where} directly ({looked})"
    with StoreBlockedTarget(store, description) as target:
        yield target


@contextlib.contextmanager
def blocked_session(
    config: Path | None, data_dir: str | None, admin_url: str | None, token: str | None
) -> Iterator[BlockedTarget]:
    """Load the settings (like `mqttq serve`), open the target, say on stderr where the
    command goes, and run the block. A failure a user can fix is one line on stderr and
    exit 1 (2 for bad input, naming the flag); nothing else is printed."""
    settings: Settings | None = None
    try:
        settings = load_settings(config, os.environ, {"storage.data_dir": data_dir})
        with open_blocked(settings, admin_url, token) as target:
            note(target.description)
            yield target
    except ConfigError as exc:
        print_error(f"{exc.key}: {exc.problem}")
        raise typer.Exit(EXIT_CONFIG) from None
    except BlockedInputError as exc:
        print_error(str(input_error(exc)))
        raise typer.Exit(EXIT_CONFIG) from None
    except Exception as exc:
        explained = explain(exc, settings)
        if explained is None:
            raise
        message, code = explained
        print_error(message)
        raise typer.Exit(code if code else EXIT_FAILURE) from None
