"""Start, pin and stop the brokers the side-by-side benchmarks measure (not a test).

mosquitto runs with a generated mosquitto.conf on a free loopback port; mqttq runs as
`python -m mqttq serve --port 0` and is ready once it has written its ready file. Each
broker gets its own working directory and its own process group, optionally pinned to one
core with `taskset`. `stop_all`, which the scripts call in a `finally` (so also on Ctrl-C,
and on SIGTERM once `install_sigterm_handler` ran), ends every group started here.
Everything listens on 127.0.0.1 only. Every script that starts a broker or pins a process
uses these helpers: peers/, distributed/ (the Kafka and cluster runs) and investigations/.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parents[2]
"""The repository root: benchmarks/harness/ is two levels below it."""
MOSQUITTO = "/usr/sbin/mosquitto"
HOST = "127.0.0.1"
INFLIGHT = 100
"""Publisher window (--inflight) for both brokers; mosquitto's max_inflight_messages too."""
QUEUE_LIMIT = 10_000
"""mqttq's default mqtt.max_queued_messages; mosquitto's max_queued_messages is set to it
(mqttq accepts at most 65535, so neither can be made unlimited like for like)."""
SQLITE_FILES = ("mqttq.sqlite3", "mqttq.sqlite3-wal", "mqttq.sqlite3-shm")
"""The files of mqttq's SQLite store in its data dir: database, WAL, shared memory."""


class RunFailed(Exception):
    """A broker or a bench run could not complete; the message is one line."""


def _raise_nofile() -> None:
    # Runs in the child before exec: thousands of sockets need thousands of descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def cores() -> tuple[str | None, str | None]:
    """(broker core, tool core) for taskset, or (None, None) without two usable cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2 or not _which("taskset"):
        return None, None
    return str(allowed[0]), str(allowed[1])


def _which(program: str) -> bool:
    return any(Path(d, program).exists() for d in os.environ.get("PATH", "").split(os.pathsep))


def pinned(core: str | None, argv: list[str]) -> list[str]:
    """`argv` prefixed with `taskset -c core` (taskset execs, so the pid stays the same)."""
    return ["taskset", "-c", core, *argv] if core is not None else argv


def free_port() -> int:
    """A port nothing listens on right now (for mosquitto, which cannot bind port 0)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def on_cpu_seconds(pid: int) -> float:
    """The on-CPU time of the process's live threads so far, from
    /proc/<pid>/task/*/schedstat: nanoseconds as the scheduler counted them. utime + stime
    are ticks (250 a second here) charged to whoever runs when one fires; a broker that
    runs for 30 µs in every millisecond, as at 1,000 msg/s, is sampled, not measured, by
    them. A thread that ended is no longer counted."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return total / 1e9


class BrokerProcess:
    """A broker started in its own process group; `stop()` ends the whole group."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
        self.name = name
        self.process = process
        self.workdir = workdir
        self.pid = process.pid
        self.port = 0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def cpu_seconds(self) -> float:
        """utime + stime of every thread so far, from /proc/<pid>/stat."""
        text = Path(f"/proc/{self.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def on_cpu_seconds(self) -> float:
        """`on_cpu_seconds(pid)`: exact, where `cpu_seconds` is sampled."""
        return on_cpu_seconds(self.pid)

    def status_bytes(self, key: str) -> int:
        """A memory line of /proc/<pid>/status (VmRSS, VmHWM...) in bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise RunFailed(f"{self.name}: no {key} in /proc/{self.pid}/status")

    def log_tail(self, lines: int = 3) -> str:
        log = self.workdir / "broker.log"
        text = log.read_text(errors="replace").strip() if log.exists() else ""
        return " | ".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 15 s; idempotent."""
        stop_group(self.process, grace=15.0)


def stop_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the group led by `process`, SIGKILL it after `grace` s, and reap the leader.
    Members left behind by a leader that already exited (worker processes) are killed too;
    Linux does not reuse a pid while it still names a process group, so only ours are hit."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _spawn(
    argv: list[str], workdir: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with (workdir / "broker.log").open("wb") as log:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_raise_nofile,  # noqa: PLW1509 (no threads in the benchmark scripts)
        )


