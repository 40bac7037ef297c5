"""Integrations in `mqttq serve`: their tables checked, their store opened, the manager
started on the broker and following changes made by other nodes or the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from mqttq.broker.integrations import BrokerIntegrations
from mqttq.broker.server import Broker
from mqttq.config import Settings
from mqttq.integrations.manager import IntegrationManager
from mqttq.integrations.spec import parse_integrations
from mqttq.integrations.stores.choose import store_for
from mqttq.integrations.stores.postgres import PostgresIntegrationStore
from mqttq.integrations.stores.sqlite import SqliteIntegrationStore

log = logging.getLogger("mqttq.cli.serve")


def check_integrations(settings: Settings) -> None:
    """Check the `[[integration]]` tables before anything starts: ConfigError names
    `integration[N].<key>` (exit 2)."""
    parse_integrations(settings.integration)


@dataclass(slots=True)
class IntegrationsHandle:
    """The running integrations of a broker; `close` stops them (backlogs stay)."""

    manager: IntegrationManager
    store: SqliteIntegrationStore | PostgresIntegrationStore
    follow: asyncio.Task[None]

    async def close(self) -> None:
        self.follow.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.follow
        await self.manager.stop()
        await self.store.close()


async def start_integrations(broker: Broker, settings: Settings) -> IntegrationsHandle:
    """Open the store, start every integration (the file's tables replace stored ones of
    the same name) and follow the store's change feed."""
    store = store_for(settings)
    await store.open()
    manager = IntegrationManager(store, BrokerIntegrations(broker))
    try:
        await manager.start(settings.integration)
    except BaseException:
        await manager.stop()
        await store.close()
        raise
    follow = asyncio.create_task(manager.follow(store.watch()), name="integrations follow")
    if manager.names():
        log.info("integrations started", extra={"integrations": manager.names()})
    return IntegrationsHandle(manager, store, follow)
