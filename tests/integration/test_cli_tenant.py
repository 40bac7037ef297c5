"""`mqttq tenant ls|show|set|rm` as a user runs it (a subprocess): straight on the SQLite
credential database when no broker runs, and through a running broker's admin API
(issue 5). The PostgreSQL mode is exercised in test_cli_credentials.py."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqttq.auth.model import Tenant
from mqttq.limits.quota import Quota
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import HOST, BrokerFactory

pytestmark = pytest.mark.mqttq_only

CLI_DEADLINE = 60.0
"""Bounds a hung command, not its speed."""


@dataclass
class Run:
    """A finished `mqttq` command."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self
        return json.loads(self.stdout)

    def error(self) -> str:
        """The one error line (asserting there is exactly one, and no traceback)."""
        assert "Traceback" not in self.stderr, self.stderr
        lines = [line for line in self.stderr.splitlines() if line.startswith("mqttq: error:")]
        assert len(lines) == 1, self.stderr
        return lines[0]


def run_cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Run:
    """`python -m mqttq ARGS` with no MQTTQ_* variable of the test run, stdin not a TTY."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    clean.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=clean,
        timeout=CLI_DEADLINE,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def stored_tenant(data_dir: Path, name: str) -> Tenant | None:
    """The row as the broker's own SQLite store reads it."""

    async def read() -> Tenant | None:
        store = SqliteAuthStore(data_dir / "auth.db")
        await store.open()
        try:
            return await store.get_tenant(name)
        finally:
            await store.close()

    return asyncio.run(read())


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (just released)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


# --- no broker: the SQLite database directly ---------------------------------------------


def test_set_show_ls_rm_on_the_database(tmp_path: Path) -> None:
    data = str(tmp_path)
    default = Quota().to_dict()
    first = run_cli(
        "tenant", "set", "acme", "--max-sessions", "10", "--max-publish-rate", "2.5",
        "--json", "--data-dir", data,
    )  # fmt: skip
    assert f"broker not running: editing {tmp_path / 'auth.db'} directly" in first.stderr
    tenant = first.json()
    assert tenant["name"] == "acme" and tenant["stored"] is True and tenant["usage"] is None
    assert tenant["quota"] == {**default, "max_sessions": 10, "max_publish_rate": 2.5}

    # Only the fields given change; the others keep their stored values.
    second = run_cli("tenant", "set", "acme", "--max-topics", "7", "--json", "--data-dir", data)
    expected = {**default, "max_sessions": 10, "max_publish_rate": 2.5, "max_topics": 7}
    assert second.json()["quota"] == expected
    row = stored_tenant(tmp_path, "acme")
    assert row is not None and row.quota == Quota.from_mapping(expected)

    shown = run_cli("tenant", "show", "acme", "--json", "--data-dir", data).json()
    assert shown["quota"] == expected and shown["stored"] is True
    listed = run_cli("tenant", "ls", "--json", "--data-dir", data).json()
    assert listed["default_quota"] == default
    assert [(t["name"], t["quota"]) for t in listed["tenants"]] == [("acme", expected)]

    table = run_cli("tenant", "ls", "--data-dir", data)
    assert table.code == 0 and "acme" in table.stdout and "publish/s" in table.stdout
    assert "broker not running" not in table.stdout  # notes go to stderr only

    removed = run_cli("tenant", "rm", "acme", "--json", "--data-dir", data)
    assert removed.json() == {"name": "acme", "removed": True}
    assert stored_tenant(tmp_path, "acme") is None
    gone = run_cli("tenant", "show", "acme", "--data-dir", data)
    assert gone.code == 1 and "no tenant 'acme'" in gone.error()
    again = run_cli("tenant", "rm", "acme", "--data-dir", data)
    assert again.code == 1 and "no tenant 'acme'" in again.error()


