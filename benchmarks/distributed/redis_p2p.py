"""Persistent P2P QoS 1 against mqttq with Redis DEVICE queues: pipelining off vs on (not a test).

Publisher i -> persistent DEVICE subscriber i (62-byte payloads, MQTT 5), driven by the
`mqttq bench` library: the subscribers subscribe with a persistent session and go offline,
the publishers publish for `--seconds` (every message is saved in Redis before its PUBACK),
then the subscribers come back and drain their queues (fetch, deliver, remove on PUBACK).
For each mode the broker (SQLite sessions + RedisMessageQueue, uvloop: the tests' broker
process tests/redis/redis_broker_child.py, until `mqttq serve` selects Redis) and a private
redis-server are started fresh. Printed as a markdown table:

- publish msg/s and PUBACK latency p50 / p99 (the Redis save is on that path);
- drain msg/s (end of publishing, which includes the reconnect, to last delivery);
- Redis commands per message, from INFO commandstats (EVALSHA calls, and every command
  including those run inside the scripts);
- round trips to Redis per 1,000 messages (one per script call, or one per pipeline) and
  the largest pipeline;
- broker CPU seconds per 1,000 messages (/proc, user + system, whole run);
- in + out messages per CPU-second of broker and Redis together (TBMQ's "msg/s per core":
  each published message is delivered once, so 2 x published / (broker + Redis CPU s)).

    python benchmarks/redis_p2p.py [--pairs 20] [--seconds 5] [--rate 0] [--flush-interval-ms 3]
        [--modes off,on]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis

from mqttq.bench import BenchOptions, run_plan
from mqttq.bench.scenarios import p2p

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root, for `benchmarks` and `tests`
from tests.services import RedisServer  # noqa: E402 (the tests' Redis launcher, reused)

# --- the orchestrator ------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def start_broker(
    workdir: Path, url: str, pipelining: bool, interval_ms: float
) -> tuple[subprocess.Popen[bytes], int]:
    """The tests' broker process (SQLite sessions, Redis queues with limit 65535 so that
    nothing is trimmed, uvloop) on port 0."""
    ready = workdir / "ready.json"
    command = [sys.executable, "-m", "tests.redis.redis_broker_child", str(workdir), url]
    command += [str(ready), "--flush-interval-ms", str(interval_ms)]
    if not pipelining:
        command.append("--no-pipelining")
    log = (workdir / "broker.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=log, cwd=ROOT)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the broker did not start:\n{(workdir / 'broker.log').read_text()}")
        time.sleep(0.05)
    return process, int(json.loads(ready.read_text())["mqtt_port"])


def command_counts(client: redis.Redis) -> tuple[int, int]:
    """(EVALSHA calls, all calls) since the last CONFIG RESETSTAT, INFO/CONFIG excluded."""
    stats: dict[str, Any] = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}
    total = sum(n for name, n in calls.items() if name not in ("info", "config|resetstat"))
    return calls.get("evalsha", 0), total


def run_mode(pipelining: bool, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    mode = f"on ({args.flush_interval_ms:g} ms)" if pipelining else "off"
    server = RedisServer(tmp / f"redis-{pipelining}")
    server.start()
    workdir = tmp / f"broker-{pipelining}"
    workdir.mkdir()
    broker, port = start_broker(workdir, server.url, pipelining, args.flush_interval_ms)
    client = redis.Redis.from_url(server.url)
    try:
        client.config_resetstat()
        assert server.process is not None
        redis_pid = server.process.pid
        cpu0, redis_cpu0 = cpu_seconds(broker.pid), cpu_seconds(redis_pid)
        plan = replace(p2p("bench", args.pairs), persistent=True)
        options = BenchOptions(
            port=port,
            qos=1,
            protocol=5,
            payload=62,
            rate=args.rate,
            duration=args.seconds,
            drain_timeout=60,
        )
        result = run_plan(plan, options)
        # The last removes may still be on their way (the broker acknowledges first); at
        # the end the bench discards its sessions, so Redis ends up empty.
        deadline = time.monotonic() + 60
        while client.dbsize() and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu = cpu_seconds(broker.pid) - cpu0
        redis_cpu = cpu_seconds(redis_pid) - redis_cpu0
        evalsha, commands = command_counts(client)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(timeout=30)
        client.close()
        server.stop()
    messages = result["messages"]
    published = max(1, messages["published"])
    queue_stats = json.loads((workdir / "stats.json").read_text())
    return {
        "mode": mode,
        "published": messages["published"],
        "lost": messages["lost"],
        "duplicates": messages["duplicates"],
        "publish_per_s": result["rates"]["published_per_s"],
        "puback_p50": result["latency_ms"]["puback"]["p50"],
        "puback_p99": result["latency_ms"]["puback"]["p99"],
        "drain_per_s": drain_rate(result),
        "evalsha_per_msg": evalsha / published,
        "commands_per_msg": commands / published,
        "cpu_per_1000": cpu / published * 1000,
        "redis_cpu_per_1000": redis_cpu / published * 1000,
        "in_out_per_cpu_s": 2 * messages["published"] / max(cpu + redis_cpu, 1e-9),
        "round_trips_per_1000": queue_stats["round_trips"] / published * 1000,
        "largest_batch": queue_stats["largest_batch"],
        "warnings": result["warnings"],
    }


def drain_rate(result: dict[str, Any]) -> float | None:
    """Messages per second from the end of publishing to the last delivery.

    The bench's own drain figure assumes that every subscriber expects every message (its
    persistent fan-in scenario); in P2P each expects one publisher's, so it is derived here
    from the received rate (received / (last delivery - start)) and the publishing window.
    """
    received, rate = result["latency_ms"]["e2e"]["count"], result["rates"]["received_per_s"]
    if not rate:
        return None
    drain_s = received / rate - result["measured_s"]
    return received / drain_s if drain_s > 0 else None


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"Persistent P2P, QoS 1, MQTT 5, 62-byte payloads, {args.pairs} pairs, "
        f"{args.seconds:g} s of publishing "
        f"({f'{args.rate:g} msg/s per publisher' if args.rate else 'at full speed'}), "
        "then the subscribers drain their Redis queues.",
        "",
        "| pipelining | published | publish msg/s | PUBACK p50 ms | PUBACK p99 ms "
        "| drain msg/s | EVALSHA / msg | Redis commands / msg | round trips / 1000 msg "
        "| largest batch | broker CPU s / 1000 msg | Redis CPU s / 1000 msg "
        "| in + out msg per CPU-s (broker + Redis) | lost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        drain = "-" if r["drain_per_s"] is None else f"{r['drain_per_s']:,.0f}"
        lines.append(
            f"| {r['mode']} | {r['published']:,} | {r['publish_per_s']:,.0f} "
            f"| {r['puback_p50']:.2f} | {r['puback_p99']:.2f} | {drain} "
            f"| {r['evalsha_per_msg']:.2f} | {r['commands_per_msg']:.2f} "
            f"| {r['round_trips_per_1000']:,.0f} | {r['largest_batch']} "
            f"| {r['cpu_per_1000']:.3f} | {r['redis_cpu_per_1000']:.3f} "
            f"| {r['in_out_per_cpu_s']:,.0f} | {r['lost']} |"
        )
    for r in rows:
        for warning in r["warnings"]:
            lines.append(f"\nwarning ({r['mode']}): {warning}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="msg/s per publisher (0: as fast as possible)"
    )
    parser.add_argument(
        "--flush-interval-ms",
        type=float,
        default=3.0,
        help="the pipelining mode's flush interval (0: at the next event-loop turn)",
    )
    parser.add_argument(
        "--modes", default="off,on", help="pipelining modes to run, in order: off, on or both"
    )
    args = parser.parse_args()
    modes = [mode.strip() == "on" for mode in args.modes.split(",") if mode.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_mode(pipelining, args, Path(tmp)) for pipelining in modes]
    print(table(rows, args))


if __name__ == "__main__":
    main()
