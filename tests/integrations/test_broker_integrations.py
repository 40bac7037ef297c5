"""Integrations end to end through `mqttq serve` in embedded mode (issue 33): real MQTT
clients publish to the broker subprocess, and what leaves it is read where it lands: a real
HTTP server, a real Mosquitto, a real PostgreSQL table, the dead-letter topic, the admin API,
`/metrics` and `mqttq integration ls --json`.

Every test runs `mqttq serve` as a subprocess (`broker_process`): the in-process harness
does not start integrations, and the kill -9 test needs a process.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mqttq.model import Message, Subscription
from mqttq.storage.ports import SessionRecord
from mqttq.storage.sqlite.store import SqliteStorage
from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.paho_client import PahoClients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE, BrokerFactory, wait_for
from tests.integrations.e2e_receiver import HttpReceiver, duplicates, first_arrivals
from tests.integrations.mqtt_mosquitto import Mosquitto, Subscriber, publish

pytestmark = [pytest.mark.broker_process, pytest.mark.mqttq_only]

FAST_RETRY = "retry_initial_ms = 20\nretry_max_ms = 200\n"
"""A sink that comes back is tried again soon (the backoff is not what these tests check)."""


def http_integration(name: str, url: str, filters: list[str], extra: str = "") -> str:
    """One `[[integration]]` table of type http."""
    return (
        f'[[integration]]\nname = "{name}"\ntype = "http"\nfilters = {json.dumps(filters)}\n'
        f'url = "{url}"\n{FAST_RETRY}{extra}'
    )


@pytest.fixture
def paho() -> Any:
    registry = PahoClients()
    yield registry
    registry.close_all()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mqttq ARGS` without the test run's MQTTQ_* variables (MQTTQ_PURE kept)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQTTQ_") or k == "MQTTQ_PURE"}
    return subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


# --- 1. what reaches a webhook -------------------------------------------------------------


def test_matching_messages_reach_the_webhook_in_order_with_their_envelope(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    receiver = HttpReceiver().start()
    try:
        extra = "payload_filter = '$.kind != \"debug\"'\n"
        broker = broker_factory(
            http_integration("hook", receiver.url(), ["sensors/#", "alerts/+"], extra)
        )
        one = paho.connect(broker.port, "dev-1")
        two = paho.connect(broker.port, "dev-2", protocol=4)
        before_ms = int(time.time() * 1000)
        sent_one: list[str] = []
        sent_two: list[str] = []
        for n in range(20):
            reading = json.dumps({"n": n, "kind": "reading", "from": "dev-1"})
            one.publish("sensors/kitchen/temp", reading.encode(), qos=1, retain=n == 0)
            sent_one.append(reading)
            alert = json.dumps({"n": n, "kind": "alert", "from": "dev-2"})
            two.publish("alerts/door", alert.encode(), qos=0)
            sent_two.append(alert)
            if n % 5 == 0:  # refused by the payload filter
                one.publish("sensors/kitchen/temp", b'{"kind": "debug"}', qos=1)
                two.publish("alerts/door", b'{"kind": "debug"}', qos=0)
            # matching no filter: never delivered
            one.publish("other/kitchen", b'{"kind": "reading", "stray": 1}', qos=1)
            two.publish("alerts/door/deeper", b'{"kind": "alert", "stray": 2}', qos=0)
        fence_one, fence_two = '{"fence": 1}', '{"fence": 2}'
        one.publish("sensors/end", fence_one.encode(), qos=1)
        two.publish("alerts/end", fence_two.encode(), qos=0)
        # Each publisher's messages are delivered in its order: once its fence arrived,
        # everything it sent before had its chance.
        got = receiver.wait_payloads({fence_one, fence_two})
        after_ms = int(time.time() * 1000)

        assert first_arrivals(got) == got, "no duplicate without a fault"
        assert [p for p in got if '"dev-1"' in p] == sent_one
        assert [p for p in got if '"dev-2"' in p] == sent_two
        assert not [p for p in got if "debug" in p or "stray" in p]
        assert len(got) == len(sent_one) + len(sent_two) + 2

        envelopes = {item["payload"]: item for item in receiver.envelopes()}
        first = envelopes[sent_one[0]]
        assert first["topic"] == "sensors/kitchen/temp"
        assert first["qos"] == 1
        assert first["client_id"] == "dev-1"
        assert first["tenant"] == "default"
        assert first["retain"] is True
        assert before_ms <= first["timestamp"] <= after_ms
        assert envelopes[sent_one[1]]["retain"] is False
        at_most_once = envelopes[sent_two[3]]
        assert (at_most_once["topic"], at_most_once["qos"]) == ("alerts/door", 0)
        assert at_most_once["retain"] is False
        assert (at_most_once["client_id"], at_most_once["tenant"]) == ("dev-2", "default")
        assert before_ms <= at_most_once["timestamp"] <= after_ms
        assert {r.path for r in receiver.requests} == {"/ingest"}
    finally:
        receiver.stop()


# --- 2. the sink down, the broker killed: nothing acknowledged lost ------------------------


def test_nothing_acknowledged_is_lost_across_a_sink_outage_and_kill_9(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    receiver = HttpReceiver()  # not listening yet: the sink is down
    batch_size = 10
    broker = broker_factory(
        http_integration(
            "hook", receiver.url(), ["sensors/#"], f'batch_size = {batch_size}\nbody = "array"\n'
        )
    )
    publisher = paho.connect(broker.port, "dev-1")
    sent = [f"m{n}" for n in range(60)]
    for payload in sent:
        assert publisher.publish("sensors/a", payload.encode(), qos=1) == 0  # PUBACKed
    publisher.close()

    broker.kill9()  # kill -9 and start again on the same data directory
    receiver.start()
    try:
        got = receiver.wait_payloads(set(sent))
        assert first_arrivals(got) == sent
        assert duplicates(got) <= batch_size
    finally:
        receiver.stop()


def test_a_backlog_longer_than_a_session_queue_loses_nothing_and_shows_its_lag(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    # Ordinary sessions keep 20 messages here; an integration's session is its backlog and
    # keeps what packet ids allow. Only 10 are held in memory: the rest wait on disk.
    receiver = HttpReceiver()  # down
    table = http_integration(
        "hook",
        receiver.url(),
        ["sensors/#"],
        'batch_size = 10\nmax_in_flight = 10\nbody = "array"\n',
    )
    broker = broker_factory("[mqtt]\nmax_queued_messages = 20\n" + table)
    publisher = paho.connect(broker.port, "dev-1")
    sent = [f"m{n}" for n in range(100)]
    for payload in sent:
        assert publisher.publish("sensors/a", payload.encode(), qos=1) == 0
    publisher.close()
    api = AdminApi(broker.data_dir)
    wait_for(lambda: api.ok("GET", "/api/v1/integrations/hook")["lag"] == 100, what="lag 100")
    receiver.start()
    try:
        got = receiver.wait_payloads(set(sent))
        assert first_arrivals(got) == sent
        status = wait_for(
            lambda: (s := api.ok("GET", "/api/v1/integrations/hook"))["lag"] == 0 and s,
            what="the backlog drained",
        )
        assert status["dropped"] == 0
        assert status["delivered"] >= 100
    finally:
        receiver.stop()


def test_a_batch_in_flight_when_the_broker_is_killed_is_delivered_again(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    # The sink is up but answers 503 to everything: the broker holds a batch in flight,
    # retrying it, when it is killed. After the restart the sink accepts.
    accepting = threading.Event()
    receiver = HttpReceiver(lambda _body: 200 if accepting.is_set() else 503).start()
    try:
        batch_size = 5
        broker = broker_factory(
            http_integration(
                "hook",
                receiver.url(),
                ["sensors/#"],
                f'batch_size = {batch_size}\nbody = "array"\n',
            )
        )
        publisher = paho.connect(broker.port, "dev-1")
        sent = [f"m{n}" for n in range(20)]
        for payload in sent:
            assert publisher.publish("sensors/a", payload.encode(), qos=1) == 0
        publisher.close()
        wait_for(lambda: len(receiver.requests) >= 2, what="the sink to be tried and fail")
        broker.kill9()
        accepting.set()
        got = receiver.wait_payloads(set(sent))
        assert first_arrivals(got) == sent
        assert duplicates(got) <= batch_size
    finally:
        receiver.stop()


# --- 3. a poison message goes to the dead-letter topic ---------------------------------------


def test_a_poison_message_is_dead_lettered_and_the_rest_flow(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    receiver = HttpReceiver(lambda body: 422 if body.get("payload") == "poison" else 200).start()
    try:
        broker = broker_factory(http_integration("hook", receiver.url(), ["sensors/#"]))
        dead = paho.connect(broker.port, "watcher")
        assert dead.subscribe("$integrations/hook/dead", qos=1) == [1]
        publisher = paho.connect(broker.port, "dev-1")
        sent = ["a", "b", "poison", "c", "d"]
        for payload in sent:
            assert publisher.publish("sensors/x", payload.encode(), qos=1) == 0

        got = receiver.wait_payloads({"a", "b", "c", "d"})
        assert got == ["a", "b", "c", "d"]
        [letter] = dead.wait_messages(1)
        assert letter.topic == "$integrations/hook/dead"
        assert letter.qos == 1
        body = json.loads(letter.payload)
        assert body["integration"] == "hook"
        assert "422" in body["reason"]
        original = body["message"]
        assert original["topic"] == "sensors/x"
        assert original["payload"] == "poison"
        assert original["client_id"] == "dev-1"
        assert original["qos"] == 1
        assert [r.status for r in receiver.requests if r.body.get("payload") == "poison"] == [422]
    finally:
        receiver.stop()


# --- 4. no client may take an integration's session -----------------------------------------


@pytest.mark.parametrize(("level", "refused"), [(5, 0x85), (4, 2)])
def test_a_client_cannot_connect_as_an_integration(
    broker_factory: BrokerFactory, level: int, refused: int
) -> None:
    broker = broker_factory(http_integration("hook", "http://127.0.0.1:9/x", ["sensors/#"]))
    client = RawClient(broker.port)
    try:
        connack = client.connect("$integration/hook", level=level, expect_success=False)
        assert connack.reason_code == refused
        client.wait_closed()
    finally:
        client.close()


# --- 5. a bad [[integration]] table stops serve with one line --------------------------------


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('type = "http"\nfilters = ["a/#"]\nurl = "ftp://x"', "integration[0].url"),
        ('type = "smtp"\nfilters = ["a/#"]\nurl = "http://x"', "integration[0].type"),
        ('type = "http"\nfilters = ["a/#/b"]\nurl = "http://x"', "integration[0].filters"),
    ],
)
def test_serve_refuses_a_bad_integration_naming_its_key(
    tmp_path: Path, table: str, key: str
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(f'[[integration]]\nname = "hook"\n{table}\n')
    done = cli(
        "serve", "--port", "0", "--data-dir", str(tmp_path / "data"), "--config", str(config)
    )
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mqttq: error: "), lines
    assert key in lines[0], lines


# --- 6. changed while traffic flows, observed, paused, removed -------------------------------


def test_an_integration_changed_while_traffic_flows(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    receiver = HttpReceiver().start()
    try:
        broker = broker_factory()
        api = AdminApi(broker.data_dir)
        created = api.ok(
            "POST",
            "/api/v1/integrations",
            {
                "name": "live",
                "type": "http",
                "filters": ["live/#"],
                "url": receiver.url(),
                "batch_size": 10,
                "retry_initial_ms": 20,
                "retry_max_ms": 200,
            },
        )
        assert created["batch_size"] == 10

        publisher = paho.connect(broker.port, "dev-1")
        sent = [f"m{n}" for n in range(200)]
        failures: list[BaseException] = []

        def publish_all() -> None:
            try:
                for payload in sent:
                    assert publisher.publish("live/a", payload.encode(), qos=1) == 0
            except BaseException as exc:  # re-raised on the test thread
                failures.append(exc)

        thread = threading.Thread(target=publish_all)
        thread.start()
        wait_for(lambda: len(receiver.payloads()) >= 20, what="traffic to flow")
        changed = api.ok("PUT", "/api/v1/integrations/live", {"batch_size": 50})
        assert changed["batch_size"] == 50
        thread.join(DEADLINE * 3)
        assert not thread.is_alive() and not failures, failures

        got = receiver.wait_payloads(set(sent))
        assert first_arrivals(got) == sent
        assert duplicates(got) <= 10  # at most the batch in flight when it was changed

        [status] = wait_for(
            lambda: [s for s in api.ok("GET", "/api/v1/integrations") if s["lag"] == 0],
            what="the backlog to drain",
        )
        assert status["name"] == "live" and status["batch_size"] == 50
        delivered = status["delivered"]
        assert delivered > 0  # counted since the change restarted its worker
        listed = json.loads(ok_cli("integration", "ls", "--json", "--data-dir", broker.data_dir))
        assert [(s["name"], s["delivered"], s["lag"]) for s in listed] == [("live", delivered, 0)]
        metrics = api.metrics()
        assert metric_value(metrics, "mqttq_integration_delivered_total", integration="live") == (
            delivered
        )

        paused = api.ok("POST", "/api/v1/integrations/live/pause")
        assert paused["state"] == "paused"
        held = [f"p{n}" for n in range(5)]
        for payload in held:
            assert publisher.publish("live/a", payload.encode(), qos=1) == 0
        wait_for(
            lambda: api.ok("GET", "/api/v1/integrations/live")["lag"] == len(held),
            what="the paused integration's lag to grow",
        )
        assert not set(held) & set(receiver.payloads())
        assert api.ok("GET", "/api/v1/integrations/live")["delivered"] == delivered

        api.ok("POST", "/api/v1/integrations/live/resume")
        receiver.wait_payloads(set(held))
        resumed = wait_for(
            lambda: (s := api.ok("GET", "/api/v1/integrations/live"))["lag"] == 0 and s,
            what="the resumed integration to drain",
        )
        assert resumed["delivered"] == delivered + len(held)

        sessions = api.ok("GET", "/api/v1/sessions")["sessions"]
        assert "$integration/live" in [s["client_id"] for s in sessions]
        removed = ok_cli("integration", "rm", "live", "--data-dir", broker.data_dir)
        assert "live" in removed
        assert api.ok("GET", "/api/v1/integrations") == []
        sessions = api.ok("GET", "/api/v1/sessions")["sessions"]
        assert "$integration/live" not in [s["client_id"] for s in sessions]
        status_code, _ = api.call("GET", "/api/v1/integrations/live")
        assert status_code == 404
    finally:
        receiver.stop()


def ok_cli(*args: Any) -> str:
    """A CLI command's stdout, asserting it exited 0."""
    done = cli(*(str(arg) for arg in args))
    assert done.returncode == 0, done
    return done.stdout


