"""Two brokers on one host: the second finds the admin port taken and starts anyway (MQTT
served, a warning, the admin API off), unless `[admin] required = true`, which makes it
a one-line start-up error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.admin_api import AdminApi
from tests.integration.paho_client import PahoClients
from tests.integration.waiting import DEADLINE, wait_for

pytestmark = pytest.mark.mqttq_only


def _env(admin_port: int) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = str(admin_port)
    return env


def _command(workdir: Path) -> list[str]:
    return [
        sys.executable, "-m", "mqttq", "serve", "--port", "0", "--log-format", "text",
        "--data-dir", str(workdir / "data"), "--ready-file", str(workdir / "ready.json"),
        "--config", str(workdir / "broker.toml"),
    ]  # fmt: skip


@contextmanager
def running(workdir: Path, admin_port: int, config: str = "") -> Iterator[tuple[int, Path]]:
    """A `mqttq serve` with its admin API on `admin_port`: (MQTT port, stderr log)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "broker.toml").write_text(config)
    log = workdir / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            _command(workdir), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
            env=_env(admin_port),
        )  # fmt: skip
    try:
        ready = wait_for(
            lambda: _ready(workdir / "ready.json", process), timeout=60, what="the broker"
        )
        yield int(ready["mqtt_port"]), log
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE * 3) == 0, log.read_text()


def _ready(path: Path, process: subprocess.Popen[bytes]) -> dict[str, int] | None:
    assert process.poll() is None, f"broker exited with {process.returncode}"
    try:
        ready: dict[str, int] = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return ready


def test_second_broker_on_the_host_starts_without_its_admin_api(tmp_path: Path) -> None:
    with running(tmp_path / "first", 0) as (first_port, _):
        first_api = AdminApi(tmp_path / "first" / "data")
        admin_port = int(first_api.url.rsplit(":", 1)[1].split("/")[0])
        with running(tmp_path / "second", admin_port) as (second_port, log):
            assert second_port != first_port
            clients = PahoClients()
            try:
                subscriber = clients.connect(second_port, "on-second")
                assert subscriber.subscribe("two/t", 1) == [1]
                publisher = clients.connect(second_port, "also-on-second")
                assert publisher.publish("two/t", b"served", 1) == 0
                assert [m.payload for m in subscriber.wait_messages(1)] == [b"served"]
            finally:
                clients.close_all()
            text = log.read_text()
            assert "admin API off" in text and str(admin_port) in text, text
            assert not (tmp_path / "second" / "data" / "admin.json").exists()
        # The first broker's API still answers.
        assert first_api.ok("GET", "/health")["status"] == "ok"

        # required = true: the taken port is a start-up error, in one line.
        workdir = tmp_path / "third"
        workdir.mkdir()
        (workdir / "broker.toml").write_text("[admin]\nrequired = true\n")
        result = subprocess.run(
            _command(workdir), capture_output=True, text=True, timeout=60,
            env=_env(admin_port), stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert f"cannot listen for the admin API on 127.0.0.1:{admin_port}" in lines[0]
