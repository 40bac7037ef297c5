"""Where an accepted PUBLISH goes: one intake per broker, chosen once at start.

`dispatch.on_publish` checks the ACL and the rates, then hands the message to
`hub.intake.accept(...)`; the intake routes (or stores) it and answers the publisher's
QoS 1/2 through the client's `steps`, in arrival order. Three intakes, picked by
`Hub.choose_intake` (the protocol never asks which mode it is in; uvicorn's `Config.load`
picks its protocol class the same way):

- `DirectIntake`: route at once; the PUBACK / PUBREC waits for the storage writes the
  routing needs (`Hub.settle`).
- `InboxIntake` (embedded SQLite): a message for persistent sessions is acknowledged once
  it is durable as one inbox row and fanned out after (broker/delivery/inbox.py); direct
  while the inbox is not engaged, and it learns from each direct routing.
- `LogIntake` (`storage.log = "kafka"`): appended to the message log, acknowledged once the
  log has it, routed when read back (broker/distributed/log_router.py).

`Intake` is a base class rather than a `typing.Protocol` on purpose: under mypyc a call
through a compiled base class is a native virtual call, a call through a Protocol a
Python-level one, and `accept` runs for every PUBLISH.

An intake names what it needs, not who provides it: the client that published is a
`Publisher` (broker/delivery/publisher.py, a `Client`), the hub an `IntakeHost` (below, the
`Hub`'s base class: route, complete a fan-out, append to the log). Compiled base classes
too, for the same reason; so the intake sits below the hub that holds it and the
connection code that calls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from mqttq.broker.delivery.fanout import Fanout
from mqttq.broker.delivery.pending import OrderedSteps, StepRun
from mqttq.broker.delivery.publisher import Publisher
from mqttq.broker.delivery.tenants import TenantSpace
from mqttq.broker.sessions.host import SessionHost
from mqttq.codec.packets import PubackPacket, PubrecPacket
from mqttq.codec.properties import Properties
from mqttq.model import Message
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.broker.delivery.inbox import PublishInbox

__all__ = [
    "DirectIntake",
    "InboxIntake",
    "Intake",
    "IntakeHost",
    "LogAnswers",
    "LogIntake",
    "ack",
]

# The answers to PUBLISH were written by dispatch and are logged under its name.
logger = logging.getLogger("mqttq.broker.dispatch")

_ACK_REASON_STRINGS: Final = {
    ReasonCode.UNSPECIFIED_ERROR: "the message could not be stored",
    ReasonCode.QUOTA_EXCEEDED: "quota exceeded",
    ReasonCode.NOT_AUTHORIZED: "not authorized to publish to this topic",
}
"""Reason Strings on error PUBACK / PUBREC (dropped when the client asked for none)."""


class IntakeHost(SessionHost):
    """What an intake needs of the hub (`Hub`): route a message in its publisher's tenant
    (`publish`), complete a fan-out in the publisher's order (`settle`), append to the
    message log (`append_to_log`). It extends `SessionHost` because `Hub` does and mypyc
    allows a native class one base only."""

    def publish(
        self, space: TenantSpace, message: Message, deliver_now: bool, logged: int | None = None
    ) -> Fanout | ReasonCode:
        """Route `message` once within `space` (see `Hub.publish`)."""
        raise NotImplementedError

    def settle(
        self,
        fan: Fanout | ReasonCode,
        then: Callable[[ReasonCode], None] | None = None,
        steps: OrderedSteps | None = None,
    ) -> asyncio.Future[Any] | None:
        """Complete `fan` once what it waits for settled (see `Hub.settle`)."""
        raise NotImplementedError

    def append_to_log(self, tenant: str, message: Message) -> asyncio.Future[Any]:
        """Append `message` to the message log (see `Hub.append_to_log`)."""
        raise NotImplementedError


class Intake:
    """Takes every accepted PUBLISH of one broker (see the module docstring)."""

    def accept(self, client: Publisher, message: Message, qos: int, packet_id: int | None) -> None:
        """Route or store `message` (built from the client's PUBLISH, its topic alias
        resolved) and answer QoS 1/2 with `packet_id` through `client.steps`."""
        raise NotImplementedError


class DirectIntake(Intake):
    """Route at once; answer once the stored deliveries are durable."""

    def __init__(self, hub: IntakeHost) -> None:
        self.hub = hub

    def accept(self, client: Publisher, message: Message, qos: int, packet_id: int | None) -> None:
        session = client.session
        assert session is not None
        self.answer(
            client,
            qos,
            packet_id,
            self.hub.publish(session.space, message, deliver_now=not client.steps.holding()),
        )

    def answer(
        self, client: Publisher, qos: int, packet_id: int | None, fan: Fanout | ReasonCode
    ) -> None:
        """Answer a routed PUBLISH: at once when nothing waits and no earlier answer does
        (no allocation on that path), else in order once `fan` settled."""
        steps = client.steps
        if not isinstance(fan, Fanout):  # delivered already: `fan` is the reason code
            if not qos:
                return
            if steps:  # the answer still waits for the earlier ones
                steps.add(None, partial(_acknowledge, client, qos, packet_id, fan))
            else:
                ack(client, qos, packet_id, fan)
            return
        if fan.answer_only:
            # Delivered already; only the answer waits, for an integration log's write (the
            # fan-out has nothing to complete): in the run of this client's answers that
            # wait for the same write, which reads its outcome once.
            if qos:
                assert packet_id is not None
                written = fan.waited()
                item = packet_id << 2 | qos
                if not steps.add_to_run(written, item):
                    run = LogAnswers(client)
                    run.items.append(item)
                    steps.add_run(written, run)
                client.pause_reading_if_behind()
            return
        # Through the steps even when they are empty: a stored delivery's answer waits, and
        # the answers after it wait for it (they see `steps` non-empty).
        self.hub.settle(fan, partial(ack, client, qos, packet_id) if qos else None, steps)
        if steps:
            client.pause_reading_if_behind()


class InboxIntake(DirectIntake):
    """The publish inbox when it takes the message; direct routing otherwise."""

    def __init__(self, hub: IntakeHost, inbox: PublishInbox) -> None:
        super().__init__(hub)
        self.inbox = inbox

    def accept(self, client: Publisher, message: Message, qos: int, packet_id: int | None) -> None:
        session = client.session
        assert session is not None
        space = session.space
        inbox = self.inbox
        steps = client.steps
        if inbox.engaged and inbox.takes(space.name, message):
            held = inbox.publish(space, message)
            if held is not None:
                steps.add(held, partial(accepted, client, qos, packet_id))
                client.pause_reading_if_behind()
            return
        fan = self.hub.publish(space, message, deliver_now=not steps.holding())
        stored = isinstance(fan, Fanout) and fan.enqueue is not None
        if stored or inbox.engaged:
            inbox.learn(space.name, message, stored)
        self.answer(client, qos, packet_id, fan)


class LogIntake(Intake):
    """Append to the message log; answer once the log confirmed it. The message is
    routed when read back (`LogRouter`)."""

    def __init__(self, hub: IntakeHost) -> None:
        self.hub = hub

    def accept(self, client: Publisher, message: Message, qos: int, packet_id: int | None) -> None:
        session = client.session
        assert session is not None
        future = self.hub.append_to_log(session.space.name, message)
        if not qos:
            return
        client.steps.add(future, partial(accepted, client, qos, packet_id))
        client.pause_reading_if_behind()


class LogAnswers(StepRun):
    """The PUBACKs / PUBRECs of one client's PUBLISHes delivered already whose answer
    waits for one write of an integration's log (items: packet id << 2 | QoS): answered
    together, in order, with one look at the write's outcome; each as `accepted` would."""

    __slots__ = ("client",)

    def __init__(self, client: Publisher) -> None:
        super().__init__()
        self.client = client

    def complete(self, future: asyncio.Future[Any]) -> None:
        client = self.client
        if future.cancelled() or future.exception() is not None:
            reason = ReasonCode.UNSPECIFIED_ERROR
        else:
            result = future.result()
            reason = result if isinstance(result, ReasonCode) else ReasonCode.SUCCESS
        if reason in _ACK_REASON_STRINGS:
            for item in self.items:
                ack(client, item & 3, item >> 2, reason)
            return
        for item in self.items:  # `ack`'s success path, one flush for the run
            client.conn.send_publish_ack(item & 3, item >> 2, reason)
        client.flush_soon()


