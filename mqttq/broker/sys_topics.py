"""`$SYS` topics: the broker's counters as retained messages, every `[sys] interval`
seconds, with Mosquitto's names where mqttq has the number.

Broker-wide numbers go to the default tenant (the operators' namespace); a client of
another tenant subscribes to the same names in its own namespace (tenants do not see
each other's topics) and reads its tenant's numbers there: its clients, subscriptions
and retained messages on this node, the version and uptime. A `$` topic is never matched
by a filter starting with `#` or `+` [MQTT-4.7.2-1] (`routing.topics`), so only a client
that subscribes to `$SYS/...` by name receives them.

In a cluster every node would overwrite the others' retained `$SYS/broker/...`, so a
node publishes under `$SYS/brokers/<node id>/` instead (EMQX's spelling).

A value is published only when it changed since the last time (Mosquitto does the
same), so an idle broker writes nothing. Counters the broker does not keep are not
published (bytes: mqttq counts messages, not bytes; `messages/*` are PUBLISH packets).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from mqttq import __version__
from mqttq.auth.model import DEFAULT_TENANT
from mqttq.config import Settings
from mqttq.config.schema import node_id_of
from mqttq.errors import StorageError
from mqttq.model import Message

if TYPE_CHECKING:
    from mqttq.broker.delivery.hub import Hub

__all__ = ["LOAD_PERIODS", "SysTopics", "load_average", "start_sys_topics"]

logger = logging.getLogger("mqttq.broker.sys_topics")

LOAD_PERIODS: Final = (("1min", 60.0), ("5min", 300.0), ("15min", 900.0))


def load_average(previous: float, per_minute: float, elapsed: float, period: float) -> float:
    """Mosquitto's `load/...` figures: an exponentially weighted moving average over
    `period` seconds of a rate per minute, moved on by `elapsed` seconds."""
    weight = math.exp(-elapsed / period)
    return per_minute + weight * (previous - per_minute)


@dataclass(slots=True)
class _Loads:
    """The moving averages of one counter, by period name."""

    values: dict[str, float] = field(
        default_factory=lambda: {name: 0.0 for name, _period in LOAD_PERIODS}
    )

    def add(self, delta: float, elapsed: float) -> None:
        per_minute = delta * 60.0 / elapsed if elapsed > 0 else 0.0
        for name, period in LOAD_PERIODS:
            self.values[name] = load_average(self.values[name], per_minute, elapsed, period)


class SysTopics:
    """Publishes the `$SYS` topics of `hub` every `interval` seconds (see the module
    docstring); `start()` on the broker's loop, `stop()` before the broker stops."""

    def __init__(
        self,
        hub: Hub,
        interval: float,
        *,
        started_at: float,
        node_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`node_id`: set in a cluster (topics under `$SYS/brokers/<node id>/`)."""
        self.hub = hub
        self.interval = interval
        self.started_at = started_at
        self.prefix = "$SYS/broker/" if node_id is None else f"$SYS/brokers/{node_id}/"
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._last: dict[tuple[str, str], bytes] = {}
        self._previous: dict[str, int] = {}
        self._previous_at: float | None = None
        self._loads: dict[str, _Loads] = {}
        self._maximum: dict[str, int] = {}
        self.published = 0
        """$SYS messages published (not counted in `messages/received`, as client events
        are not)."""

    def start(self) -> None:
        """Publish now, then every `interval` seconds, until `stop()`."""
        if self._task is None and self.interval > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop publishing (what was published stays retained)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                self.publish_now()
            except StorageError as exc:
                # Only a message log that is not open refuses an append at once, and it
                # closes only when the broker stops (`mqttq serve` stops $SYS after that,
                # on a signal): nothing is wrong, and there is nothing left to publish to.
                logger.debug("$SYS topics end: %s", exc)
                return
            except Exception:  # a bug here must not end $SYS for the broker's lifetime
                logger.exception("$SYS topics not published")
            await asyncio.sleep(self.interval)

    def publish_now(self) -> int:
        """Publish every value that changed; returns how many were published."""
        count = 0
        for tenant, values in self.snapshot():
            for name, value in values.items():
                payload = value.encode()
                key = (tenant, name)
                if self._last.get(key) == payload:
                    continue
                message = Message(self.prefix + name, payload, 0, True, None, time.time(), None, "")
                self.hub.publish_detached(tenant, message)
                self._last[key] = payload  # after: a value refused is published again
                count += 1
        self.published += count
        return count

    def snapshot(self) -> Iterator[tuple[str, dict[str, str]]]:
        """(tenant, {topic name below the prefix: payload}) for the default tenant (the
        broker's numbers) and for every other tenant with a session on this node."""
        hub = self.hub
        now = self._clock()
        uptime = f"{int(time.time() - self.started_at)} seconds"
        version = f"mqttq version {__version__}"
        stats = hub.statistics()
        # The broker's own messages ($SYS, client events) are not what clients sent.
        own = self.published + hub.events.published
        received = sum(stats[f"messages_in_qos{q}"] for q in range(3)) - own
        sent = sum(stats[f"messages_out_qos{q}"] for q in range(3))
        dropped = sum(stats[f"messages_dropped_qos{q}"] for q in range(3))
        counters = {  # Mosquitto's load/<name>/<period> names
            "messages/received": received,
            "messages/sent": sent,
            "publish/received": received,
            "publish/sent": sent,
            "publish/dropped": dropped,
            "connections": stats["connections_total"],
        }
        elapsed = 0.0 if self._previous_at is None else now - self._previous_at
        if self._previous_at is not None and elapsed > 0:
            for name, value in counters.items():
                loads = self._loads.setdefault(name, _Loads())
                loads.add(max(value - self._previous.get(name, value), 0), elapsed)
        self._previous = counters
        self._previous_at = now
        per_tenant = self._tenants()
        broker_wide = _clients(
            stats["connections"],
            stats["sessions"],
            self._maximum_of(DEFAULT_TENANT, stats["connections"]),
        )
        values = {
            "version": version,
            "uptime": uptime,
            **broker_wide,
            "messages/received": str(received),
            "messages/sent": str(sent),
            "publish/messages/received": str(received),
            "publish/messages/sent": str(sent),
            "publish/messages/dropped": str(dropped),
            "subscriptions/count": str(stats["subscriptions"]),
            "retained messages/count": str(stats["retained"]),
        }
        for name, loads in self._loads.items():
            for period, average in loads.values.items():
                values[f"load/{name}/{period}"] = f"{average:.2f}"
        yield DEFAULT_TENANT, values
        for tenant, (connected, total, subscriptions, retained) in per_tenant.items():
            if tenant == DEFAULT_TENANT:
                continue
            yield (
                tenant,
                {
                    "version": version,
                    "uptime": uptime,
                    **_clients(connected, total, self._maximum_of(tenant, connected)),
                    "subscriptions/count": str(subscriptions),
                    "retained messages/count": str(retained),
                },
            )

    def _maximum_of(self, tenant: str, connected: int) -> int:
        highest = max(self._maximum.get(tenant, 0), connected)
        self._maximum[tenant] = highest
        return highest

    def _tenants(self) -> dict[str, tuple[int, int, int, int]]:
        """(connected, sessions, subscriptions, retained) of each tenant with a session."""
        found: dict[str, list[int]] = {}
        for client_id, session in self.hub.sessions.items():
            space = session.space
            row = found.setdefault(space.name, [0, 0, 0, len(space.retained)])
            row[0] += session.client is not None
            row[1] += 1
            row[2] += len(space.router.subscriptions_of(client_id))
        return {name: (row[0], row[1], row[2], row[3]) for name, row in found.items()}


def _clients(connected: int, total: int, maximum: int) -> dict[str, str]:
    return {
        "clients/connected": str(connected),
        "clients/active": str(connected),
        "clients/disconnected": str(total - connected),
        "clients/inactive": str(total - connected),
        "clients/total": str(total),
        "clients/maximum": str(maximum),
    }


def start_sys_topics(hub: Hub, settings: Settings, started_at: float) -> SysTopics | None:
    """Start publishing `$SYS` topics as `[sys]` says (None when `interval` is 0); in a
    cluster under this node's id."""
    if settings.sys.interval <= 0:
        return None
    node_id = node_id_of(settings) if hub.cluster is not None else None
    topics = SysTopics(hub, settings.sys.interval, started_at=started_at, node_id=node_id)
    topics.start()
    return topics
