"""Will messages: published when a connection ends without DISCONNECT 0x00, after the Will
Delay Interval or when the session ends, whichever is first [MQTT-3.1.2-8]; cancelled when
the client reconnects to the session in time [MQTT-3.1.3-9]."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from mqttq.codec.packets import Will
from mqttq.model import Message

__all__ = ["WillScheduler", "will_message"]

logger = logging.getLogger("mqttq.broker.will")


def will_message(will: Will, client_id: str, now: float) -> Message:
    """The application message a will becomes; Will Delay Interval does not travel with it."""
    props = will.properties
    if props.will_delay_interval is not None:
        props = dataclasses.replace(props, will_delay_interval=None)
    expiry = props.message_expiry_interval
    return Message(
        will.topic,
        will.payload,
        will.qos,
        will.retain,  # [MQTT-3.1.2-16] [MQTT-3.1.2-17]
        props,
        now,
        None if expiry is None else now + expiry,
        client_id,
    )


class WillScheduler:
    """Delayed wills, one per client id, on the event loop's clock; each is handed, when
    due, to `publish` for the tenant namespace of the session that set it (which makes
    it a message with `will_message`, at the broker's wall clock)."""

    __slots__ = ("_loop", "_pending", "_publish")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, publish: Callable[[str, str, Will], None]
    ) -> None:
        self._loop = loop
        self._publish = publish
        """publish(client_id, tenant, will)."""
        self._pending: dict[str, tuple[asyncio.TimerHandle, Will, str]] = {}

    def connection_closed(self, client_id: str, will: Will, delay: float, tenant: str) -> None:
        """The network connection closed abnormally: publish now, or after `delay` s
        (the Will Delay Interval, already capped by the session's expiry)."""
        self.cancel(client_id)
        if delay <= 0:
            self._fire(client_id, will, tenant)
            return
        handle = self._loop.call_later(delay, self._due, client_id)
        self._pending[client_id] = (handle, will, tenant)

    def cancel(self, client_id: str) -> bool:
        """The client reconnected before the delay ran out: never publish [MQTT-3.1.3-9]."""
        pending = self._pending.pop(client_id, None)
        if pending is None:
            return False
        pending[0].cancel()
        return True

    def session_ended(self, client_id: str) -> None:
        """The session ended first: its delayed will is published now [MQTT-3.1.2-8]."""
        pending = self._pending.pop(client_id, None)
        if pending is not None:
            pending[0].cancel()
            self._fire(client_id, pending[1], pending[2])

    def drop_all(self) -> None:
        """Shutdown: delayed wills not yet due are not published."""
        for handle, _will, _tenant in self._pending.values():
            handle.cancel()
        self._pending.clear()

    def _due(self, client_id: str) -> None:
        pending = self._pending.pop(client_id, None)
        if pending is not None:
            self._fire(client_id, pending[1], pending[2])

    def _fire(self, client_id: str, will: Will, tenant: str) -> None:
        logger.debug("publishing the will of %r on %r", client_id, will.topic)
        self._publish(client_id, tenant, will)