def mosquitto_config(
    port: int | str, workdir: Path | str, *, inflight: int, queue_limit: int = QUEUE_LIMIT
) -> str:
    """The mosquitto.conf of a measuring run; each choice says why."""
    lines = [
        f"listener {port} {HOST}",
        "allow_anonymous true",
        "# Like mqttq's SQLite store, keep sessions on disk. mosquitto saves its in-memory",
        "# state every autosave_interval (default 1800 s) and at shutdown, not per message.",
        "persistence true",
        f"persistence_location {workdir}/",
        "# Nagle off: otherwise small PUBACKs wait for delayed ACKs (~40 ms).",
        "set_tcp_nodelay true",
        f"# = --inflight {inflight}: mosquitto announces it as Receive Maximum (default 20),",
        "# so both brokers see the same publisher window.",
        f"max_inflight_messages {inflight}",
        "# = mqttq's mqtt.max_queued_messages: both hold this many QoS 1/2 messages per",
        "# session beyond the in-flight window (online or offline), then drop (mosquitto",
        "# the newest, mqttq the oldest). mosquitto's default is 1000.",
        f"max_queued_messages {queue_limit}",
        "# mqttq has no $SYS tree: do not make mosquitto publish one.",
        "sys_interval 0",
        "log_dest stderr",
        "log_type error",
        "log_type warning",
    ]
    if os.geteuid() == 0:
        # As root, mosquitto would switch to the `mosquitto` user, which cannot write here.
        lines.append("user root")
    return "\n".join(lines) + "\n"


def start_mosquitto(
    workdir: Path, *, core: str | None, inflight: int = INFLIGHT, queue_limit: int = QUEUE_LIMIT
) -> BrokerProcess:
    """mosquitto on a free loopback port, configured by `mosquitto_config`."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = workdir / "mosquitto.conf"
    if not conf.exists():
        conf.write_text(mosquitto_config(port, workdir, inflight=inflight, queue_limit=queue_limit))
    else:
        port = int(conf.read_text().split()[1])  # a restart keeps its port and state
    broker = BrokerProcess(
        "mosquitto", _spawn(pinned(core, [MOSQUITTO, "-c", str(conf)]), workdir), workdir
    )
    _REGISTRY.append(broker)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not broker.alive:
            raise RunFailed(f"mosquitto exited at start: {broker.log_tail()}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
        except OSError:
            time.sleep(0.05)
            continue
        broker.port = port
        return broker
    broker.stop()
    raise RunFailed("mosquitto did not listen within 15 s")


def start_mqttq(
    workdir: Path,
    *,
    core: str | None,
    name: str = "mqttq",
    config_toml: str | None = None,
    settings_env: dict[str, str] | None = None,
    launcher: tuple[str, ...] = ("-m", "mqttq"),
) -> BrokerProcess:
    """`python -m mqttq serve --port 0` with its data dir in `workdir`; `config_toml`, when
    given, is passed as --config; `settings_env` as MQTTQ_* environment variables;
    `launcher`: what follows `python` in place of `-m mqttq` (a script that instruments
    the broker, then runs mqttq's CLI with the rest of the arguments)."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready.json"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, *launcher, "serve", "--port", "0", "--host", HOST]
    argv += ["--data-dir", str(workdir / "data"), "--ready-file", str(ready)]
    if config_toml is not None:
        (workdir / "mqttq.toml").write_text(config_toml)
        argv += ["--config", str(workdir / "mqttq.toml")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"  # several brokers may run at once
    env.update(settings_env or {})
    broker = BrokerProcess(name, _spawn(pinned(core, argv), workdir, env), workdir)
    _REGISTRY.append(broker)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not broker.alive:
            raise RunFailed(f"{name} exited at start: {broker.log_tail()}")
        try:
            info = json.loads(ready.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
            continue
        broker.pid = int(info["pid"])
        broker.port = int(info["mqtt_port"])
        return broker
    broker.stop()
    raise RunFailed(f"{name} wrote no ready file within 30 s")


def redis_config(url: str) -> str | None:
    """TOML that puts mqttq's device sessions in Redis at `url`, or None when this mqttq's
    config has no `[storage] device = "redis"` yet."""
    from mqttq import config  # noqa: PLC0415 (only when --redis-url is given)
    from mqttq.errors import ConfigError  # noqa: PLC0415

    keys = {key for key, _, _ in config.iter_keys()}
    url_keys = sorted(k for k in keys if "redis" in k and k.endswith("url"))
    if "storage.device" not in keys or not url_keys:
        return None
    sections: dict[str, list[str]] = {"storage": ['device = "redis"']}
    section, _, name = url_keys[0].partition(".")
    sections.setdefault(section, []).append(f"{name} = {json.dumps(url)}")
    text = "".join(f"[{s}]\n" + "\n".join(body) + "\n" for s, body in sections.items())
    try:
        config.parse_settings(text, {}, {})
    except ConfigError:
        return None
    return text


# Every broker started here that stop_broker has not dropped; stop_all stops them all
# (stopping is idempotent, so one already stopped does no harm).
_REGISTRY: list[BrokerProcess] = []


def stop_all() -> None:
    """Stop every broker this process started that is still running."""
    while _REGISTRY:
        _REGISTRY.pop().stop()


def stop_broker(broker: BrokerProcess) -> None:
    """Stop `broker` now and drop it from the brokers `stop_all` will stop."""
    broker.stop()
    _REGISTRY.remove(broker)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: nothing is left behind


def install_sigterm_handler() -> None:
    """Make SIGTERM exit like Ctrl-C: through every `finally`, so `stop_all` still runs."""
    signal.signal(signal.SIGTERM, _on_sigterm)
