"""`[[auth.anonymous_acl]]` with real clients: a refused subscription gets 0x80 in a 3.1.1
SUBACK and 0x87 at 5.0; a refused PUBLISH gets PUBACK 0x87 at 5.0 and is dropped at 3.1.1
(acknowledged, never delivered); the first matching rule decides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.paho_client import PahoClients

pytestmark = pytest.mark.mqttq_only

ACL = """
[auth]
anonymous = "always"
[[auth.anonymous_acl]]
permission = "deny"
action = "subscribe"
topic = "test/nosubscribe"
[[auth.anonymous_acl]]
permission = "deny"
action = "publish"
topic = "secret/#"
[[auth.anonymous_acl]]
permission = "allow"
action = "publish"
topic = "secret/public"
[[auth.anonymous_acl]]
permission = "allow"
action = "all"
topic = "#"
"""


@pytest.fixture
def acl_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(config=ACL)


@pytest.fixture
def paho_clients() -> Iterator[PahoClients]:
    made = PahoClients()
    yield made
    made.close_all()


def test_refused_subscriptions_get_0x80_at_3_1_1_and_0x87_at_5(
    acl_broker: BrokerProcess, paho_clients: PahoClients
) -> None:
    old = paho_clients.connect(acl_broker.port, "old", protocol=4)
    new = paho_clients.connect(acl_broker.port, "new", protocol=5)
    assert old.subscribe("test/nosubscribe", 1) == [0x80]
    assert new.subscribe("test/nosubscribe", 1) == [0x87]
    # Not covered by the deny rule: the allow-all rule decides.
    assert old.subscribe("test/other", 1) == [1]
    assert new.subscribe("test/+", 1) == [1]


def test_refused_publishes_get_0x87_at_5_and_are_dropped_at_3_1_1(
    acl_broker: BrokerProcess, paho_clients: PahoClients
) -> None:
    listener = paho_clients.connect(acl_broker.port, "listener", protocol=5)
    assert listener.subscribe("#", 1) == [1]
    new = paho_clients.connect(acl_broker.port, "new-pub", protocol=5)
    old = paho_clients.connect(acl_broker.port, "old-pub", protocol=4)
    assert new.publish("secret/plans", b"v5", 1) == 0x87
    assert old.publish("secret/plans", b"v3", 1) == 0  # acknowledged, dropped
    # The first matching rule decides: the deny on secret/# comes before the allow.
    assert new.publish("secret/public", b"first match", 1) == 0x87
    # `secret/#` matches `secret` itself too.
    assert new.publish("secret", b"parent", 1) == 0x87
    # A publish no rule refuses arrives, and only it.
    assert new.publish("news/x", b"allowed", 1) == 0
    assert [m.payload for m in listener.wait_messages(1)] == [b"allowed"]
    assert old.publish("news/y", b"allowed too", 1) == 0
    assert [m.payload for m in listener.wait_messages(2)] == [b"allowed", b"allowed too"]
