"""Client events as MQTT messages for ordinary subscribers (`[events]`), on a real
broker: each kind with what it carries (the connected event's address is the client's
socket address), a topic template of one's own, never matched by `#`, and a kind that
does not exist named at start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mqttq.broker.events import ClientEvents
from mqttq.errors import ConfigError
from tests.harness import let_time_pass
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE, BrokerFactory
from tests.integration.wire import Prop

pytestmark = pytest.mark.mqttq_only

ALL_KINDS = (
    '["connected", "disconnected", "subscribed", "unsubscribed", "session_expired", '
    '"message_dropped"]'
)


def events(client: RawClient, count: int) -> list[tuple[str, dict[str, Any]]]:
    """The next `count` PUBLISHes as (topic, decoded JSON body)."""
    return [
        (packet.topic or "", json.loads(packet.payload))
        for packet in client.receive_messages(count)
    ]


def test_every_kind_reaches_a_subscriber_with_its_details(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=f"[events]\nkinds = {ALL_KINDS}\n")
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$events/+/device-1", 1))
    device = clients.raw(broker)
    device.connect("device-1")
    host, port = device.sock.getsockname()[:2]
    device.subscribe(("cmd/device-1", 1), ("cfg/#", 0))
    device.unsubscribe("cfg/#")
    device.disconnect()
    got = events(watcher, 4)
    assert [topic for topic, _ in got] == [
        "$events/connected/device-1",
        "$events/subscribed/device-1",
        "$events/unsubscribed/device-1",
        "$events/disconnected/device-1",
    ]
    connected = got[0][1]
    assert connected["event"] == "connected"
    assert connected["address"] == f"{host}:{port}"
    assert connected["protocol"] == "MQTT 5.0"
    assert connected["protocol_level"] == 5
    assert connected["listener"] == "tcp"
    assert connected["tenant"] == "default"
    assert isinstance(connected["timestamp"], int)
    assert got[1][1]["topic_filters"] == ["cmd/device-1", "cfg/#"]
    assert got[2][1]["topic_filters"] == ["cfg/#"]
    assert (got[3][1]["reason"], got[3][1]["reason_code"]) == ("normal", 0)


def test_an_abnormal_disconnect_and_a_311_client(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config='[events]\nkinds = ["connected", "disconnected"]\n')
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$events/+/old-1", 1))
    old = clients.raw(broker)
    old.connect("old-1", level=4)
    old.close()  # no DISCONNECT
    got = events(watcher, 2)
    assert got[0][1]["protocol"] == "MQTT 3.1.1"
    assert got[1][1]["reason"] == "connection_lost"


REJECT_NEW = '[mqtt]\nmax_queued_messages = 1\nqueue_full_policy = "reject_new"\n'


@pytest.mark.manual_clock
def test_session_expired(broker_factory: BrokerFactory, clients: Clients) -> None:
    broker = broker_factory(config=f"[events]\nkinds = {ALL_KINDS}\n")
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$events/session_expired/+", 1))
    sleeper = clients.raw(broker)
    sleeper.connect("sleeper", clean=False, props=[(Prop.SESSION_EXPIRY_INTERVAL, 1)])
    sleeper.disconnect()
    let_time_pass(broker, 1.5, offline=["sleeper"])  # past the 1 s expiry
    [(topic, body)] = events(watcher, 1)
    assert topic == "$events/session_expired/sleeper"
    assert (body["event"], body["client_id"]) == ("session_expired", "sleeper")


def test_message_dropped_for_a_client_that_does_not_keep_up(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=f"{REJECT_NEW}[events]\nkinds = {ALL_KINDS}\n")
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$events/message_dropped/+", 1))
    slow = clients.raw(broker)
    slow.connect("slow", props=[(Prop.RECEIVE_MAXIMUM, 1)])
    slow.subscribe(("news/#", 1))
    publisher = clients.connected(broker, "publisher")
    for number in range(3):  # one in flight (never acknowledged), one queued, one refused
        publisher.publish(f"news/{number}", b"x", qos=1)
    [(topic, body)] = events(watcher, 1)
    assert topic == "$events/message_dropped/slow"
    assert (body["reason"], body["topic"], body["qos"]) == ("queue_full", "news/2", 1)


def test_message_dropped_for_an_offline_session(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=f"{REJECT_NEW}[events]\nkinds = {ALL_KINDS}\n")
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$events/message_dropped/+", 1))
    sleeper = clients.raw(broker)
    sleeper.connect("sleeper", clean=False, props=[(Prop.SESSION_EXPIRY_INTERVAL, 600)])
    sleeper.subscribe(("news/#", 1))
    sleeper.disconnect()
    publisher = clients.connected(broker, "publisher")
    publisher.publish("news/1", b"kept", qos=1)
    publisher.publish("news/2", b"no room", qos=1)
    [(topic, body)] = events(watcher, 1)
    assert topic == "$events/message_dropped/sleeper"
    assert body["reason"] == "queue_full"


def test_a_topic_template_of_ones_own_and_no_wildcard_match(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    config = '[events]\nkinds = ["connected"]\ntopic = "$mqttq/presence/{client_id}/{kind}"\n'
    broker = broker_factory(config=config)
    everything = clients.connected(broker, "everything")
    everything.subscribe(("#", 1), ("+/presence/#", 1))
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$mqttq/presence/+/connected", 1))
    clients.connected(broker, "arrives")
    [(topic, body)] = events(watcher, 1)
    assert topic == "$mqttq/presence/arrives/connected"
    assert body["client_id"] == "arrives"
    marker = clients.connected(broker, "marker")
    marker.publish("marker", b"m", qos=1)
    first = everything.recv(DEADLINE)  # the connected event was not matched before it
    assert (first.topic, first.payload) == ("marker", b"m")


def test_nothing_is_published_for_kinds_not_asked_for(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config='[events]\nkinds = ["disconnected"]\n')
    watcher = clients.connected(broker, "watcher")
    watcher.subscribe(("$events/#", 1))
    leaver = clients.raw(broker)
    leaver.connect("leaver")
    leaver.disconnect()
    [(topic, _body)] = events(watcher, 1)
    assert topic == "$events/disconnected/leaver"  # no connected event before it


def test_an_unknown_kind_is_named() -> None:
    with pytest.raises(ConfigError, match=r"events\.kinds.*'arrived'"):
        ClientEvents(hub=None).configure(("connected", "arrived"))  # type: ignore[arg-type]


def test_serve_refuses_an_unknown_kind(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('[listener]\nport = 0\n[events]\nkinds = ["arrived"]\n')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mqttq",
            "serve",
            "--config",
            str(config),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "events.kinds" in result.stderr
    assert "Traceback" not in result.stderr


def test_reading_events_takes_a_subscribe_acl_that_names_them(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    from tests.integration.admin_api import AdminApi  # noqa: PLC0415

    broker = broker_factory(config='[events]\nkinds = ["connected"]\n')
    api = AdminApi(broker.data_dir)
    api.add_credential("monitor", "pw", subscribe_acl=["$events/connected/+"])
    api.add_credential("device", "pw", subscribe_acl=["#"])
    device = clients.raw(broker)
    device.connect("device-1", username="device", password=b"pw")
    refused = device.subscribe(("$events/connected/+", 1))
    assert refused.reason_codes == (0x87,)  # `#` in an ACL does not reach `$` topics
    monitor = clients.raw(broker)
    monitor.connect("monitor-1", username="monitor", password=b"pw")
    granted = monitor.subscribe(("$events/connected/+", 1))
    assert granted.reason_codes == (1,)
    clients.connected(broker, "arrives", username="device", password=b"pw")
    [(topic, body)] = events(monitor, 1)
    assert (topic, body["client_id"]) == ("$events/connected/arrives", "arrives")