# --- 7. the MQTT bridge to a real Mosquitto --------------------------------------------------


def bridge(name: str, direction: str, filters: list[str], port: int) -> str:
    return (
        f'[[integration]]\nname = "{name}"\ntype = "mqtt"\ndirection = "{direction}"\n'
        f'filters = {json.dumps(filters)}\nhost = "127.0.0.1"\nport = {port}\n{FAST_RETRY}'
    )


def wait_remote_subscription(mosquitto: Mosquitto, client_id: str) -> None:
    """Until `client_id` subscribed at `mosquitto` (its log says so)."""
    wait_for(
        lambda: f"Received SUBSCRIBE from {client_id}" in mosquitto.log_text(),
        timeout=DEADLINE * 2,
        what=f"{client_id} to subscribe at mosquitto",
    )


def test_the_bridge_out_and_in_through_a_real_mosquitto(
    broker_factory: BrokerFactory, paho: PahoClients, tmp_path: Path
) -> None:
    mosquitto = Mosquitto(tmp_path / "mosquitto")
    mosquitto.start()
    remote = Subscriber(mosquitto, "-t", "out/#", "-t", "loop/#", "-F", "MSG|%t %p")
    try:
        broker = broker_factory(
            bridge("to-mosquitto", "out", ["out/#"], mosquitto.port)
            + bridge("from-mosquitto", "in", ["in/#"], mosquitto.port)
            + bridge("loop-out", "out", ["loop/#"], mosquitto.port)
            + bridge("loop-in", "in", ["loop/#"], mosquitto.port)
        )
        local = paho.connect(broker.port, "local-sub")
        local.subscribe("in/#", qos=1)
        local.subscribe("loop/#", qos=1)
        wait_remote_subscription(mosquitto, "mqttq-bridge-from-mosquitto")
        wait_remote_subscription(mosquitto, "mqttq-bridge-loop-in")
        publisher = paho.connect(broker.port, "local-pub")

        # out: published here, received at Mosquitto
        for n in range(5):
            assert publisher.publish(f"out/{n}", b"out-%d" % n, qos=1) == 0
        assert remote.wait_messages(5)[:5] == [f"out/{n} out-{n}" for n in range(5)]

        # in: published at Mosquitto, received here
        for n in range(5):
            publish(mosquitto, f"in/{n}", f"in-{n}")
        got = local.wait_messages(5)
        assert [(m.topic, m.payload) for m in got] == [(f"in/{n}", b"in-%d" % n) for n in range(5)]

        # a loop (out and in on the same topics): each message crosses once
        assert publisher.publish("loop/here", b"from-local", qos=1) == 0
        wait_for(lambda: "loop/here from-local" in remote.messages(), what="the export")
        publish(mosquitto, "loop/there", "from-remote")
        local.wait_messages(7)
        # Fences: anything echoed back would come before them on the same path.
        publish(mosquitto, "loop/fence-in", "fence")
        assert publisher.publish("loop/fence-out", b"fence", qos=1) == 0
        wait_for(
            lambda: (
                "loop/fence-in" in [m.topic for m in local.messages]
                and "loop/fence-out fence" in remote.messages()
            ),
            what="the fences on both sides",
        )
        local_loop = [(m.topic, m.payload) for m in local.messages if m.topic.startswith("loop/")]
        assert sorted(local_loop) == sorted(
            [
                ("loop/here", b"from-local"),
                ("loop/there", b"from-remote"),
                ("loop/fence-in", b"fence"),
                ("loop/fence-out", b"fence"),
            ]
        ), local_loop
        remote_loop = [line for line in remote.messages() if line.startswith("loop/")]
        assert sorted(remote_loop) == sorted(
            [
                "loop/here from-local",
                "loop/there from-remote",
                "loop/fence-in fence",
                "loop/fence-out fence",
            ]
        ), remote_loop
    finally:
        remote.close()
        mosquitto.stop()


