"""Where `mqttq integration` does its work: a running broker's admin API, or the
integration store itself.

The admin API when `--admin-url` names one or a running broker is found (exactly as for
`mqttq tenant`: mqttq.cli.admin_target.running_api); every change is then live. Otherwise
the store the broker would read at its next start: SQLite `auth.db` in the data dir
(embedded), or the `mqttq_integration` table of `[postgres] url` when the settings name
the Kafka message log (distributed). A store edit is applied when a broker starts (or, for a
broker that runs on that store without an admin API, when its change feed sees it); the
command says so on stderr. Both targets answer with the admin API's shapes; in the store,
nothing has run, so the counters are null and the state is `stopped` (or `paused`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import typer

from mqttq.cli.admin_target import running_api
from mqttq.cli.admin_views import JSON, note
from mqttq.cli.errors import EXIT_CONFIG, CliError, explain, print_error
from mqttq.config import Settings, load_settings
from mqttq.errors import ConfigError
from mqttq.integrations.spec import IntegrationSpec, parse_integration
from mqttq.integrations.stored import StoredIntegration

if TYPE_CHECKING:
    from mqttq.integrations.stored import IntegrationStore

__all__ = [
    "IntegrationTarget",
    "StoreTarget",
    "integration_session",
    "probe",
    "stored_status",
]


class IntegrationTarget(Protocol):
    """What `mqttq integration` asks of either target; answers are the API's shapes. A
    missing integration is None (False for a removal), never an error."""

    description: str
    live: bool
    """True through a running broker's API: a change applies at once."""

    def list_integrations(self) -> list[JSON]: ...

    def get_integration(self, name: str) -> JSON | None: ...

    def add_integration(self, table: Mapping[str, Any]) -> JSON:
        """Check and store (and, live, start) it; CliError when the name is taken."""
        ...

    def remove_integration(self, name: str) -> bool: ...

    def pause_integration(self, name: str, paused: bool) -> JSON | None: ...

    def test_integration(self, name: str) -> str | None:
        """What the sink answered to one sample; CliError with its reason on failure."""
        ...


def stored_status(item: StoredIntegration) -> JSON:
    """The API's status shape of a stored integration that is not running: its public spec
    (secrets "***"), `state` stopped or paused, counters null. A table that no longer
    passes the check shows its name and type, state `invalid` and the reason."""
    counters: JSON = {
        "delivered": None,
        "failed": None,
        "retried": None,
        "dead_lettered": None,
        "lag": None,
        "last_error": None,
        "last_error_at": None,
    }
    try:
        spec = parse_integration(item.table, f"integration {item.name!r}")
    except ConfigError as exc:
        return {
            "name": item.name,
            "type": item.table.get("type"),
            "origin": item.origin,
            "state": "invalid",
            **counters,
            "last_error": f"{exc.key}: {exc.problem}",
        }
    body = spec.public()
    body["origin"] = item.origin
    body["state"] = "paused" if item.paused else "stopped"
    body.update(counters)
    return body


class StoreTarget:
    """The integration store itself, for when no broker runs (changes are applied at the
    broker's next start). Runs the store's coroutines on a private event loop; use as a
    context manager (opens and closes the store)."""

    live = False

    def __init__(self, store: IntegrationStore, description: str) -> None:
        self.store: Any = store
        self.description = description
        self._runner = asyncio.Runner()

    def __enter__(self) -> StoreTarget:
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

    def _items(self) -> dict[str, StoredIntegration]:
        items: list[StoredIntegration] = self._runner.run(self.store.load())
        return {item.name: item for item in items}

    def list_integrations(self) -> list[JSON]:
        return [stored_status(item) for _, item in sorted(self._items().items())]

    def get_integration(self, name: str) -> JSON | None:
        item = self._items().get(name)
        return None if item is None else stored_status(item)

    def add_integration(self, table: Mapping[str, Any]) -> JSON:
        spec = parse_integration(table, "integration")
        if spec.name in self._items():
            raise CliError(
                f"integration {spec.name!r} exists already; 'mqttq integration rm' it first"
            )
        item = StoredIntegration(spec.name, dict(table), updated_at=time.time())
        self._runner.run(self.store.save(item))
        return stored_status(item)

    def remove_integration(self, name: str) -> bool:
        removed: bool = self._runner.run(self.store.delete(name))
        return removed

    def pause_integration(self, name: str, paused: bool) -> JSON | None:
        item = self._items().get(name)
        if item is None:
            return None
        item.paused = paused
        item.updated_at = time.time()
        self._runner.run(self.store.save(item))
        return stored_status(item)

    def test_integration(self, name: str) -> str | None:
        item = self._items().get(name)
        if item is None:
            return None
        spec = parse_integration(item.table, f"integration {name!r}")
        return self._runner.run(probe(spec))


