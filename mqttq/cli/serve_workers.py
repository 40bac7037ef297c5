"""`mqttq serve --workers N`: N nodes of one cluster on one machine.

The supervisor (this process) starts N `mqttq serve` worker processes. Each is a full node
of the distributed mode: node id `<node id>-w<i>`, data dir `<data_dir>/w<i>`, admin port
`admin.port + i` (0 stays 0: each picks a free one, written to its data dir's admin.json),
all binding the MQTT listeners with SO_REUSEPORT so that the kernel spreads connections
over them. Only in distributed mode (`storage.log = "kafka"`): the nodes share sessions,
subscriptions and messages through Kafka and Redis and never talk to each other.

The supervisor forwards SIGTERM and SIGINT to every worker and exits when all have
stopped: 0 when every worker stopped cleanly on the signal, 1 when any worker exited on
its own (logged at once; the others go on serving, as the nodes of a cluster do) or
failed. It restarts nothing. Workers run in their own process group (a Ctrl+C reaches them
once, through the supervisor) and get SIGTERM if the supervisor itself dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from mqttq.cli.ready_file import write_ready_file
from mqttq.config import Settings
from mqttq.config.schema import node_id_of
from mqttq.errors import ConfigError

__all__ = ["WORKER_ENV", "check_workers", "run_workers", "worker_node_id"]

log = logging.getLogger("mqttq.cli.serve")

WORKER_ENV: Final = "MQTTQ_WORKER"
"""Set (to the worker's index) in a worker's environment: the worker then leaves the
`listening on` line to its supervisor. Not a setting (no `__` in the name)."""
_PR_SET_PDEATHSIG: Final = 1
_POLL: Final = 0.05


def check_workers(settings: Settings, workers: int) -> None:
    """ConfigError naming the flag or key when `workers` cannot run with `settings`."""
    if workers > 1 and settings.storage.log != "kafka":
        raise ConfigError(
            "storage.log",
            f'--workers {workers} needs the distributed mode: set storage.log = "kafka" '
            "(with [kafka] bootstrap_servers and [redis]), or run one process without --workers",
        )


def worker_node_id(base: str, index: int) -> str:
    """The node id of worker `index`: `<base>-w<index>`."""
    return f"{base}-w{index}"


@dataclass(slots=True)
class _Worker:
    index: int
    node_id: str
    data_dir: Path
    ready_file: Path
    process: subprocess.Popen[bytes]
    exit_code: int | None = None
    signalled: bool = False


def run_workers(
    settings: Settings,
    workers: int,
    config: Path | None,
    ready_file: Path | None,
    *,
    announce: bool = False,
) -> int:
    """Start `workers` worker processes, supervise them until all have stopped; the exit
    code (see the module docstring). Once all listen, writes `ready_file` and, when
    `announce`, one `mqttq listening on HOST:PORT (distributed, N workers ...)` line on
    stderr (the workers print none)."""
    listener = settings.listener
    holder: socket.socket | None = None
    port = listener.port
    if port == 0:
        # Choose the port once for all workers, and hold it (bound, not listening: it gets
        # no connections) so that nothing else takes it before they bind.
        holder = socket.socket(socket.AF_INET6 if ":" in listener.host else socket.AF_INET)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((listener.host, 0))
        port = holder.getsockname()[1]
    base = node_id_of(replace(settings, listener=replace(listener, port=port)))
    shown = f"[{listener.host}]" if ":" in listener.host else listener.host
    line = (
        f"mqttq listening on {shown}:{port} (distributed, {workers} workers "
        f"{worker_node_id(base, 0)}..{worker_node_id(base, workers - 1)}, data dirs "
        f"{settings.storage.data_dir.absolute()}/w0..w{workers - 1})"
    )
    started: list[_Worker] = []
    stopping = False

    def forward(signum: int, _frame: object, *, once: bool = False) -> None:
        # A second signal reaches the workers too (they take it as "exit now"), unless
        # `once`: then only the workers not signalled yet get it.
        nonlocal stopping
        stopping = True
        for worker in started:
            if worker.exit_code is None and not (once and worker.signalled):
                worker.signalled = True
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(workers):
            started.append(_start(settings, config, base, index, port))
        if stopping:  # a signal came while starting: the workers started since get it too
            forward(signal.SIGTERM, None, once=True)
        code = _supervise(
            started,
            lambda: stopping,
            lambda: forward(signal.SIGTERM, None, once=True),
            lambda: _announce_ready(started, ready_file, port, line if announce else None),
        )
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if holder is not None:
            holder.close()
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
    return code


def _start(settings: Settings, config: Path | None, base: str, index: int, port: int) -> _Worker:
    data_dir = settings.storage.data_dir / f"w{index}"
    data_dir.mkdir(parents=True, exist_ok=True)
    ready = data_dir / "ready.json"
    ready.unlink(missing_ok=True)
    node_id = worker_node_id(base, index)
    command = [sys.executable, "-m", "mqttq", "serve", "--host", settings.listener.host]
    command += ["--port", str(port), "--data-dir", str(data_dir), "--ready-file", str(ready)]
    command += ["--log-level", settings.log.level, "--log-format", settings.log.format]
    if config is not None:
        command += ["--config", str(config)]
    admin_port = settings.admin.port + index if settings.admin.port else 0
    env = dict(os.environ)
    env.update(
        {
            "MQTTQ_CLUSTER__NODE_ID": node_id,
            "MQTTQ_LISTENER__REUSE_PORT": "true",
            "MQTTQ_ADMIN__PORT": str(admin_port),
            WORKER_ENV: str(index),
        }
    )
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 (the supervisor runs no threads)
    )
    log.info("worker started", extra={"worker": index, "node_id": node_id, "pid": process.pid})
    return _Worker(index, node_id, data_dir, ready, process)


def _die_with_parent() -> None:
    # Linux: SIGTERM to the worker when the supervisor dies (even by kill -9).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _supervise(
    workers: list[_Worker],
    is_stopping: Callable[[], bool],
    stop_all: Callable[[], None],
    on_ready: Callable[[], None],
) -> int:
    """Poll the workers until all have exited, calling `on_ready` once all listen; a
    worker that exits before all are ready stops the others (the cluster never came up)."""
    failed = False
    announced = False
    while any(worker.exit_code is None for worker in workers):
        for worker in workers:
            if worker.exit_code is not None:
                continue
            code = worker.process.poll()
            if code is None:
                continue
            worker.exit_code = code
            if is_stopping() and code == 0:
                log.info(
                    "worker stopped", extra={"worker": worker.index, "node_id": worker.node_id}
                )
                continue
            failed = True
            if not announced and not is_stopping():
                log.error(
                    "worker %d failed to start (code %d): stopping the others", worker.index, code
                )
                stop_all()
                continue
            log.error(
                "worker %d (node %s, pid %d) %s%s",
                worker.index,
                worker.node_id,
                worker.process.pid,
                _how_it_ended(code),
                "" if is_stopping() else "; the other workers go on, nothing is restarted",
            )
        if not announced and all(w.ready_file.exists() for w in workers if w.exit_code is None):
            announced = True
            on_ready()
        time.sleep(_POLL)
    return 1 if failed else 0


def _how_it_ended(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name} (exit code {code})"
    return f"exited with code {code}"


def _announce_ready(
    workers: list[_Worker], ready_file: Path | None, port: int, line: str | None
) -> None:
    pids = []
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            pids.append(int(json.loads(worker.ready_file.read_text())["pid"]))
    log.info("workers listening", extra={"port": port, "workers": pids})
    if ready_file is not None:
        write_ready_file(ready_file, os.getpid(), port)
    if line is not None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