# --- 8. a PostgreSQL table --------------------------------------------------------------------


def test_rows_appear_in_a_postgresql_table_it_created(
    broker_factory: BrokerFactory, paho: PahoClients, postgres_url: str
) -> None:
    broker = broker_factory(
        '[[integration]]\nname = "to-pg"\ntype = "postgres"\nfilters = ["sensors/#"]\n'
        f'url = "{postgres_url}"\ntable = "readings"\ncreate_table = true\n{FAST_RETRY}'
    )
    publisher = paho.connect(broker.port, "dev-1")
    sent = [{"n": n, "temp": 20 + n} for n in range(10)]
    for reading in sent:
        assert publisher.publish("sensors/kitchen", json.dumps(reading).encode(), qos=1) == 0
    assert publisher.publish("sensors/raw", b"\xff\x00", qos=1) == 0

    def rows() -> list[tuple[Any, ...]]:
        try:
            with psycopg.connect(postgres_url) as conn:
                return conn.execute(
                    "SELECT topic, client_id, tenant, qos, retain, payload, payload_raw"
                    " FROM readings ORDER BY received_at, payload->>'n'"
                ).fetchall()
        except psycopg.errors.UndefinedTable:
            return []

    wait_for(lambda: len(rows()) >= len(sent) + 1, what="the rows")
    found = rows()
    assert found[: len(sent)] == [
        ("sensors/kitchen", "dev-1", "default", 1, False, reading, None) for reading in sent
    ]
    assert found[len(sent) :] == [("sensors/raw", "dev-1", "default", 1, False, None, b"\xff\x00")]