async def probe(spec: IntegrationSpec) -> str:
    """`IntegrationManager.test` without a broker; CliError (exit 2, naming the sink's
    address key) with the sink's reason when it fails."""
    from mqttq.integrations.manager import probe as probe_sink  # noqa: PLC0415
    from mqttq.integrations.sink import SinkError  # noqa: PLC0415
    from mqttq.integrations.spec import SINK_TYPES  # noqa: PLC0415

    try:
        return await probe_sink(spec)
    except SinkError as exc:
        field = f"integration.{SINK_TYPES[spec.type].address}"
        raise CliError(
            f"{field}: integration {spec.name!r} test failed: {exc}", EXIT_CONFIG
        ) from None


def _open_store(settings: Settings, *, creates: bool) -> tuple[IntegrationStore | None, str]:
    """The store the settings name, not opened, and where it is (for notes); None when the
    SQLite file does not exist and the command creates nothing."""
    from mqttq.integrations.stores.choose import store_for  # noqa: PLC0415
    from mqttq.integrations.stores.postgres import PostgresIntegrationStore  # noqa: PLC0415

    store = store_for(settings)
    if isinstance(store, PostgresIntegrationStore):
        return store, f"PostgreSQL at {store.where}"
    if not creates and not store.path.exists():
        return None, str(store.path)
    return store, str(store.path)


class _NothingStored:
    """No broker and no store file: nothing is stored, nothing is created."""

    live = False

    def __init__(self, description: str) -> None:
        self.description = description

    def list_integrations(self) -> list[JSON]:
        return []

    def get_integration(self, name: str) -> JSON | None:
        return None

    def add_integration(self, table: Mapping[str, Any]) -> JSON:
        raise CliError("nothing can be stored here: no integration store (a bug)")

    def remove_integration(self, name: str) -> bool:
        return False

    def pause_integration(self, name: str, paused: bool) -> JSON | None:
        return None

    def test_integration(self, name: str) -> str | None:
        return None


@contextlib.contextmanager
def open_integrations(
    settings: Settings, admin_url: str | None, token: str | None, *, creates: bool
) -> Iterator[IntegrationTarget]:
    """The target (see the module docstring), open for the block."""
    api, looked = running_api(settings, admin_url, token)
    if api is not None:
        yield api
        return
    store, where = _open_store(settings, creates=creates)
    if store is None:
        yield _NothingStored(f"broker not running ({looked}) and no {where}: nothing stored")
        return
    with StoreTarget(store, f"broker not running: using {where} directly ({looked})") as target:
        yield target


@contextlib.contextmanager
def integration_session(
    config: Path | None,
    data_dir: str | None,
    admin_url: str | None,
    token: str | None,
    *,
    creates: bool = False,
) -> Iterator[IntegrationTarget]:
    """Load the settings (like `mqttq serve`), open the target (`creates`: a command that
    stores something may create the SQLite file), say on stderr where the command goes,
    and run the block. A failure a user can fix is one line on stderr and exit 1 (2 for
    bad input, a ConfigError naming the key); nothing else is printed."""
    settings: Settings | None = None
    try:
        settings = load_settings(config, os.environ, {"storage.data_dir": data_dir})
        with open_integrations(settings, admin_url, token, creates=creates) as target:
            note(target.description)
            yield target
    except ConfigError as exc:
        print_error(f"{exc.key}: {exc.problem}")
        raise typer.Exit(EXIT_CONFIG) from None
    except Exception as exc:
        explained = explain(exc, settings)
        if explained is None:
            raise
        message, code = explained
        print_error(message)
        raise typer.Exit(code) from None
