"""The broker's side of integrations (`IntegrationRuntime`): backlogs, dead letters and
messages a bridge brings in.

Embedded mode: an integration is what issue 33 calls it, a subscriber that is not a socket.
It is a session `$integration/<name>` of its tenant (no MQTT client may take that id),
subscribed to its filters at QoS 1 and never online, whose deliveries routing appends to the
integration's own log (`IntegrationLog`, `DATA/integrations/<name>/`, registered in
`Hub.appenders`): one buffered append per message, one write and one fsync per loop
iteration, and the publisher's PUBACK waits for that write as it waits for a queue entry.
The worker drains the log (`LogBacklog`) and commits its position once the sink took a
batch.

The session is still stored like any persistent session, for the time its log is not
attached: after a restart, the messages the publish inbox replays and those published
before the integrations start are queued for it in SQLite as for any persistent session.
At its first attach, whatever its stored queue holds is moved into the log, ahead of what
routing appended since (`_move_queue`), and removed from the queue. That is also how a data
directory from before the log (the backlog was that queue) is taken over.

With the `memory` store (nothing survives a restart), or a hub without `appenders` (a build
older than the log), the session's queue is the backlog (`SessionBacklog`), as before.

Distributed mode (the Kafka message log): every node reads the log for each integration as
one consumer group (`KafkaBacklog`): Kafka spreads the partitions over the nodes.

Dead letters are published as QoS 1 messages on `$integrations/<name>/dead` in the
integration's tenant: a JSON object with the integration, the reason and the message's
envelope. A `$` topic is never matched by `#`: whoever wants them subscribes to it (a
persistent session, or another integration).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from mqttq.codec.enums import SESSION_EXPIRY_NEVER
from mqttq.codec.packets import SubscribePacket, SubscriptionRequest
from mqttq.codec.properties import Properties
from mqttq.integrations.append_log import IntegrationLog
from mqttq.integrations.log_backlog import LogBacklog
from mqttq.integrations.record import Delivery, delivery_of, envelope
from mqttq.integrations.sink import Rejected
from mqttq.integrations.spec import IntegrationSpec
from mqttq.integrations.worker import Backlog
from mqttq.model import Message, QueuedMessage
from mqttq.protocol.connect import INTEGRATION_CLIENT_PREFIX

if TYPE_CHECKING:
    from mqttq.broker.server import Broker
    from mqttq.broker.sessions.session import Session

__all__ = ["BrokerIntegrations", "SessionBacklog", "dead_letter_topic", "session_id"]

log = logging.getLogger(__name__)

DEAD_LETTER_PREFIX: Final = "$integrations/"


@runtime_checkable
class PiecewiseQueueReader(Protocol):
    """A store that reads a queue in pieces (the SQLite store)."""

    async def fetch_after(self, client_id: str, after: int, limit: int) -> list[QueuedMessage]:
        """At most `limit` entries with a serial above `after`, in serial order, expired
        ones included."""
        ...


def session_id(name: str) -> str:
    """The client id of an integration's session."""
    return f"{INTEGRATION_CLIENT_PREFIX}{name}"


def dead_letter_topic(name: str) -> str:
    """Where the deliveries an integration's sink refused for good are published."""
    return f"{DEAD_LETTER_PREFIX}{name}/dead"


