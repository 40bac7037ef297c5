"""The side-by-side scenarios and one `mqttq bench` run of them (not a test).

`SCENARIOS` are the seven `mqttq bench` commands `compare.py` runs against every broker;
`bench_argv` gives one run's exact command line (one tool worker, the same client options
for every broker) and `run_bench` runs it in a process group of its own and returns its
result JSON. `compare.py`, `compare_report.py`, `drain_timeline.py`, `kafka_log.py` and
`cluster_p2p.py` share them, so that their figures are of the same commands.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.brokers import HOST, REPO, RunFailed, stop_group

PAYLOAD = 62
"""Payload bytes of every scenario: a 62-byte payload, as TBMQ's P2P test sends."""


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
        stop_group(process, grace=5.0)
    if process.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        raise RunFailed(f"bench exited {process.returncode}: {lines[-1] if lines else ''}")
    result: dict[str, Any] = json.loads(out)
    return result
