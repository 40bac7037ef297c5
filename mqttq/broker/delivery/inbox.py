"""The publish inbox: acknowledge a message for persistent sessions once it is durable as
one row, and fan it out after (embedded SQLite store).

Without it, a QoS 1/2 PUBLISH whose topic feeds N offline persistent sessions is
acknowledged only once its N queue entries committed; a burst of such messages keeps the
publisher waiting for the whole fan-out (routing, then thousands of entries written).
With it (`InboxStore`, schema 7), the broker:

1. writes the message as one inbox row (the rows of one loop iteration share one job and
   commit, which does not wait to share it with other jobs);
2. acknowledges the publisher once that commit returned (PUBACK / PUBREC: still nothing
   is acknowledged before it is durable);
3. then routes it, in acceptance order, and the job that queues its entries deletes the
   row in the same transaction. A row still there at the next start is routed then,
   before the listeners open (`replay`): each accepted message reaches each queue once.

Which messages: QoS 1/2, non-retained ones in a tenant where a persistent session
subscribed with QoS 1/2, except on topics whose last message queued nothing (learned from
each routing). Live traffic between connected non-persistent clients never waits for a
commit. Once messages are held, every later PUBLISH (QoS 0 and retained ones too, without
a row) is held behind them, so the order of routing stays the order of arrival. A
retained one is answered after its routing, as on the direct path (its topic may be
refused by a topic quota: 0x97).

The inbox names what it needs of the hub that routes its messages, an `InboxHost`: a
`typing.Protocol` that `Hub` satisfies (the inbox is not compiled), so that the inbox
stays below the hub and the intake that hold it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

from mqttq.model import Message
from mqttq.reasons import ReasonCode
from mqttq.storage.ports import InboxStore

if TYPE_CHECKING:
    from mqttq.broker.delivery.fanout import Fanout
    from mqttq.broker.delivery.pending import BackgroundTasks, OrderedSteps
    from mqttq.broker.delivery.tenants import TenantSpace

__all__ = ["FANOUT_BACKLOG", "InboxHost", "PublishInbox"]

logger = logging.getLogger("mqttq.broker.inbox")

DIRECT_TOPICS_LIMIT: Final = 65536
"""Topics remembered as queueing nothing, at most (forgotten all at once when full: their
next message goes through the inbox and teaches it again)."""

FANOUT_BACKLOG: Final = 20_000
"""Queue entries routed from the inbox and not committed yet, at most, before further
acknowledgements (and the routing of their messages) wait: the publishers' windows fill
and they slow to the pace of the fan-out, as on the direct path. A burst of 100 messages
to 100 sessions is 10,000."""


class _Held:
    """A message waiting for its turn to be routed."""

    __slots__ = ("index", "message", "outcome", "rows", "space")

    def __init__(
        self,
        space: TenantSpace,
        message: Message,
        rows: asyncio.Future[list[int]] | None,
        index: int,
        outcome: asyncio.Future[ReasonCode] | None,
    ) -> None:
        self.space = space
        self.message = message
        self.rows = rows
        """The inbox append holding its row (None: held without one)."""
        self.index = index
        """Its row's place in that append."""
        self.outcome = outcome
        """Settles with the publisher's reason code once routed and completed (a held
        retained message; None when the answer does not wait for the routing)."""


class InboxHost(Protocol):
    """What the inbox needs of the hub (`Hub`): route a held message (`publish`), complete
    its fan-out (`settle`), the tenant spaces, and the background work it spawns."""

    @property
    def tasks(self) -> BackgroundTasks: ...

    def space(self, tenant: str) -> TenantSpace: ...

    def publish(
        self, space: TenantSpace, message: Message, deliver_now: bool, logged: int | None = None
    ) -> Fanout | ReasonCode: ...

    def settle(
        self,
        fan: Fanout | ReasonCode,
        then: Callable[[ReasonCode], None] | None = None,
        steps: OrderedSteps | None = None,
    ) -> asyncio.Future[Any] | None: ...


