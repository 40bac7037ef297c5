"""Real Redis servers for the tests: one standalone server, or a 3-master Redis Cluster.

Debian's `redis-server` (scripts/install-services.sh installs it) on 127.0.0.1 only, on
ports chosen at run time (bind port 0, retry when another process takes the port first),
with `--save "" --appendonly yes --dir <tmp>`: no RDB snapshots, every write in the AOF, so
a restart keeps what was acknowledged. Nothing here is a pytest fixture: see
tests/redis_fixtures.py.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
HOST = "127.0.0.1"
START_DEADLINE = 20.0
"""Bounds a hang on a loaded machine; never a performance bound."""
PORT_ATTEMPTS = 5


class ServiceError(RuntimeError):
    """A test service could not be started or stopped."""


def redis_available() -> bool:
    """True when Debian's redis-server and redis-cli are installed."""
    return Path(REDIS_SERVER).exists() and shutil.which(REDIS_CLI) is not None


def free_port() -> int:
    """A port nobody listens on right now (it may be taken before it is used: retry)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _wait(predicate: Callable[[], bool], what: str, deadline: float = START_DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise ServiceError(f"timed out after {deadline:.0f} s waiting for {what}")
        time.sleep(0.02)


def redis_cli(port: int, *args: str) -> str:
    """Run `redis-cli -p PORT ARGS...` and return its output ('' when it failed)."""
    done = subprocess.run(
        [REDIS_CLI, "-h", HOST, "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=START_DEADLINE,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


class RedisServer:
    """One redis-server process on a fixed directory; `port` stays the same across restarts."""

    def __init__(self, workdir: Path, *, cluster: bool = False) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.port = 0
        self.log = workdir / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def _command(self, port: int, bus_port: int | None) -> list[str]:
        command = [REDIS_SERVER, "--bind", HOST, "--port", str(port), "--save", ""]
        command += ["--appendonly", "yes", "--dir", str(self.workdir)]
        command += ["--logfile", str(self.log), "--daemonize", "no"]
        if bus_port is not None:
            command += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            command += ["--cluster-port", str(bus_port)]
        return command

    def start(self) -> None:
        """Start on a new free port (first start) or on the same port (restart)."""
        if self.process is not None:
            raise ServiceError("redis-server already running")
        if self.port:
            self._spawn(self.port)
            return
        for _attempt in range(PORT_ATTEMPTS):
            if self._spawn(free_port()):
                return
        raise ServiceError(f"redis-server found no free port:\n{self.log_text()}")

    def _spawn(self, port: int) -> bool:
        # A cluster node also listens on a bus port, chosen the same way.
        bus_port = free_port() if self.cluster else None
        self.process = subprocess.Popen(
            self._command(port, bus_port), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )

        def up() -> bool:
            if self.process is None or self.process.poll() is not None:
                return True
            return redis_cli(port, "PING") == "PONG"

        _wait(up, f"redis-server on port {port}")
        assert self.process is not None
        if self.process.poll() is not None:
            self.process = None
            if self.port:  # a restart must keep its port: the broker holds the URL
                raise ServiceError(f"redis-server did not restart:\n{self.log_text()}")
            return False  # the port was taken meanwhile: try another
        self.port = port
        return True

    def stop(self) -> None:
        """SIGTERM (Redis writes and fsyncs its AOF), wait for the exit."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=START_DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        """Stop, then start on the same port and directory (the data comes back from the AOF)."""
        self.stop()
        self.start()

    def flush(self) -> None:
        """Delete every key (a fresh state for the next test); the script cache stays."""
        redis_cli(self.port, "FLUSHALL")

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class RedisClusterServers:
    """Three redis-server masters joined by `redis-cli --cluster create` (no replicas)."""

    def __init__(self, workdir: Path) -> None:
        self.nodes = [RedisServer(workdir / f"node{i}", cluster=True) for i in range(3)]

    @property
    def url(self) -> str:
        """The URL of one node; the cluster client discovers the others."""
        return self.nodes[0].url

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        addresses = [f"{HOST}:{node.port}" for node in self.nodes]
        create = [REDIS_CLI, "--cluster", "create", *addresses, "--cluster-replicas", "0"]
        done = subprocess.run(
            [*create, "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=START_DEADLINE,
            check=False,
        )
        if done.returncode != 0:
            raise ServiceError(f"redis-cli --cluster create failed:\n{done.stdout}{done.stderr}")

        def ready() -> bool:
            return all(
                "cluster_state:ok" in redis_cli(node.port, "CLUSTER", "INFO") for node in self.nodes
            )

        _wait(ready, "cluster_state:ok on every node")

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(ServiceError):
                node.stop()

    def flush(self) -> None:
        for node in self.nodes:
            node.flush()
