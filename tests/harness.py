"""The broker under test, two ways: in the test's process (the default) or as a subprocess.

- `running_broker(...)`: a `Broker` on 127.0.0.1 port 0 on an event loop in a background
  thread, with the storage and auth store the test hands it (`BrokerLoop`).
- `InProcessBroker`: what `mqttq serve --port 0 --data-dir DIR --config broker.toml` builds
  (settings from the file, storage, auth store, message log, cluster link, admin API,
  heartbeat, ready file), composed by the same functions of `mqttq.cli.serve` and run on a
  uvloop loop in a background thread instead of a new interpreter. The `broker` and
  `broker_factory` fixtures give this one.
- `BrokerProcess`: the real `mqttq serve` subprocess, for the tests where the process
  boundary is what they test (kill -9, signals, exit codes, `--workers`, cluster failover):
  they carry `@pytest.mark.broker_process` or ask for `broker_process_factory`.

Both broker kinds show a test the same surface (`BrokerUnderTest`): host, port, data_dir,
workdir (holding broker.toml, ready.json and the broker's log), start, restart, terminate,
stderr_text. The in-process broker runs the same modules, compiled or not, as the process
would: the test process imports them the same way (MQTTQ_PURE=1 reaches both).

A start of the subprocess costs 0.7-1.4 s on this 2-core machine (an interpreter, the
imports, the SQLite open); the in-process one about 10 ms.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mqttq.build import PURE_ENV
from tests.integration.waiting import DEADLINE, HOST, MOSQUITTO_MODE, wait_for

if TYPE_CHECKING:
    from mqttq.auth.ports import AuthStore
    from mqttq.broker.server import Broker
    from mqttq.cli.data_dir_lock import DataDirLock
    from mqttq.cli.serve import AroundBroker
    from mqttq.config import Settings
    from mqttq.storage.ports import Storage

__all__ = [
    "BROKER_PROCESS_MARK",
    "MANUAL_CLOCK_MARK",
    "BrokerLoop",
    "BrokerProcess",
    "InProcessBroker",
    "ManualClockLoop",
    "let_time_pass",
    "new_loop",
    "running_broker",
]

BROKER_PROCESS_MARK = "broker_process"
"""Marker: this test's `broker` / `broker_factory` run `mqttq serve` as a subprocess."""
MANUAL_CLOCK_MARK = "manual_clock"
"""Marker: this test's in-process brokers run on a clock it moves on (`let_time_pass`)."""

MOSQUITTO = "/usr/sbin/mosquitto"
START_DEADLINE = 30.0
"""Python start-up on a loaded 2-core machine can be slow; this bounds a hang, not speed."""
STOP_DEADLINE = 15.0

BROKER_ENV = {"MQTTQ_ADMIN__PORT": "0"}
"""The MQTTQ_* environment a broker under test sees: none of the test process's own, and
its admin API on a free port (never the fixed default 18083: brokers run side by side)."""


def new_loop() -> asyncio.AbstractEventLoop:
    """The event loop `mqttq serve` runs on: uvloop where it is installed."""
    try:
        import uvloop  # noqa: PLC0415 (optional, as in mqttq.cli.serve)
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


# --- a Broker on a loop in a thread -----------------------------------------------------------


class ManualClockLoop(asyncio.SelectorEventLoop):
    """asyncio's own loop with a clock the test moves forward: `time()` is the monotonic
    clock plus `skew`, so the timers the broker arms on it (session expiry, will delay,
    keep alive) fall due as if that time had passed. `wall_time()` is `time.time()` plus
    the same skew: the broker's message clock (`Hub.clock`: message creation and expiry
    times) is set to it, so that messages age with the timers."""

    def __init__(self) -> None:
        super().__init__()
        self.skew = 0.0

    def time(self) -> float:
        return super().time() + self.skew

    def wall_time(self) -> float:
        """The wall clock, moved on as far as the loop's clock."""
        return time.time() + self.skew


