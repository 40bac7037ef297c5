"""A retained message deleted through the admin API of an embedded `mqttq serve` is gone for
a new subscriber at once and after a restart (issue 34: the delete goes through the
broker's own path for retained messages, as an empty retained PUBLISH does)."""

from __future__ import annotations

import pytest

from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, BrokerUnderTest

pytestmark = pytest.mark.mqttq_only


def first_message(clients: Clients, broker: BrokerUnderTest, name: str) -> tuple[str, bytes]:
    """(topic, payload) of the first message a new subscriber to `cfg/#` receives: a
    retained one comes before the marker published after its SUBACK."""
    subscriber = clients.connected(broker, f"{name}-sub", level=5)
    assert subscriber.subscribe(("cfg/#", 1)).reason_codes == (1,)
    marker: RawClient = clients.connected(broker, f"{name}-marker", level=5)
    assert marker.publish("cfg/marker", b"marker", qos=1) is not None
    (first,) = subscriber.receive_messages(1)
    return first.topic or "", first.payload


def test_deleted_retained_stays_deleted_after_a_restart(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    publisher = clients.connected(broker, "pub", level=5)
    assert publisher.publish("cfg/a", b"v1", qos=1, retain=True) is not None
    api = AdminApi(broker.data_dir)
    assert first_message(clients, broker, "before") == ("cfg/a", b"v1")
    listed = api.ok("GET", "/api/v1/retained?prefix=cfg/")["retained"]
    assert [(r["topic"], r["payload_text"]) for r in listed] == [("cfg/a", "v1")]

    assert api.call("DELETE", "/api/v1/retained?topic=cfg/a")[0] == 204
    assert api.ok("GET", "/api/v1/retained?prefix=cfg/")["retained"] == []
    assert first_message(clients, broker, "after") == ("cfg/marker", b"marker")
    assert api.call("DELETE", "/api/v1/retained?topic=cfg/a")[0] == 404

    broker.restart()
    assert first_message(clients, broker, "restarted") == ("cfg/marker", b"marker")
    assert AdminApi(broker.data_dir).ok("GET", "/api/v1/retained")["retained"] == []
