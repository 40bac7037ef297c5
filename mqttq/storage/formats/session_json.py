"""How a session record's structured parts are stored as text: subscriptions and the
will (TBMQ-form message JSON plus its delay) for the SQLite session table."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mqttq.codec.packets import Will
from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.storage.formats.tbmq_json import compact_json, message_from_json, message_to_json

__all__ = [
    "subscriptions_from_json",
    "subscriptions_to_json",
    "will_from_json",
    "will_to_json",
]


def subscriptions_to_json(subscriptions: list[Subscription]) -> str:
    return compact_json(
        [
            {
                "topicFilter": s.topic_filter,
                "qos": s.qos,
                "noLocal": s.no_local,
                "retainAsPublished": s.retain_as_published,
                "retainHandling": s.retain_handling,
                "subscriptionIdentifier": s.subscription_identifier,
            }
            for s in subscriptions
        ]
    )


def subscriptions_from_json(text: str) -> list[Subscription]:
    try:
        items: Any = json.loads(text)
        return [
            Subscription(
                topic_filter=str(item["topicFilter"]),
                qos=int(item["qos"]),
                no_local=bool(item["noLocal"]),
                retain_as_published=bool(item["retainAsPublished"]),
                retain_handling=int(item["retainHandling"]),
                subscription_identifier=item.get("subscriptionIdentifier"),
            )
            for item in items
        ]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StorageError(f"stored subscriptions are unreadable: {exc!r}") from exc


def will_to_json(will: Will, client_id: str) -> str:
    """The will as one JSON object: its delay, and the message in TBMQ form."""
    props = will.properties
    delay = props.will_delay_interval
    if delay is not None:
        props = dataclasses.replace(props, will_delay_interval=None)
    message = Message(will.topic, will.payload, will.qos, will.retain, props, 0.0, None, client_id)
    text = message_to_json(message, client_id=client_id, packet_id=0)
    return compact_json({"delay": delay, "message": text})


def will_from_json(text: str) -> Will:
    """Decode `will_to_json`; StorageError when it cannot be read."""
    try:
        item: Any = json.loads(text)
        delay = item["delay"]
        message = message_from_json(item["message"]).message
    except (ValueError, TypeError, KeyError) as exc:
        raise StorageError(f"stored will is unreadable: {exc!r}") from exc
    props = message.properties
    if delay is not None:
        props = dataclasses.replace(props, will_delay_interval=int(delay))
    return Will(message.topic, message.payload, message.qos, message.retain, props)