class _LoopThread:
    """An event loop (`new_loop`, or a `ManualClockLoop`) run by a daemon thread until
    `close`; `call` runs a coroutine on it from the test's thread and returns its result."""

    def __init__(self, manual_clock: bool = False) -> None:
        self.loop = ManualClockLoop() if manual_clock else new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = DEADLINE) -> Any:
        """Run `coro` on the loop and return its result (raising what it raised)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def advance(self, seconds: float) -> None:
        """Move a ManualClockLoop's clock `seconds` forward; returns once the timers that
        fell due have run."""
        loop = self.loop
        assert isinstance(loop, ManualClockLoop), "not a manual clock"

        async def move() -> None:
            loop.skew += seconds

        self.call(move())
        self.call(asyncio.sleep(0))  # a full turn of the loop: the due timers ran before it

    def close(self) -> None:
        """Cancel what is left on the loop (as asyncio.run does), stop it, close it."""
        if self.loop.is_closed():
            return
        if self.thread.is_alive():
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                self.call(_cancel_remaining())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(DEADLINE)
        if not self.thread.is_alive():
            self.loop.close()


async def _cancel_remaining() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


class BrokerLoop(_LoopThread):
    """A started `Broker` (built by `make` on the test's thread) on its own loop thread.

    `port` is its MQTT port; `call` runs a coroutine on the broker's loop (where its
    stores live); `stop` shuts the broker down and ends the loop (idempotent)."""

    def __init__(self, make: Callable[[], Broker]) -> None:
        super().__init__()
        self.broker = make()
        try:
            self.call(self.broker.start())
        except BaseException:
            self._shutdown()
            raise
        self.port = self.broker.port

    def _shutdown(self) -> None:
        try:
            if self.thread.is_alive():
                self.call(self.broker.shutdown())
        finally:
            self.close()

    def stop(self) -> None:
        """Shut the broker down (disconnect clients, flush, close storage), end the loop."""
        if not self.loop.is_closed():
            self._shutdown()


@contextlib.contextmanager
def running_broker(
    storage: Storage | None = None,
    auth_store: AuthStore | None = None,
    settings: Settings | None = None,
) -> Iterator[BrokerLoop]:
    """A `Broker` on 127.0.0.1 port 0 in this process (MemoryStorage and no auth store
    unless given; `settings` defaults to those of the listener alone), stopped on exit."""
    from mqttq.broker.server import Broker  # noqa: PLC0415
    from mqttq.config import ListenerSettings, Settings  # noqa: PLC0415
    from mqttq.storage.memory import MemoryStorage  # noqa: PLC0415

    chosen = settings if settings is not None else Settings(listener=ListenerSettings(host=HOST))
    chosen = dataclasses.replace(chosen, listener=dataclasses.replace(chosen.listener, port=0))

    def make() -> Broker:
        return Broker(chosen, storage if storage is not None else MemoryStorage(), auth_store)

    running = BrokerLoop(make)
    try:
        yield running
    finally:
        running.stop()


# --- what `mqttq serve` builds, in this process -----------------------------------------------


class _Served:
    """One start of an InProcessBroker: the broker, its admin API and heartbeat, on a loop."""

    def __init__(self, settings: Settings, ready_file: Path, manual_clock: bool) -> None:
        from mqttq.broker.server import Broker  # noqa: PLC0415
        from mqttq.cli.serve import (  # noqa: PLC0415
            open_app_contexts,
            open_cluster_link,
            open_message_log,
            open_storage,
        )
        from mqttq.cli.serve_admin import open_auth_store  # noqa: PLC0415

        self.settings = settings
        self.ready_file = ready_file
        self.around: AroundBroker | None = None
        self.serving: asyncio.Task[None] | None = None
        self.runner = _LoopThread(manual_clock)
        # The composition of mqttq.cli.serve.run_broker, argument for argument.
        self.broker = Broker(
            settings,
            open_storage(settings),
            open_auth_store(settings),
            open_message_log(settings),
            open_app_contexts(settings),
            cluster=open_cluster_link(settings),
        )
        loop = self.runner.loop
        if isinstance(loop, ManualClockLoop):
            self.broker.hub.clock = loop.wall_time
        try:
            self.runner.call(self._start(), START_DEADLINE)
        except BaseException:
            self.runner.close()
            raise

    async def _start(self) -> None:
        # mqttq.cli.serve._serve without the signal handlers (a thread cannot own them) and
        # without settle_heap (it tunes the collector of the whole test process).
        from mqttq.cli.ready_file import write_ready_file  # noqa: PLC0415
        from mqttq.cli.serve import start_broker  # noqa: PLC0415

        self.around = await start_broker(self.broker, self.settings)
        write_ready_file(self.ready_file, os.getpid(), self.broker.port, self.broker.ports)
        self.serving = asyncio.create_task(self.broker.serve_forever())

    async def _release(self) -> None:
        if self.around is not None:
            await self.around.close()
        else:
            await self.broker.shutdown()

    async def _stop(self) -> None:
        try:
            await self._release()
            if self.serving is not None:
                await self.serving
        finally:
            self.ready_file.unlink(missing_ok=True)

    @property
    def ended(self) -> bool:
        """Whether the broker stopped serving without being asked to (or its loop died)."""
        if not self.runner.thread.is_alive():
            return True
        return self.serving is not None and self.serving.done()

    def stop(self) -> None:
        try:
            if self.runner.thread.is_alive():
                self.runner.call(self._stop(), STOP_DEADLINE)
        finally:
            self.runner.close()


class InProcessBroker:
    """The broker under test in this process, configured as `mqttq serve --port 0
    --data-dir <workdir>/data [--config <workdir>/broker.toml]` would be, on a data
    directory that outlives restarts. `port` changes at every start (port 0).

    `broker` is the running `Broker`, `call(coro)` runs a coroutine on its loop. What needs
    a process (kill -9, signals) is refused: mark such a test `broker_process`. With
    `manual_clock` the broker runs on a `ManualClockLoop`, moved on by `let_time_pass`."""

    host = HOST

    def __init__(self, workdir: Path, config: str | None, *, manual_clock: bool = False) -> None:
        self.manual_clock = manual_clock
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.ready_file = workdir / "ready.json"
        self.stderr_path = workdir / "broker-stderr.log"
        self.port = 0
        self._served: _Served | None = None
        self._log: logging.Handler | None = None
        self._lock: DataDirLock | None = None

    def settings(self) -> Settings:
        """The settings `mqttq serve` would load now (the config file is read again)."""
        from mqttq.config import load_settings  # noqa: PLC0415

        config_path: Path | None = None
        if self.config is not None:
            config_path = self.workdir / "broker.toml"
            config_path.write_text(self.config)
        overrides: dict[str, object] = {"listener.port": 0, "storage.data_dir": str(self.data_dir)}
        if log_level := os.environ.get("MQTTQ_TEST_LOG_LEVEL"):
            overrides["log.level"] = log_level
        return load_settings(config_path, BROKER_ENV, overrides)

    @property
    def broker(self) -> Broker:
        assert self._served is not None, "broker not running"
        return self._served.broker

    @property
    def process(self) -> subprocess.Popen[bytes]:
        raise AssertionError(
            "this broker runs in the test's process: mark the test "
            f"@pytest.mark.{BROKER_PROCESS_MARK} to signal or kill a `mqttq serve` process"
        )

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the broker's loop and return its result."""
        assert self._served is not None, "broker not running"
        return self._served.runner.call(coro)

    def start(self) -> None:
        """Start the broker; it accepts connections when this returns."""
        from mqttq.cli.data_dir_lock import lock_data_dir  # noqa: PLC0415

        assert self._served is None, "broker already running"
        settings = self.settings()
        self._attach_log(settings)
        with self.stderr_path.open("a") as log:
            log.write(f"--- start in process: {self.workdir}\n")
        # Held while it runs, as `mqttq serve` holds it: CLI commands see a running broker.
        self._lock = lock_data_dir(settings.storage.data_dir)
        try:
            self._served = _Served(settings, self.ready_file, self.manual_clock)
        except BaseException:
            self._release()
            raise
        self.port = self._served.broker.port

    def _attach_log(self, settings: Settings) -> None:
        # What the process would write on stderr: the broker's records at its log level.
        from mqttq.logs import JsonFormatter, TextFormatter  # noqa: PLC0415

        self._detach_log()
        handler = logging.FileHandler(self.stderr_path, delay=True)
        handler.setLevel(settings.log.level.upper())
        text = settings.log.format.lower() == "text"
        handler.setFormatter(TextFormatter() if text else JsonFormatter())
        logging.getLogger().addHandler(handler)
        self._log = handler

    def _detach_log(self) -> None:
        if self._log is not None:
            logging.getLogger().removeHandler(self._log)
            self._log.close()
            self._log = None

    @property
    def ended(self) -> bool:
        """Whether a started broker stopped serving on its own."""
        return self._served is not None and self._served.ended

    def terminate(self) -> int:
        """Graceful stop, as SIGTERM would (it stays stopped); 0, the exit code of that."""
        assert self._served is not None, "broker not running"
        served, self._served = self._served, None
        try:
            served.stop()
        finally:
            self._release()
        return 0

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self._detach_log()

    def restart(self) -> None:
        """Graceful stop and start again on the same data directory."""
        self.terminate()
        self.start()

    def kill9(self) -> None:
        raise AssertionError(
            f"kill -9 needs a process: mark the test @pytest.mark.{BROKER_PROCESS_MARK}"
        )

    def stop(self) -> int | None:
        """Teardown: graceful stop; 0 if it was running, else None."""
        if self._served is None:
            return None
        return self.terminate()

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def advance_clock(self, seconds: float) -> None:
        """Move the manual clock on; returns once the timers that fell due have run."""
        assert self._served is not None, "broker not running"
        self._served.runner.advance(seconds)

    def offline(self, client_id: str) -> bool:
        """Whether `client_id` has a session and no connection (its end was handled)."""

        async def read() -> bool:
            session = self.broker.hub.sessions.get(client_id)
            return session is not None and session.client is None

        return bool(self.call(read()))


def let_time_pass(broker: object, seconds: float, *, offline: Iterable[str] = ()) -> None:
    """Let `seconds` pass for `broker`'s timers (session expiry, will delay, keep alive)
    and the age of its messages (message expiry): at once on an in-process broker with a
    manual clock (once the sessions of `offline` are handled as disconnected, so that their
    timers are armed), by sleeping on any other broker."""
    if not (isinstance(broker, InProcessBroker) and broker.manual_clock):
        time.sleep(seconds)  # the behaviour is about time: a real clock must pass
        return
    for client_id in offline:
        is_offline = functools.partial(broker.offline, client_id)
        wait_for(is_offline, what=f"{client_id}'s session to be offline")
    broker.advance_clock(seconds)


# --- `mqttq serve` as a subprocess ------------------------------------------------------------


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
    env.update(BROKER_ENV)
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

    @property
    def ended(self) -> bool:
        """Whether a started process exited on its own."""
        return self.process is not None and self.process.poll() is not None

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
