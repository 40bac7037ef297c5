"""Broker: the composition of hub, session lifecycle and listener, with its lifecycle."""

from __future__ import annotations

import asyncio
import logging

from mqttq.broker.client import Client
from mqttq.broker.hub import Hub
from mqttq.broker.lifecycle import Lifecycle
from mqttq.broker.listeners import bound_port, start_tcp_listener
from mqttq.config import Settings
from mqttq.storage.ports import Storage

__all__ = ["Broker"]

logger = logging.getLogger("mqttq.broker")


class Broker:
    """An MQTT broker bound to one TCP listener, backed by one storage adapter.

    `start()` opens the storage, restores persistent sessions and retained messages, and
    binds the listener; `shutdown()` stops accepting, disconnects every client (0x8B on
    5.0), flushes and closes the storage. The storage is opened and closed here.
    """

    def __init__(self, settings: Settings, storage: Storage) -> None:
        self.settings = settings
        self.storage = storage
        self.hub = Hub(settings.mqtt, storage)
        self._life: Lifecycle | None = None
        self._server: asyncio.Server | None = None
        self._port = 0
        self._stopped: asyncio.Event | None = None
        self._shutdown_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound MQTT port (after `start`)."""
        return self._port

    async def start(self) -> None:
        """Load state, then bind the listener (settings.listener.port may be 0)."""
        loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        await self.storage.open()
        life = self._life = Lifecycle(self.hub, loop)
        restored = await life.restore()
        listener = self.settings.listener
        self._server = await start_tcp_listener(
            loop, lambda: Client(life), listener.host, listener.port
        )
        self._port = bound_port(self._server)
        logger.debug(
            "listening on %s:%d (%d stored sessions, %d retained messages)",
            listener.host,
            self._port,
            restored,
            len(self.hub.retained),
        )

    async def serve_forever(self) -> None:
        """Return once `shutdown()` has completed."""
        if self._stopped is None:
            raise RuntimeError("Broker.start() was not called")
        await self._stopped.wait()

    async def shutdown(self) -> None:
        """Stop accepting, disconnect clients, flush and close storage; idempotent."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._shutdown_task)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        try:
            if self._life is not None:
                await self._life.shutdown()
        finally:
            try:
                await self.storage.close()
            finally:
                if self._stopped is not None:
                    self._stopped.set()
                logger.debug("stopped")

    def statistics(self) -> dict[str, int]:
        """Counters: connections, sessions, messages in/out/dropped per QoS, retained."""
        return self.hub.statistics()
