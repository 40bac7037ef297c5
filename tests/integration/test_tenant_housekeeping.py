"""Tenants that come and go do not grow the broker's memory: an in-process Broker whose
clients name ever new tenants forgets the idle ones (issue 5)."""

from __future__ import annotations

import time
from collections.abc import Callable

from mqttq.broker.server import Broker
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import Storage
from tests.integration.raw_client import RawClient
from tests.integration.test_broker_smoke import BrokerThread, start_broker
from tests.integration.waiting import wait_for
from tests.integration.wire import Prop

__all__ = ["start_broker"]  # the fixture, imported for pytest


def test_idle_tenants_are_forgotten(start_broker: Callable[[Storage], BrokerThread]) -> None:
    running = start_broker(MemoryStorage())
    broker = running.broker
    keeper = RawClient(running.port)
    keeper.connect("keeper", props=[(Prop.USER_PROPERTY, ("tenant", "kept"))])
    keeper.subscribe(("x", 0))
    for n in range(20):
        client = RawClient(running.port)
        client.connect(f"c{n}", props=[(Prop.USER_PROPERTY, ("tenant", f"t{n}"))])
        client.publish("status", b"", qos=1, retain=True)  # an empty retained: no topic
        client.disconnect()
    wait_for(lambda: len(broker.hub.sessions) == 1, what="the 20 sessions to end")
    assert len(broker.hub.spaces) == 21
    dropped = running.call(_drop(broker))
    assert dropped == 20
    assert sorted(broker.hub.spaces) == ["kept"]
    assert broker.limits.tenants() == ["kept"]
    assert broker.limits.usage("kept") == {"connections": 1, "sessions": 1, "topics": 1}
    keeper.ping()
    keeper.close()


async def _drop(broker: Broker) -> int:
    """On the broker's loop, as its housekeeping timer does."""
    return broker.drop_idle_tenants()


def test_expired_retained_messages_give_their_topics_back(
    start_broker: Callable[[Storage], BrokerThread],
) -> None:
    storage = MemoryStorage()
    running = start_broker(storage)
    broker = running.broker
    client = RawClient(running.port)
    client.connect("pub", props=[(Prop.USER_PROPERTY, ("tenant", "acme"))])
    expiring = [(Prop.MESSAGE_EXPIRY_INTERVAL, 60)]
    client.publish("gone/soon", b"1", qos=1, retain=True, props=expiring)
    client.publish("kept", b"2", qos=1, retain=True)
    client.disconnect()
    assert broker.limits.usage("acme")["topics"] == 2

    assert running.call(_purge(broker, 30.0)) == 0  # not expired yet: nothing changes
    assert running.call(_purge(broker, 61.0)) == 1
    assert broker.limits.usage("acme")["topics"] == 1
    assert [m.topic for m in broker.hub.spaces["acme"].retained.all()] == ["kept"]

    def stored() -> list[tuple[str, str]]:
        return [(t, m.topic) for t, m in running.call(storage.load_retained(time.time()))]

    wait_for(lambda: stored() == [("acme", "kept")], what="the expired message out of storage")


async def _purge(broker: Broker, seconds_from_now: float) -> int:
    """On the broker's loop, as its housekeeping timer does, `seconds_from_now` later."""
    return broker.hub.purge_expired_retained(time.time() + seconds_from_now)
