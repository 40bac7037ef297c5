"""p2p QoS 1 on a cluster of 1 and of 2 mqttq nodes sharing one Kafka and one Redis (a
benchmark, not a test).

What `mqttq serve --workers N` runs, made addressable: each node is its own `mqttq serve`
process with its own node id (`bench-n<i>`), port, data dir and admin API, the same
`[kafka]` and `[redis]` (distributed mode, heartbeats on). `--workers N` would put the N
nodes behind one SO_REUSEPORT port, where the kernel, not the benchmark, picks each
client's node; separate ports let the benchmark choose. The load is `mqttq bench p2p`
(62-byte payloads, MQTT 5, 100 in flight per publisher, one bench process) with
`--node-ports`: pair i's publisher connects to node i % N, its subscriber to the same node
(`--placement same`) or to the next one (`--placement cross`: the two ends of every pair
are on different nodes; a message is routed by the node owning its publisher's `msg.all`
partition, so about half of them go through the subscriber's node's downlink topic).
`--placement workers` runs the literal `mqttq serve --workers N` instead: one port, the
kernel places each client, so with 2 workers about half the pairs cross; CPU is summed
over the workers' pids.

Cores: nothing is pinned. The nodes, Kafka (one KRaft node from scripts/kafka-local.sh,
fresh in a temporary directory, warmed up by an unmeasured run), Redis and the bench tool
share every core of the machine; so the comparison that matters is CPU per delivered
message, not msg/s. Broker CPU is the sum over the nodes of utime + stime from
/proc/<pid>/stat just before and after the measured run; Kafka's is measured the same way.
It is also split by kind of thread (/proc/<pid>/task: the event loop's, librdkafka's,
the other Python threads). `--profile DIR` runs py-spy on every node for the warm-up and
the measured run (folded stacks, DIR/<nodes><placement>-node<i>.txt).

    python benchmarks/distributed/cluster_p2p.py [--nodes 1,2]
        [--placement same|cross|workers] [--pairs 100] [--duration 15] [--kafka-warmup 20]
        [--kafka BOOTSTRAP --redis URL] [--profile DIR] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.distributed.kafka_log import cpu_seconds
from benchmarks.harness.brokers import (
    HOST,
    REPO,
    BrokerProcess,
    RunFailed,
    install_sigterm_handler,
    start_mqttq,
    stop_all,
)
from benchmarks.harness.scenarios import Scenario, Timing, bench_argv, run_bench
from tests.kafka_service import KafkaServer
from tests.services import RedisServer


def node_config(bootstrap: str, prefix: str, redis_url: str, node_id: str) -> str:
    return f"""
