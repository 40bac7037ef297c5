"""A broker whose plain TCP listener takes the PROXY protocol, with a real HAProxy
(Debian's /usr/sbin/haproxy) in front of it: one frontend that sends v1 headers
(`send-proxy`), one that sends v2 (`send-proxy-v2`), all on 127.0.0.1 ports chosen at
run time. Module-scoped: HAProxy and the broker start once for the file's tests."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import InProcessBroker
from tests.integration.waiting import DEADLINE, HOST
from tests.services import free_port

HAPROXY = "/usr/sbin/haproxy"

BROKER_CONFIG = """\
[listener]
proxy_protocol = true
proxy_trusted = ["127.0.0.1/32"]
proxy_header_timeout = 2.0

[listener.ws]
port = 0
proxy_protocol = true

[admin]
port = 0
"""

HAPROXY_CONFIG = """\
global
    maxconn 200

defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend mqtt_v1
    bind {host}:{v1}
    default_backend mqttq_v1

frontend mqtt_v2
    bind {host}:{v2}
    default_backend mqttq_v2

backend mqttq_v1
    server mqttq {host}:{broker} send-proxy

backend mqttq_v2
    server mqttq {host}:{broker} send-proxy-v2
"""


@dataclass
class ProxiedBroker:
    """The broker (`broker.port` takes only PROXY connections) and HAProxy's two
    frontends in front of it; `session(client_id)` is the admin API's view."""

    broker: InProcessBroker
    v1_port: int
    v2_port: int
    haproxy_config: str

    def admin(self, path: str) -> Any:
        data_dir = self.broker.data_dir
        url = json.loads((data_dir / "admin.json").read_text())["url"]
        token = (data_dir / "admin-token").read_text().strip()
        request = urllib.request.Request(
            url.rstrip("/") + path, headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=DEADLINE) as answer:
            return json.loads(answer.read())

    def session(self, client_id: str) -> Any:
        return self.admin(f"/api/v1/sessions/{client_id}")

    def metrics(self) -> str:
        """The admin API's /metrics text, scraped now."""
        data_dir = self.broker.data_dir
        url = json.loads((data_dir / "admin.json").read_text())["url"]
        token = (data_dir / "admin-token").read_text().strip()
        request = urllib.request.Request(
            url.rstrip("/") + "/metrics", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=DEADLINE) as answer:
            return str(answer.read().decode())


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"haproxy exited {process.returncode}: {log.read_text()}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"haproxy did not listen on {port}: {log.read_text()}")


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedBroker]:
    if not Path(HAPROXY).exists() or shutil.which(HAPROXY) is None:
        pytest.skip("haproxy is not installed (scripts/install-services.sh installs it)")
    workdir = tmp_path_factory.mktemp("proxied")
    broker = InProcessBroker(workdir / "broker", BROKER_CONFIG)
    broker.start()
    config_text = HAPROXY_CONFIG.format(
        host=HOST, v1=free_port(), v2=free_port(), broker=broker.port
    )
    v1, v2 = (int(line.rsplit(":", 1)[1]) for line in config_text.splitlines() if "bind" in line)
    config = workdir / "haproxy.cfg"
    config.write_text(config_text)
    log = workdir / "haproxy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [HAPROXY, "-f", str(config), "-db"], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_listening(v1, process, log)
        _wait_listening(v2, process, log)
        yield ProxiedBroker(broker, v1, v2, config_text)
    finally:
        process.terminate()
        try:
            process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        broker.stop()
