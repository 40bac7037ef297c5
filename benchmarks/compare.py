"""mosquitto vs mqttq, side by side, in one run on this machine (a benchmark, not a test).

For every scenario each broker is started fresh in its own temporary directory and pinned
to one core (`taskset -c 0`); `mqttq bench` drives it from the other core (`taskset -c 1`)
with exactly the same client options. Broker CPU seconds come from /proc/<pid>/stat
(utime + stime, all threads) read just before and just after the bench process. The
results table, the targets (mqttq / mosquitto ratios) and the machine are written between
the `compare.py` markers of docs/benchmarks.md.

    python benchmarks/compare.py                       # 15 s per scenario, about 5 minutes
    python benchmarks/compare.py --quick               # smoke check, about 1.5 minutes
    python benchmarks/compare.py --only p2p-qos1 --duration 30 --json
    python benchmarks/compare.py --redis-url redis://127.0.0.1:6379/0   # adds mqttq-redis

Everything listens on 127.0.0.1 only; every process started here is stopped (its whole
process group) before the script exits, also on Ctrl-C or SIGTERM.
`benchmarks/memory.py` reuses the broker helpers defined here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "benchmarks.md"
MOSQUITTO = "/usr/sbin/mosquitto"
HOST = "127.0.0.1"
INFLIGHT = 100
"""Publisher window (--inflight) for both brokers; mosquitto's max_inflight_messages too."""
QUEUE_LIMIT = 10_000
"""mqttq's default mqtt.max_queued_messages; mosquitto's max_queued_messages is set to it
(mqttq accepts at most 65535, so neither can be made unlimited like for like)."""
PAYLOAD = 62
BUSY_LOAD = 0.5
"""A 1-minute load average above this at start marks the run preliminary."""
DASH = "\u2013"
"""An en dash marks a value that does not apply or was not measured."""
SQLITE_FILES = ("mqttq.sqlite3", "mqttq.sqlite3-wal", "mqttq.sqlite3-shm")


class RunFailed(Exception):
    """A broker or a bench run could not complete; the message is one line."""


# --- brokers ------------------------------------------------------------------------------


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
        _stop_group(self.process, grace=15.0)


