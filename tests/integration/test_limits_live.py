"""Limits changed under connected clients, and rate limits under concurrent load (issue 5):
a quota set through the admin API or `mqttq tenant set`, or a default quota or node limit
re-read on SIGHUP, applies to the very connections already open; one tenant publishing
past its rate never costs another tenant a message. Assertions count admitted and refused
operations (a rate's admitted count is bounded by rate x measured elapsed time + burst);
none asserts a duration. Count limits and reason codes: test_limits.py."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.helpers import Clients
from tests.integration.test_cli_tenant import run_cli
from tests.integration.test_limits import (
    EXACT_RATES,
    connect,
    publish_burst,
    refusals,
    tokens,
)
from tests.integration.waiting import BrokerFactory, BrokerUnderTest, wait_for
from tests.integration.wire import RC

pytestmark = [pytest.mark.mqttq_only, pytest.mark.broker_process]  # SIGHUP


def config_file(broker: BrokerUnderTest) -> Path:
    """The broker.toml the broker under test was started with."""
    path: Path = broker.workdir / "broker.toml"
    assert path.exists()
    return path


def send_sighup(broker: BrokerUnderTest) -> None:
    process = broker.process
    assert process is not None
    process.send_signal(signal.SIGHUP)


# --- quotas changed under connected clients ------------------------------------------------


def test_raised_quota_applies_to_a_connected_client(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config=EXACT_RATES)
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_publish_rate=tokens(1))
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    assert publish_burst(acme, 3) == [RC.NO_MATCHING_SUBSCRIBERS] + [RC.QUOTA_EXCEEDED] * 2
    api.set_tenant("acme", max_publish_rate=1_000_000)
    assert publish_burst(acme, 50) == [RC.NO_MATCHING_SUBSCRIBERS] * 50  # same connection
    tenant = api.ok("GET", "/api/v1/tenants/acme")
    assert tenant["quota"]["max_publish_rate"] == 1_000_000
    assert tenant["usage"]["connections"] == 1


def test_cli_tenant_set_changes_the_rate_of_a_connected_client(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """`mqttq tenant set acme --max-publish-rate N` finds the running broker through
    --data-dir; lowered to a burst of 2, the connection already open gets exactly 2 more
    PUBLISHes through, then 0x97; raised again, the same connection gets through."""
    broker = broker_factory(config=EXACT_RATES)
    data_dir = str(broker.data_dir)
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    assert publish_burst(acme, 3) == [RC.NO_MATCHING_SUBSCRIBERS] * 3  # the default quota
    lowered = run_cli(
        "tenant", "set", "acme", "--max-publish-rate", str(tokens(2)), "--data-dir", data_dir
    )
    assert lowered.code == 0, lowered.stderr
    assert "via admin API" in lowered.stderr
    assert publish_burst(acme, 5) == [RC.NO_MATCHING_SUBSCRIBERS] * 2 + [RC.QUOTA_EXCEEDED] * 3
    raised = run_cli("tenant", "set", "acme", "--max-publish-rate", "1000", "--data-dir", data_dir)
    assert raised.code == 0, raised.stderr
    assert publish_burst(acme, 5) == [RC.NO_MATCHING_SUBSCRIBERS] * 5
    assert refusals(AdminApi(broker.data_dir)) == {("acme", "publish_rate"): 3}


def test_sighup_changes_the_default_quota_for_connected_clients(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """`[mqtt_limit.tenant]` edited and SIGHUP sent: a connected client of a tenant without
    a stored quota (globex) gets the new publish burst of 2, and globex's next session is
    over the new max_sessions = 1; acme, whose quota is stored, keeps it."""
    before = f"{EXACT_RATES}[mqtt_limit.tenant]\nmax_publish_rate = 1000.0\n"
    broker = broker_factory(config=before)
    api = AdminApi(broker.data_dir)
    api.set_tenant("acme", max_publish_rate=1000)
    globex, _ = connect(clients, broker, "globex-pub", "globex")
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    assert publish_burst(globex, 3) == [RC.NO_MATCHING_SUBSCRIBERS] * 3
    after = f"{EXACT_RATES}[mqtt_limit.tenant]\nmax_publish_rate = {tokens(2)}\nmax_sessions = 1\n"
    config_file(broker).write_text(after)
    send_sighup(broker)

    def reloaded() -> bool:
        status, body = api.call("GET", "/api/v1/tenants")
        return status == 200 and body["default_quota"]["max_sessions"] == 1

    wait_for(reloaded, interval=0.1, what="the default quota re-read on SIGHUP")
    assert publish_burst(globex, 5) == [RC.NO_MATCHING_SUBSCRIBERS] * 2 + [RC.QUOTA_EXCEEDED] * 3
    _, code = connect(clients, broker, "globex-2", "globex", expect_success=False)
    assert code == RC.QUOTA_EXCEEDED
    assert publish_burst(acme, 5) == [RC.NO_MATCHING_SUBSCRIBERS] * 5
    connect(clients, broker, "acme-2", "acme")
    assert refusals(api) == {("globex", "publish_rate"): 3, ("globex", "sessions"): 1}


def test_sighup_changes_burst_wait_and_admin_rate(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """`[mqtt_limit] burst_seconds` and `[admin] max_request_rate` edited and SIGHUP sent:
    a connected client's bucket grows to the new burst at once (2 -> 6 tokens: 4 more
    through), and the admin API's routes get the new rate (burst 1: the next call 429)."""
    quota = f"[mqtt_limit.tenant]\nmax_publish_rate = {tokens(2)}\n"
    broker = broker_factory(config=EXACT_RATES + quota)
    api = AdminApi(broker.data_dir)
    globex, _ = connect(clients, broker, "globex-pub", "globex")
    assert publish_burst(globex, 3) == [RC.NO_MATCHING_SUBSCRIBERS] * 2 + [RC.QUOTA_EXCEEDED]
    after = EXACT_RATES.replace("burst_seconds = 1000", "burst_seconds = 3000")
    config_file(broker).write_text(f"{after}{quota}[admin]\nmax_request_rate = 0.001\n")
    send_sighup(broker)
    wait_for(
        lambda: api.call("GET", "/api/v1/limits")[0] == 429,
        interval=0.1,
        what="the admin API's rate re-read on SIGHUP",
    )
    assert publish_burst(globex, 5) == [RC.NO_MATCHING_SUBSCRIBERS] * 4 + [RC.QUOTA_EXCEEDED]