class PublishInbox:
    """See the module docstring. One per Hub, made when its storage is an `InboxStore`."""

    __slots__ = (
        "_backlog",
        "_direct",
        "_done",
        "_held",
        "_hub",
        "_loop",
        "_rows",
        "_rows_future",
        "_spaces",
        "_store",
        "_waiting",
        "engaged",
    )

    def __init__(self, hub: InboxHost, store: InboxStore) -> None:
        self._hub = hub
        self._store = store
        self._held: deque[_Held] = deque()
        self._rows: list[tuple[str, Message]] = []
        """This loop iteration's rows, appended together by `_append_rows`."""
        self._rows_future: asyncio.Future[list[int]] | None = None
        self._spaces: set[str] = set()
        """Tenants where persistent sessions subscribed (or messages were queued)."""
        self._direct: set[tuple[str, str]] = set()
        """(tenant, topic) in those tenants whose last message queued nothing."""
        self._done: list[int] = []
        """Rows of messages routed with nothing queued, deleted together."""
        self._backlog = 0
        """Entries routed from the inbox whose commit is still to come (`FANOUT_BACKLOG`)."""
        self._waiting: deque[tuple[asyncio.Future[list[int]], asyncio.Future[list[int]]]]
        self._waiting = deque()
        """Committed appends whose publishers wait for the backlog to shrink."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.engaged = False
        """True once some tenant expects storage: until then no message is taken, and the
        direct path (live traffic only) need not call `takes` or `learn` at all."""

    def statistics(self) -> dict[str, int]:
        """Counters for /metrics."""
        return {"inbox_held": len(self._held), "inbox_backlog": self._backlog}

    def takes(self, tenant: str, message: Message) -> bool:
        """Whether `message` goes through the inbox (`publish`) rather than the direct path;
        callers may skip asking while `engaged` is false (then it is false too)."""
        if self._held:
            return True
        return (
            bool(message.qos)
            and not message.retain
            and tenant in self._spaces
            and (tenant, message.topic) not in self._direct
        )

    def expect_storage(self, tenant: str) -> None:
        """A persistent session subscribed in `tenant` with QoS 1/2 (or came back from
        storage): its QoS 1/2 messages go through the inbox from now on."""
        self._spaces.add(tenant)
        self.engaged = True

    def learn(self, tenant: str, message: Message, stored: bool) -> None:
        """The direct path routed `message`: `stored` when it queued entries in storage
        (callers may skip telling while nothing was stored and `engaged` is false)."""
        if message.qos and not message.retain and (stored or tenant in self._spaces):
            self._remember(tenant, message.topic, stored)

    def _remember(self, tenant: str, topic: str, stored: bool) -> None:
        key = (tenant, topic)
        if stored:
            self._spaces.add(tenant)
            self.engaged = True
            self._direct.discard(key)
        elif key not in self._direct:
            if len(self._direct) >= DIRECT_TOPICS_LIMIT:
                self._direct.clear()
            self._direct.add(key)

    def publish(self, space: TenantSpace, message: Message) -> asyncio.Future[Any] | None:
        """Hold `message` behind the messages held already. What the publisher's answer
        waits for: a QoS 1/2 non-retained message's inbox append (its result is a list:
        success), a retained QoS 1/2 message's outcome (a ReasonCode); None for QoS 0."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if message.qos and not message.retain:
            rows = self._rows_future
            if rows is None:
                rows = self._rows_future = loop.create_future()
                loop.call_soon(self._append_rows)
            self._held.append(_Held(space, message, rows, len(self._rows), None))
            self._rows.append((space.name, message))
            return rows
        outcome: asyncio.Future[ReasonCode] | None = None
        if message.qos:
            outcome = loop.create_future()
        self._held.append(_Held(space, message, None, 0, outcome))
        if len(self._held) == 1:
            loop.call_soon(self._route_ready)
        return outcome

    def _append_rows(self) -> None:
        """One inbox job for this iteration's rows; routing resumes when it settles."""
        rows, self._rows = self._rows, []
        future, self._rows_future = self._rows_future, None
        assert future is not None
        task = asyncio.ensure_future(self._store.append_inbox(rows))
        task.add_done_callback(partial(self._appended, future))
        # Added after every publisher's answer: the acknowledgements go out (and their
        # writes are flushed) before this burst's routing takes the loop.
        future.add_done_callback(self._route_soon)

    def _appended(self, future: asyncio.Future[list[int]], task: asyncio.Future[list[int]]) -> None:
        if self._waiting or self._backlog >= FANOUT_BACKLOG:
            self._waiting.append((future, task))
        else:
            _settle(future, task)

    def _release(self) -> None:
        """Answer (and route) the appends that waited, while the backlog has room."""
        waiting = self._waiting
        while waiting and self._backlog < FANOUT_BACKLOG:
            future, task = waiting.popleft()
            _settle(future, task)

    def _route_soon(self, _future: object) -> None:
        assert self._loop is not None
        self._loop.call_soon(self._route_ready)

    def _route_ready(self) -> None:
        """Route the held messages from the head whose rows are committed, in order."""
        held = self._held
        while held:
            entry = held[0]
            rows = entry.rows
            seq: int | None = None
            if rows is not None:
                if not rows.done():
                    break
                if rows.cancelled() or rows.exception() is not None:
                    held.popleft()  # not accepted: its publisher hears 0x80
                    continue
                seq = rows.result()[entry.index]
            held.popleft()
            self._route(entry.space, entry.message, seq, entry.outcome)
        self._delete_done()

    def _route(
        self,
        space: TenantSpace,
        message: Message,
        seq: int | None,
        outcome: asyncio.Future[ReasonCode] | None,
    ) -> asyncio.Future[Any] | None:
        """Route one message (its inbox row `seq` goes with the commit of its entries);
        what its completion waits for, None when it is complete."""
        fan = self._hub.publish(space, message, deliver_now=True, logged=seq)
        if isinstance(fan, ReasonCode):
            if seq is not None:
                self._remember(space.name, message.topic, False)
                self._done.append(seq)
            if outcome is not None:
                outcome.set_result(fan)
            return None
        row: int | None = None  # deleted once what the routing waits for is written
        if seq is not None:
            self._remember(space.name, message.topic, fan.enqueue is not None)
            if fan.enqueue is None and fan.produced:
                row = seq
            elif fan.enqueue is None:
                self._done.append(seq)
        backlog: int | None = None  # None: completed at once, nothing waited
        if fan.waits():
            backlog = len(fan.stored)
            self._backlog += backlog
        return self._hub.settle(
            fan, partial(self._completed, message.topic, seq, outcome, backlog, row)
        )

    def _delete_done(self) -> None:
        if self._done:
            done, self._done = self._done, []
            self._hub.tasks.spawn(self._store.inbox_done(done), "inbox_done")

    def _completed(  # noqa: PLR0917 (bound by `partial` in `_route`)
        self,
        topic: str,
        seq: int | None,
        outcome: asyncio.Future[ReasonCode] | None,
        backlog: int | None,
        row: int | None,
        reason: ReasonCode,
    ) -> None:
        """`Hub.settle` completed the routing of a held message with `reason`; `backlog`:
        the entries it added to the backlog while it waited (None: it did not wait); `row`:
        its inbox row, deleted now that what it waited for is written."""
        if row is not None and reason != ReasonCode.UNSPECIFIED_ERROR:
            self._done.append(row)
            self._delete_done()
        if backlog is not None:
            self._backlog -= backlog
            if self._waiting:
                self._release()
        if outcome is not None:
            outcome.set_result(reason)
        elif reason == ReasonCode.UNSPECIFIED_ERROR and seq is not None:
            logger.warning(
                "queueing an accepted message on %r failed; it stays in the inbox and is "
                "routed again at the next start",
                topic,
            )

    async def replay(self) -> int:
        """Route the rows a previous run left (accepted, not fanned out) and wait until
        their entries are committed, before clients connect; how many there were."""
        hub = self._hub
        rows = await self._store.load_inbox()
        waits = [
            wait
            for seq, tenant, message in rows
            if (wait := self._route(hub.space(tenant), message, seq, None)) is not None
        ]
        self._delete_done()
        if waits:
            await asyncio.wait(waits)
        if rows:
            logger.info("routed %d accepted messages left in the inbox by the last run", len(rows))
        return len(rows)


def _settle(future: asyncio.Future[list[int]], task: asyncio.Future[list[int]]) -> None:
    """Pass the append's outcome on to the future the publishers wait for."""
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif (error := task.exception()) is not None:
        logger.warning("storing accepted messages in the inbox failed: %s", error)
        future.set_exception(error)
    else:
        future.set_result(task.result())