def accepted(
    client: Publisher, qos: int, packet_id: int | None, future: asyncio.Future[Any] | None
) -> None:
    """The answer to a PUBLISH appended to the message log or taken by the publish inbox:
    success once the log or the inbox row has it, 0x80 (or a disconnect at 3.x) when that
    failed, or the reason code of a held retained message's routing."""
    assert future is not None
    if future.cancelled() or future.exception() is not None:
        ack(client, qos, packet_id, ReasonCode.UNSPECIFIED_ERROR)
        return
    result = future.result()
    ack(client, qos, packet_id, result if isinstance(result, ReasonCode) else ReasonCode.SUCCESS)


def _acknowledge(
    client: Publisher,
    qos: int,
    packet_id: int | None,
    reason: ReasonCode,
    _future: asyncio.Future[Any] | None,
) -> None:
    ack(client, qos, packet_id, reason)


def ack(client: Publisher, qos: int, packet_id: int | None, reason: ReasonCode) -> None:
    """PUBACK (QoS 1) or PUBREC (QoS 2) with `reason`. 3.x acknowledgements carry no
    reason code: a publish denied by the ACL is acknowledged and dropped (as 3.x clients
    expect), and one refused for a quota or a storage failure is not acknowledged at all:
    the connection is closed, and the client sends the message again once it reconnects."""
    if not qos:
        return
    assert packet_id is not None
    reason_string = _ACK_REASON_STRINGS.get(reason)
    if reason_string is None:  # every success: no packet object, no properties
        client.send_publish_ack(qos, packet_id, reason)
        return
    if not client.conn.is_v5 and reason != ReasonCode.NOT_AUTHORIZED:
        logger.info("client %r: %s (0x%02X), closing", client.client_id, reason_string, reason)
        client.conn.inbound.refused_unanswered(qos, packet_id)
        client.kick(reason, reason_string)
        return
    props = Properties(reason_string=reason_string)
    if qos == 1:
        client.send(PubackPacket(packet_id, reason, props))
    else:
        client.send(PubrecPacket(packet_id, reason, props))