# --- client events --------------------------------------------------------------------------


def test_client_events_reach_the_webhook_in_order(broker_factory: BrokerFactory) -> None:
    receiver = HttpReceiver().start()
    try:
        events = '["connected", "subscribed", "unsubscribed", "disconnected"]'
        table = (
            f'[[integration]]\nname = "presence"\ntype = "http"\nevents = {events}\n'
            f'url = "{receiver.url()}"\n{FAST_RETRY}'
        )
        broker = broker_factory(table)
        device = RawClient(broker.port)
        device.connect("sensor-7")
        device.subscribe(("cmd/sensor-7", 1))
        device.unsubscribe("cmd/sensor-7")
        device.disconnect()  # sends DISCONNECT 0x00 and closes
        wait_for(lambda: len(receiver.envelopes()) >= 4, what="sensor-7's four events")
        raw = RawClient(broker.port)  # a connection that just goes away: connection_lost
        raw.connect("sensor-8")
        raw.close()

        def seen() -> list[tuple[str, str]]:
            return [
                (item["topic"], json.loads(item["payload"])["event"])
                for item in receiver.envelopes()
            ]

        wait_for(lambda: len(seen()) >= 6, what="six events")
        assert seen() == [
            ("$events/connected/sensor-7", "connected"),
            ("$events/subscribed/sensor-7", "subscribed"),
            ("$events/unsubscribed/sensor-7", "unsubscribed"),
            ("$events/disconnected/sensor-7", "disconnected"),
            ("$events/connected/sensor-8", "connected"),
            ("$events/disconnected/sensor-8", "disconnected"),
        ]
        bodies = [json.loads(item["payload"]) for item in receiver.envelopes()]
        assert bodies[1]["topic_filters"] == ["cmd/sensor-7"]
        assert bodies[3]["reason"] == "normal"
        assert bodies[5]["reason"] == "connection_lost"
        assert all(body["tenant"] == "default" for body in bodies)
        assert not any("$integration/" in body["client_id"] for body in bodies)
    finally:
        receiver.stop()


