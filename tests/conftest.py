"""Suite-wide pytest wiring: the `mqttq_only` marker and the broker-process fixtures.

`broker` / `broker_factory` start the real `mqttq serve` as a subprocess on port 0 (the port
comes from the ready file); MQTTQ_TEST_LOG_LEVEL=debug passes --log-level to it.
With MQTTQ_TEST_BROKER=mosquitto they start Debian's mosquitto 2.0 instead, so that the
end-to-end tests can be validated against a reference broker; tests of mqttq-specific
behaviour carry `@pytest.mark.mqttq_only` and are skipped in that mode.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqttq.build import PURE_ENV
from tests.integration.helpers import (
    Clients,
)
from tests.integration.waiting import (
    HOST,
    MOSQUITTO_MODE,
    BrokerFactory,
    BrokerUnderTest,
    wait_for,
)

# Every `mqttq serve` the tests start (and the processes they start) serves its admin API
# on a free port, never on the fixed default 18083: brokers run side by side in a test.
os.environ.setdefault("MQTTQ_ADMIN__PORT", "0")

MOSQUITTO = "/usr/sbin/mosquitto"
START_DEADLINE = 30.0
"""Python start-up on a loaded 2-core machine can be slow; this bounds a hang, not speed."""
STOP_DEADLINE = 15.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mqttq_only: checks mqttq-specific behaviour; skipped when MQTTQ_TEST_BROKER=mosquitto",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not MOSQUITTO_MODE:
        return
    skip = pytest.mark.skip(reason="mqttq-specific behaviour (MQTTQ_TEST_BROKER=mosquitto)")
    for item in items:
        if item.get_closest_marker("mqttq_only"):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Keep each phase's report on the item so fixtures can tell, at teardown, that the test
    # failed (and then show the broker's log).
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


# Mosquitto equivalents of broker.toml keys; any other key has none and makes the test
# mqttq-only.
_MOSQUITTO_KEYS = {
    "mqtt.max_keep_alive": "max_keepalive",
    "mqtt.max_packet_size": "max_packet_size",
    "mqtt.topic_alias_maximum": "max_topic_alias",
    "mqtt.max_queued_messages": "max_queued_messages",
    "mqtt.queue_qos0": "queue_qos0_messages",
    "mqtt.retain_available": "retain_available",
}


def _mosquitto_conf(port: int, data_dir: Path, config: str | None) -> str:
    lines = [
        f"listener {port} {HOST}",
        "allow_anonymous true",
        "persistence true",
        f"persistence_location {data_dir}/",
        "log_dest stderr",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "log_type information",
        "set_tcp_nodelay true",
    ]
    if os.geteuid() == 0:
        lines.append("user root")
    parsed = tomllib.loads(config or "")
    for section, values in parsed.items():
        for key, value in values.items():
            name = _MOSQUITTO_KEYS.get(f"{section}.{key}")
            if name is None:
                pytest.fail(
                    f"{section}.{key} has no mosquitto equivalent: mark the test mqttq_only"
                )
            text = str(value).lower() if isinstance(value, bool) else str(value)
            lines.append(f"{name} {text}")
    return "\n".join(lines) + "\n"


def _broker_env() -> dict[str, str]:
    # MQTTQ_* variables configure mqttq; the broker must see only the test's configuration
    # (and its admin API on a free port).
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"
    if PURE_ENV in os.environ:  # not a setting: which build runs (tests/pure_python.py)
        env[PURE_ENV] = os.environ[PURE_ENV]
    return env


def _free_port() -> int:
    # Only for the mosquitto reference mode, which cannot report the port it bound.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class BrokerProcess:
    """The broker under test as a subprocess on a data directory that outlives restarts.

    `port` is re-read from the ready file at every start (it may change across restarts).
    """

    host = HOST

    def __init__(self, workdir: Path, config: str | None) -> None:
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.ready_file = workdir / "ready.json"
        self.stderr_path = workdir / "broker-stderr.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def _command(self) -> list[str]:
        if MOSQUITTO_MODE:
            self.port = _free_port()
            conf = self.workdir / "mosquitto.conf"
            conf.write_text(_mosquitto_conf(self.port, self.data_dir, self.config))
            return [MOSQUITTO, "-c", str(conf)]
        command = [sys.executable, "-m", "mqttq", "serve", "--port", "0"]
        command += ["--data-dir", str(self.data_dir), "--ready-file", str(self.ready_file)]
        if log_level := os.environ.get("MQTTQ_TEST_LOG_LEVEL"):
            command += ["--log-level", log_level]  # more detail in the log shown on failure
        if self.config is not None:
            config_path = self.workdir / "broker.toml"
            config_path.write_text(self.config)
            command += ["--config", str(config_path)]
        return command

    def start(self) -> None:
        """Start the broker and wait until it accepts connections."""
        assert self.process is None, "broker already running"
        self.ready_file.unlink(missing_ok=True)
        command = self._command()
        with self.stderr_path.open("ab") as stderr:
            stderr.write(f"--- start: {' '.join(command)}\n".encode())
            stderr.flush()
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=_broker_env()
            )
        wait_for(self._ready, timeout=START_DEADLINE, interval=0.05, what="the broker to start")

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            code = self.process.returncode
            self.process = None
            pytest.fail(f"broker exited during start-up ({code}):\n{self.stderr_text()}")
        if MOSQUITTO_MODE:
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
            except OSError:
                return False
            return True
        try:
            ready = json.loads(self.ready_file.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        assert ready["pid"] == self.process.pid, f"ready file pid {ready} != {self.process.pid}"
        self.port = int(ready["mqtt_port"])
        assert self.port > 0, ready
        return True

    def _wait(self) -> int:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=STOP_DEADLINE)
        finally:
            self.process = None
        return code

    def terminate(self) -> int:
        """SIGTERM; wait for the process to exit and return its exit code (it stays stopped)."""
        assert self.process is not None, "broker not running"
        self.process.send_signal(signal.SIGTERM)
        return self._wait()

    def restart(self) -> None:
        """Graceful stop (SIGTERM) and start again on the same data directory."""
        code = self.terminate()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{self.stderr_text()}"
        self.start()

    def kill9(self) -> None:
        """SIGKILL (no chance to flush anything), then start again on the same data directory."""
        assert self.process is not None, "broker not running"
        self.process.kill()
        self._wait()
        self.start()

    def stop(self) -> int | None:
        """Teardown: SIGTERM, SIGKILL if that hangs. Returns the exit code if it was running."""
        if self.process is None:
            return None
        if self.process.poll() is not None:
            return self._wait()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None
        finally:
            self.process = None

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@pytest.fixture
def broker_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """Start brokers with a custom broker.toml: `broker_factory(config="[mqtt]\\n...")`."""
    started: list[BrokerProcess] = []

    def make(config: str | None = None) -> BrokerProcess:
        proc = BrokerProcess(tmp_path_factory.mktemp("broker"), config)
        started.append(proc)
        proc.start()
        return proc

    yield make
    failed = any(
        getattr(getattr(request.node, f"report_{phase}", None), "failed", False)
        for phase in ("setup", "call")
    )
    died = {
        proc.workdir: proc.process.returncode
        for proc in started
        if proc.process is not None and proc.process.poll() is not None
    }
    for proc in started:
        proc.stop()
        if failed or proc.workdir in died:
            print(f"===== broker stderr ({proc.workdir}) =====\n{proc.stderr_text()}")
    if died:
        pytest.fail(f"the broker died during the test: exit codes {died}")


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerUnderTest:
    """The broker with its default configuration."""
    return broker_factory()


@pytest.fixture
def clients(broker_factory: BrokerFactory) -> Iterator[Clients]:
    """Client factory; depends on broker_factory so clients close before brokers stop."""
    registry = Clients()
    yield registry
    registry.close_all()
