"""Garbage collection pauses in the broker while p2p QoS 1 runs at 1,000 msg/s.

A benchmark, not a test. Starts `mqttq serve` (embedded, port 0, pinned to core 0 when
there are two) inside a wrapper that times every collection with `gc.callbacks`, runs
`mqttq bench p2p --pairs 100 --rate 10` (the `p2p-qos1-1k` scenario of compare.py) on
the other core, stops the broker and prints the bench's end-to-end latency next to the
collections made while clients were connected (start-up collections, made while the
modules are imported, are counted apart).

    python benchmarks/investigations/gc_pauses.py [--duration 15]
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOST = "127.0.0.1"


def _broker(report: str, argv: list[str]) -> None:
    """In the broker process: time each collection, write them at exit, run the CLI."""
    started: list[float] = [0.0]
    pauses: list[tuple[float, int, float, int]] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            end = time.perf_counter()
            pauses.append((time.time(), info["generation"], end - started[0], info["collected"]))

    def dump() -> None:
        Path(report).write_text(json.dumps(pauses))

    gc.callbacks.append(on_gc)
    atexit.register(dump)
    from mqttq.cli import main  # noqa: PLC0415 (after the callback is in place)

    sys.argv = ["mqttq", *argv]
    main()


def _summary(pauses: list[tuple[float, int, float, int]]) -> list[str]:
    lines = []
    for generation in (0, 1, 2):
        times = sorted(p[2] for p in pauses if p[1] == generation)
        if times:
            collected = sum(p[3] for p in pauses if p[1] == generation)
            lines.append(
                f"  gen{generation}: {len(times)} collections, {sum(times) * 1e3:.1f} ms in all, "
                f"max {times[-1] * 1e6:,.0f} us, median {times[len(times) // 2] * 1e6:,.0f} us, "
                f"{collected} objects collected"
            )
    return lines or ["  none"]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--broker":
        _broker(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=15.0)
    args = parser.parse_args()
    pin = len(os.sched_getaffinity(0)) >= 2
    with tempfile.TemporaryDirectory() as workdir:
        report, ready = Path(workdir) / "gc.json", Path(workdir) / "ready.json"
        serve = ["serve", "--port", "0", "--host", HOST, "--data-dir", f"{workdir}/data"]
        argv = [sys.executable, __file__, "--broker", str(report), *serve]
        argv += ["--ready-file", str(ready)]
        env = {**os.environ, "MQTTQ_ADMIN__PORT": "0"}
        broker = subprocess.Popen(
            (["taskset", "-c", "0"] if pin else []) + argv, env=env, stderr=subprocess.DEVNULL
        )
        try:
            for _ in range(300):
                if ready.exists() and ready.read_text():
                    break
                time.sleep(0.1)
            port = json.loads(ready.read_text())["mqtt_port"]
            connected = time.time()
            bench = [sys.executable, "-m", "mqttq.cli.bench", "p2p", "--pairs", "100"]
            bench += ["--rate", "10", "--qos", "1", "--payload", "64", "--warmup", "2"]
            bench += ["--duration", f"{args.duration:g}", "--workers", "1", "--json"]
            bench += ["--host", HOST, "--port", str(port)]
            out = subprocess.run(
                (["taskset", "-c", "1"] if pin else []) + bench,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(60)
        result = json.loads(out)
        pauses = [tuple(p) for p in json.loads(report.read_text())]
    e2e = result["latency_ms"]["e2e"]
    print(
        f"e2e latency over {e2e['count']:,} messages: p50 {e2e['p50']} ms, "
        f"p99 {e2e['p99']} ms, max {e2e['max']} ms; load {os.getloadavg()[0]:.2f}"
    )
    print("collections while clients were connected:")
    print("\n".join(_summary([p for p in pauses if p[0] >= connected])))
    print("collections at start-up (imports, before listening):")
    print("\n".join(_summary([p for p in pauses if p[0] < connected])))


if __name__ == "__main__":
    main()
