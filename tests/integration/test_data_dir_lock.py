"""One broker per data dir (issue 31, item 1): a second `mqttq serve` on a data dir in use
exits 1 with one line naming the first one's pid; the lock dies with its process, so a
`kill -9` leaves nothing to clean up; commands that only read work beside the broker.
Real `mqttq serve` processes on 127.0.0.1, ports chosen by the kernel."""

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

from mqttq import build
from tests.integration.waiting import DEADLINE, wait_for

pytestmark = pytest.mark.mqttq_only

DATA_DIR = ("--data-dir", "mqttq-data")
START_DEADLINE = 60.0
"""Bounds a hung start (a cold interpreter on a busy machine), not its speed."""


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"
    if build.PURE_ENV in os.environ:
        env[build.PURE_ENV] = os.environ[build.PURE_ENV]
    return env


def _serve(ready: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mqttq",
        "serve",
        "--port",
        "0",
        "--ready-file",
        str(ready),
        *args,
    ]


@contextmanager
def serving(cwd: Path, name: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A `mqttq serve` in `cwd`, once its ready file says it listens; stopped after."""
    ready = cwd / f"{name}.ready.json"
    process = subprocess.Popen(
        _serve(ready, *args),
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def started() -> bool:
            if process.poll() is not None:
                pytest.fail(f"mqttq serve exited {process.returncode}: {process.communicate()[1]}")
            try:
                return bool(json.loads(ready.read_text())["pid"] == process.pid)
            except (FileNotFoundError, ValueError):
                return False

        wait_for(started, timeout=START_DEADLINE, what=f"{name} to listen")
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def _second(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _serve(cwd / "second.ready.json", *args),
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_DEADLINE,
        check=False,
    )


def test_a_second_broker_on_the_data_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    with serving(tmp_path, "first", "--data-dir", "mqttq-data") as first:
        second = _second(tmp_path, "--data-dir", "mqttq-data")
        assert second.returncode == 1, second.stderr
        assert second.stderr.splitlines() == [
            f"mqttq: error: data dir 'mqttq-data' is in use by another mqttq (pid {first.pid}); "
            "stop it or choose another --data-dir"
        ]
        assert second.stdout == ""
        assert not (tmp_path / "second.ready.json").exists()
        # The same directory spelled another way is the same directory.
        spelled = _second(tmp_path, "--data-dir", str(tmp_path / "mqttq-data"))
        assert spelled.returncode == 1
        assert f"is in use by another mqttq (pid {first.pid})" in spelled.stderr

        # The first broker is untouched, and another data dir is fine beside it.
        assert first.poll() is None
        with serving(tmp_path, "other", "--data-dir", "other-data") as other:
            assert other.poll() is None

        # Commands that only read the data dir work beside the running broker.
        listed = subprocess.run(
            [sys.executable, "-m", "mqttq", "credentials", "ls", "--json", *DATA_DIR],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=START_DEADLINE,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == {"credentials": []}
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=DEADLINE) == 0

    # Stopped cleanly: the next broker starts on the same dir.
    with serving(tmp_path, "again", "--data-dir", "mqttq-data") as again:
        assert again.poll() is None


def test_kill_9_leaves_no_stale_lock(tmp_path: Path) -> None:
    with serving(tmp_path, "first", "--data-dir", "mqttq-data") as first:
        lock = tmp_path / "mqttq-data" / "mqttq.lock"
        assert lock.read_text().strip() == str(first.pid)
        first.kill()
        first.wait(timeout=DEADLINE)
    # The file (with the dead pid) is still there; its lock went with the process.
    assert lock.exists()
    with serving(tmp_path, "after", "--data-dir", "mqttq-data") as after:
        assert lock.read_text().strip() == str(after.pid)


def test_a_data_dir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("not a directory")
    refused = _second(tmp_path, "--data-dir", "taken")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "mqttq: error: data dir 'taken' is not a directory; choose another --data-dir"
    ]
