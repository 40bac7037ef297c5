"""Fanout: the deliveries of one routed message that are still to settle or to be made.

`Hub.publish` builds one only when something waits (a storage write, a retained write, a
Kafka record) or a delivery must wait its turn; the common case returns a bare
`ReasonCode` and allocates nothing. `waits()` names what must settle before `Hub.complete`
may hand the stored entries over and make the waiting deliveries; `future()` is the same
as one awaitable (no gather when there is a single one).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mqttq.model import Message, QueuedMessage

if TYPE_CHECKING:
    from mqttq.broker.sessions.session import Session

__all__ = ["Fanout"]


class Fanout:
    """The deliveries of one message: those waiting for storage and those not yet made."""

    __slots__ = (
        "answer_only",
        "count",
        "enqueue",
        "immediate",
        "message",
        "produced",
        "rejected",
        "retained_write",
        "stored",
    )

    def __init__(self) -> None:
        self.count = 0
        """Sessions the message was routed to."""
        self.rejected = 0
        """Deliveries refused because a queue was full (reject_new)."""
        self.stored: list[Session] = []
        self.immediate: list[tuple[Session, Message]] = []
        self.enqueue: asyncio.Future[list[QueuedMessage | None]] | None = None
        self.message: Message | None = None
        """The message whose entries `enqueue` stores (what a full queue drops)."""
        self.retained_write: asyncio.Future[None] | None = None
        self.produced: list[asyncio.Future[Any]] | None = None
        """Records appended to APPLICATION clients' Kafka topics (acks=all), or handed to
        other nodes, or to integrations' logs."""
        self.answer_only = False
        """Nothing waits but the publisher's answer: the deliveries were made (a message
        whose one wait is an integration log's write; shared, never changed after)."""

    def waited(self) -> asyncio.Future[Any]:
        """The one future an `answer_only` Fanout waits for."""
        produced = self.produced
        assert produced is not None
        return produced[0]

    def waits(self) -> list[asyncio.Future[Any]]:
        """Every future that must settle before `Hub.complete` (none: complete at once)."""
        waits: list[asyncio.Future[Any]] = []
        if self.enqueue is not None:
            waits.append(self.enqueue)
        if self.retained_write is not None:
            waits.append(self.retained_write)
        if self.produced:
            waits.extend(self.produced)
        return waits

    def future(self) -> asyncio.Future[Any] | None:
        """What must settle before the deliveries and the publisher's ack, as one future
        (None: nothing waits)."""
        if self.produced is None:
            if self.retained_write is None:
                return self.enqueue  # the common stored case: no list, no gather
            if self.enqueue is None:
                return self.retained_write
        elif self.enqueue is None and self.retained_write is None and len(self.produced) == 1:
            return self.produced[0]  # one append (an integration's log): no gather
        return asyncio.gather(*self.waits(), return_exceptions=True)
