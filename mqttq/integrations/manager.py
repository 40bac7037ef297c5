"""`IntegrationManager`: the integrations of one broker, changed live.

It owns the specs (from `[[integration]]` tables at start, then from the admin API), keeps
them durably through an `IntegrationStore` (SQLite in embedded mode, PostgreSQL in
distributed mode), and runs each one: an out integration is an `IntegrationWorker` draining
the backlog the `IntegrationRuntime` gives it into its sink; an MQTT bridge in is a
`BridgeSource` whose messages the runtime republishes locally.

The runtime is the broker's side (`mqttq.broker` implements it): it makes an integration a
persistent subscriber of its filters, hands out its backlog, takes dead letters and
republishes what a bridge brings in. The manager never looks inside the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mqttq.errors import ConfigError, MqttqError
from mqttq.integrations.record import Delivery
from mqttq.integrations.secrets import expand_env
from mqttq.integrations.sink import SinkError
from mqttq.integrations.spec import SINK_TYPES, IntegrationSpec, parse_integration
from mqttq.integrations.stored import RESYNC, IntegrationStore, StoredIntegration
from mqttq.integrations.worker import Backlog, DeadLetters, IntegrationWorker

log = logging.getLogger(__name__)

SECRET_MASK = "***"
"""What `public()` shows for a secret; an update that sends it back keeps the stored value."""


class UnknownIntegration(LookupError):
    """No integration has that name (HTTP 404, CLI exit 1)."""


class IntegrationExists(ValueError):
    """An integration of that name exists already (HTTP 409, CLI exit 1)."""


class IntegrationRuntime(Protocol):
    """The broker's side of integrations."""

    @property
    def dead_letters(self) -> DeadLetters:
        """Where refused deliveries go."""
        ...

    async def attach(self, spec: IntegrationSpec) -> Backlog:
        """Make `spec` a persistent subscriber of its filters (or take it back after a
        restart, its backlog intact) and return its backlog."""
        ...

    async def detach(self, spec: IntegrationSpec, *, forget: bool) -> None:
        """Stop feeding the backlog; with `forget`, delete it and what it holds."""
        ...

    async def republish(self, delivery: Delivery) -> None:
        """Publish `delivery` locally in its tenant, as QoS `delivery.qos` (a bridge in);
        returns once the broker accepted it (durably for persistent subscribers)."""
        ...


@dataclass(slots=True)
class _Running:
    spec: IntegrationSpec
    stored: StoredIntegration
    worker: IntegrationWorker | None = None
    source: Any = None
    """The BridgeSource of a bridge in."""
    task: asyncio.Task[None] | None = None
    backlog: Backlog | None = None
    created_at: float = field(default_factory=time.time)