def _stop_group(process: subprocess.Popen[bytes], grace: float) -> None:
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
            preexec_fn=_raise_nofile,  # noqa: PLW1509 (no threads in this script)
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
) -> BrokerProcess:
    """`python -m mqttq serve --port 0` with its data dir in `workdir`; `config_toml`, when
    given, is passed as --config; `settings_env` as MQTTQ_* environment variables."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready.json"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "mqttq", "serve", "--port", "0", "--host", HOST]
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


_REGISTRY: list[BrokerProcess] = []


def stop_all() -> None:
    """Stop every broker this process started that is still running."""
    while _REGISTRY:
        _REGISTRY.pop().stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: nothing is left behind


def install_sigterm_handler() -> None:
    signal.signal(signal.SIGTERM, _on_sigterm)


# --- machine --------------------------------------------------------------------------------


def machine_info() -> dict[str, str]:
    """What the numbers depend on: cores, CPU, memory, kernel, Python, mosquitto, mqttq."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    try:
        mosq = subprocess.run(
            [MOSQUITTO, "-h"], check=False, capture_output=True, text=True, timeout=10
        )
        mosquitto = (mosq.stdout or mosq.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        mosquitto = "not found"
    from mqttq import __version__  # noqa: PLC0415

    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "kernel": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "mosquitto": mosquitto,
        "mqttq": f"{__version__} (git {commit or 'unknown'}, working tree as run)",
    }


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def write_section(path: Path, name: str, body: str) -> None:
    """Replace the text between the `<!-- name:begin -->` / `<!-- name:end -->` markers of
    `path` with `body`, or append a marked section when the markers are not there yet."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- scenarios ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scenario:
    """One `mqttq bench` command, run the same way against every broker."""

    name: str
    title: str
    args: tuple[str, ...]
    qos: int
    timed: bool = True
    """False for `persistent`, bounded by --messages rather than --duration."""
    overload: bool = False
    """Offered load above what the subscriber can take: QoS 1 messages pile up in its
    session queue, and the broker drops at max_queued_messages by configuration."""
    warmup: bool = True
    """False for floods: what the publishers push into the broker during a warm-up is
    delivered during the measured phase, which would make the delivery rate look low."""


SCENARIOS = (
    Scenario("p2p-qos1", "p2p QoS 1, 100 pairs, full speed", ("p2p", "--pairs", "100"), 1),
    Scenario(
        "p2p-qos1-1k",
        "p2p QoS 1, 100 pairs x 10 msg/s = 1,000 msg/s",
        ("p2p", "--pairs", "100", "--rate", "10"),
        1,
    ),
    Scenario(
        "fan-in-qos0",
        "fan-in QoS 0, 100 pub -> 1 sub (+), full speed",
        ("fan-in", "--publishers", "100", "--subscribers", "1"),
        0,
        warmup=False,
    ),
    Scenario(
        "fan-in-qos1",
        "fan-in QoS 1, 100 pub -> 1 sub (+), full speed",
        ("fan-in", "--publishers", "100", "--subscribers", "1"),
        1,
        overload=True,
        warmup=False,
    ),
    Scenario(
        "fan-in-qos1-5k",
        "fan-in QoS 1, 100 pub x 50 msg/s -> 1 sub (+)",
        ("fan-in", "--publishers", "100", "--subscribers", "1", "--rate", "50"),
        1,
    ),
    Scenario(
        "fan-out-qos0",
        "fan-out QoS 0, 1 pub -> 50 sub, full speed",
        ("fan-out", "--publishers", "1", "--subscribers", "50"),
        0,
        warmup=False,
    ),
    Scenario(
        "persistent-qos1",
        "persistent QoS 1, 100 offline sub x 100 msg backlog",
        ("persistent", "--publishers", "1", "--subscribers", "100", "--messages", "100"),
        1,
        timed=False,
    ),
)


@dataclass(frozen=True, slots=True)
class Timing:
    duration: float
    warmup: float
    drain_timeout: float
    inflight: int


def bench_argv(scenario: Scenario, timing: Timing, port: int | str) -> list[str]:
    """The exact `mqttq bench` command line (without taskset) for one run."""
    argv = [sys.executable, "-m", "mqttq.cli.bench", *scenario.args, "--qos", str(scenario.qos)]
    argv += ["--payload", str(PAYLOAD), "--protocol", "5", "--inflight", str(timing.inflight)]
    # One worker process: the tool has exactly one core, a second process would only add
    # context switches.
    argv += ["--workers", "1", "--drain-timeout", f"{timing.drain_timeout:g}"]
    if scenario.timed:
        warmup = timing.warmup if scenario.warmup else 0.0
        argv += ["--duration", f"{timing.duration:g}", "--warmup", f"{warmup:g}"]
    return [*argv, "--host", HOST, "--port", str(port), "--json"]


def run_bench(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run one bench process (own process group, killed on any exit) and parse its JSON."""
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"bench did not finish within {timeout:.0f} s") from None
    finally:
        _stop_group(process, grace=5.0)
    if process.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        raise RunFailed(f"bench exited {process.returncode}: {lines[-1] if lines else ''}")
    result: dict[str, Any] = json.loads(out)
    return result


