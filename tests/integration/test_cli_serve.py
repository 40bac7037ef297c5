"""`mqttq serve` as a user runs it: a real subprocess, real files, real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mqttq import build
from mqttq.config import ConfigFileError, env_var_name, iter_keys, load_settings

REPO = Path(__file__).resolve().parents[2]
SERVE_FLAGS = (
    "--config",
    "--host",
    "--port",
    "--data-dir",
    "--log-level",
    "--log-format",
    "--ready-file",
)
# MQTT 3.1.1 CONNECT: clean session, keep alive 60, empty client id [MQTT-3.1].
CONNECT_311 = bytes.fromhex("100c00044d5154540402003c0000")
CONNACK_ACCEPTED = bytes.fromhex("20020000")


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without MQTTQ_* settings a developer may have exported."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"  # brokers run side by side: never the fixed default port
    if build.PURE_ENV in os.environ:  # not a setting: which build runs (tests/pure_python.py)
        env[build.PURE_ENV] = os.environ[build.PURE_ENV]
    env.update(extra)
    return env


def run_mqttq(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@contextmanager
def serving(tmp_path: Path, *args: str, **env: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Start `mqttq serve --port 0 --ready-file ...`; yield (process, bound port)."""
    ready = tmp_path / "ready.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "mqttq", "serve", "--port", "0", "--ready-file", str(ready), *args],
        cwd=tmp_path,
        env=clean_env(**env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not ready.exists():
            if process.poll() is not None:
                _, stderr = process.communicate()
                pytest.fail(f"mqttq serve exited {process.returncode} before ready:\n{stderr}")
            time.sleep(0.02)
        content = json.loads(ready.read_text())
        assert content["pid"] == process.pid
        yield process, content["mqtt_port"]
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def mqtt_connect(port: int) -> bytes:
    """Send a 3.1.1 CONNECT and return the 4 CONNACK bytes the broker answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(CONNECT_311)
        answer = b""
        while len(answer) < 4:
            chunk = connection.recv(4 - len(answer))
            if not chunk:
                break
            answer += chunk
        return answer


def requires_broker() -> None:
    pytest.importorskip("mqttq.broker.server", reason="the broker has not landed yet")


# --- configuration errors: one line, exit code 2, no traceback ------------------------------


def test_bad_config_value_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[mqtt]\nmax_keep_alive = 0\n")
    result = run_mqttq("serve", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert "mqtt.max_keep_alive" in result.stderr
    assert "between 1 and 65535" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreachable_postgres_exits_1_in_one_line_without_the_password(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "broker.toml"
    config.write_text(
        f'[auth]\nstore = "postgres"\n[postgres]\nurl = "postgresql://u:hunter2@127.0.0.1:{port}/db"\n'
    )
    result = run_mqttq("serve", "--port", "0", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 1
    assert f"127.0.0.1:{port}" in result.stderr
    assert "postgres.url" in result.stderr
    assert "hunter2" not in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    missing = tmp_path / "missing.toml"
    missing.write_text('[auth]\nstore = "postgres"\n')
    result = run_mqttq("serve", "--port", "0", "--config", str(missing), cwd=tmp_path)
    assert result.returncode == 2
    assert "postgres.url" in result.stderr


def test_unknown_config_key_exits_2_with_a_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[listener]\nprot = 1884\n")
    result = run_mqttq("serve", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert "listener.prot" in result.stderr
    assert "did you mean 'listener.port'" in result.stderr
    assert "Traceback" not in result.stderr


def test_toml_syntax_error_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[listener]\nport = 1883\nhost = \n")
    result = run_mqttq("serve", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert str(config) in result.stderr
    assert "line 3" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = run_mqttq("serve", "--config", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert result.returncode == 2
    assert "nope.toml" in result.stderr
    assert "no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_path_from_mqttq_config_env_var(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[log]\nformat = 'yaml'\n")
    result = run_mqttq("serve", cwd=tmp_path, MQTTQ_CONFIG=str(config))
    assert result.returncode == 2
    assert "log.format" in result.stderr


def test_bad_env_var_exits_2_naming_key_and_variable(tmp_path: Path) -> None:
    result = run_mqttq("serve", cwd=tmp_path, MQTTQ_LISTENER__PORT="http")
    assert result.returncode == 2
    assert "listener.port" in result.stderr
    assert "MQTTQ_LISTENER__PORT" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_flag_value_exits_2_naming_the_key(tmp_path: Path) -> None:
    result = run_mqttq("serve", "--log-level", "chatty", cwd=tmp_path)
    assert result.returncode == 2
    assert "log.level" in result.stderr
    assert "Traceback" not in result.stderr


# --- help and version ------------------------------------------------------------------------


def test_serve_help_lists_every_flag_with_its_config_key(tmp_path: Path) -> None:
    result = run_mqttq("serve", "--help", cwd=tmp_path, COLUMNS="200")
    assert result.returncode == 0
    for flag in SERVE_FLAGS:
        assert flag in result.stdout
    for key in ("listener.host", "listener.port", "storage.data_dir", "log.level", "log.format"):
        assert key in result.stdout


def test_version(tmp_path: Path) -> None:
    from mqttq import __version__  # noqa: PLC0415

    result = run_mqttq("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"mqttq {__version__}"


# --- load_settings on real files ---------------------------------------------------------------


def test_load_settings_reads_the_file(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[listener]\nport = 0\n[storage]\nbackend = 'memory'\n")
    settings = load_settings(config, {"MQTTQ_LISTENER__HOST": "127.0.0.2"}, {})
    assert settings.listener.port == 0
    assert settings.listener.host == "127.0.0.2"
    assert settings.storage.backend == "memory"


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("missing.toml", None, "no such file"),
        ("a-directory", "DIR", "is a directory"),
        ("latin1.toml", b"[log]\nlevel = '\xe9'\n", "not UTF-8"),
        ("syntax.toml", b"[log\n", "invalid TOML"),
    ],
)
def test_unreadable_config_file_names_the_file(
    tmp_path: Path, name: str, content: bytes | str | None, fragment: str
) -> None:
    path = tmp_path / name
    if content == "DIR":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigFileError) as caught:
        load_settings(path, {}, {})
    assert str(path) in str(caught.value)
    assert fragment in str(caught.value)


def test_the_configuration_page_documents_every_config_key() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    for key, _, _ in iter_keys():
        name = key.rpartition(".")[2]
        assert f"| `{name}` |" in page, f"docs/configuration.md has no table row for {key}"
        assert env_var_name(key) in page, f"docs/configuration.md misses {env_var_name(key)}"


# --- the running broker ------------------------------------------------------------------------


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_mqtt_then_stops_cleanly_on_signal(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    requires_broker()
    data_dir = tmp_path / "data"
    with serving(tmp_path, "--data-dir", str(data_dir)) as (process, port):
        assert port > 0
        assert mqtt_connect(port) == CONNACK_ACCEPTED
        process.send_signal(stop_signal)
        stdout, stderr = process.communicate()
        assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stdout == ""
    assert (data_dir / "mqttq.sqlite3").is_file()
    assert not (tmp_path / "ready.json").exists()


def test_memory_backend_writes_no_database(tmp_path: Path) -> None:
    requires_broker()
    data_dir = tmp_path / "data"
    with serving(tmp_path, "--data-dir", str(data_dir), MQTTQ_STORAGE__BACKEND="memory") as (
        process,
        port,
    ):
        assert mqtt_connect(port) == CONNACK_ACCEPTED
        process.send_signal(signal.SIGTERM)
        process.communicate()
        assert process.returncode == 0
    assert not (data_dir / "mqttq.sqlite3").exists()


def test_json_logs_on_stderr_at_info(tmp_path: Path) -> None:
    requires_broker()
    with serving(tmp_path, "--data-dir", str(tmp_path / "d"), "--log-level", "info") as (
        process,
        port,
    ):
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate()
    records = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    listening = [record for record in records if record["msg"] == "listening"]
    assert listening, stderr
    assert listening[0]["port"] == port
    assert listening[0]["build"] == build.describe()  # compiled or pure Python
    assert {"ts", "level", "logger", "msg"} <= listening[0].keys()


def test_port_in_use_is_one_clear_line_and_non_zero_exit(tmp_path: Path) -> None:
    requires_broker()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_mqttq(
            "serve", "--port", str(port), "--data-dir", str(tmp_path / "data"), cwd=tmp_path
        )
    assert result.returncode == 1
    assert "address already in use" in result.stderr
    assert f"127.0.0.1:{port}" in result.stderr
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
