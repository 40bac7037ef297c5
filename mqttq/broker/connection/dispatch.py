"""What the broker does with each packet a connected client sends.

One function per packet type, called by `Client` in arrival order; each names the client
as a `ClientLink` (broker/connection/link.py), what the handlers need of it. Answers that depend on
storage (PUBACK/PUBREC after an enqueue, SUBACK after a session save, PUBREL after
mark_pubrel) go through the client's `steps`, which keep them in arrival order. CONNECT is
answered asynchronously by the session lifecycle (the client reads nothing more until it
is) and PINGREQ / PUBREL by MqttConnection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from mqttq.broker.connection.enhanced import on_auth
from mqttq.broker.connection.link import ClientLink
from mqttq.broker.delivery.intake import ack
from mqttq.codec.packets import (
    AuthPacket,
    ConnectPacket,
    DisconnectPacket,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    SubackPacket,
    SubscribePacket,
    UnsubackPacket,
    UnsubscribePacket,
)
from mqttq.limits.limiter import Refused
from mqttq.reasons import ReasonCode
from mqttq.routing.topics import validate_topic_name

if TYPE_CHECKING:
    from mqttq.broker.sessions.session import Session

__all__ = ["HANDLERS"]

logger = logging.getLogger("mqttq.broker.dispatch")


def _session(client: ClientLink) -> Session:
    session = client.session
    assert session is not None  # packets are read only once CONNECT was accepted
    return session


def on_connect(client: ClientLink, packet: ConnectPacket) -> None:
    client.start_connect(packet)


def on_publish(client: ClientLink, packet: PublishPacket) -> None:
    """Check the publish ACL and the publish rate (node, then tenant: a bounded wait for a
    token, then 0x97), then route the message; answer QoS 1/2 once its stored deliveries
    are durable."""
    validate_topic_name(packet.topic)  # [MQTT-3.3.2-2]
    identity = client.identity
    space = client.space
    assert identity is not None and space is not None  # set before CONNACK
    limits = client.hub.limits
    # `$SYS/...` is the broker's own: no client writes it (retained values included).
    if not identity.may_publish(packet.topic) or packet.topic.startswith("$SYS/"):
        limits.count_refusal(space.name, "acl_publish")
        _refuse_publish(client, packet, ReasonCode.NOT_AUTHORIZED)
        return
    admitted = limits.admit_publish(space.name, client.loop.time())
    if isinstance(admitted, Refused):
        _refuse_publish(client, packet, ReasonCode.QUOTA_EXCEEDED)
        return
    if admitted:
        client.defer(admitted, partial(_route_durably, client, packet))
        return
    _route_durably(client, packet)


def _route_durably(client: ClientLink, packet: PublishPacket) -> None:
    """`_route`, after storing a persistent session's inbound QoS 2 ids with this one:
    its PUBREC waits for that save, so a re-sent PUBLISH is known as a duplicate even
    after a `kill -9` of the broker [MQTT-4.3.3-10]."""
    session = client.session
    if packet.qos == 2 and session is not None and session.persistent:
        client.steps.add(_save_awaiting_pubrel(client, session), _nothing)
    _route(client, packet)


def _save_awaiting_pubrel(client: ClientLink, session: Session) -> asyncio.Future[Any]:
    session.awaiting_pubrel = client.conn.inbound.awaiting_pubrel
    return client.hub.save_session(session, shared=False)


def _nothing(_future: asyncio.Future[Any] | None) -> None:
    """A step that only orders the ones after it."""


def on_pubrel(client: ClientLink, packet: PubrelPacket) -> None:
    """PUBCOMP was sent by the connection; a persistent session's stored ids follow (a
    crash before this save settles leaves the id stored: a new PUBLISH re-using it at
    once after the restart would be taken for a duplicate)."""
    session = client.session
    if session is not None and session.persistent:
        _save_awaiting_pubrel(client, session)


def _refuse_publish(client: ClientLink, packet: PublishPacket, reason: ReasonCode) -> None:
    """A PUBLISH the broker will not route: counted as dropped, and answered as `intake.ack`
    answers `reason` (QoS 0 gets no answer)."""
    if reason == ReasonCode.NOT_AUTHORIZED:  # 3.x has no other trace of it than this line
        logger.info("client %r: PUBLISH to %r not authorized", client.client_id, packet.topic)
    client.hub.stats.dropped[packet.qos] += 1
    ack(client, packet.qos, packet.packet_id, reason)


def _route(client: ClientLink, packet: PublishPacket) -> None:
    """Hand the message to the broker's one intake (chosen at start: direct, the publish
    inbox or the message log), which routes it and answers QoS 1/2 in arrival order."""
    hub = client.hub
    hub.intake.accept(
        client, hub.message_from(packet, client.client_id), packet.qos, packet.packet_id
    )


def on_puback(client: ClientLink, packet: PubackPacket) -> None:
    _session(client).on_puback(packet.packet_id)


def on_pubrec(client: ClientLink, packet: PubrecPacket) -> None:
    """PUBREC: PUBREL once the entry is marked in storage [MQTT-4.3.3-4]; none after an
    error PUBREC [MQTT-4.4.0-2]."""
    future = _session(client).on_pubrec(packet.packet_id, packet.reason_code)
    if packet.reason_code < 0x80:
        client.steps.add(future, partial(_send_pubrel, client, packet.packet_id))


def _send_pubrel(client: ClientLink, packet_id: int, _future: asyncio.Future[Any] | None) -> None:
    if client.session is not None:
        client.send(client.session.pubrel_for(packet_id))


def on_pubcomp(client: ClientLink, packet: PubcompPacket) -> None:
    _session(client).on_pubcomp(packet.packet_id)


def on_subscribe(client: ClientLink, packet: SubscribePacket) -> None:
    """SUBACK once a persistent session's subscriptions are saved, then the retained
    messages of the new subscriptions [MQTT-3.8.4]."""
    session = _session(client)
    hub = client.hub
    identity = client.identity
    allowed = None if identity is None else identity.may_subscribe
    codes, retained, granted = hub.subscribe(session, packet, allowed)
    if granted and hub.events.kinds:
        hub.events.emit("subscribed", session.space.name, session.client_id, topic_filters=granted)
    shared = hub.cluster is not None  # other nodes route to this session too
    save = hub.save_session(session) if (session.persistent or shared) and granted else None
    if session.app is not None and granted:
        # An APPLICATION client's `$share` subscription: SUBACK once its topic exists.
        save = _both(save, session.app.sync_shared())
    client.steps.add(save, partial(_suback, client, packet.packet_id, codes, granted))
    for subscription, messages in retained:
        hub.settle(hub.deliver_retained(session, subscription, messages), None, client.steps)


def _both(
    first: asyncio.Future[Any] | None, second: asyncio.Future[Any] | None
) -> asyncio.Future[Any] | None:
    """One future for two (either may be None); it fails when either fails."""
    if first is None or second is None:
        return first or second
    return asyncio.gather(first, second)


def _suback(
    client: ClientLink,
    packet_id: int,
    codes: list[ReasonCode],
    granted: list[str],
    save: asyncio.Future[Any] | None,
) -> None:
    if save is not None and (save.cancelled() or save.exception() is not None):
        # Not durable: undo, and say so rather than grant silently.
        session = _session(client)
        for topic_filter in granted:
            client.hub.drop_subscription(session, topic_filter)
        codes = [ReasonCode.UNSPECIFIED_ERROR] * len(codes)
    client.send(SubackPacket(packet_id, codes))


def on_unsubscribe(client: ClientLink, packet: UnsubscribePacket) -> None:
    """UNSUBACK (0x00 / 0x11 per filter) once a persistent session is saved."""
    session = _session(client)
    hub = client.hub
    codes = hub.unsubscribe(session, packet)
    if hub.events.kinds:
        removed = [f for f, c in zip(packet.topic_filters, codes, strict=True) if c == 0]
        if removed:
            hub.events.emit(
                "unsubscribed", session.space.name, session.client_id, topic_filters=removed
            )
    save = hub.save_session(session) if session.persistent or hub.cluster is not None else None
    if session.app is not None:
        session.app.sync_shared()
    client.steps.add(save, partial(_unsuback, client, packet.packet_id, codes))


def _unsuback(
    client: ClientLink, packet_id: int, codes: list[ReasonCode], _save: asyncio.Future[Any] | None
) -> None:
    client.send(UnsubackPacket(packet_id, codes))


def on_disconnect(client: ClientLink, packet: DisconnectPacket) -> None:
    client.disconnected(packet)


HANDLERS: Final[dict[type, Callable[[ClientLink, Any], None]]] = {
    ConnectPacket: on_connect,
    PublishPacket: on_publish,
    PubackPacket: on_puback,
    PubrecPacket: on_pubrec,
    PubcompPacket: on_pubcomp,
    PubrelPacket: on_pubrel,
    SubscribePacket: on_subscribe,
    UnsubscribePacket: on_unsubscribe,
    DisconnectPacket: on_disconnect,
    AuthPacket: on_auth,  # re-authentication [MQTT-4.12.1]
}
"""Packet type -> handler (PINGREQ and PUBREL are answered by MqttConnection; PUBREL
comes here too, after its PUBCOMP)."""