class SessionBacklog:
    """An integration's backlog in embedded mode: the queue of its session.

    At most `max_in_flight` entries are held in memory; past that, entries stay in storage
    only and are read again once the held ones are gone. What the payload filter refuses is
    removed without being delivered (counted in `skipped`). Serials are consecutive, so a
    gap in what storage gives back is what left the queue undelivered (it expired, or the
    queue was full: `queue_limit_of`): counted in `dropped()`.

    The feed hands entries over in the order their publishers' messages complete, which is
    each publisher's order but not always serial order (messages of two publishers routed
    in one commit complete in their publishers' turns). So an entry is known by its serial
    (`_held`), not by being below the newest one seen: an entry fed late, or left in storage
    while the backlog was full, is still delivered. Only what a read of storage covered
    (`_read_upto`: every entry committed before the read began) is taken from the read.
    """

    def __init__(self, broker: Broker, session: Session, spec: IntegrationSpec) -> None:
        self.broker = broker
        self.session = session
        self.spec = spec
        self.skipped = 0
        self._limit = spec.delivery.max_in_flight
        self._waiting: deque[QueuedMessage] = deque()
        self._taken: dict[int, QueuedMessage] = {}
        """seq (serial) -> entry taken and not settled."""
        self._held: set[int] = set()
        """The serials in `_waiting` and `_taken`, and those being removed."""
        self._last_serial = 0
        """The newest serial held or handled."""
        self._read_upto = 0
        """The newest serial a read of storage returned: the feed's entries up to it came
        in that read (they were committed before it began)."""
        self._newest = 0
        """The newest serial stored, as far as the feed told."""
        self._dropped = 0
        self._opened = False
        self._refilling = False
        self._arrivals: list[QueuedMessage] = []
        """Entries the feed handed over while a refill read storage: merged after it."""
        self._behind = False
        """Entries were stored that are not held: read storage again when empty."""
        self._arrived = asyncio.Event()
        self._removing: asyncio.Future[None] | None = None
        """The removal of the last batch settled, while it commits."""

    async def open(self) -> None:
        """Hear of each new entry, and read what the session holds."""
        self.session.feed = self._stored
        await self._refill()
        self._opened = True

    def close(self) -> None:
        self.session.feed = None
        self._arrived.set()
        # A removal under way commits on its own (the store finishes what it was given).

    def _stored(self, entry: QueuedMessage) -> None:
        serial = entry.serial
        if serial <= self._read_upto or serial in self._held:
            return
        self._newest = max(self._newest, serial)
        if self._refilling:
            # An entry committed while the read is under way may be missing from what it
            # returns: kept aside, merged by serial once the read is in.
            self._arrivals.append(entry)
            return
        if self._behind or len(self._waiting) + len(self._taken) >= self._limit:
            # It waits in storage: read by the next refill.
            self._behind = True
            self._arrived.set()
            return
        self._hold(entry)
        self._arrived.set()

    def _hold(self, entry: QueuedMessage) -> None:
        self._waiting.append(entry)
        self._held.add(entry.serial)
        self._last_serial = max(self._last_serial, entry.serial)

    async def _refill(self) -> None:
        """Read the stored entries not held, in serial order, while there is room; the feed
        only sets aside what arrives meanwhile, so none is skipped.

        The queue in storage is what is held (taken, waiting, being removed) and what is
        not yet: its first `room + held` entries hold every one there is room for, so a
        store that reads a queue in pieces (`fetch_after`) reads that many, not a long
        backlog whole at each refill."""
        removing, self._removing = self._removing, None
        if removing is not None:
            # Its entries leave `_held` when it commits: a read from before that commit
            # would hand them out again.
            await removing
        self._behind = False
        self._refilling = True
        room = self._limit - len(self._waiting) - len(self._taken)
        storage = self.broker.storage
        client_id = self.session.client_id
        try:
            if isinstance(storage, PiecewiseQueueReader):
                wanted = room + len(self._held)
                stored = await storage.fetch_after(client_id, 0, wanted)
                whole = len(stored) < wanted
            else:
                stored = await storage.fetch(client_id, time.time())
                whole = True
        finally:
            self._refilling = False
            arrivals, self._arrivals = self._arrivals, []
        newest_read = stored[-1].serial if stored else 0
        # Every entry is in what a whole read returned or was fed while it ran (or both):
        # the feed hears of an entry only after its commit, and the read began before. A
        # piece read leaves entries after it in storage: what arrived then waits there too
        # (taken now, it would pass older entries of its publisher).
        if arrivals:
            if whole:
                stored = [*stored, *(e for e in arrivals if e.serial > newest_read)]
            else:
                self._behind = True
        self._read_upto = max(self._read_upto, newest_read)
        held = self._held
        room = self._limit - len(self._waiting) - len(self._taken)
        for entry in stored:
            serial = entry.serial
            if serial in held:
                continue
            if room <= 0:
                self._behind = True
                break
            if self._opened and serial > self._last_serial + 1:
                self._dropped += serial - self._last_serial - 1
            self._hold(entry)
            room -= 1
        if not whole:
            self._behind = True
        if not self._behind and self._opened and self._newest > self._last_serial:
            # Announced before this read began, and not in storage any more: gone.
            self._dropped += self._newest - self._last_serial
            self._last_serial = self._newest
        self._newest = max(self._newest, self._last_serial)
        self.session.fetched_serial = max(self.session.fetched_serial, self._read_upto)

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        while True:
            while not self._waiting:
                if self._behind:
                    await self._refill()
                    continue
                self._arrived.clear()
                await self._arrived.wait()
            if len(self._waiting) < max_items and linger > 0:
                await asyncio.sleep(linger)
            batch: list[Delivery] = []
            dropped: list[QueuedMessage] = []
            now = time.time()
            keep = self.spec.payload_filter
            tenant = self.spec.tenant
            waiting = self._waiting
            taken = self._taken
            while waiting and len(batch) < max_items:
                entry = waiting.popleft()
                message = entry.message
                if message.expires_at is not None and message.is_expired(now):
                    # [MQTT-3.3.2-5]: never delivered once expired
                    self._dropped += 1
                    dropped.append(entry)
                    continue
                if keep is not None and not keep.matches(message.payload):
                    self.skipped += 1
                    dropped.append(entry)
                    continue
                taken[entry.serial] = entry
                batch.append(delivery_of(message, tenant, entry.serial, now))
            if dropped:
                await self._remove(dropped)
            if batch:
                return batch

    async def settle(self, batch: Sequence[Delivery]) -> None:
        """Remove `batch` from storage without waiting for that commit: the worker takes
        and sends the next batch meanwhile (a crash before it commits delivers the batch
        again: at least once). At most one removal is under way; the previous one is
        awaited here, so its failure surfaces in this call."""
        taken = self._taken
        entries = [taken.pop(delivery.seq) for delivery in batch if delivery.seq in taken]
        previous, self._removing = self._removing, None
        if previous is not None:
            await previous
        if entries:
            removing = self._removing = asyncio.ensure_future(self._remove(entries))
            # Logged here, also when no settle or refill comes to await it (the integration
            # was removed, the broker stops), instead of as a "never retrieved" task.
            removing.add_done_callback(functools.partial(_log_failed_removal, self.spec.name))

    def give_back(self) -> None:
        """What was taken and not settled goes back to the front (sent again)."""
        for serial in sorted(self._taken, reverse=True):
            self._waiting.appendleft(self._taken.pop(serial))

    def lag(self) -> int:
        """Held in memory, and stored behind them."""
        return len(self._waiting) + len(self._taken) + self._newest - self._last_serial

    def dropped(self) -> int:
        return self._dropped

    async def _remove(self, entries: Sequence[QueuedMessage]) -> None:
        """Remove `entries` from storage; they stay known (`_held`) until that committed,
        so a refill meanwhile does not take them again."""
        if entries:
            client_id = self.session.client_id
            try:
                await self.broker.storage.remove_many([(client_id, e.packet_id) for e in entries])
            finally:
                held = self._held
                for entry in entries:
                    held.discard(entry.serial)


