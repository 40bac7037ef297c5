"""Packet identifier allocation, and topic alias tables."""

from __future__ import annotations

import pytest

from mqttq.errors import ProtocolError
from mqttq.protocol.aliases import InboundAliases, OutboundAliases
from mqttq.protocol.inflight import InboundWindow, PacketIdAllocator
from mqttq.reasons import ReasonCode


def test_allocator_skips_ids_in_use_and_wraps() -> None:
    in_use = {2, 3}
    ids = PacketIdAllocator(in_use)
    assert [ids.allocate(), ids.allocate()] == [1, 4]
    wrapping = PacketIdAllocator({1}, last=65534)
    assert [wrapping.allocate(), wrapping.allocate()] == [65535, 2]


def test_allocator_refuses_when_every_id_is_taken() -> None:
    with pytest.raises(ValueError):
        PacketIdAllocator(range(1, 65536)).allocate()


def test_inbound_window_counts_qos1_until_puback() -> None:
    window = InboundWindow(1)
    assert window.publish_received(1, 1) is True
    with pytest.raises(ProtocolError):
        window.publish_received(1, 2)
    window.puback_sent()
    assert window.publish_received(1, 2) is True
    assert len(window) == 1


def test_inbound_window_qos2_duplicate_states() -> None:
    window = InboundWindow(5)
    assert window.publish_received(2, 9) is True
    assert window.publish_received(2, 9) is None  # first PUBREC still pending
    window.pubrec_sent(9, ReasonCode.SUCCESS)
    assert window.publish_received(2, 9) is False  # answer PUBREC again
    assert window.pubrel_received(9) is True
    assert window.pubrel_received(9) is False
    assert len(window) == 0


def test_inbound_window_forgets_a_publish_refused_without_an_answer() -> None:
    """3.x refusal (no error PUBACK/PUBREC exists): the id is neither counted nor taken
    for a duplicate, so the client's re-send after reconnect is routed."""
    window = InboundWindow(2)
    assert window.publish_received(2, 7) is True
    assert window.publish_received(1, 8) is True
    window.refused_unanswered(2, 7)
    window.refused_unanswered(1, 8)
    assert len(window) == 0
    assert window.awaiting_pubrel == set()
    assert window.publish_received(2, 7) is True  # new, not a duplicate to skip


def test_inbound_aliases() -> None:
    aliases = InboundAliases(2)
    assert aliases.resolve("a", 2) == "a"
    assert aliases.resolve("", 2) == "a"
    assert aliases.resolve("b", None) == "b"
    for topic, alias, code in [
        ("x", 3, ReasonCode.TOPIC_ALIAS_INVALID),
        ("x", 0, ReasonCode.TOPIC_ALIAS_INVALID),
        ("", 1, ReasonCode.PROTOCOL_ERROR),
        ("", None, ReasonCode.PROTOCOL_ERROR),
    ]:
        with pytest.raises(ProtocolError) as info:
            aliases.resolve(topic, alias)
        assert info.value.reason_code == code


def test_outbound_aliases_fill_then_stop() -> None:
    aliases = OutboundAliases(1)
    assert aliases.lookup("a") is None
    assert aliases.next_alias() == 1
    aliases.bind("a", 1)
    assert aliases.lookup("a") == 1
    assert aliases.next_alias() is None
    assert OutboundAliases(0).next_alias() is None