class IntegrationManager:
    """Every integration of this broker (see module docstring)."""

    def __init__(self, store: IntegrationStore, runtime: IntegrationRuntime) -> None:
        self.store = store
        self.runtime = runtime
        self._running: dict[str, _Running] = {}
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ life

    async def start(self, configured: Sequence[Mapping[str, Any]] = ()) -> None:
        """Load the stored integrations, let the config file's `[[integration]]` tables
        (checked already) replace those of the same name, and start them all."""
        async with self._lock:
            stored = {item.name: item for item in await self.store.load()}
            for table in configured:
                name = str(table["name"])
                previous = stored.get(name)
                item = StoredIntegration(
                    name,
                    dict(table),
                    paused=previous.paused if previous is not None else False,
                    origin="config",
                    updated_at=time.time(),
                )
                await self.store.save(item)
                stored[name] = item
            for item in stored.values():
                try:
                    spec = parse_integration(item.table, f"integration {item.name!r}")
                except ConfigError as exc:
                    log.error("integration %s: stored spec is no longer valid: %s", item.name, exc)
                    continue
                await self._launch(spec, item)

    async def stop(self) -> None:
        """Stop every worker and source (backlogs stay: they resume at the next start)."""
        async with self._lock:
            for running in list(self._running.values()):
                await self._halt(running, forget=False)
            self._running.clear()

    # ------------------------------------------------------------------ queries

    def names(self) -> list[str]:
        return sorted(self._running)

    def status(self, name: str) -> dict[str, Any]:
        """The integration as `integration ls/show` and the API print it: its public spec
        and what it did (state, delivered, failed, retried, dead_lettered, lag, last
        error and when)."""
        running = self._get(name)
        body = running.spec.public()
        body["origin"] = running.stored.origin
        worker = running.worker
        if worker is not None:
            stats = worker.stats
            body.update(
                state=worker.state,
                delivered=stats.delivered,
                failed=stats.failed,
                retried=stats.retried,
                dead_lettered=stats.dead_lettered,
                lag=running.backlog.lag() if running.backlog is not None else 0,
                dropped=running.backlog.dropped() if running.backlog is not None else 0,
                last_error=stats.last_error or None,
                last_error_at=stats.last_error_at or None,
            )
        else:
            counters = running.source.statistics() if running.source is not None else {}
            state = "paused" if running.stored.paused else "running"
            if not running.spec.enabled:
                state = "disabled"
            elif running.task is not None and running.task.done():
                state = "stopped"
            body.update(
                state=state,
                delivered=counters.get("received", 0),
                failed=0,
                retried=0,
                dead_lettered=0,
                dropped=counters.get("dropped", 0),
                lag=0,
                last_error=getattr(running.source, "last_error", None),
                last_error_at=None,
            )
        return body

    def statuses(self) -> list[dict[str, Any]]:
        return [self.status(name) for name in self.names()]

    def latency(self, name: str) -> tuple[list[int], float] | None:
        """The delivery latency histogram (bucket counts, sum) of an out integration."""
        worker = self._get(name).worker
        if worker is None:
            return None
        return list(worker.stats.latency_counts), worker.stats.latency_sum

    # ------------------------------------------------------------------ changes

    async def create(self, table: Mapping[str, Any]) -> dict[str, Any]:
        """Check, store and start a new integration. ConfigError names the field."""
        spec = parse_integration(table, "integration")
        async with self._lock:
            if spec.name in self._running:
                raise IntegrationExists(f"integration {spec.name!r} exists already")
            item = StoredIntegration(spec.name, dict(table), updated_at=time.time())
            await self.store.save(item)
            await self._launch(spec, item)
        return self.status(spec.name)

    async def update(self, name: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the keys given in `changes` (a key whose value is "***" keeps its stored
        value) and restart the integration with the result; its backlog is kept."""
        async with self._lock:
            running = self._get(name)
            if changes.get("name", name) != name:
                raise ConfigError("integration.name", "cannot be changed (remove and add)")
            table = dict(running.stored.table)
            for key, given in changes.items():
                if given == SECRET_MASK:
                    continue
                value = given
                if isinstance(given, dict) and isinstance(table.get(key), dict):
                    kept = table[key]
                    value = {
                        inner: kept.get(inner, item) if item == SECRET_MASK else item
                        for inner, item in given.items()
                    }
                if value is None:
                    table.pop(key, None)
                else:
                    table[key] = value
            spec = parse_integration(table, "integration")
            item = StoredIntegration(
                name, table, running.stored.paused, running.stored.origin, time.time()
            )
            await self.store.save(item)
            await self._halt(running, forget=False)
            await self._launch(spec, item)
        return self.status(name)

    async def remove(self, name: str) -> None:
        """Stop the integration, delete its backlog and forget it."""
        async with self._lock:
            running = self._get(name)
            await self._halt(running, forget=True)
            del self._running[name]
            await self.store.delete(name)

    async def pause(self, name: str) -> dict[str, Any]:
        return await self._set_paused(name, True)

    async def resume(self, name: str) -> dict[str, Any]:
        return await self._set_paused(name, False)

    async def test(self, name: str) -> str:
        """Send one sample delivery through a fresh sink and say what the sink answered.
        Raises SinkError (or ConfigError) with the reason."""
        return await probe(self._get(name).spec)

    # ------------------------------------------------------------------ changes elsewhere

    async def sync(self, name: str) -> None:
        """Make integration `name` here what the store says it is, whoever changed it
        (another node, the CLI on the same file): created -> started; changed -> restarted
        with its backlog kept; deleted -> stopped and its backlog forgotten; only the paused
        flag changed -> paused or resumed. Nothing happens when it matches already. A
        stored table that no longer parses is logged and the running one kept."""
        async with self._lock:
            stored = {item.name: item for item in await self.store.load()}
            await self._sync_one(name, stored.get(name))

    async def sync_all(self) -> None:
        """`sync` every integration stored or running (after a feed missed changes)."""
        async with self._lock:
            stored = {item.name: item for item in await self.store.load()}
            for name in sorted(stored.keys() | self._running.keys()):
                await self._sync_one(name, stored.get(name))

    async def follow(self, changes: AsyncIterator[str]) -> None:
        """Apply every change a store's feed (`store.watch()`) reports, until cancelled
        or the feed ends (then the feed is closed). Call it after `start`. A change that
        cannot be applied (the store cannot be read, the broker refuses to attach) is
        logged, and the next one is applied as usual."""
        try:
            async for name in changes:
                try:
                    if name == RESYNC:
                        await self.sync_all()
                    else:
                        await self.sync(name)
                except MqttqError as exc:
                    log.error("integrations: cannot apply a change of %s: %s", name, exc)
        finally:
            if isinstance(changes, AsyncGenerator):
                await changes.aclose()

    async def _sync_one(self, name: str, item: StoredIntegration | None) -> None:
        running = self._running.get(name)
        if item is None:
            if running is not None:
                await self._halt(running, forget=True)
                del self._running[name]
            return
        if running is not None and _same_table(running.stored.table, item.table):
            running.stored.origin = item.origin
            running.stored.updated_at = item.updated_at
            if running.stored.paused != item.paused:
                await self._apply_paused(running, item.paused)
            return
        try:
            spec = parse_integration(item.table, f"integration {name!r}")
        except ConfigError as exc:
            log.error("integration %s: stored spec is not valid, not applied: %s", name, exc)
            return
        if running is not None:
            await self._halt(running, forget=False)
        await self._launch(spec, item)

    async def _apply_paused(self, running: _Running, paused: bool) -> None:
        running.stored.paused = paused
        if running.worker is not None:
            if paused:
                running.worker.pause()
            else:
                running.worker.resume()
        elif paused:
            await self._halt(running, forget=False)
        else:
            await self._launch(running.spec, running.stored)

    # ------------------------------------------------------------------ internals

    def _get(self, name: str) -> _Running:
        running = self._running.get(name)
        if running is None:
            raise UnknownIntegration(f"no integration named {name!r}")
        return running

    async def _set_paused(self, name: str, paused: bool) -> dict[str, Any]:
        async with self._lock:
            running = self._get(name)
            running.stored.paused = paused
            running.stored.updated_at = time.time()
            await self.store.save(running.stored)
            await self._apply_paused(running, paused)
        return self.status(name)

    async def _launch(self, spec: IntegrationSpec, item: StoredIntegration) -> None:
        """Start `spec` and list it as running; if its backlog cannot be attached the error
        propagates and nothing is listed."""
        running = _Running(spec, item)
        if not spec.enabled:
            self._running[spec.name] = running
            return
        if spec.direction == "in":
            from mqttq.integrations.bridge.source import BridgeSource  # noqa: PLC0415

            running.source = BridgeSource(
                spec.settings,
                spec.name,
                self.runtime.republish,
                tenant=spec.tenant,
                own_origins=_OutBridgeIds(self._running),
            )
            if not item.paused:
                running.task = asyncio.create_task(
                    running.source.run(), name=f"integration {spec.name}"
                )
            self._running[spec.name] = running
            return
        running.backlog = await self.runtime.attach(spec)
        sink = SINK_TYPES[spec.type].make_sink(spec.settings, spec.name)
        running.worker = IntegrationWorker(
            spec.name, sink, running.backlog, self.runtime.dead_letters, spec.delivery
        )
        previous = self._running.get(spec.name)
        if previous is not None and previous.worker is not None:
            # A changed integration counts on: its totals are the integration's, not the
            # worker's (Prometheus counters must not fall back to 0 on an edit).
            running.worker.stats = previous.worker.stats
        if item.paused:
            running.worker.pause()
        running.task = asyncio.create_task(running.worker.run(), name=f"integration {spec.name}")
        self._running[spec.name] = running

    async def _halt(self, running: _Running, *, forget: bool) -> None:
        if running.source is not None:
            await running.source.close()
        task = running.task
        running.task = None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if running.worker is not None or forget:
            await self.runtime.detach(running.spec, forget=forget)


class _OutBridgeIds:
    """The remote client ids of the out bridges running here, read at each `in` test (a
    bridge added or changed later counts): what a bridge in must not bring back
    (mqttq.integrations.bridge.loop)."""

    def __init__(self, running: Mapping[str, _Running]) -> None:
        self._running = running

    def __contains__(self, origin: object) -> bool:
        for running in self._running.values():
            spec = running.spec
            if spec.type != "mqtt" or spec.direction != "out":
                continue
            template = spec.settings.default_client_id(spec.name)
            try:
                client_id = expand_env(template, f"integration[{spec.name}].client_id")
            except ConfigError:
                continue  # its sink cannot start either: it exported nothing
            if origin == client_id:
                return True
        return False


def _same_table(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """The two tables are the same once stored (a stored table is JSON: key order and
    tuples versus lists do not count)."""
    return json.dumps(left, sort_keys=True, default=str) == json.dumps(
        right, sort_keys=True, default=str
    )


def sample_delivery(spec: IntegrationSpec) -> Delivery:
    """The delivery `test` sends: on the first filter with its wildcards as `test`."""
    topic = spec.filters[0] if spec.filters else "mqttq/test"
    return Delivery(
        topic=topic.replace("#", "test").replace("+", "test"),
        payload=b'{"mqttq": "test"}',
        qos=1,
        client_id="mqttq-integration-test",
        tenant=spec.tenant,
        timestamp_ms=int(time.time() * 1000),
    )


async def probe(spec: IntegrationSpec) -> str:
    """Send `sample_delivery(spec)` through a fresh sink of `spec` and return what the sink
    answered. Raises SinkError (or ConfigError) with the reason; the sink's address key
    (`SINK_TYPES[spec.type].address`) is the field at fault."""
    sink = SINK_TYPES[spec.type].make_sink(spec.settings, spec.name)
    try:
        await sink.open()
        return await sink.probe(sample_delivery(spec))
    finally:
        with contextlib.suppress(SinkError):
            await sink.close()
