"""The first run is not silent (issue 31, item 5): `mqttq serve` always prints one
`listening on` line at the default log level, even when stderr is a pipe, and nothing else;
`serve --help` describes --config by the real sections; `scripts/run-local.sh` says what it
installs and how long it takes, and keeps talking while it does."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

import pytest

from mqttq import build
from mqttq.config.schema import Settings
from tests.integration.waiting import DEADLINE, wait_for

REPO = Path(__file__).resolve().parents[2]
RUN_LOCAL = REPO / "scripts" / "run-local.sh"
SERVE = (sys.executable, "-m", "mqttq", "serve", "--port", "0")
START_DEADLINE = 60.0
"""Bounds a hung start, not its speed."""
LISTENING = re.compile(r"mqttq listening on 127\.0\.0\.1:(\d+) \((\w+), data dir (.+)\)")


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"
    if build.PURE_ENV in os.environ:
        env[build.PURE_ENV] = os.environ[build.PURE_ENV]
    env.update(extra)
    return env


@contextmanager
def serve(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`mqttq serve` with stderr to a file (not a terminal), in `tmp_path`, until ready."""
    ready = tmp_path / "ready.json"
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*SERVE, "--ready-file", str(ready), *args],
            cwd=tmp_path,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
    try:

        def started() -> bool:
            assert process.poll() is None, log.read_text()
            return ready.exists()

        wait_for(started, timeout=START_DEADLINE, what="the broker to listen")
        yield process, log
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_the_listening_line_shows_on_a_pipe_at_the_default_level(tmp_path: Path) -> None:
    with serve(tmp_path) as (process, log):
        wait_for(log.read_text, what="the listening line")
        port = json.loads((tmp_path / "ready.json").read_text())["mqtt_port"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE) == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines  # and nothing else, stopping included
    found = LISTENING.fullmatch(lines[0])
    assert found is not None, lines
    assert found.group(1) == str(port)
    assert found.group(2) == "embedded"
    assert found.group(3) == str(tmp_path / "mqttq-data")


def test_error_level_is_quiet(tmp_path: Path) -> None:
    with serve(tmp_path, "--log-level", "error") as (process, log):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE) == 0
    assert log.read_text() == ""


def test_serve_help_names_the_sections_of_the_settings_tree() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mqttq", "serve", "--help"],
        env=_env(COLUMNS="400"),
        capture_output=True,
        text=True,
        timeout=START_DEADLINE,
        check=True,
    )
    config_help = " ".join(done.stdout.split())
    for section in fields(Settings):
        assert f"[{section.name}]" in config_help, section.name  # [[integration]] too
    assert "four" not in config_help


def _bash(script: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source "{RUN_LOCAL}"\n{script}'],
        env=_env(**extra),
        capture_output=True,
        text=True,
        timeout=START_DEADLINE,
        check=False,
    )


def test_run_local_says_what_it_compiles() -> None:
    done = _bash(
        'install_notice "" "$("$VENV/bin/python" "$ROOT/mqttq/build.py" --sources | wc -w)"'
    )
    assert done.returncode == 0, done.stderr
    assert f"mypyc compiles {len(build.COMPILED_MODULES)} modules to C" in done.stdout
    assert "minutes" in done.stdout
    pure = _bash('install_notice "" 0', MQTTQ_COMPILE="0")
    assert "pure Python" in pure.stdout and "mypyc compiles" not in pure.stdout


def test_run_local_keeps_talking_while_it_installs(tmp_path: Path) -> None:
    # The command ends only once the heartbeat has spoken: no clock in the assertion.
    log = tmp_path / "stderr.log"
    script = (
        f'with_heartbeat "compiling" bash -c \'until grep -q still "{log}"; do sleep 0.05; done; '
        "echo Collecting x; echo Requirement already satisfied: y; echo Successfully installed x'"
        ' | { grep -E "$PIP_PROGRESS" || true; } >&2'
    )
    with log.open("w") as stderr:
        done = subprocess.run(
            ["bash", "-c", f'source "{RUN_LOCAL}"\n{script}'],
            env=_env(HEARTBEAT_SECONDS="1"),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=START_DEADLINE,
            check=False,
        )
    assert done.returncode == 0
    lines = log.read_text().splitlines()
    assert lines[0] == "  ... still compiling (1 s)"
    progress = [line for line in lines if not line.startswith("  ... still compiling")]
    assert progress == ["Collecting x", "Successfully installed x"]


@pytest.mark.parametrize("code", [0, 3])
def test_run_local_heartbeat_keeps_the_exit_status(code: int) -> None:
    done = _bash(f'with_heartbeat "x" bash -c "exit {code}" || echo "status $?"; echo done')
    assert done.stdout.splitlines() == ([] if code == 0 else [f"status {code}"]) + ["done"]
