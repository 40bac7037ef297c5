"""`mqttq bench` against real brokers: `mqttq serve` and Debian's mosquitto (reference),
each on a free loopback port.

These tests check the tool's accounting, never its speed: every expected message arrives
once and in order, QoS handshakes complete, the persistent backlog drains, and the CLI's
JSON and error paths behave.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mqttq.bench import BenchError, BenchOptions, run_plan
from mqttq.bench import scenarios as sc
from mqttq.bench.stats import LatencyHistogram
from mqttq.cli.bench import bench_app

MOSQUITTO = Path("/usr/sbin/mosquitto")
HOST = "127.0.0.1"

pytestmark = pytest.mark.skipif(not MOSQUITTO.exists(), reason="mosquitto is not installed")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def mosquitto_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A mosquitto 2.0 listening on 127.0.0.1 only, with unlimited queues, for this module."""
    workdir = tmp_path_factory.mktemp("mosquitto")
    for _attempt in range(5):
        # mosquitto cannot report an ephemeral port: pick a free one, retry if it got taken.
        port = _free_port()
        conf = workdir / "mosquitto.conf"
        lines = [
            f"listener {port} {HOST}",
            "allow_anonymous true",
            "persistence false",
            "max_queued_messages 0",
            "set_tcp_nodelay true",
            "log_dest stderr",
            "log_type error",
        ]
        if os.geteuid() == 0:
            lines.append("user root")
        conf.write_text("\n".join(lines) + "\n")
        log = (workdir / "mosquitto.log").open("ab")
        process = subprocess.Popen(
            [str(MOSQUITTO), "-c", str(conf)], stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while process.poll() is None and time.monotonic() < deadline and not _listening(port):
            time.sleep(0.05)
        if process.poll() is None and _listening(port):
            break
        process.kill()
        process.wait()
        log.close()
    else:
        pytest.fail(f"mosquitto did not start: {(workdir / 'mosquitto.log').read_text()}")
    try:
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def mqttq_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`mqttq serve` on port 0 (embedded SQLite) for this module; the port from its ready
    file."""
    workdir = tmp_path_factory.mktemp("mqttq")
    ready = workdir / "ready.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"
    command = [sys.executable, "-m", "mqttq", "serve", "--port", "0"]
    command += ["--data-dir", str(workdir / "data"), "--ready-file", str(ready)]
    log = (workdir / "mqttq.log").open("ab")
    process = subprocess.Popen(command, stdout=log, stderr=log, env=env)
    deadline = time.monotonic() + 30
    while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not ready.exists():
        process.kill()
        process.wait()
        log.close()
        pytest.fail(f"mqttq did not start: {(workdir / 'mqttq.log').read_text()}")
    try:
        yield int(json.loads(ready.read_text())["mqtt_port"])
    finally:
        process.terminate()
        assert process.wait(timeout=15) == 0
        log.close()


@pytest.fixture(params=["mqttq", "mosquitto"])
def broker_port(request: pytest.FixtureRequest) -> int:
    """The port of each real broker in turn: the tool must account exactly on both."""
    port: int = request.getfixturevalue(f"{request.param}_port")
    return port


def _options(port: int, **kwargs: Any) -> BenchOptions:
    values: dict[str, Any] = {
        "host": HOST,
        "port": port,
        "duration": None,
        "count": 50,
        "drain_timeout": 10.0,
        "workers": 1,
    }
    values.update(kwargs)
    return BenchOptions(**values)


def _assert_complete(result: dict[str, Any], *, qos: int) -> None:
    m = result["messages"]
    assert m["received"] == m["expected"] > 0, m
    assert (m["lost"], m["duplicates"], m["out_of_order"], m["foreign"]) == (0, 0, 0, 0), m
    if qos:
        # Every PUBLISH finished its handshake: PUBACK (QoS 1) or PUBREC/PUBREL/PUBCOMP (2).
        assert m["acknowledged"] == m["published"], m
        assert result["latency_ms"]["puback"]["count"] == m["published"]
    for name in ("e2e", "puback"):
        summary = result["latency_ms"][name]
        for key in ("min", "mean", "p50", "p95", "p99", "max"):
            assert summary[key] >= 0, (name, summary)
    e2e = result["latency_ms"]["e2e"]
    assert e2e["count"] == m["received"]
    assert e2e["min"] <= e2e["p50"] <= e2e["p95"] <= e2e["p99"] <= e2e["max"]
    # The histogram in the JSON holds the same samples as the summary above.
    histogram = LatencyHistogram.from_json(result["histograms_us"]["e2e"])
    assert histogram.summary_ms() == e2e
    assert result["errors"] == []
    for row in result["tool"]["workers"]:
        assert row["cpu_s"] >= 0


@pytest.mark.parametrize("protocol", [4, 5])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_p2p_accounts_every_message(broker_port: int, qos: int, protocol: int) -> None:
    options = _options(broker_port, qos=qos, protocol=protocol)
    result = run_plan(sc.p2p(options.topic_prefix, 3), options)
    assert result["messages"]["published"] == 3 * 50
    assert result["messages"]["expected"] == 3 * 50
    _assert_complete(result, qos=qos)


def test_fan_in_each_subscriber_gets_every_publisher(broker_port: int) -> None:
    options = _options(broker_port, qos=1, count=30)
    result = run_plan(sc.fan_in(options.topic_prefix, 4, 2), options)
    assert result["messages"]["expected"] == 4 * 30 * 2
    _assert_complete(result, qos=1)


def test_fan_out_at_qos2_over_311(broker_port: int) -> None:
    options = _options(broker_port, qos=2, protocol=4, count=30)
    result = run_plan(sc.fan_out(options.topic_prefix, 1, 4), options)
    assert result["messages"]["expected"] == 30 * 4
    _assert_complete(result, qos=2)


@pytest.mark.parametrize("protocol", [4, 5])
def test_shared_group_receives_each_message_once(broker_port: int, protocol: int) -> None:
    options = _options(broker_port, qos=1, protocol=protocol, count=40)
    result = run_plan(sc.shared(options.topic_prefix, 2, 3), options)
    assert result["messages"]["expected"] == 2 * 40
    _assert_complete(result, qos=1)


@pytest.mark.parametrize("protocol", [4, 5])
def test_persistent_backlog_drains(broker_port: int, protocol: int) -> None:
    options = _options(broker_port, qos=1, protocol=protocol, count=20)
    result = run_plan(sc.persistent(options.topic_prefix, 1, 3), options)
    _assert_complete(result, qos=1)
    persistent = result["persistent"]
    assert persistent["backlog"] == 3 * 20
    assert persistent["sessions_present"] == 3
    assert persistent["drained_subscribers"] == 3
    assert persistent["drain_s"] is not None and persistent["drain_s"] >= 0
    started, ended = persistent["drain_started_ns"], persistent["drain_ended_ns"]
    assert started <= persistent["first_drained_ns"] <= ended
    assert round((ended - started) / 1e9, 3) == persistent["drain_s"]


def test_rate_limited_publishers_with_warmup(broker_port: int) -> None:
    options = _options(broker_port, qos=1, count=10, rate=200.0, warmup=0.05)
    result = run_plan(sc.p2p(options.topic_prefix, 2), options)
    m = result["messages"]
    # Warm-up messages are accounted (expected, received) but not measured.
    assert m["published"] > 2 * 10
    assert result["latency_ms"]["e2e"]["count"] == 2 * 10
    _assert_complete_except_measured(m)


def _assert_complete_except_measured(m: dict[str, int]) -> None:
    assert m["received"] == m["expected"] == m["published"]
    assert m["acknowledged"] == m["published"]
    assert (m["lost"], m["duplicates"], m["out_of_order"]) == (0, 0, 0)


def test_two_worker_processes_merge_their_results(broker_port: int) -> None:
    options = _options(broker_port, qos=1, count=40, workers=2)
    result = run_plan(sc.p2p(options.topic_prefix, 4), options)
    assert result["workers"] == 2
    assert [row["worker"] for row in result["tool"]["workers"]] == [0, 1]
    _assert_complete(result, qos=1)


def test_cli_json_output_parses(broker_port: int, tmp_path: Path) -> None:
    output = tmp_path / "result.json"
    args = ["p2p", "--port", str(broker_port), "--pairs", "2", "--count", "20"]
    args += ["--qos", "1", "--protocol", "311", "--payload", "62", "--json"]
    args += ["--output", str(output)]
    outcome = CliRunner().invoke(bench_app, args)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["scenario"] == "p2p"
    assert result["protocol"] == "3.1.1"
    assert result["payload_bytes"] == 62
    assert json.loads(output.read_text()) == result
    _assert_complete(result, qos=1)


def test_cli_persistent_json(broker_port: int) -> None:
    args = ["persistent", "--port", str(broker_port), "--subscribers", "3"]
    args += ["--messages", "20", "--json"]
    outcome = CliRunner().invoke(bench_app, args)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["persistent"]["drained_subscribers"] == 3
    _assert_complete(result, qos=1)


def test_connection_refused_is_one_line_and_exit_1() -> None:
    port = _free_port()  # nothing listens there
    outcome = CliRunner().invoke(bench_app, ["p2p", "--port", str(port), "--count", "1"])
    assert outcome.exit_code == 1
    assert outcome.stderr.strip() == (
        f"mqttq: error: cannot connect to {HOST}:{port}: is a broker running?"
    )
    assert "Traceback" not in outcome.output


def test_connection_refused_raises_bench_error() -> None:
    options = _options(_free_port())
    with pytest.raises(BenchError, match="is a broker running"):
        run_plan(sc.p2p(options.topic_prefix, 1), options)


def test_payload_smaller_than_header_is_refused(broker_port: int) -> None:
    args = ["p2p", "--port", str(broker_port), "--payload", "10", "--count", "1"]
    outcome = CliRunner().invoke(bench_app, args)
    assert outcome.exit_code == 2  # bad input, not a failed run
    assert "--payload must be at least 19 bytes" in outcome.stderr