def test_node_limits_change_through_the_api_and_sighup(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[mqtt_limit.cluster]\nmax_connections_per_node = 100\n")
    api = AdminApi(broker.data_dir)
    assert api.ok("GET", "/api/v1/limits")["node"]["max_connections_per_node"] == 100
    api.ok("PUT", "/api/v1/limits", {"max_connections_per_node": 1})
    connect(clients, broker, "only")
    assert connect(clients, broker, "second", expect_success=False)[1] == RC.QUOTA_EXCEEDED
    # SIGHUP re-reads the file: back to 100.
    assert "max_connections_per_node = 100" in config_file(broker).read_text()
    send_sighup(broker)
    wait_for(lambda: api.ok("GET", "/api/v1/limits")["node"]["max_connections_per_node"] == 100)
    connect(clients, broker, "third")


# --- rates under load ----------------------------------------------------------------------


def test_publish_over_the_rate_waits_for_a_token_within_the_bound(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """With a wait bound, a burst over the rate is delayed, not refused (20/s, bound 5 s:
    30 messages need at most about 1.5 s of waiting)."""
    broker = broker_factory(config="[mqtt_limit]\nrate_wait_ms = 5000\nburst_seconds = 0.1\n")
    AdminApi(broker.data_dir).set_tenant("acme", max_publish_rate=20)
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    assert publish_burst(acme, 30) == [RC.NO_MATCHING_SUBSCRIBERS] * 30


def test_a_tenant_at_its_publish_rate_does_not_hold_up_another(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """acme (4/s, burst 4, wait bound 200 ms) publishes QoS 1 back to back from one thread:
    between tokens it is refused (0x97: the next token is more than 200 ms away), and in
    the last 200 ms before each token its PUBLISH waits for it. globex publishes from
    another thread meanwhile, until acme has waited for at least two tokens: every globex
    PUBLISH is admitted (PUBACK 0x00) and delivered, and acme's admitted count stays within
    4 x the elapsed time measured around all of acme's publishing + 4."""
    rate, burst, waited_for = 4.0, 4, 2
    broker = broker_factory(config="[mqtt_limit]\nrate_wait_ms = 200\nburst_seconds = 1\n")
    api = AdminApi(broker.data_dir)
    start = time.monotonic()  # every token acme takes is taken after this
    api.set_tenant("acme", max_publish_rate=rate)
    acme_sub, _ = connect(clients, broker, "acme-sub", "acme")
    globex_sub, _ = connect(clients, broker, "globex-sub", "globex")
    assert acme_sub.subscribe(("t", 1)).reason_codes == (1,)
    assert globex_sub.subscribe(("t", 1)).reason_codes == (1,)
    acme, _ = connect(clients, broker, "acme-pub", "acme")
    globex, _ = connect(clients, broker, "globex-pub", "globex")

    acme_codes: list[int] = []
    acme_elapsed: list[float] = []
    acme_errors: list[BaseException] = []
    acme_refused = threading.Event()
    acme_waited = threading.Event()
    globex_done = threading.Event()

    def publish_as_acme() -> None:
        admitted = 0
        try:
            while not globex_done.is_set():
                puback = acme.publish("t", b"acme", qos=1)
                assert puback is not None and puback.reason_code is not None
                acme_codes.append(puback.reason_code)
                if puback.reason_code == RC.QUOTA_EXCEEDED:
                    acme_refused.set()
                    continue
                admitted += 1
                if admitted >= burst + waited_for:
                    acme_waited.set()
            acme_elapsed.append(time.monotonic() - start)
        except BaseException as error:  # re-raised in the test's thread
            acme_errors.append(error)
        finally:
            acme_refused.set()
            acme_waited.set()

    acme_thread = threading.Thread(target=publish_as_acme, name="acme-publisher")
    acme_thread.start()
    globex_codes: list[int] = []
    try:
        assert acme_refused.wait(timeout=30), "acme was never refused"
        while not acme_waited.is_set():  # globex publishes while acme is over its rate
            assert len(globex_codes) < 2000, "acme never got a token after waiting"
            globex_codes += publish_burst(globex, 1)
            time.sleep(0.005)  # a steady publisher, not a flood: a few hundred messages
    finally:
        globex_done.set()
        acme_thread.join(timeout=30)
    assert not acme_thread.is_alive()
    if acme_errors:
        raise acme_errors[0]

    assert globex_codes == [RC.SUCCESS] * len(globex_codes)
    assert len(globex_sub.receive_messages(len(globex_codes))) == len(globex_codes)
    admitted = acme_codes.count(RC.SUCCESS)
    refused = acme_codes.count(RC.QUOTA_EXCEEDED)
    assert admitted + refused == len(acme_codes)
    assert refused > 0
    assert burst + waited_for <= admitted <= rate * acme_elapsed[0] + burst
    assert len(acme_sub.receive_messages(admitted)) == admitted
    assert refusals(api) == {("acme", "publish_rate"): refused}
    routed = metric_value(api.metrics(), "mqttq_messages_received_total", qos="1")
    assert routed == admitted + len(globex_codes)  # a refused PUBLISH is never routed
