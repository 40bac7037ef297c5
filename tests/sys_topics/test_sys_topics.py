"""`$SYS` topics on a real broker: Mosquitto's names, retained, at `[sys] interval`;
never matched by `#` or `+` at the first level [MQTT-4.7.2-1]; a tenant's client reads
its tenant's numbers; off by default."""

from __future__ import annotations

import pytest

from mqttq import __version__
from mqttq.broker.sys_topics import load_average
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE, BrokerFactory
from tests.integration.wire import Prop

pytestmark = pytest.mark.mqttq_only

SYS_CONFIG = "[sys]\ninterval = 0.2\n"


def latest(client: RawClient, wanted: dict[str, str | None]) -> dict[str, str]:
    """Read PUBLISHes until every topic of `wanted` arrived with its value (None: any);
    returns the last payload seen of every topic."""
    seen: dict[str, str] = {}

    def done() -> bool:
        return all(
            topic in seen and (value is None or seen[topic] == value)
            for topic, value in wanted.items()
        )

    while not done():
        packet = client.recv(DEADLINE)
        assert packet.topic is not None, packet
        seen[packet.topic] = packet.payload.decode()
    return seen


def test_broker_numbers_with_mosquittos_names(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    # Client events are on: the broker's own messages are not counted as received.
    broker = broker_factory(config=SYS_CONFIG + '[events]\nkinds = ["connected"]\n')
    clients.connected(broker, "other-1")
    clients.connected(broker, "other-2")
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$SYS/broker/#", 0))
    publisher = clients.connected(broker, "pub")
    publisher.publish("t/1", b"x", qos=1)
    seen = latest(
        watcher,
        {
            "$SYS/broker/version": f"mqttq version {__version__}",
            "$SYS/broker/clients/connected": "4",
            "$SYS/broker/clients/total": "4",
            "$SYS/broker/clients/disconnected": "0",
            "$SYS/broker/clients/maximum": "4",
            "$SYS/broker/subscriptions/count": "1",
            "$SYS/broker/publish/messages/received": "1",
            "$SYS/broker/messages/received": "1",
            "$SYS/broker/retained messages/count": None,
            "$SYS/broker/uptime": None,
            "$SYS/broker/messages/sent": None,
            "$SYS/broker/load/messages/received/1min": None,
            "$SYS/broker/load/connections/15min": None,
            "$SYS/broker/load/publish/sent/5min": None,
        },
    )
    assert seen["$SYS/broker/uptime"].endswith(" seconds")
    float(seen["$SYS/broker/load/messages/received/1min"])
    # The values are retained: a late subscriber reads them at once.
    late = clients.connected(broker, "late")
    late.subscribe(("$SYS/broker/version", 0))
    packet = late.recv(DEADLINE)
    assert (packet.topic, packet.payload, packet.retain) == (
        "$SYS/broker/version",
        f"mqttq version {__version__}".encode(),
        True,
    )


def test_sys_topics_are_not_matched_by_wildcards_at_the_first_level(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=SYS_CONFIG)
    everything = clients.connected(broker, "everything")
    everything.subscribe(("#", 0), ("+/broker/#", 0), ("+/broker/version", 0))
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$SYS/broker/clients/connected", 0))
    # The watcher reads a publication made after both subscribed (a third client
    # changes the count), so one was made that `everything` could have matched.
    clients.connected(broker, "third")
    latest(watcher, {"$SYS/broker/clients/connected": "3"})
    publisher = clients.connected(broker, "marker")
    publisher.publish("marker", b"m", qos=1)
    packet = everything.recv(DEADLINE)  # the first PUBLISH it gets is the marker
    assert (packet.topic, packet.payload) == ("marker", b"m")


def test_a_tenants_client_reads_its_tenants_numbers(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=SYS_CONFIG)
    for number in range(3):
        clients.connected(broker, f"default-{number}")
    acme = clients.connected(broker, "acme-1", props=[(Prop.USER_PROPERTY, ("tenant", "acme"))])
    acme.subscribe(("$SYS/broker/clients/connected", 0), ("$SYS/broker/clients/total", 0))
    seen = latest(
        acme,
        {"$SYS/broker/clients/connected": "1", "$SYS/broker/clients/total": "1"},
    )
    assert seen["$SYS/broker/clients/connected"] == "1"
    operator = clients.connected(broker, "operator")
    operator.subscribe(("$SYS/broker/clients/connected", 0))
    latest(operator, {"$SYS/broker/clients/connected": "5"})


def test_off_by_default(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory()
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$SYS/#", 0))
    publisher = clients.connected(broker, "pub")
    watcher.subscribe(("marker", 0))
    publisher.publish("marker", b"m", qos=1)
    packet = watcher.recv(DEADLINE)
    assert packet.topic == "marker"


def test_load_average_follows_mosquittos_formula() -> None:
    # A steady 120 messages a minute for one period brings the 1 min figure to
    # 1 - 1/e of it; a long quiet spell brings it back towards 0.
    assert load_average(0.0, 120.0, 60.0, 60.0) == pytest.approx(120.0 * (1 - 2.718281828**-1))
    assert load_average(120.0, 120.0, 10.0, 60.0) == pytest.approx(120.0)
    assert load_average(100.0, 0.0, 900.0, 60.0) < 0.001


def test_clients_may_not_publish_to_sys(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=SYS_CONFIG)
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$SYS/broker/fake", 0), ("marker", 0))
    forger = clients.connected(broker, "forger")
    answer = forger.publish("$SYS/broker/fake", b"forged", qos=1)
    assert answer is not None and answer.reason_code == 0x87  # Not authorized
    forger.publish("marker", b"m", qos=1)
    assert watcher.recv(DEADLINE).topic == "marker"
