"""`mqttq credentials` and `mqttq tenant` find the running broker (issue 31, item 3): run
outside the directory where `mqttq serve` started, they reach it where `[admin]` says its API
listens; they say on stderr which broker or file they used; a command that only reads never
creates a data dir or an empty auth.db. Real `mqttq serve` and real CLI runs; the admin port
is chosen at run time and given to the CLI through its config file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttq import build
from mqttq.cli.admin_target import configured_admin_url
from mqttq.config import load_settings
from tests.integration.admin_api import AdminApi
from tests.integration.test_cli_tenant import Run
from tests.integration.waiting import DEADLINE, wait_for

pytestmark = pytest.mark.mqttq_only

START_DEADLINE = 60.0
"""Bounds a hung command, not its speed."""


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    if build.PURE_ENV in os.environ:
        env[build.PURE_ENV] = os.environ[build.PURE_ENV]
    return env


def mqttq(*args: str, cwd: Path, stdin: str = "") -> Run:
    """`python -m mqttq ARGS` in `cwd`, no MQTTQ_* setting from the test run."""
    done = subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        cwd=cwd,
        input=stdin,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=START_DEADLINE,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _config(directory: Path, admin_port: int) -> Path:
    """A broker.toml saying only where the admin API listens."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "broker.toml"
    path.write_text(f"[admin]\nport = {admin_port}\n")
    return path


def _closed_port() -> int:
    with socket.socket() as probe:  # nothing listens on it once closed
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A `mqttq serve` started in tmp_path/started (data dir ./mqttq-data there, admin API
    on a free port): (its data dir, its admin port)."""
    started = tmp_path / "started"
    started.mkdir()
    ready = started / "ready.json"
    env = _env() | {"MQTTQ_ADMIN__PORT": "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mqttq", "serve", "--port", "0", "--ready-file", str(ready)],
        cwd=started,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        data_dir = started / "mqttq-data"

        def listening() -> bool:
            assert process.poll() is None, f"mqttq serve exited {process.returncode}"
            return ready.exists() and (data_dir / "admin.json").exists()

        wait_for(listening, timeout=START_DEADLINE, what="the broker and its admin API")
        url = json.loads((data_dir / "admin.json").read_text())["url"]
        yield data_dir, int(url.rsplit(":", 1)[1])
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE)


def test_commands_run_elsewhere_reach_the_broker_at_the_admin_address(
    tmp_path: Path, running: tuple[Path, int]
) -> None:
    data_dir, admin_port = running
    elsewhere = tmp_path / "elsewhere"
    config = str(_config(elsewhere, admin_port))
    expected_note = (
        f"via admin API at http://127.0.0.1:{admin_port} "
        f"(the broker on {data_dir.resolve()}, found at the [admin] address)"
    )

    added = mqttq(
        "credentials",
        "add",
        "alice",
        "--password-stdin",
        "-c",
        config,
        cwd=elsewhere,
        stdin="secret\n",
    )
    assert added.code == 0, added.stderr
    assert expected_note in added.stderr
    api = AdminApi(data_dir)
    assert api.ok("GET", "/api/v1/credentials/alice")["username"] == "alice"

    listed = mqttq("credentials", "ls", "--json", "-c", config, cwd=elsewhere)
    assert [c["username"] for c in listed.json()["credentials"]] == ["alice"]
    assert expected_note in listed.stderr
    table = mqttq("credentials", "ls", "-c", config, cwd=elsewhere)
    assert table.code == 0 and table.stdout.splitlines()[-1] == "1 credential"
    tenant = mqttq(
        "tenant", "set", "acme", "--max-topics", "7", "--json", "-c", config, cwd=elsewhere
    )
    assert tenant.json()["quota"]["max_topics"] == 7
    assert api.ok("GET", "/api/v1/tenants/acme")["quota"]["max_topics"] == 7

    # Nothing was written where the commands ran.
    assert sorted(p.name for p in elsewhere.iterdir()) == ["broker.toml"]


def test_a_given_data_dir_is_not_taken_for_the_broker_on_another(
    tmp_path: Path, running: tuple[Path, int]
) -> None:
    data_dir, admin_port = running
    elsewhere = tmp_path / "elsewhere"
    config = str(_config(elsewhere, admin_port))
    own = elsewhere / "own-data"
    added = mqttq(
        "credentials",
        "add",
        "bob",
        "--password",
        "pw",
        "-c",
        config,
        "--data-dir",
        str(own),
        cwd=elsewhere,
    )
    assert added.code == 0, added.stderr
    assert f"broker not running: editing {own / 'auth.db'} directly" in added.stderr
    assert f"the broker at http://127.0.0.1:{admin_port} has another data dir" in added.stderr
    assert (own / "auth.db").is_file()
    status, _ = AdminApi(data_dir).call("GET", "/api/v1/credentials/bob")
    assert status == 404


def test_reading_without_a_broker_creates_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    port = _closed_port()
    config = str(_config(empty, port))
    missing = f"no broker answers at http://127.0.0.1:{port}"

    credentials = mqttq("credentials", "ls", "--json", "-c", config, cwd=empty)
    assert credentials.json() == {"credentials": []}
    assert missing in credentials.stderr
    assert "no mqttq-data/auth.db: nothing stored yet" in credentials.stderr
    tenants = mqttq("tenant", "ls", "--json", "-c", config, cwd=empty).json()
    assert tenants["tenants"] == []
    default = mqttq("tenant", "show", "default", "--json", "-c", config, cwd=empty).json()
    assert default["name"] == "default" and default["stored"] is False
    for command in (
        ("credentials", "show", "x"),
        ("credentials", "rm", "x"),
        ("credentials", "passwd", "x", "--password", "p"),
        ("tenant", "rm", "x"),
    ):
        refused = mqttq(*command, "-c", config, cwd=empty)
        assert refused.code == 1, (command, refused)
        assert "'x'" in refused.error()
    assert sorted(p.name for p in empty.iterdir()) == ["broker.toml"]

    # A command that stores something does create the database, and says where.
    added = mqttq("credentials", "add", "carol", "--password", "pw", "-c", config, cwd=empty)
    assert added.code == 0, added.stderr
    assert "broker not running: editing mqttq-data/auth.db directly" in added.stderr
    assert (empty / "mqttq-data" / "auth.db").is_file()


def test_the_default_admin_address_is_where_serve_listens(tmp_path: Path) -> None:
    assert configured_admin_url(load_settings(None, {}, {})) == "http://127.0.0.1:18083"
    config = tmp_path / "broker.toml"
    config.write_text('[admin]\nhost = "0.0.0.0"\nport = 18999\n')
    assert configured_admin_url(load_settings(config, {}, {})) == "http://127.0.0.1:18999"
    env = {"MQTTQ_ADMIN__HOST": "::1", "MQTTQ_ADMIN__PORT": "19000"}
    assert configured_admin_url(load_settings(None, env, {})) == "http://[::1]:19000"
    off = {"MQTTQ_ADMIN__ENABLED": "false"}
    assert configured_admin_url(load_settings(None, off, {})) is None
    assert configured_admin_url(load_settings(None, {"MQTTQ_ADMIN__PORT": "0"}, {})) is None
