"""Outbound QoS 1/2 deliveries follow protocol/outbound.py's table for every (state,
acknowledgement) pair.

For a pair in TRANSITIONS the delivery moves to the table's state (with a success reason
code, or an error one); for a pair missing from it, and for a packet id not in flight, the
outcome is a ProtocolError and the window is left as it was. Hypothesis walks every pair
and random sequences of sends and acknowledgements against a model.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.codec.enums import PacketType
from mqttq.errors import ProtocolError
from mqttq.model import Message, QueuedMessage
from mqttq.protocol.outbound import (
    TRANSITIONS,
    OutboundState,
    OutboundWindow,
    next_state,
    state_of,
)
from mqttq.reasons import ReasonCode

ACKS = (PacketType.PUBACK, PacketType.PUBREC, PacketType.PUBCOMP)
"""What a client sends about a delivery the broker sent it."""
IN_FLIGHT = (OutboundState.AWAIT_PUBACK, OutboundState.AWAIT_PUBREC, OutboundState.AWAIT_PUBCOMP)
REASONS = (ReasonCode.SUCCESS, ReasonCode.NO_MATCHING_SUBSCRIBERS, ReasonCode.UNSPECIFIED_ERROR)


def entry_in(state: OutboundState, packet_id: int = 1) -> QueuedMessage:
    qos = 1 if state is OutboundState.AWAIT_PUBACK else 2
    entry = QueuedMessage(0, packet_id, Message("t", b"x", qos))
    entry.pubrel = state is OutboundState.AWAIT_PUBCOMP
    assert state_of(entry) == state
    return entry


def receive(
    window: OutboundWindow, packet_type: PacketType, packet_id: int, reason: ReasonCode
) -> QueuedMessage:
    if packet_type is PacketType.PUBACK:
        return window.puback_received(packet_id)
    if packet_type is PacketType.PUBREC:
        return window.pubrec_received(packet_id, reason)
    return window.pubcomp_received(packet_id)


@pytest.mark.parametrize("reason", REASONS, ids=lambda r: r.name)
@pytest.mark.parametrize("packet_type", ACKS, ids=lambda t: t.name)
@pytest.mark.parametrize("state", IN_FLIGHT, ids=lambda s: s.name)
def test_every_pair_follows_the_table(
    state: OutboundState, packet_type: PacketType, reason: ReasonCode
) -> None:
    window = OutboundWindow()
    entry = entry_in(state, 7)
    window.sent(entry)
    # PUBACK and PUBCOMP carry no reason the flow depends on: the window is given none.
    given_reason = reason if packet_type is PacketType.PUBREC else ReasonCode.SUCCESS
    step = TRANSITIONS.get((state, packet_type))
    if step is None:
        with pytest.raises(ProtocolError) as raised:
            receive(window, packet_type, 7, given_reason)
        assert raised.value.reason_code is ReasonCode.PROTOCOL_ERROR
        assert window.entries == {7: entry}
        assert state_of(entry) == state
        return
    after = step[1] if given_reason >= 0x80 else step[0]
    assert receive(window, packet_type, 7, given_reason) is entry
    assert next_state(state, packet_type, given_reason) == after
    if after is OutboundState.COMPLETE:
        assert window.entries == {}
        assert len(window) == 0
    else:
        assert window.entries == {7: entry}
        assert state_of(entry) == after
        assert window.awaiting_pubcomp(7) is (after is OutboundState.AWAIT_PUBCOMP)


def test_the_table_is_the_spec_flows() -> None:
    """QoS 1: PUBLISH -> PUBACK. QoS 2: PUBLISH -> PUBREC -> PUBREL -> PUBCOMP; an error
    PUBREC ends it [MQTT-4.4.0-2]; a repeated PUBREC is answered with PUBREL again."""
    s = OutboundState
    assert TRANSITIONS == {
        (s.AWAIT_PUBACK, PacketType.PUBACK): (s.COMPLETE, s.COMPLETE),
        (s.AWAIT_PUBREC, PacketType.PUBREC): (s.AWAIT_PUBCOMP, s.COMPLETE),
        (s.AWAIT_PUBCOMP, PacketType.PUBREC): (s.AWAIT_PUBCOMP, s.COMPLETE),
        (s.AWAIT_PUBCOMP, PacketType.PUBCOMP): (s.COMPLETE, s.COMPLETE),
    }


@pytest.mark.parametrize("packet_type", ACKS, ids=lambda t: t.name)
def test_an_id_not_in_flight_is_not_found(packet_type: PacketType) -> None:
    window = OutboundWindow()
    window.sent(entry_in(OutboundState.AWAIT_PUBACK, 1))
    with pytest.raises(ProtocolError) as raised:
        receive(window, packet_type, 2, ReasonCode.SUCCESS)
    assert raised.value.reason_code is ReasonCode.PACKET_IDENTIFIER_NOT_FOUND
    assert list(window.entries) == [1]
    assert window.awaiting_pubcomp(2) is False


operations = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from((1, 2))),
        st.tuples(st.sampled_from(ACKS), st.integers(0, 6), st.sampled_from(REASONS)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_random_walks_match_a_model(ops: list[tuple[object, ...]]) -> None:
    """Sends allocate ids never in flight; each acknowledgement does what the table says
    for the state the model holds, or raises and changes nothing."""
    window = OutboundWindow()
    model: dict[int, OutboundState] = {}
    sent: list[int] = []
    for op in ops:
        if op[0] == "send":
            qos = op[1]
            assert isinstance(qos, int)
            packet_id = window.allocate()
            assert packet_id not in model
            assert 1 <= packet_id <= 65535
            window.sent(QueuedMessage(0, packet_id, Message("t", b"x", qos)))
            model[packet_id] = (
                OutboundState.AWAIT_PUBACK if qos == 1 else OutboundState.AWAIT_PUBREC
            )
            sent.append(packet_id)
            continue
        packet_type, index, reason = op
        assert isinstance(packet_type, PacketType)
        assert isinstance(index, int)
        assert isinstance(reason, ReasonCode)
        # Mostly ids that were sent (in flight or done), sometimes one never used.
        packet_id = sent[index % len(sent)] if sent and index else 60000
        before = model.get(packet_id)
        step = None if before is None else TRANSITIONS.get((before, packet_type))
        if step is None:
            with pytest.raises(ProtocolError):
                receive(window, packet_type, packet_id, reason)
        else:
            receive(window, packet_type, packet_id, reason)
            after = step[1] if reason >= 0x80 and packet_type is PacketType.PUBREC else step[0]
            if after is OutboundState.COMPLETE:
                del model[packet_id]
            else:
                model[packet_id] = after
        assert {i: OutboundState(state_of(e)) for i, e in window.entries.items()} == model
        assert len(window) == len(model)
        assert window.unacknowledged() == {
            i for i, s in model.items() if s is not OutboundState.AWAIT_PUBCOMP
        }