def test_unstored_tenant_starts_from_the_configured_default_quota(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[mqtt_limit.tenant]\nmax_sessions = 5\nmax_publish_rate = 20.0\n")
    common = ("--config", str(config), "--data-dir", str(tmp_path / "data"))
    default = Quota(max_sessions=5, max_publish_rate=20.0).to_dict()
    shown = run_cli("tenant", "show", "default", "--json", *common).json()
    assert shown["stored"] is False and shown["quota"] == default
    tenant = run_cli("tenant", "set", "beta", "--max-topics", "3", "--json", *common).json()
    assert tenant["quota"] == {**default, "max_topics": 3}
    assert run_cli("tenant", "ls", "--json", *common).json()["default_quota"] == default


def test_invalid_values_name_the_field_and_change_nothing(tmp_path: Path) -> None:
    data = str(tmp_path)
    assert run_cli("tenant", "set", "acme", "--max-topics", "7", "--data-dir", data).code == 0
    before = stored_tenant(tmp_path, "acme")
    cases = [
        ("--max-topics", "-1", "max_topics"),
        ("--max-connection-rate", "fast", "max_connection_rate"),
        ("--max-sessions", "1.5", "max_sessions"),
        ("--max-publish-rate", "nan", "max_publish_rate"),
        ("--max-connections-per-node", "inf", "max_connections_per_node"),
    ]
    for flag, value, field in cases:
        refused = run_cli(
            "tenant", "set", "acme", "--max-sessions", "9", flag, value, "--data-dir", data
        )  # fmt: skip
        assert refused.code == 2, (flag, refused)
        assert field in refused.error(), (flag, refused.stderr)
    bad_name = run_cli("tenant", "set", "no spaces", "--max-topics", "1", "--data-dir", data)
    assert bad_name.code == 2 and "name" in bad_name.error()
    nothing = run_cli("tenant", "set", "acme", "--data-dir", data)
    assert nothing.code == 2 and "--max-topics" in nothing.error()
    assert stored_tenant(tmp_path, "acme") == before
    assert stored_tenant(tmp_path, "no spaces") is None


def test_a_stale_discovery_file_means_no_broker(tmp_path: Path) -> None:
    # A broker killed -9 leaves admin.json behind: its pid is gone, or a live process
    # (here: this test) holds a pid but nothing answers at the URL.
    url = f"http://{HOST}:{closed_port()}"
    for pid in (_dead_pid(), os.getpid()):
        (tmp_path / "admin.json").write_text(json.dumps({"url": url, "pid": pid}))
        listed = run_cli("tenant", "ls", "--json", "--data-dir", str(tmp_path))
        assert listed.json()["tenants"] == []
        assert "broker not running" in listed.stderr


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_unreachable_admin_url_and_bad_config_are_one_line(tmp_path: Path) -> None:
    url = f"http://{HOST}:{closed_port()}"
    unreachable = run_cli("tenant", "ls", "--admin-url", url, "--token", "t")
    assert unreachable.code == 1
    assert f"cannot reach the admin API at {url}" in unreachable.error()
    by_env = run_cli("tenant", "ls", env={"MQTTQ_ADMIN_URL": url, "MQTTQ_ADMIN_TOKEN": "t"})
    assert by_env.code == 1 and "cannot reach the admin API" in by_env.error()
    missing = run_cli("tenant", "ls", "--config", str(tmp_path / "absent.toml"))
    assert missing.code == 2 and "absent.toml" in missing.error()


# --- a running broker: the admin API ------------------------------------------------------


def test_set_goes_live_through_the_running_broker(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config="[admin]\nport = 0\n")
    data = str(broker.data_dir)
    api = AdminApi(broker.data_dir)
    assert api.call("GET", "/api/v1/tenants/acme")[0] == 404

    changed = run_cli(
        "tenant", "set", "acme", "--max-sessions", "4", "--max-publish-rate", "50",
        "--json", "--data-dir", data,
    )  # fmt: skip
    assert f"via admin API at {api.url}" in changed.stderr
    assert changed.json()["quota"]["max_sessions"] == 4
    seen = api.ok("GET", "/api/v1/tenants/acme")
    assert seen["stored"] is True
    assert (seen["quota"]["max_sessions"], seen["quota"]["max_publish_rate"]) == (4, 50.0)

    # Usage comes from the broker: one anonymous client in the default tenant.
    clients.raw(broker).connect("usage-probe")
    shown = run_cli("tenant", "show", "default", "--json", "--data-dir", data).json()
    assert shown["usage"]["connections"] == 1
    listed = run_cli("tenant", "ls", "--json", "--data-dir", data).json()
    by_name = {t["name"]: t for t in listed["tenants"]}
    assert by_name["acme"]["usage"] == {"connections": 0, "sessions": 0, "topics": 0}
    assert all(isinstance(t["usage"], dict) for t in listed["tenants"])
    table = run_cli("tenant", "ls", "--data-dir", data)
    assert table.code == 0 and "now / max" in table.stdout
    assert "0 / 4" in table.stdout  # acme: no sessions of its max_sessions 4

    refused = run_cli("tenant", "set", "acme", "--max-topics", "-3", "--data-dir", data)
    assert refused.code == 2 and "max_topics" in refused.error()
    assert api.ok("GET", "/api/v1/tenants/acme")["quota"] == seen["quota"]

    removed = run_cli("tenant", "rm", "acme", "--data-dir", data)
    assert removed.code == 0 and "removed" in removed.stdout
    assert api.call("GET", "/api/v1/tenants/acme")[0] == 404
    again = run_cli("tenant", "rm", "acme", "--data-dir", data)
    assert again.code == 1 and "no tenant 'acme'" in again.error()


def test_a_wrong_token_is_refused_in_one_line(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(config="[admin]\nport = 0\n")
    refused = run_cli("tenant", "ls", "--token", "wrong", "--data-dir", str(broker.data_dir))
    assert refused.code == 1
    assert refused.error().endswith(
        f"admin API refused the token; pass --token or check {broker.data_dir / 'admin-token'}"
    )
