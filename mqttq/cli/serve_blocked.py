"""Blocked clients in `mqttq serve`: the store the settings name, the list loaded into
the "blocked" provider at the head of the authentication chain, the clients a new entry
matches disconnected, expired entries purged.

A connected 5.0 client gets DISCONNECT 0x98 Administrative action with the reason string
"blocked": 0x8A Banned is a CONNACK code only, not one a DISCONNECT may carry (MQTT 5.0
section 3.14.2.1, which the codec enforces); its next CONNECT gets 0x8A.

The store: the embedded broker keeps its entries in `<data_dir>/auth.db`; a distributed
one (`storage.log = "kafka"`) in the compacted topic `<kafka.topic_prefix>client.blocked`,
which every node reads from its start, so an entry added on one node reaches them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqttq.auth.blocked.entries import BlockedClient
from mqttq.auth.blocked.ports import BlockedStore
from mqttq.auth.blocked.service import BlockedClients
from mqttq.broker.connection.admission import chain_of
from mqttq.broker.connection.client import Client
from mqttq.broker.sessions.end_reasons import BLOCKED
from mqttq.config import Settings
from mqttq.errors import StorageError
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.broker.server import Broker

__all__ = ["BlockedHandle", "blocked_store", "client_address", "start_blocked"]

log = logging.getLogger("mqttq.cli.serve")


def blocked_store(settings: Settings) -> BlockedStore:
    """The store the settings name (see the module docstring), not opened."""
    if settings.storage.log == "kafka":
        from mqttq.storage.kafka.blocked import KafkaBlockedStore  # noqa: PLC0415 (Kafka only)

        return KafkaBlockedStore(
            settings.kafka.bootstrap_servers,
            settings.kafka.topic_prefix,
            timeout=max(10.0, settings.kafka.produce_timeout_ms / 1000),
        )
    from mqttq.storage.sqlite.blocked import SqliteBlockedStore  # noqa: PLC0415

    return SqliteBlockedStore.in_data_dir(settings.storage.data_dir)


def client_address(client: Client) -> str | None:
    """The IP address a connection came from (no port), None when unknown."""
    transport = client.transport
    peer = None if transport is None else transport.get_extra_info("peername")
    if not peer or not isinstance(peer, tuple):
        return None
    return str(peer[0])


@dataclass(slots=True)
class BlockedHandle:
    """The running blocked-client list of a broker; `close` stops it."""

    blocked: BlockedClients
    purging: asyncio.Task[None]

    async def close(self) -> None:
        self.purging.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.purging
        await self.blocked.stop()

    def attach(self, broker: Broker) -> None:
        """Put the list at the head of the broker's authentication chain (again, when
        the chain was replaced)."""
        chain = chain_of(broker.authenticator)
        if chain.provider("blocked") is not self.blocked:
            chain.set_blocked(self.blocked)


async def start_blocked(broker: Broker, settings: Settings) -> BlockedHandle:
    """Load the list and put it in front of `broker`'s authentication chain (before the
    broker starts listening); new entries disconnect the clients they match."""
    blocked = BlockedClients(
        blocked_store(settings), failed_size=settings.blocked.failed_connections
    )
    await blocked.start()

    def disconnect(entry: BlockedClient) -> None:
        life = broker.lifecycle
        if life is None:
            return
        for outlet in life.connections():
            if not isinstance(outlet, Client) or outlet.closed:
                continue
            identity = outlet.identity
            username = identity.username if identity is not None else None
            if identity is None:  # not through CONNECT yet: only its address is known
                address = client_address(outlet)
                if (
                    entry.kind == "address"
                    and address is not None
                    and blocked.matches_client(entry, "", None, address)
                ):
                    log.info("connection from %s closed: blocked", address)
                    outlet.close()
                continue
            if blocked.matches_client(entry, outlet.client_id, username, client_address(outlet)):
                log.info("client %r disconnected: blocked (entry %s)", outlet.client_id, entry.id)
                outlet.kick(ReasonCode.ADMINISTRATIVE_ACTION, "blocked", why=BLOCKED)

    blocked.on_blocked = disconnect
    purging = asyncio.get_running_loop().create_task(
        _purge_forever(blocked, settings.blocked.purge_interval), name="blocked clients purge"
    )
    handle = BlockedHandle(blocked, purging)
    handle.attach(broker)
    return handle


async def _purge_forever(blocked: BlockedClients, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await blocked.purge()
        except StorageError as exc:  # a store hiccup: the next purge tries again
            log.warning("expired blocked-client entries not purged: %s", exc)