def run_one(
    scenario: Scenario, broker_name: str, timing: Timing, workdir: Path, redis_toml: str | None
) -> dict[str, Any]:
    """Start a fresh broker, run the scenario against it, stop it; return the run record."""
    broker_core, tool_core = cores()
    record: dict[str, Any] = {"scenario": scenario.name, "broker": broker_name, "error": None}
    broker: BrokerProcess | None = None
    try:
        if broker_name == "mosquitto":
            broker = start_mosquitto(workdir, core=broker_core, inflight=timing.inflight)
        else:
            broker = start_mqttq(
                workdir,
                core=broker_core,
                name=broker_name,
                config_toml=redis_toml if broker_name == "mqttq-redis" else None,
            )
        argv = pinned(tool_core, bench_argv(scenario, timing, broker.port))
        budget = timing.warmup + timing.duration + 2 * timing.drain_timeout + 120
        cpu_before = broker.cpu_seconds()
        record["bench"] = run_bench(argv, budget)
        record["broker_cpu_s"] = round(broker.cpu_seconds() - cpu_before, 3)
        record["broker_max_rss_mib"] = round(broker.status_bytes("VmHWM") / 2**20, 1)
        if not broker.alive:
            raise RunFailed(f"{broker_name} exited during the run: {broker.log_tail()}")
    except RunFailed as exc:
        record["error"] = str(exc)
        if broker is not None and broker.log_tail():
            record["error"] += f" (broker log: {broker.log_tail()})"
    finally:
        if broker is not None:
            broker.stop()
            _REGISTRY.remove(broker)
    return record


# --- report ---------------------------------------------------------------------------------


def _get(record: dict[str, Any] | None, *path: str) -> Any:
    value: Any = record.get("bench") if record else None
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _rate_out(record: dict[str, Any]) -> float | None:
    if record["scenario"] == "persistent-qos1":
        value: float | None = _get(record, "persistent", "drain_per_s")
        return value
    rate: float | None = _get(record, "rates", "received_per_s")
    return rate


def _num(value: float | None) -> str:
    return DASH if value is None else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}"


@dataclass(frozen=True, slots=True)
class Target:
    """A goal of the issue: mqttq's metric over mosquitto's, bounded by `limit`."""

    label: str
    scenario: str
    metric: tuple[str, ...]
    """Path of the metric in the bench result JSON."""
    at_most: bool
    """True: the ratio must stay <= limit (latency); False: >= limit (throughput)."""
    limit: float
    zero_lost: bool = False


TARGETS = (
    Target(
        "p2p QoS 1 full speed: delivered msg/s, zero lost",
        "p2p-qos1",
        ("rates", "received_per_s"),
        at_most=False,
        limit=0.5,
        zero_lost=True,
    ),
    Target(
        "p2p QoS 1 at 1,000 msg/s: e2e p99 (ms)",
        "p2p-qos1-1k",
        ("latency_ms", "e2e", "p99"),
        at_most=True,
        limit=2.0,
    ),
    Target(
        "fan-out QoS 0: delivered msg/s",
        "fan-out-qos0",
        ("rates", "received_per_s"),
        at_most=False,
        limit=0.5,
    ),
)


