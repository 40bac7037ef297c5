"""`storage.log` at the command line: a bad setup is one clear line naming the key, and
the embedded default never loads confluent_kafka."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.mqttq_only


def _serve(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "broker.toml"
    path.write_text(config)
    command = [sys.executable, "-m", "mqttq", "serve", "--config", str(path), "--port", "0"]
    command += ["--data-dir", str(tmp_path / "data")]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_log_kafka_without_bootstrap_servers_is_one_line_naming_the_key(tmp_path: Path) -> None:
    done = _serve(tmp_path, '[storage]\nlog = "kafka"\n[admin]\nenabled = false\n')
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "kafka.bootstrap_servers" in lines[0] and 'storage.log = "kafka"' in lines[0]
    assert "Traceback" not in done.stderr


def test_embedded_broker_never_imports_confluent_kafka(tmp_path: Path) -> None:
    """A broker started and stopped with the default settings (through the same
    composition root as `mqttq serve`) leaves confluent_kafka unloaded."""
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from mqttq.config import load_settings
        from mqttq.cli.serve import open_message_log, open_storage
        from mqttq.cli.serve_admin import open_auth_store
        from mqttq.broker.server import Broker

        settings = load_settings(None, {{}}, {{
            "listener.port": 0, "storage.data_dir": {str(tmp_path / "data")!r}
        }})
        async def main():
            broker = Broker(
                settings, open_storage(settings), open_auth_store(settings),
                open_message_log(settings),
            )
            await broker.start()
            await broker.shutdown()
        asyncio.run(main())
        print("confluent_kafka" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "False"


def test_unreachable_kafka_at_start_is_one_line_naming_the_key(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = (
        '[storage]\nlog = "kafka"\n[admin]\nenabled = false\n'
        f'[kafka]\nbootstrap_servers = "127.0.0.1:{port}"\nproduce_timeout_ms = 1500\n'
    )
    done = _serve(tmp_path, config)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "kafka" in lines[0] and "kafka.bootstrap_servers" in lines[0]