def _log_failed_removal(name: str, future: asyncio.Future[None]) -> None:
    error = None if future.cancelled() else future.exception()
    if error is not None:
        log.warning(
            "integration %s: removing delivered messages from its backlog failed (%s); "
            "they are delivered again after a restart",
            name,
            error,
        )


class BrokerIntegrations:
    """`IntegrationRuntime` on a running `Broker` (see the module docstring)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.dead_letters = self
        self._backlogs: dict[str, Backlog] = {}
        self._logs: dict[str, IntegrationLog] = {}
        """The open log of each integration attached (kept across a restart of its
        worker: routing appends to it meanwhile)."""
        self._tenants: dict[str, str] = {}
        self._events: dict[str, tuple[str, ...]] = {}
        """The client events each attached integration takes."""

    def _events_changed(self) -> None:
        kinds = frozenset(kind for taken in self._events.values() for kind in taken)
        self.broker.hub.events.kinds = kinds

    async def attach(self, spec: IntegrationSpec) -> Backlog:
        self._tenants[spec.name] = spec.tenant
        self._events[spec.name] = spec.events
        self._events_changed()
        log_settings = self.broker.settings.kafka if self.broker.log is not None else None
        if log_settings is not None:
            from mqttq.integrations.kafka_backlog import KafkaBacklog  # noqa: PLC0415

            kafka_backlog = KafkaBacklog(
                spec,
                log_settings.bootstrap_servers,
                log_settings.topic_prefix,
                partitions=log_settings.msg_all_partitions,
                max_in_flight=spec.delivery.max_in_flight,
            )
            await kafka_backlog.open()
            self._backlogs[spec.name] = kafka_backlog
            return kafka_backlog
        opened = await self._log(spec)
        if opened is None:
            session = await self._session(spec)
            backlog = SessionBacklog(self.broker, session, spec)
            await backlog.open()
            self._backlogs[spec.name] = backlog
            return backlog
        integration_log, fresh = opened
        if fresh:
            await self._move_queue(spec, integration_log)
        else:
            await self._session(spec)
        log_backlog = LogBacklog(integration_log, spec)
        self._backlogs[spec.name] = log_backlog
        return log_backlog

    async def _log(self, spec: IntegrationSpec) -> tuple[IntegrationLog, bool] | None:
        """The integration's log, registered for routing, and whether it was opened now
        (then held: `_move_queue` writes the stored queue first); None where the session's
        queue is the backlog (the module docstring)."""
        appenders = getattr(self.broker.hub, "appenders", None)
        if appenders is None or self.broker.settings.storage.backend != "sqlite":
            return None
        integration_log = self._logs.get(spec.name)
        fresh = integration_log is None
        if integration_log is None:
            directory = self.broker.settings.storage.data_dir / "integrations" / spec.name
            integration_log = IntegrationLog(directory, spec.tenant)
            # Off the loop: opening reads the backlog through (to count it, and to find
            # where a torn tail ends).
            await asyncio.to_thread(integration_log.open)
            integration_log.hold()
            self._logs[spec.name] = integration_log
        integration_log.tenant = spec.tenant
        integration_log.max_bytes = spec.delivery.max_backlog_mb << 20
        appenders[session_id(spec.name)] = integration_log.append
        return integration_log, fresh

    async def _move_queue(self, spec: IntegrationSpec, integration_log: IntegrationLog) -> None:
        """Make the session, then move what its stored queue holds (queued while no log was
        attached: before this start's attach, or by a build older than the log) into the
        held log, ahead of what routing appended since; then remove it from the queue."""
        client_id = session_id(spec.name)
        storage = self.broker.storage
        entries: list[QueuedMessage] = []
        try:
            await self._session(spec)
            # The queue writes in flight for it commit first: the fetch sees them.
            await self.broker.hub.tasks.barrier(client_id)
            entries = await storage.fetch(client_id, time.time())
        finally:
            await integration_log.put_first([entry.message for entry in entries])
        if entries:
            await storage.remove_many([(client_id, entry.packet_id) for entry in entries])
            log.info(
                "integration %s: moved %d messages queued for it into its log",
                spec.name,
                len(entries),
            )

    async def detach(self, spec: IntegrationSpec, *, forget: bool) -> None:
        self._events.pop(spec.name, None)
        self._events_changed()
        backlog = self._backlogs.pop(spec.name, None)
        if isinstance(backlog, SessionBacklog):
            backlog.close()
        elif backlog is not None and not isinstance(backlog, LogBacklog):
            await backlog.close()  # type: ignore[attr-defined]
        if forget and self.broker.log is None:
            client_id = session_id(spec.name)
            session = self.broker.hub.sessions.get(client_id)
            life = self.broker.lifecycle
            if session is not None and life is not None:
                await life.endings.remove_session(session)
            appenders = getattr(self.broker.hub, "appenders", None)
            if appenders is not None:
                appenders.pop(client_id, None)
            integration_log = self._logs.pop(spec.name, None)
            if integration_log is not None:
                await integration_log.destroy()

    async def republish(self, delivery: Delivery) -> None:
        properties = Properties()
        properties.user_properties = list(delivery.user_properties)
        properties.content_type = delivery.content_type
        properties.response_topic = delivery.response_topic
        properties.correlation_data = delivery.correlation_data
        properties.message_expiry_interval = delivery.message_expiry_interval
        await self._publish(
            delivery.tenant,
            delivery.topic,
            delivery.payload,
            delivery.qos,
            properties,
            delivery.client_id,
            delivery.retain,
        )

    async def put(self, integration: str, rejected: Sequence[Rejected]) -> None:
        """Publish each refused delivery on the integration's dead-letter topic."""
        tenant = self._tenants.get(integration, "default")
        for item in rejected:
            body: dict[str, Any] = {
                "integration": integration,
                "reason": item.reason,
                "message": envelope(item.delivery),
            }
            payload = json.dumps(body, separators=(",", ":")).encode()
            properties = Properties()
            properties.content_type = "application/json"
            await self._publish(
                tenant,
                dead_letter_topic(integration),
                payload,
                1,
                properties,
                session_id(integration),
            )

    async def _publish(  # noqa: PLR0917 (a PUBLISH's fields)
        self,
        tenant: str,
        topic: str,
        payload: bytes,
        qos: int,
        properties: Properties,
        publisher: str,
        retain: bool = False,
    ) -> None:
        now = time.time()
        expiry = properties.message_expiry_interval
        message = Message(
            topic,
            payload,
            qos,
            retain,
            properties,
            now,
            None if expiry is None else now + expiry,
            publisher,
        )
        waits = self.broker.hub.publish_detached(tenant, message)
        if waits is not None:
            await waits

    async def _session(self, spec: IntegrationSpec) -> Session:
        """The integration's session, made (or its subscriptions brought to the spec's
        filters) and stored before the backlog is read."""
        from mqttq.broker.sessions.session import Session  # noqa: PLC0415

        hub = self.broker.hub
        client_id = session_id(spec.name)
        session = hub.sessions.get(client_id)
        if session is not None and session.space.name != spec.tenant:
            life = self.broker.lifecycle
            if life is not None:  # moved to another tenant: its queue stays behind
                await life.endings.remove_session(session)
            session = None
        if session is None:
            session = Session(hub, client_id, 5, SESSION_EXPIRY_NEVER, hub.space(spec.tenant))
            session.disconnected_at = time.time()
            hub.sessions[client_id] = session
            hub.limits.acquire_session(spec.tenant, force=True)
        router = session.space.router
        filters = spec.topic_filters
        wanted = set(filters)
        for existing in [s.topic_filter for s in router.subscriptions_of(client_id)]:
            if existing not in wanted:
                hub.drop_subscription(session, existing)
        # Retain as published: the envelope's `retain` (and a bridge's export, a table's
        # column) is the flag the publisher set, as in distributed mode, where the log keeps it.
        requests = [
            SubscriptionRequest(f, qos=1, retain_as_published=True, retain_handling=2)
            for f in filters
        ]
        hub.subscribe(session, SubscribePacket(1, requests))
        await hub.save_session(session)
        return session