def evaluate_targets(records: list[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """Each target for one mqttq variant against mosquitto (met, NOT MET or not run), then
    the QoS 1 losses: a target for the runs below saturation, a figure for the overload."""
    by = {(r["scenario"], r["broker"]): r for r in records}
    rows: list[dict[str, Any]] = []
    for t in TARGETS:
        mq, mo = by.get((t.scenario, variant)), by.get((t.scenario, "mosquitto"))
        a, b = _get(mq, *t.metric), _get(mo, *t.metric)
        ratio = a / b if a is not None and b else None
        status = "not run"
        if mq is not None and mq["error"]:
            status = "NOT MET (mqttq run failed)"
        elif ratio is not None:
            met = ratio <= t.limit if t.at_most else ratio >= t.limit
            if t.zero_lost and _get(mq, "messages", "lost") != 0:
                met = False
            status = "met" if met else "NOT MET"
        need = f"{'<=' if t.at_most else '>='} {t.limit:g}x" + (", 0 lost" if t.zero_lost else "")
        rows.append(
            {"variant": variant, "target": t.label, "mqttq": a, "mosquitto": b,
             "ratio": ratio, "need": need, "status": status}
        )  # fmt: skip
    for overload in (False, True):
        names = {s.name for s in SCENARIOS if s.qos >= 1 and s.overload == overload}
        rows.append(_loss_row(records, variant, names, overload))
    return rows


def _loss_row(
    records: list[dict[str, Any]], variant: str, names: set[str], overload: bool
) -> dict[str, Any]:
    lost = {
        broker: sum(_get(r, "messages", "lost") or 0 for r in records
                    if r["broker"] == broker and r["scenario"] in names)
        for broker in (variant, "mosquitto")
    }  # fmt: skip
    mine = [r for r in records if r["broker"] == variant and r["scenario"] in names]
    if overload:
        label = "QoS 1 lost under overload (fan-in full speed; queue limit drops, see notes)"
        status = "info" if mine else "not run"
    else:
        label = "no QoS 1 message lost (every other QoS 1 run)"
        failed = any(r["error"] for r in mine)
        status = "not run" if not mine else "met" if not lost[variant] and not failed else "NOT MET"
    return {"variant": variant, "target": label, "mqttq": lost[variant],
            "mosquitto": lost["mosquitto"], "ratio": None,
            "need": "-" if overload else "0 lost", "status": status}  # fmt: skip


def render(report: dict[str, Any]) -> str:
    """The Markdown section for docs/benchmarks.md."""
    out: list[str] = []
    timing = report["timing"]
    kind = "quick smoke run" if report["quick"] else "full run"
    out.append(f"### Run of {report['date']} ({kind})\n")
    if report["preliminary"]:
        out.append(
            "> **Preliminary.** "
            + ("Short --quick runs; " if report["quick"] else "")
            + f"load average at start {report['load_start']} on {report['machine']['nproc']} "
            "cores: other work shared the machine, so these numbers are noisy and only show "
            "that the comparison runs end to end. Re-run on an idle machine before quoting "
            "them.\n"
        )
    out.append(f"Command: `{report['command']}`\n")
    out.append("| machine | |\n|---|---|")
    for key, value in report["machine"].items():
        out.append(f"| {key} | {value} |")
    out.append(f"| load average at start (1/5/15 min) | {report['load_start']} |")
    out.append(f"| load average at end | {report['load_end']} |")
    out.append(f"| pinning | {report['pinning']} |\n")
    out.append(
        f"Each scenario: {timing['duration']:g} s measured after {timing['warmup']:g} s warm-up "
        "(no warm-up for the full-speed fan-in and fan-out floods; `persistent`: 100 "
        f"messages per subscriber), payload {PAYLOAD} B, MQTT 5, "
        f"`--inflight {timing['inflight']}` for both brokers, one bench worker process. "
        "A fresh broker (new temporary directory) per scenario.\n"
    )
    out.append(
        "| scenario | broker | msg/s in | msg/s out | e2e p50 | p95 | p99 | max | "
        "PUBACK p50 | p99 | lost | dup | ooo | broker CPU s | msg (in+out) / CPU s | "
        "tool CPU % |"
    )
    out.append("|---|---|" + "---:|" * 14)
    titles = {s.name: s.title for s in SCENARIOS}
    for r in report["runs"]:
        title = titles[r["scenario"]]
        if r["error"]:
            out.append(f"| {title} | {r['broker']} | failed: {r['error']} |" + " |" * 13)
            continue
        msgs = r["bench"]["messages"]
        e2e, ack = r["bench"]["latency_ms"]["e2e"], r["bench"]["latency_ms"]["puback"]
        cpu = r["broker_cpu_s"]
        per_cpu = (msgs["published"] + msgs["received"]) / cpu if cpu > 0 else None
        tool = max((w["cpu_percent"] for w in r["bench"]["tool"]["workers"]), default=0)
        qos0 = r["bench"]["qos"] == 0
        out.append(
            f"| {title} | {r['broker']} | {_num(_get(r, 'rates', 'published_per_s'))} | "
            f"{_num(_rate_out(r))} | {_ms(e2e.get('p50'))} | {_ms(e2e.get('p95'))} | "
            f"{_ms(e2e.get('p99'))} | {_ms(e2e.get('max'))} | "
            f"{DASH if qos0 else _ms(ack.get('p50'))} | {DASH if qos0 else _ms(ack.get('p99'))} | "
            f"{msgs['lost']:,} | {msgs['duplicates']:,} | {msgs['out_of_order']:,} | "
            f"{cpu:.2f} | {_num(per_cpu)} | {tool:.0f}{' (sat.)' if tool > 90 else ''} |"
        )
    out.append(
        "\nLatencies in ms. *msg/s out* is deliveries per second (for `persistent`: the "
        "backlog drain rate, first reconnect to last message; its e2e latency includes the "
        "time spent queued). *ooo* = out of order. *msg (in+out) / CPU s* = (published + "
        "delivered) / broker CPU seconds over the whole bench process (setup and drain "
        "included), as TBMQ counts efficiency. *tool CPU %*: the bench worker's share of its "
        "core; above 90 % (*sat.*) the tool, not the broker, may have been the limit. QoS 0 "
        "may lose messages by design.\n"
    )
    persistent = [
        r for r in report["runs"] if r["scenario"] == "persistent-qos1" and not r["error"]
    ]
    if persistent:
        out.append(
            "| persistent backlog | broker | backlog | sessions present | drain s | drain msg/s "
            "| lost |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|")
        for r in persistent:
            p = r["bench"]["persistent"]
            out.append(
                f"| 100 sub x 100 msg | {r['broker']} | {p['backlog']:,} | "
                f"{p['sessions_present']} | {_ms(p['drain_s'])} | {_num(p['drain_per_s'])} | "
                f"{r['bench']['messages']['lost']:,} |"
            )
        out.append("")
    out.append("Targets (mqttq / mosquitto):\n")
    out.append("| mqttq variant | target | mqttq | mosquitto | ratio | required | status |")
    out.append("|---|---|---:|---:|---:|---|---|")
    for t in report["targets"]:
        ratio = DASH if t["ratio"] is None else f"{t['ratio']:.2f}x"
        fmt = _ms if "(ms)" in t["target"] else _num
        out.append(
            f"| {t['variant']} | {t['target']} | {fmt(t['mqttq'])} | {fmt(t['mosquitto'])} | "
            f"{ratio} | {t['need']} | **{t['status']}** |"
        )
    busy = "the machine was busy"
    notes = [
        f"{titles[r['scenario']]} / {r['broker']}: {w}"
        for r in report["runs"]
        for w in (_get(r, "warnings") or []) + (_get(r, "errors") or [])[:3]
        if not w.startswith(busy)
    ]
    crowded = [
        r for r in report["runs"] if any(w.startswith(busy) for w in _get(r, "warnings") or [])
    ]
    if crowded:
        notes.append(
            f"{len(crowded)} of {len(report['runs'])} runs saw a 1-minute load average above "
            "the core count (the bench's 'machine was busy' warning); the broker and the tool "
            "themselves make a load of about 2"
        )
    notes += report["notes"]
    if notes:
        out.append("\nWarnings from the runs:\n")
        out.extend(f"- {n}" for n in notes)
    out.append("\nCommands run (PORT is the broker's, TMP its temporary directory):\n")
    out.append("```sh")
    out.extend(report["commands"])
    out.append("```\n")
    out.append("mosquitto.conf (generated per run):\n")
    out.append("```\n" + report["mosquitto_conf"].rstrip() + "\n```")
    return "\n".join(out) + "\n"


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=15.0, help="measured s per scenario")
    parser.add_argument("--quick", action="store_true", help="3 s runs: a smoke check")
    parser.add_argument(
        "--only",
        action="append",
        choices=[s.name for s in SCENARIOS],
        help="run only this scenario (repeatable)",
    )
    parser.add_argument(
        "--inflight",
        type=int,
        default=INFLIGHT,
        help="publisher window, both brokers (mosquitto max_inflight_messages)",
    )
    parser.add_argument("--redis-url", help='also run mqttq with [storage] device = "redis"')
    parser.add_argument(
        "--output", default=str(DOCS), help="Markdown file to update ('' = do not write)"
    )
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; exit status 0 when every run completed, 1 otherwise."""
    args = parse_args(argv)
    install_sigterm_handler()
    load_start = load_average()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    timing = Timing(
        duration=3.0 if args.quick and args.duration == 15.0 else args.duration,
        warmup=0.5 if args.quick else 2.0,
        drain_timeout=5.0 if args.quick else 10.0,
        inflight=args.inflight,
    )
    brokers = ["mosquitto", "mqttq"]
    notes: list[str] = []
    redis_toml = redis_config(args.redis_url) if args.redis_url else None
    if redis_toml is not None:
        brokers.append("mqttq-redis")
    elif args.redis_url:
        notes.append('--redis-url skipped: this mqttq has no [storage] device = "redis" yet')
        _log(notes[-1])
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    records: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="mqttq-compare-") as tmp:
            for scenario in scenarios:
                for name in brokers:
                    _log(f"{scenario.name} / {name} ...")
                    workdir = Path(tmp) / f"{scenario.name}-{name}"
                    record = run_one(scenario, name, timing, workdir, redis_toml)
                    records.append(record)
                    _log("  " + (record["error"] or _summary(record)))
    finally:
        stop_all()
    command = ["python", "benchmarks/compare.py", *(sys.argv[1:] if argv is None else argv)]
    report: dict[str, Any] = {
        "date": started,
        "command": shlex.join(command),
        "quick": args.quick,
        "machine": machine_info(),
        "load_start": load_start,
        "load_end": load_average(),
        "preliminary": args.quick or float(load_start.split()[0]) > BUSY_LOAD,
        "pinning": _pinning(),
        "timing": dataclasses.asdict(timing),
        "runs": records,
        "targets": [t for v in brokers[1:] for t in evaluate_targets(records, v)],
        "notes": notes,
        "commands": _commands(scenarios, timing, redis_toml is not None),
        "mosquitto_conf": mosquitto_config("PORT", "TMP", inflight=timing.inflight),
    }
    if args.output:
        write_section(Path(args.output), "compare.py", render(report))
        _log(f"wrote {args.output}")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    for t in report["targets"]:
        _log(f"{t['variant']}: {t['target']}: {t['status']}")
    return 1 if any(r["error"] for r in records) else 0


def _pinning() -> str:
    broker_core, tool_core = cores()
    if broker_core is None:
        return "none (fewer than 2 usable cores, or no taskset)"
    return f"brokers `taskset -c {broker_core}`, bench `taskset -c {tool_core}`"


def _commands(scenarios: list[Scenario], timing: Timing, redis: bool) -> list[str]:
    broker_core, tool_core = cores()
    serve = "python -m mqttq serve --port 0 --host 127.0.0.1 --data-dir TMP/data"
    serve += " --ready-file TMP/ready.json"
    lines = [
        shlex.join(pinned(broker_core, [MOSQUITTO, "-c", "TMP/mosquitto.conf"])),
        " ".join(pinned(broker_core, [serve])),
    ]
    if redis:
        lines.append(" ".join(pinned(broker_core, [serve + " --config TMP/mqttq.toml"])))
    for s in scenarios:
        lines.append(shlex.join(pinned(tool_core, ["python", *bench_argv(s, timing, "PORT")[1:]])))
    return lines


def _summary(record: dict[str, Any]) -> str:
    msgs = record["bench"]["messages"]
    return (
        f"in {_num(_get(record, 'rates', 'published_per_s'))}/s, out {_num(_rate_out(record))}/s, "
        f"p99 {_ms(_get(record, 'latency_ms', 'e2e', 'p99'))} ms, lost {msgs['lost']}, "
        f"broker CPU {record['broker_cpu_s']:.2f} s"
    )


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # everything started was stopped on the way out
        sys.exit(130)