[storage]
log = "kafka"
[kafka]
bootstrap_servers = "{bootstrap}"
topic_prefix = "{prefix}"
[redis]
url = "{redis_url}"
[cluster]
node_id = "{node_id}"
"""


def start_workers(workdir: Path, workers: int, config: str) -> tuple[BrokerProcess, list[int]]:
    """`mqttq serve --workers N` on one free port; the supervisor and the nodes' pids."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready.json"
    (workdir / "mqttq.toml").write_text(config)
    argv = [sys.executable, "-m", "mqttq", "serve", "--workers", str(workers), "--port", "0"]
    argv += ["--host", HOST, "--data-dir", str(workdir / "data"), "--ready-file", str(ready)]
    argv += ["--config", str(workdir / "mqttq.toml")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQTTQ_")}
    env["MQTTQ_ADMIN__PORT"] = "0"
    with (workdir / "broker.log").open("wb") as log:
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    supervisor = BrokerProcess(f"workers{workers}", process, workdir)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not supervisor.alive:
            raise RunFailed(f"mqttq serve --workers exited at start: {supervisor.log_tail()}")
        with contextlib.suppress(OSError, ValueError):
            supervisor.port = int(json.loads(ready.read_text())["mqtt_port"])
            if workers == 1:
                return supervisor, [process.pid]
            files = [workdir / "data" / f"w{i}" / "ready.json" for i in range(workers)]
            return supervisor, [int(json.loads(f.read_text())["pid"]) for f in files]
        time.sleep(0.1)
    supervisor.stop()
    raise RunFailed("mqttq serve --workers wrote no ready file within 60 s")


def thread_cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds so far of the nodes' threads, summed by kind of thread: `loop` (the
    event loop's), `rdk` (librdkafka's own), `kafka-py` (mqttq's producer poll and consumer
    threads), `other`."""
    tick = os.sysconf("SC_CLK_TCK")
    totals: dict[str, float] = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                name = (task / "comm").read_text().strip()
                text = (task / "stat").read_text()
                fields = text[text.rindex(")") + 2 :].split()
                kind = (
                    "loop"
                    if task.name == str(pid)
                    else "rdk"
                    if name.startswith("rdk:")
                    else "kafka-py"
                    if name.startswith("mqttq-kafka")
                    else "other"
                )
                totals[kind] = totals.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return totals


def start_profilers(
    profile: Path | None, pids: list[int], label: str, timing: Timing
) -> list[subprocess.Popen[bytes]]:
    """py-spy on every node for the warm-up and the measured run (raw folded stacks)."""
    if profile is None:
        return []
    profile.mkdir(parents=True, exist_ok=True)
    spy = Path(sys.executable).with_name("py-spy")
    seconds = str(int(timing.warmup + timing.duration))
    return [
        subprocess.Popen(
            [
                str(spy),
                "record",
                "--nonblocking",
                "-r",
                "250",
                "-f",
                "raw",
                "-d",
                seconds,
                "-o",
                str(profile / f"{label}-node{index}.txt"),
                "-p",
                str(pid),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for index, pid in enumerate(pids)
    ]


def run_cluster(  # noqa: PLR0917 (one call per row)
    nodes: int,
    placement: str,
    scenario: Scenario,
    timing: Timing,
    workdir: Path,
    bootstrap: str,
    redis_url: str,
    kafka_pid: int | None,
    prefix: str,
    profile: Path | None = None,
) -> dict[str, Any]:
    started: list[BrokerProcess] = []
    spies: list[subprocess.Popen[bytes]] = []
    if placement == "workers":
        supervisor, pids = start_workers(
            workdir, nodes, node_config(bootstrap, prefix, redis_url, "bench")
        )
        started = [supervisor]
        argv = bench_argv(scenario, timing, supervisor.port)
    else:
        for index in range(nodes):
            config = node_config(bootstrap, prefix, redis_url, f"bench-n{index}")
            started.append(
                start_mqttq(
                    workdir / f"n{index}", core=None, name=f"node{index}", config_toml=config
                )
            )
        pids = [node.pid for node in started]
        ports = ",".join(str(node.port) for node in started)
        argv = bench_argv(scenario, timing, started[0].port)
        argv[-1:-1] = ["--node-ports", ports, *(["--cross-nodes"] if placement == "cross" else [])]
    try:
        broker_cpu0 = sum(cpu_seconds(pid) for pid in pids)
        threads0 = thread_cpu(pids)
        kafka_cpu0 = cpu_seconds(kafka_pid) if kafka_pid else 0.0
        spies = start_profilers(profile, pids, f"{nodes}{placement}", timing)
        result = run_bench(argv, timing.warmup + timing.duration + 2 * timing.drain_timeout + 120)
        broker_cpu = sum(cpu_seconds(pid) for pid in pids) - broker_cpu0
        threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu(pids).items()}
        kafka_cpu = cpu_seconds(kafka_pid) - kafka_cpu0 if kafka_pid else 0.0
    finally:
        for spy in spies:
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(timeout=30)
        for node in started:
            node.stop()
    messages = result["messages"]
    received = max(1, messages["received"])
    return {
        "nodes": nodes,
        "placement": placement,
        "delivered_per_s": result["rates"]["received_per_s"],
        "e2e_p50_ms": result["latency_ms"]["e2e"]["p50"],
        "e2e_p99_ms": result["latency_ms"]["e2e"]["p99"],
        "published": messages["published"],
        "received": messages["received"],
        "lost": messages["lost"],
        "duplicates": messages["duplicates"],
        "broker_cpu_s": broker_cpu,
        "broker_cpu_us_per_msg": broker_cpu / received * 1e6,
        "kafka_cpu_us_per_msg": kafka_cpu / received * 1e6 if kafka_pid else None,
        "broker_cpu_us_per_msg_by_thread": {
            name: round(seconds / received * 1e6, 1)
            for name, seconds in sorted(threads.items(), key=lambda item: -item[1])
        },
        "warnings": result.get("warnings", []),
        "command": " ".join(argv),
    }


def render(rows: list[dict[str, Any]], pairs: int, duration: float) -> str:
    lines = [
        f"p2p QoS 1, {pairs} pairs, 62-byte payloads, {duration:g} s, full speed, nothing pinned",
        "",
        "| nodes | placement | delivered msg/s | e2e p50 / p99 ms | lost | dup "
        "| broker CPU s (all nodes) | broker CPU µs/msg | Kafka CPU µs/msg |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['nodes']} | {r['placement']} | {r['delivered_per_s']:,.0f} | "
            f"{r['e2e_p50_ms']:.1f} / {r['e2e_p99_ms']:.1f} | {r['lost']} | "
            f"{r['duplicates']} | {r['broker_cpu_s']:.1f} | "
            f"{r['broker_cpu_us_per_msg']:.0f} | "
            + ("-" if r["kafka_cpu_us_per_msg"] is None else f"{r['kafka_cpu_us_per_msg']:.0f}")
            + " |"
        )
    by_nodes = {r["nodes"]: r for r in rows}
    if 1 in by_nodes and 2 in by_nodes:
        ratio = by_nodes[2]["broker_cpu_us_per_msg"] / max(
            1e-9, by_nodes[1]["broker_cpu_us_per_msg"]
        )
        lost = by_nodes[2]["lost"] + by_nodes[1]["lost"]
        verdict = "target <= 1.25x" if not lost else "not comparable: messages were lost"
        lines += ["", f"broker CPU per message, 2 nodes / 1 node: {ratio:.2f}x ({verdict})"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", default="1,2", help="cluster sizes to run, e.g. 1,2")
    parser.add_argument(
        "--placement",
        choices=("same", "cross", "workers"),
        default="cross",
        help="same / cross: separate nodes on their own ports, pairs on one node or "
        "crossing; workers: `mqttq serve --workers N` on one SO_REUSEPORT port (the kernel "
        "places the clients)",
    )
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--kafka-warmup", type=float, default=20.0)
    parser.add_argument(
        "--kafka", default="", help="bootstrap of a running Kafka (else own; its CPU unmeasured)"
    )
    parser.add_argument("--redis", default="", help="URL of a running Redis (else own)")
    parser.add_argument(
        "--profile", type=Path, default=None, help="directory for py-spy folded stacks per node"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    install_sigterm_handler()
    scenario = Scenario("p2p-qos1", "p2p QoS 1", ("p2p", "--pairs", str(args.pairs)), 1)
    timing = Timing(args.duration, args.warmup, drain_timeout=30.0, inflight=100)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="mqttq-cluster-bench-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        root = Path(tmp)
        bootstrap, kafka_pid = args.kafka, None
        if not bootstrap:
            kafka = KafkaServer(root / "kafka")
            kafka.start()
            stack.callback(kafka.stop)
            bootstrap = kafka.bootstrap
            kafka_pid = int((kafka.workdir / "kafka.pid").read_text())
        redis_url = args.redis
        if not redis_url:
            redis = RedisServer(root / "redis")
            redis.start()
            stack.callback(redis.stop)
            redis_url = redis.url
        stack.callback(stop_all)
        if args.kafka_warmup > 0:
            warm = Timing(args.kafka_warmup, 0.0, drain_timeout=30.0, inflight=100)
            run_cluster(
                1, "same", scenario, warm, root / "warm", bootstrap, redis_url, None, "warm."
            )
        for nodes in (int(n) for n in args.nodes.split(",")):
            placement = args.placement if nodes > 1 or args.placement == "workers" else "same"
            prefix = f"bench{nodes}{placement}."
            rows.append(
                run_cluster(
                    nodes,
                    placement,
                    scenario,
                    timing,
                    root / f"c{nodes}",
                    bootstrap,
                    redis_url,
                    kafka_pid,
                    prefix,
                    args.profile,
                )
            )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(render(rows, args.pairs, args.duration))
        for row in rows:
            print(
                f"\nbroker CPU µs/msg by thread ({row['nodes']} node(s)): "
                f"{row['broker_cpu_us_per_msg_by_thread']}"
            )
        for row in rows:
            print(f"\nbench command ({row['nodes']} node(s)): {row['command']}")


if __name__ == "__main__":
    main()
