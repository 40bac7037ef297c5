"""Shared subscriptions ($share/<group>/<filter>, MQTT 5.0 section 4.8.2)."""

from __future__ import annotations

import pytest

from .helpers import (
    Clients,
)
from .waiting import (
    BrokerUnderTest,
    wait_for,
)
from .wire import (
    Prop,
)

COUNT = 30


@pytest.mark.parametrize("protocol", [4, 5])
def test_round_robin_among_online_members(
    broker: BrokerUnderTest, clients: Clients, protocol: int
) -> None:
    """Each message of a shared subscription goes to exactly one member of the group
    (MQTT 5.0 section 4.8.2); every online member gets a share; a plain subscriber gets all."""
    members = [clients.paho(broker, f"member{i}", protocol=protocol) for i in range(3)]
    for member in members:
        assert member.subscribe("$share/group/sh/+", 1) == [1]
    plain = clients.paho(broker, "plain", protocol=protocol)
    plain.subscribe("sh/+", 1)
    publisher = clients.paho(broker, "pub", protocol=protocol)
    expected = [b"s%02d" % i for i in range(COUNT)]
    for payload in expected:
        publisher.publish("sh/t", payload, 1)
    plain.wait_messages(COUNT)
    wait_for(
        lambda: sum(len(m.payloads()) for m in members) >= COUNT,
        what="every shared message to reach a member",
    )
    shares = [member.payloads() for member in members]
    assert sorted(p for share in shares for p in share) == expected, "each exactly once"
    assert all(shares), f"a member got no share: {[len(s) for s in shares]}"
    for share in shares:
        assert share == sorted(share), "a member's share arrives in publish order"
    assert plain.payloads() == expected


@pytest.mark.parametrize("level", [4, 5])
def test_offline_persistent_member_gets_queued_messages(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """Messages for a group whose only member is persistent and offline are kept for it and
    delivered on reconnect, in order, not dropped."""
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 300)] if level == 5 else []
    member = clients.connected(broker, "sleeper", level=level, clean=level == 5, props=props)
    member.subscribe(("$share/g/q/t", 1))
    member.disconnect()
    publisher = clients.connected(broker, "pub", level=level)
    for i in range(5):
        ack = publisher.publish("q/t", b"g%d" % i, qos=1)
        assert ack is not None and ack.reason_code == 0
    member = clients.connected(broker, "sleeper", level=level, clean=False, props=props)
    messages = member.receive_messages(5)
    assert [m.payload for m in messages] == [b"g%d" % i for i in range(5)]
    member.ping()
    member.expect_silence(0.3)


def test_groups_are_independent(broker: BrokerUnderTest, clients: Clients) -> None:
    """Two groups on the same filter each get every message once."""
    a = clients.paho(broker, "a")
    a.subscribe("$share/ga/ind/t", 1)
    b = clients.paho(broker, "b")
    b.subscribe("$share/gb/ind/t", 1)
    publisher = clients.paho(broker, "pub")
    for i in range(5):
        publisher.publish("ind/t", b"i%d" % i, 1)
    expected = [b"i%d" % i for i in range(5)]
    assert [m.payload for m in a.wait_messages(5)] == expected
    assert [m.payload for m in b.wait_messages(5)] == expected
