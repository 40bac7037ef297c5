"""`mqttq session ls|inspect --application`: APPLICATION sessions, read without the broker.

Where: the broker.toml given with `--config` (and `MQTTQ_*` variables): `[kafka]` for the
topics and offsets, and the `application_session_ctx` store, PostgreSQL with
`[auth] store = "postgres"`, else the embedded SQLite file in `storage.data_dir`. Per
session: its topic, the offset its consumer committed, the topic's end, the lag, and the
packet ids that were unacknowledged when it last disconnected.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, explain, print_error
from mqttq.config import Settings, load_settings
from mqttq.errors import MqttqError
from mqttq.storage.kafka.app_inspect import AppSessionView

__all__ = [
    "app_detail",
    "app_table",
    "inspect_app_session",
    "list_app_sessions",
    "load",
    "print_table",
    "run",
]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main`; an error a user can act on is one line on stderr and exit 1 or 2."""
    try:
        return asyncio.run(main)
    except MqttqError as exc:
        message, code = explain(exc) or (str(exc), EXIT_FAILURE)
        print_error(message)
        raise typer.Exit(code) from None


def load(config: Path | None) -> Settings:
    """The settings, with the Kafka log configured; CliError (one line) otherwise."""
    try:
        settings = load_settings(config, os.environ, {})
    except MqttqError as exc:
        explained = explain(exc)
        raise CliError(*(explained or (str(exc), EXIT_CONFIG))) from None
    if not settings.kafka.bootstrap_servers:
        raise CliError(
            "--application needs the Kafka of the broker: give --config with a [kafka] "
            "section (bootstrap_servers)",
            EXIT_CONFIG,
        )
    return settings


async def list_app_sessions(settings: Settings, pattern: str | None) -> list[AppSessionView]:
    """Every APPLICATION session with a saved context (client ids matching `pattern`)."""
    from mqttq.cli.serve import open_app_contexts  # noqa: PLC0415 (loads storage lazily)
    from mqttq.storage.kafka.app_inspect import describe_app_session  # noqa: PLC0415
    from mqttq.storage.kafka.client import KafkaAdmin  # noqa: PLC0415

    contexts = open_app_contexts(settings, force=True)
    assert contexts is not None
    await contexts.open()
    try:
        saved = await contexts.list_app_contexts()
    finally:
        await contexts.close()
    admin = KafkaAdmin(settings.kafka.bootstrap_servers, client_id="mqttq-cli")
    prefix = settings.kafka.topic_prefix
    return [
        await describe_app_session(admin, prefix, context)
        for context in saved
        if pattern is None or fnmatch.fnmatchcase(context.client_id, pattern)
    ]


async def inspect_app_session(settings: Settings, client_id: str) -> AppSessionView:
    """The session of `client_id`; CliError when it has no saved context."""
    found = [v for v in await list_app_sessions(settings, None) if v.client_id == client_id]
    if not found:
        raise CliError(f"no APPLICATION session {client_id!r} (it never connected)")
    return found[0]


def app_table(views: list[AppSessionView]) -> Table:
    table = Table(title="APPLICATION sessions", title_justify="left")
    for header in ("client id", "topic", "committed", "end", "lag", "unacked ids"):
        table.add_column(header, no_wrap=header != "unacked ids")
    for view in views:
        table.add_row(
            view.client_id,
            view.topic,
            _offset(view.committed_offset),
            _offset(view.end_offset),
            _offset(view.lag) if view.error is None else f"? ({view.error})",
            _ids(view),
        )
    return table


def app_detail(view: AppSessionView) -> Table:
    table = Table("field", "value", title=f"APPLICATION session {view.client_id!r}")
    rows = [
        ("topic", view.topic),
        ("committed offset", _offset(view.committed_offset)),
        ("end offset", _offset(view.end_offset)),
        ("lag", _offset(view.lag)),
        ("pack handled up to", _offset(view.pack_offset)),
        (
            "unacknowledged",
            ", ".join(f"{u.packet_id}@{u.offset} {u.kind}" for u in view.unacked) or "-",
        ),
    ]
    if view.error is not None:
        rows.append(("kafka", view.error))
    for field, value in rows:
        table.add_row(field, value)
    return table


def _offset(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _ids(view: AppSessionView) -> str:
    return ", ".join(str(u.packet_id) for u in view.unacked) or "-"


def print_table(table: Table) -> None:
    Console(highlight=False).print(table)
