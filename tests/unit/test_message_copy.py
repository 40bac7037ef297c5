"""`Message.for_subscriber`: the one per-subscriber copy (hub, retained delivery, cluster)."""

from __future__ import annotations

from mqttq.codec.properties import Properties
from mqttq.model import Message


def _message() -> Message:
    return Message(
        "a/b",
        b"x",
        qos=2,
        retain=False,
        properties=Properties(content_type="text/plain"),
        created_at=10.0,
        expires_at=70.0,
        publisher_id="pub",
    )


def test_unchanged_delivery_shares_the_instance() -> None:
    message = _message()
    assert message.for_subscriber(2, False, ()) is message


def test_a_copy_carries_what_the_subscriber_receives_and_keeps_the_rest() -> None:
    message = _message()
    out = message.for_subscriber(1, True, (7, 9))
    assert out is not message
    assert (out.qos, out.retain, out.subscription_identifiers) == (1, True, (7, 9))
    assert (out.topic, out.payload, out.created_at, out.expires_at, out.publisher_id) == (
        "a/b",
        b"x",
        10.0,
        70.0,
        "pub",
    )
    assert out.properties is message.properties
    # The original, shared by other subscribers, is untouched.
    assert (message.qos, message.retain, message.subscription_identifiers) == (2, False, ())


def test_subscription_identifiers_alone_make_a_copy() -> None:
    message = _message()
    out = message.for_subscriber(2, False, (3,))
    assert out is not message
    assert out.subscription_identifiers == (3,)
