"""Hub: sessions, routing, delivery and persistence of application messages.

One PUBLISH is routed once; each delivery goes either straight to an online session
(QoS 0, non-persistent sessions) or, for a persistent session, into storage first, and the
publisher's PUBACK / PUBREC waits for that write (the crash-safety path: nothing is
acknowledged before it is durable). The stored deliveries of every PUBLISH handled in one
event-loop iteration share one `enqueue` call (pending.EnqueueBatcher), so publishers
share commits instead of queueing behind each other's; each publisher's own client
orders its completions (pending.OrderedSteps). With the publish inbox (broker/delivery/inbox.py,
embedded SQLite), a message for persistent sessions is made durable as one row before
its PUBACK instead, and routed here after.

The hub extends what its sessions and its intake need of it (`SessionHost`, `IntakeHost`)
and names only what it needs of the rest: of the cluster, `ClusterRoutes`
(broker/delivery/cluster_routes.py); of its connections, nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from mqttq.auth.model import ClientType
from mqttq.broker.delivery.encoded import EncodedPublishes
from mqttq.broker.delivery.fanout import Fanout
from mqttq.broker.delivery.inbox import PublishInbox
from mqttq.broker.delivery.intake import DirectIntake, InboxIntake, Intake, IntakeHost, LogIntake
from mqttq.broker.delivery.pending import (
    BackgroundTasks,
    EnqueueBatcher,
    OrderedSteps,
    RemoveBatcher,
)
from mqttq.broker.delivery.stats import BrokerStats
from mqttq.broker.delivery.tenants import TenantSpace
from mqttq.broker.events import ClientEvents
from mqttq.broker.sessions.session import Session
from mqttq.codec.packets import PublishPacket, SubscribePacket, UnsubscribePacket
from mqttq.config import MqttSettings
from mqttq.errors import ProtocolError
from mqttq.limits.limiter import Limits
from mqttq.model import Message, Subscription
from mqttq.reasons import ReasonCode
from mqttq.routing.topics import (
    SHARE_PREFIX,
    has_wildcard,
    parse_shared,
    validate_topic_filter,
)
from mqttq.storage.ports import (
    ChunkedQueueStore,
    InboxStore,
    MessageLog,
    SessionRecord,
    Storage,
)

if TYPE_CHECKING:
    from mqttq.broker.delivery.cluster_routes import ClusterRoutes
    from mqttq.broker.distributed.app_log import AppLog

__all__ = ["Fanout", "Hub"]  # Fanout: re-exported for the callers of `publish`

_APP: Final = ClientType.APPLICATION

logger = logging.getLogger("mqttq.broker.hub")

_GRANTED = (ReasonCode.GRANTED_QOS_0, ReasonCode.GRANTED_QOS_1, ReasonCode.GRANTED_QOS_2)


class Hub(IntakeHost):
    """Every session of one broker, and each tenant's namespace (router, retained
    messages); client ids are unique across tenants, topics only within one."""

    def __init__(self, settings: MqttSettings, storage: Storage, limits: Limits) -> None:
        self.settings = settings
        self.storage = storage
        self.limits = limits
        stats = BrokerStats()
        super().__init__(
            stats,
            BackgroundTasks(stats.storage_latency),
            EncodedPublishes(),
            settings.max_queued_messages,
            settings.queue_full_policy == "reject_new",
        )
        self.spaces: dict[str, TenantSpace] = {}
        self.sessions: dict[str, Session] = {}
        chunk = storage.enqueue_chunk if isinstance(storage, ChunkedQueueStore) else None
        inbox_store = storage if isinstance(storage, InboxStore) else None
        self._batcher = EnqueueBatcher(
            storage.enqueue,
            self.tasks,
            chunk,
            None if inbox_store is None else inbox_store.enqueue_logged,
        )
        self._removals = RemoveBatcher(storage.remove_many, self.tasks)
        self.inbox: PublishInbox | None = None
        """The publish inbox (broker/delivery/inbox.py), with a store that has one; not under
        reject_new, whose 0x97 answer needs the fan-out before the PUBACK."""
        if inbox_store is not None and not self.reject_when_full:
            self.inbox = PublishInbox(self, inbox_store)
        self._queue_qos0 = settings.queue_qos0
        self._online = self.is_online  # one bound method, not one per PUBLISH
        self.app_log: AppLog | None = None
        """APPLICATION clients' Kafka topics (with `storage.log = "kafka"`), set by the
        broker before it starts."""
        self.log: MessageLog | None = None
        """The message log (distributed mode): PUBLISHes go there first, and are routed
        when read back (broker/distributed/log_router.py). None: routed at once (embedded)."""
        self._log_failing = False
        self.cluster: ClusterRoutes | None = None
        """The other nodes (`attach_cluster`); None on a broker of its own."""
        self.intake: Intake = DirectIntake(self)
        """Where every accepted PUBLISH goes (`choose_intake`)."""
        self.events = ClientEvents(self)
        """Client events for integrations (broker/events.py): off until one asks."""
        self.appenders: dict[str, Callable[[Message], asyncio.Future[Any]]] = {}
        """Integrations' logs (broker/integrations.py) by their session's client id: a
        delivery to one is appended there, and its publisher's answer waits for the write
        as for a stored entry."""
        self._answer_fan: Fanout | None = None
        """The Fanout shared by the messages of one loop iteration whose only wait is one
        log append (`_answered_after`)."""
        self.choose_intake()

    def choose_intake(self) -> None:
        """Pick the one intake every PUBLISH takes from now on: the message log when there
        is one, else the publish inbox when there is one, else direct routing. Called at
        construction, when a cluster is attached, and by `Broker.start` once the log and
        the inbox are settled; never per PUBLISH."""
        if self.log is not None:
            self.intake = LogIntake(self)
        elif self.inbox is not None:
            self.intake = InboxIntake(self, self.inbox)
        else:
            self.intake = DirectIntake(self)

    def attach_cluster(self, cluster: ClusterRoutes) -> None:
        """Route through the cluster from now on: subscribers without a session here are
        remote (`ClusterNode.deliver`), retained messages and session records are shared,
        and a `$share` member connected to another node counts as online."""
        self.cluster = cluster
        self.inbox = None  # remote deliveries have no place in the inbox's one commit
        self.choose_intake()
        local = self.is_online
        connected = cluster.is_connected
        self._online = lambda client_id: local(client_id) or connected(client_id)

    def enqueue_stored(self, items: list[tuple[str, Message]]) -> asyncio.Future[list[Any]]:
        """Queue (client id, message) pairs in storage with this event-loop iteration's
        other writes; the future gives the entries (None: refused, queue full)."""
        return self._batcher.enqueue(items)

    def is_online(self, client_id: str) -> bool:
        session = self.sessions.get(client_id)
        return session is not None and session.client is not None

    def space(self, tenant: str) -> TenantSpace:
        """The namespace of `tenant`, created on its first use."""
        space = self.spaces.get(tenant)
        if space is None:
            limits = self.limits
            space = self.spaces[tenant] = TenantSpace(
                tenant,
                lambda name, force: limits.acquire_topic(name, force=force),
                limits.release_topic,
            )
        return space

    # ------------------------------------------------------------------ publish

    def message_from(self, packet: PublishPacket, publisher_id: str) -> Message:
        """The Message a validated inbound PUBLISH carries (topic already alias-resolved)."""
        now = self.clock()
        expiry = packet.properties.message_expiry_interval
        self.stats.messages_in[packet.qos] += 1
        return Message(
            packet.topic,
            packet.payload,
            packet.qos,
            packet.retain,
            packet.properties,
            now,
            None if expiry is None else now + expiry,
            publisher_id,
        )

    def publish(
        self, space: TenantSpace, message: Message, deliver_now: bool, logged: int | None = None
    ) -> Fanout | ReasonCode:
        """Route `message` once within the publisher's tenant and start its storage writes
        (`logged`: its inbox row, deleted by the commit of its entries).

        With `deliver_now`, deliveries that wait for nothing are made at once, and when
        nothing waits at all the publisher's reason code is returned (the common case,
        with no Fanout built). Otherwise a Fanout: the caller runs `complete` once its
        `future()` settled, which hands over the stored entries, makes the remaining
        deliveries in order and gives the reason code. A retained message on a topic the
        tenant's topic quota has no room for is refused whole: QUOTA_EXCEEDED.
        """
        fan: Fanout | None = None
        if message.retain:
            fan = Fanout()
            if not self._retain(space, message, fan):
                self.stats.dropped[message.qos] += 1
                return ReasonCode.QUOTA_EXCEEDED
        deliveries = space.router.route(message, self._online)
        if not deliveries:
            return ReasonCode.NO_MATCHING_SUBSCRIBERS if fan is None else fan
        sessions = self.sessions
        queue_qos0 = self._queue_qos0
        mqos = message.qos
        mretain = message.retain
        app_log = self.app_log
        cluster = self.cluster
        items: list[tuple[str, Message]] | None = None
        appenders = self.appenders or None
        appended: asyncio.Future[Any] | None = None
        count = rejected = 0
        for delivery in deliveries:
            session = sessions.get(delivery.client_id)
            if session is None or session.ended:
                if cluster is not None:
                    remote = cluster.deliver(space.name, delivery, message)
                    if remote is not None:
                        count += 1
                        if fan is None:
                            fan = Fanout()
                        if fan.produced is None:
                            fan.produced = []
                        fan.produced.append(remote)
                continue
            count += 1
            qos = delivery.qos
            sids = delivery.subscription_identifiers
            if qos == mqos and delivery.retain == mretain and not sids:
                out = message
            else:
                out = message.for_subscriber(qos, delivery.retain, sids)
            if appenders is not None and (append := appenders.get(session.client_id)):
                written = append(out)  # an integration's log
                if appended is None:
                    appended = written
                elif written is not appended:  # a second log: their futures differ
                    fan = _joined(fan, written)
                continue
            if session.expiry_interval and app_log is not None and session.client_type == _APP:
                # A persistent APPLICATION session: every delivery goes to its Kafka topic.
                if fan is None:
                    fan = Fanout()
                if fan.produced is None:
                    fan.produced = []
                fan.produced.append(
                    app_log.produce(space.name, session.client_id, out, delivery.share)
                )
                continue
            if session.expiry_interval and (
                qos or ((queue_qos0 or session.feed is not None) and session.client is None)
            ):
                if fan is None:
                    fan = Fanout()
                if items is None:
                    items = []
                items.append((session.client_id, out))
                fan.stored.append(session)
            elif deliver_now:
                if not session.deliver_now(out):
                    rejected += 1
                    self._queue_full(session, out)
            else:
                if fan is None:
                    fan = Fanout()
                fan.immediate.append((session, out))
        if appended is not None:
            if fan is None:  # delivered (or refused) already: only the answer waits
                return self._answered_after(appended)
            fan = _joined(fan, appended)
        if fan is None:
            return _reason(count, rejected)
        fan.count = count
        fan.rejected = rejected
        if items:
            fan.enqueue = self._batcher.enqueue(items, logged)
            fan.message = message
        return fan

    def _answered_after(self, written: asyncio.Future[Any]) -> Fanout:
        """The Fanout of a message whose deliveries were made and whose answer waits only
        for `written` (an integration log's write of this loop iteration): one shared by
        every such message of the iteration, as `complete` only reads it (`count`: how many
        took it). Its reason is success: the append counts as a delivery no queue refuses."""
        fan = self._answer_fan
        if fan is None or fan.produced is None or fan.produced[0] is not written:
            fan = self._answer_fan = Fanout()
            fan.produced = [written]
            fan.answer_only = True
            written.add_done_callback(partial(self._answered, fan))
        fan.count += 1
        return fan

    def _answered(self, fan: Fanout, written: asyncio.Future[Any]) -> None:
        """A failed log write fails every message that waited for it (`complete` counts
        the others' failures)."""
        if written.cancelled() or written.exception() is not None:
            self.stats.storage_errors += fan.count

    def _retain(self, space: TenantSpace, message: Message, fan: Fanout) -> bool:
        """Set, replace or (empty payload) clear the topic's retained message
        [MQTT-3.3.1-5] [MQTT-3.3.1-6] [MQTT-3.3.1-7]; False when a new retained topic
        finds the topic count limit full (nothing changed)."""
        topic = message.topic
        kept = message if message.payload else None
        had = space.retained.get(topic) is not None
        if kept is not None and not had:
            refused = space.add_topic_ref(topic)
            if refused is not None:
                return False
        elif kept is None and had:
            space.drop_topic_ref(topic)
        space.retained.set(topic, kept)
        fan.retained_write = self._store_retained(space.name, topic, kept)
        return True

    def _store_retained(
        self, tenant: str, topic: str, message: Message | None
    ) -> asyncio.Future[Any]:
        """Store a retained message (None: clear it): for every node in a cluster, else
        in storage."""
        if self.cluster is not None:
            future = self.cluster.set_retained(tenant, topic, message)
            self.tasks.track(future, "set_retained")
            return future
        return self.tasks.spawn(self.storage.set_retained(tenant, topic, message), "set_retained")

    def delete_retained(self, tenant: str, topic: str) -> asyncio.Future[Any] | None:
        """Delete `topic`'s retained message on an administrator's request, as an empty
        retained PUBLISH clears it [MQTT-3.3.1-6]: from memory, giving back the topic it
        held, and from storage, or from every node of a cluster. The future settles once
        stored; None when the topic held no retained message."""
        space = self.spaces.get(tenant)
        if space is None or not space.drop_retained(topic):
            return None
        return self._store_retained(tenant, topic, None)

    def purge_expired_retained(self, now: float) -> int:
        """Delete the retained messages expired at `now` [MQTT-3.3.2-5] in every tenant,
        from memory and from storage, so that their topics count no more against the
        topic limits; how many."""
        purged = 0
        for space in self.spaces.values():
            for topic in space.purge_expired_retained(now):
                self._store_retained(space.name, topic, None)
                purged += 1
        return purged

    def complete(self, fan: Fanout) -> ReasonCode:
        """Hand the committed entries to their sessions, make the waiting deliveries, and
        return the publisher's reason code: 0x80 on a storage failure (never a silent
        success), 0x97 when every delivery was refused by a full queue, 0x10 when nothing
        matched."""
        rejected = fan.rejected
        enqueue = fan.enqueue
        for produced in fan.produced or ():
            if produced.cancelled() or produced.exception() is not None:
                if not fan.answer_only:  # counted once for all who shared it (`_answered`)
                    self.stats.storage_errors += 1
                return ReasonCode.UNSPECIFIED_ERROR
        if enqueue is not None:
            if enqueue.cancelled() or enqueue.exception() is not None:
                self.stats.storage_errors += 1
                return ReasonCode.UNSPECIFIED_ERROR
            for session, entry in zip(fan.stored, enqueue.result(), strict=True):
                if entry is None:
                    rejected += 1
                    self._queue_full(session, fan.message)
                else:
                    session.deliver_stored(entry)
        for session, message in fan.immediate:
            if not session.deliver_now(message):
                rejected += 1
                self._queue_full(session, message)
        write = fan.retained_write
        if write is not None and (write.cancelled() or write.exception() is not None):
            self.stats.storage_errors += 1
            return ReasonCode.UNSPECIFIED_ERROR
        return _reason(fan.count, rejected)

    def _queue_full(self, session: Session, message: Message | None = None) -> None:
        """A delivery refused by a full queue under reject_new: a refusal of the tenant."""
        self.limits.count_refusal(session.space.name, "queue_full")
        if message is not None and self.events.kinds:
            self.events.emit(
                "message_dropped",
                session.space.name,
                session.client_id,
                reason="queue_full",
                topic=message.topic,
                qos=message.qos,
            )

    def publish_detached(self, tenant: str, message: Message) -> asyncio.Future[Any] | None:
        """Publish with no client to acknowledge (wills, integrations): deliveries complete
        on their own (through the message log when there is one). Returns what to await
        for the message to be accepted durably (None: it already is)."""
        self.stats.messages_in[message.qos] += 1
        if self.log is not None:
            return self.append_to_log(tenant, message)
        return self.settle(self.publish(self.space(tenant), message, deliver_now=True))

    def settle(
        self,
        fan: Fanout | ReasonCode,
        then: Callable[[ReasonCode], None] | None = None,
        steps: OrderedSteps | None = None,
    ) -> asyncio.Future[Any] | None:
        """The one place a publish is completed: once what `fan` waits for settled,
        `complete` it and give its reason code to `then` (a bare reason code, from a
        publish with nothing to wait for, goes to `then` as it is). With `steps`, that
        happens in the order of the client's other steps; without, at once when nothing
        waits. Returns what it waits for (None: nothing)."""
        if not isinstance(fan, Fanout):
            if then is not None:
                if steps is None:
                    then(fan)
                else:
                    steps.add(None, partial(_pass_on, then, fan))
            return None
        wait = fan.future()
        if wait is None and steps is None:
            reason = self.complete(fan)
            if then is not None:
                then(reason)
            return None
        done = partial(self._settled, fan, then)
        if steps is not None:
            steps.add(wait, done, not fan.answer_only)
        else:
            assert wait is not None
            wait.add_done_callback(done)
        return wait

    def _settled(
        self,
        fan: Fanout,
        then: Callable[[ReasonCode], None] | None,
        _future: asyncio.Future[Any] | None,
    ) -> None:
        reason = self.complete(fan)
        if then is not None:
            then(reason)

    # ------------------------------------------------------------------ message log

    def append_to_log(self, tenant: str, message: Message) -> asyncio.Future[Any]:
        """Append `message` of `tenant` to the message log (which must be set); the
        future settles once the log confirmed it or failed. The time to the confirmation
        is observed as storage latency `log_produce`; failures are counted."""
        assert self.log is not None
        future = self.log.append(tenant, message)
        future.add_done_callback(partial(self._appended, future.get_loop().time()))
        return future

    def _appended(self, started: float, future: asyncio.Future[Any]) -> None:
        stats = self.stats
        error = "cancelled" if future.cancelled() else future.exception()
        if error is not None:
            stats.log_produce_failures += 1
            if not self._log_failing:  # once per outage, not once per PUBLISH
                self._log_failing = True
                logger.warning("the message log refuses PUBLISHes: %s", error)
            return
        if self._log_failing:
            self._log_failing = False
            logger.warning("the message log accepts PUBLISHes again")
        stats.storage_latency.observe("log_produce", future.get_loop().time() - started)

    def route_logged(self, tenant: str, message: Message) -> Fanout | ReasonCode:
        """Route a message read back from the log, delivering at once what waits for
        nothing; a Fanout goes to `complete` once its `waits()` settled."""
        return self.publish(self.space(tenant), message, deliver_now=True)

    def deliver_retained(
        self, session: Session, subscription: Subscription, messages: Iterable[Message]
    ) -> Fanout:
        """Queue the retained messages a new subscription receives [MQTT-3.3.1-9], with
        RETAIN=1, QoS min(message, granted) [MQTT-3.8.4-8] and the subscription id."""
        fan = Fanout()
        granted = subscription.qos
        sid = subscription.subscription_identifier
        sids = () if sid is None else (sid,)
        items: list[tuple[str, Message]] = []
        for message in messages:
            qos = min(message.qos, granted)
            out = message.for_subscriber(qos, True, sids)
            fan.count += 1
            app_log = self.app_log
            if session.expiry_interval and app_log is not None and session.client_type == _APP:
                if fan.produced is None:
                    fan.produced = []
                fan.produced.append(
                    app_log.produce(session.space.name, session.client_id, out, None)
                )
            elif session.expiry_interval and qos:
                items.append((session.client_id, out))
                fan.stored.append(session)
            else:
                fan.immediate.append((session, out))
        if items:
            fan.enqueue = self._batcher.enqueue(items)
        return fan

    # ------------------------------------------------------------------ subscriptions

    def subscribe(
        self,
        session: Session,
        packet: SubscribePacket,
        allowed: Callable[[str], bool] | None = None,
    ) -> tuple[list[ReasonCode], list[tuple[Subscription, list[Message]]], list[str]]:
        """Apply a SUBSCRIBE [MQTT-3.8.4]: the SUBACK codes, the retained messages to send
        per new subscription, and the filters granted (to undo if saving fails).

        A filter the client's ACL refuses (`allowed` is false) gets NOT_AUTHORIZED (0x87;
        0x80 in a 3.x SUBACK); one that
        would be a new topic past the tenant's or node's topic limit gets QUOTA_EXCEEDED.

        Raises ProtocolError for No Local on a shared subscription [MQTT-3.8.3-4] and for a
        Subscription Identifier when they are not available.
        """
        settings = self.settings
        sids = packet.properties.subscription_identifiers
        sid = sids[0] if sids else None
        if sid is not None and not settings.subscription_identifier_available:
            raise ProtocolError(
                ReasonCode.SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED,
                "subscription identifiers are not available",
            )
        for request in packet.subscriptions:
            # Checked before anything is applied: the packet is refused as a whole.
            if request.no_local and request.topic_filter.startswith(SHARE_PREFIX):
                raise ProtocolError(
                    ReasonCode.PROTOCOL_ERROR, "No Local on a shared subscription [MQTT-3.8.3-4]"
                )
        codes: list[ReasonCode] = []
        retained: list[tuple[Subscription, list[Message]]] = []
        granted: list[str] = []
        now = self.clock()
        space = session.space
        router = space.router
        client_id = session.client_id
        for request in packet.subscriptions:
            topic_filter = request.topic_filter
            try:
                validate_topic_filter(topic_filter)
            except ProtocolError:
                codes.append(ReasonCode.TOPIC_FILTER_INVALID)
                continue
            share_name, inner = parse_shared(topic_filter)
            if share_name is not None and not settings.shared_subscription_available:
                codes.append(ReasonCode.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED)
                continue
            if not settings.wildcard_subscription_available and has_wildcard(inner):
                codes.append(ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED)
                continue
            if allowed is not None and not allowed(topic_filter):
                self.limits.count_refusal(space.name, "acl_subscribe")
                codes.append(ReasonCode.NOT_AUTHORIZED)
                continue
            existing = router.has_subscription(client_id, topic_filter)
            if not existing:
                refused = space.add_topic_ref(inner)
                if refused is not None:
                    codes.append(ReasonCode.QUOTA_EXCEEDED)
                    continue
            qos = min(request.qos, settings.maximum_qos)
            subscription = Subscription(
                topic_filter,
                qos,
                request.no_local,
                request.retain_as_published,
                request.retain_handling,
                sid,
            )
            is_new = router.subscribe(client_id, subscription)
            if (
                qos
                and session.expiry_interval
                and self.inbox is not None
                and client_id not in self.appenders  # an integration: its log, not storage
            ):
                self.inbox.expect_storage(space.name)
            codes.append(_GRANTED[qos])
            granted.append(topic_filter)
            handling = request.retain_handling
            # No retained messages for shared subscriptions (MQTT 5.0 section 4.8.2).
            if share_name is None and (handling == 0 or (handling == 1 and is_new)):
                messages = space.retained.match(inner, now)
                if messages:
                    retained.append((subscription, messages))
        return codes, retained, granted

    def unsubscribe(self, session: Session, packet: UnsubscribePacket) -> list[ReasonCode]:
        """Apply an UNSUBSCRIBE: 0x00 per removed filter, 0x11 where none existed."""
        return [
            ReasonCode.SUCCESS
            if self.drop_subscription(session, topic_filter)
            else ReasonCode.NO_SUBSCRIPTION_EXISTED
            for topic_filter in packet.topic_filters
        ]

    def drop_subscription(self, session: Session, topic_filter: str) -> bool:
        """Remove one subscription of `session` and its topic reference; False if none."""
        space = session.space
        if not space.router.unsubscribe(session.client_id, topic_filter):
            return False
        space.drop_topic_ref(space.topic_of(topic_filter))
        return True

    # ------------------------------------------------------------------ persistence

    def save_session(self, session: Session, *, shared: bool = True) -> asyncio.Future[Any]:
        """Store the session record with its current subscriptions (a persistent one);
        in a cluster, with `shared`, also tell every node where the session lives and
        what it subscribes to (any session)."""
        cluster = self.cluster
        if cluster is None or not shared:
            return self._store_session(session)
        published = cluster.publish_session(session)
        self.tasks.track(published, "cluster_session", session.client_id)
        if not session.persistent:
            return published
        return asyncio.gather(self._store_session(session), published)

    def _store_session(self, session: Session) -> asyncio.Future[None]:
        record = SessionRecord(
            session.client_id,
            session.protocol_level,
            session.expiry_interval,
            session.space.router.subscriptions_of(session.client_id),
            session.disconnected_at,
            session.client_type,
            session.space.name,
            session.will,
            sorted(session.awaiting_pubrel) if session.awaiting_pubrel else [],
        )
        return self.tasks.spawn(
            self.storage.save_session(record), "save_session", session.client_id
        )

    def forget(self, client_id: str, packet_id: int) -> None:
        """A stored entry's flow ended (PUBACK, PUBCOMP, expired, discarded)."""
        self._removals.remove(client_id, packet_id)

    def mark_pubrel(self, client_id: str, packet_id: int) -> asyncio.Future[None]:
        """PUBREC received for a stored entry; PUBREL goes out once this settles."""
        return self.tasks.spawn(
            self.storage.mark_pubrel(client_id, packet_id), "mark_pubrel", client_id
        )

    def statistics(self) -> dict[str, int]:
        """Counters for monitoring (see `Broker.statistics`)."""
        stats = self.stats
        online = sum(1 for session in self.sessions.values() if session.client is not None)
        counters = {
            "connections": online,
            "connections_total": stats.connections_total,
            "sessions": len(self.sessions),
            "sessions_persistent": sum(1 for s in self.sessions.values() if s.persistent),
            "subscriptions": sum(
                len(s.space.router.subscriptions_of(c)) for c, s in self.sessions.items()
            ),
            "retained": sum(len(space.retained) for space in self.spaces.values()),
            "protocol_errors": stats.protocol_errors,
            "storage_errors": stats.storage_errors,
            "storage_pending": len(self.tasks),
        }
        if self.app_log is not None:
            counters.update(self.app_log.statistics())
        for qos in range(3):
            counters[f"messages_in_qos{qos}"] = stats.messages_in[qos]
            counters[f"messages_out_qos{qos}"] = stats.messages_out[qos]
            counters[f"messages_dropped_qos{qos}"] = stats.dropped[qos]
        if self.inbox is not None:
            counters.update(self.inbox.statistics())
        if self.log is not None:
            counters["log_produce_failures"] = stats.log_produce_failures
            counters.update(self.log.statistics())
        if self.cluster is not None:
            counters.update(self.cluster.statistics())
        return counters


def _pass_on(
    then: Callable[[ReasonCode], None], reason: ReasonCode, _future: asyncio.Future[Any] | None
) -> None:
    then(reason)


def _joined(fan: Fanout | None, written: asyncio.Future[Any]) -> Fanout:
    """`fan` (made when None) also waits for `written`: an append to an integration's log,
    shared by the messages appended in one loop iteration."""
    if fan is None:
        fan = Fanout()
    produced = fan.produced
    if produced is None:
        fan.produced = [written]
    elif written not in produced:
        produced.append(written)
    return fan


def _reason(count: int, rejected: int) -> ReasonCode:
    """The publisher's reason code once every delivery was attempted: 0x10 when nothing
    matched, 0x97 when every delivery was refused by a full queue [MQTT-3.4.2.1]."""
    if not count:
        return ReasonCode.NO_MATCHING_SUBSCRIBERS
    if rejected and rejected >= count:
        return ReasonCode.QUOTA_EXCEEDED
    return ReasonCode.SUCCESS