def test_a_burst_past_what_is_held_in_memory_arrives_whole(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    # Only 20 messages are held in memory: the rest is read back from disk while new ones
    # keep arriving (an entry stored during such a read must not be skipped).
    receiver = HttpReceiver().start()
    try:
        extra = 'batch_size = 10\nmax_in_flight = 20\nlinger_ms = 0\nbody = "array"\n'
        broker = broker_factory(http_integration("hook", receiver.url(), ["burst/#"], extra))
        publishers = [paho.connect(broker.port, f"pub-{n}") for n in range(4)]
        sent: dict[str, list[str]] = {}

        def publish(index: int) -> None:
            payloads = sent[f"pub-{index}"] = [f"p{index}-{n}" for n in range(300)]
            for payload in payloads:
                assert publishers[index].publish(f"burst/{index}", payload.encode(), qos=1) == 0

        threads = [threading.Thread(target=publish, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        everything = {payload for payloads in sent.values() for payload in payloads}
        got = receiver.wait_payloads(everything, timeout=30)
        for index in range(4):  # in order per publisher
            mine = [p for p in first_arrivals(got) if p.startswith(f"p{index}-")]
            assert mine == sent[f"pub-{index}"]
    finally:
        receiver.stop()


# --- 6. a data directory from before the log -----------------------------------------------


def test_a_queue_stored_before_the_log_is_delivered_first_and_emptied(
    broker_factory: BrokerFactory, paho: PahoClients
) -> None:
    # An older broker kept an integration's backlog as the queue of its stored session
    # `$integration/hook` (as this one still queues there while no log is attached: the
    # publish inbox's replay at a start, messages before the integrations start). The
    # broker moves that queue into the log ahead of what arrives after the start, and
    # empties it.
    receiver = HttpReceiver()  # down while the old queue is written
    broker = broker_factory(http_integration("hook", receiver.url(), ["sensors/#"]))
    assert broker.terminate() == 0
    shutil.rmtree(broker.data_dir / "integrations")  # no log yet: an older data directory
    old = [f"old{n}" for n in range(30)]
    asyncio.run(_store_old_queue(broker.data_dir / "mqttq.sqlite3", old))

    broker.start()
    receiver.start()
    try:
        publisher = paho.connect(broker.port, "dev-1")
        new = [f"new{n}" for n in range(10)]
        for payload in new:
            assert publisher.publish("sensors/a", payload.encode(), qos=1) == 0
        got = receiver.wait_payloads({*old, *new})
        assert first_arrivals(got) == old + new
        assert duplicates(got) == 0
        assert (broker.data_dir / "integrations" / "hook").is_dir()
        api = AdminApi(broker.data_dir)
        wait_for(lambda: api.ok("GET", "/api/v1/integrations/hook")["lag"] == 0, what="lag 0")
    finally:
        receiver.stop()
    assert broker.terminate() == 0
    assert asyncio.run(_stored_queue(broker.data_dir / "mqttq.sqlite3")) == []


async def _store_old_queue(path: Path, payloads: list[str]) -> None:
    storage = SqliteStorage(path)
    await storage.open()
    try:
        client_id = "$integration/hook"
        subscription = Subscription("sensors/#", 1, retain_as_published=True, retain_handling=2)
        await storage.save_session(
            SessionRecord(client_id, 5, 0xFFFFFFFF, [subscription], time.time())
        )
        now = time.time()
        messages = [
            Message("sensors/a", p.encode(), 1, False, created_at=now, publisher_id="dev-0")
            for p in payloads
        ]
        entries = await storage.enqueue([(client_id, m) for m in messages])
        assert all(entry is not None for entry in entries)
    finally:
        await storage.close()


async def _stored_queue(path: Path) -> list[bytes]:
    storage = SqliteStorage(path)
    await storage.open()
    try:
        entries = await storage.fetch("$integration/hook", time.time())
        return [entry.message.payload for entry in entries]
    finally:
        await storage.close()
