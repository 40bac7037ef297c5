"""`mqttq blocked add|ls|rm|failed` as a user runs it (a subprocess): straight on the
store when no broker runs (the entry holds from the broker's next start), and through a
running broker's admin API (applied at once: a connected client it matches is
disconnected)."""

from __future__ import annotations

import json

from tests.harness import InProcessBroker
from tests.integration.raw_client import RawClient
from tests.integration.test_cli_tenant import run_cli
from tests.integration.waiting import BrokerFactory, wait_for

BANNED = 0x8A


def connack_code(port: int, client_id: str, level: int = 5) -> int:
    client = RawClient(port)
    try:
        code = client.connect(client_id, level=level, expect_success=False).reason_code
        assert code is not None
        return code
    finally:
        client.close()


def test_offline_add_holds_from_the_next_start(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    assert isinstance(broker, InProcessBroker)
    broker.terminate()
    common = ("--data-dir", str(broker.data_dir))
    added = run_cli(
        "blocked", "add", "--client-id", "dev-1", "--reason", "stolen", "--expires-in", "2h",
        "--json", *common,
    )  # fmt: skip
    assert added.code == 0, added.stderr
    entry = json.loads(added.stdout)
    assert (entry["kind"], entry["value"], entry["reason"]) == ("client_id", "dev-1", "stolen")
    assert entry["expires_at"] - entry["created_at"] == 7200
    assert "broker not running: using" in added.stderr
    regex = run_cli("blocked", "add", "--regex", "tmp-[0-9]+", "--json", *common)
    assert regex.code == 0, regex.stderr
    listed = run_cli("blocked", "ls", "--json", *common)
    assert listed.code == 0, listed.stderr
    assert [e["value"] for e in json.loads(listed.stdout)["blocked"]] == ["dev-1", "tmp-[0-9]+"]
    table = run_cli("blocked", "ls", *common)
    assert "dev-1" in table.stdout and "stolen" in table.stdout and "never" in table.stdout
    no_log = run_cli("blocked", "failed", *common)
    assert no_log.code == 1
    assert "mqttq: error: no broker is running" in no_log.stderr
    broker.start()
    assert connack_code(broker.port, "dev-1") == BANNED
    assert connack_code(broker.port, "tmp-12", level=4) == 5
    assert connack_code(broker.port, "dev-2") == 0


def test_through_the_running_broker(broker: InProcessBroker) -> None:
    common = ("--data-dir", str(broker.data_dir))
    victim = RawClient(broker.port)
    try:
        victim.connect("sensor-7")
        added = run_cli("blocked", "add", "--regex", "sensor-.*", "--json", *common)
        assert added.code == 0, added.stderr
        assert "via admin API at http://127.0.0.1:" in added.stderr
        packets = victim.wait_closed()
        assert [(p.type, p.reason_code) for p in packets] == [(14, 0x98)]  # DISCONNECT
    finally:
        victim.close()
    entry = json.loads(added.stdout)
    assert connack_code(broker.port, "sensor-8") == BANNED
    failed = run_cli("blocked", "failed", "--client-id", "sensor-8", "--json", *common)
    assert failed.code == 0, failed.stderr
    (item,) = json.loads(failed.stdout)["failed_connections"]
    assert (item["client_id"], item["address"], item["reason"], item["reason_code"]) == (
        "sensor-8",
        "127.0.0.1",
        "blocked",
        BANNED,
    )
    table = run_cli("blocked", "failed", *common)
    assert "sensor-8" in table.stdout and "blocked" in table.stdout and "0x8A" in table.stdout
    removed = run_cli("blocked", "rm", "--regex", "sensor-.*", *common)
    assert removed.code == 0, removed.stderr
    assert f"blocked-client entry {entry['id']} removed" in removed.stdout
    assert connack_code(broker.port, "sensor-8") == 0
    again = run_cli("blocked", "rm", entry["id"], *common)
    assert again.code == 1
    assert f"mqttq: error: no blocked-client entry {entry['id']!r}" in again.stderr
    # Added through the API, kept in the data dir: still there after a restart.
    assert run_cli("blocked", "add", "--username", "mallory", *common).code == 0
    broker.restart()
    listed = run_cli("blocked", "ls", "--json", *common)
    assert [e["value"] for e in json.loads(listed.stdout)["blocked"]] == ["mallory"]


def test_bad_input_is_one_line_and_exit_2(broker: InProcessBroker) -> None:
    common = ("--data-dir", str(broker.data_dir))
    cases = [
        (("--address", "10.0.0.0/33"), "mqttq: error: --address: '10.0.0.0/33' is not an IP"),
        (("--regex", "a("), "mqttq: error: --regex: 'a(' does not compile"),
        (("--client-id", "x", "--expires-in", "soon"), "mqttq: error: --expires-in: 'soon'"),
        (("--regex", "x", "--regex-on", "topic"), "mqttq: error: --regex-on: 'topic'"),
        (("--client-id", "x", "--username", "y"), "mqttq: error: give exactly one of"),
        ((), "mqttq: error: give exactly one of"),
    ]
    for args, line in cases:
        run = run_cli("blocked", "add", *args, *common)
        assert run.code == 2, (args, run.stderr)
        errors = [text for text in run.stderr.splitlines() if text.startswith("mqttq:")]
        assert len(errors) == 1 and errors[0].startswith(line), (args, run.stderr)
        assert "Traceback" not in run.stderr
    assert run_cli("blocked", "ls", "--json", *common).stdout.strip() == '{"blocked": []}'


def test_store_edit_reaches_a_broker_without_admin_api(broker_factory: BrokerFactory) -> None:
    """With no admin API to go through, `mqttq blocked add` writes the data dir's store and
    the running broker reads the change (its poll of the SQLite file) and applies it."""
    broker = broker_factory("[admin]\nenabled = false\n")
    assert isinstance(broker, InProcessBroker)
    common = ("--data-dir", str(broker.data_dir))
    client = RawClient(broker.port)
    try:
        client.connect("late-1")
        added = run_cli("blocked", "add", "--client-id", "late-1", *common)
        assert added.code == 0, added.stderr
        assert "directly" in added.stderr
        packets = client.wait_closed()
        assert [(p.type, p.reason_code) for p in packets] == [(14, 0x98)]  # DISCONNECT
    finally:
        client.close()
    assert connack_code(broker.port, "late-1") == BANNED
    removed = run_cli("blocked", "rm", "--client-id", "late-1", *common)
    assert removed.code == 0, removed.stderr
    wait_for(lambda: connack_code(broker.port, "late-1") == 0, what="the block lifted")
