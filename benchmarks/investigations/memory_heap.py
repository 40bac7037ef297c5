"""Where the Python heap of an idle connection goes: tracemalloc in the broker process.

A benchmark, not a test. A child process runs the broker (embedded mode, port 0) with
tracemalloc on; the parent opens N idle MQTT 5 connections (clean start, keep alive 60 s,
as `memory.py` does) and the child compares a heap snapshot taken before them with one
taken after, by allocation site (innermost frame) and by object type. Allocations made by
C code (uvloop's transport, libuv's handle) show up under the event loop's frame.

    python benchmarks/investigations/memory_heap.py --connections 2000 [--top 25] [--frames 4]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import multiprocessing
import resource
import sys
import tempfile
import threading
import tracemalloc
from multiprocessing.connection import Connection
from pathlib import Path

from mqttq.bench.client import BenchClient, Counters

HOST = "127.0.0.1"


def _types() -> tuple[collections.Counter[str], collections.Counter[str]]:
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        name = repr(type(obj))
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    return counts, sizes


def _report(
    before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int, top: int, frames: int
) -> str:
    stats = after.compare_to(before, "lineno" if frames == 1 else "traceback")
    lines = [f"tracemalloc: {sum(s.size_diff for s in stats) / n:,.0f} B per connection"]
    for stat in stats[:top]:
        if stat.size_diff / n >= 4:
            where = " <- ".join(f"{f.filename}:{f.lineno}" for f in stat.traceback)
            lines.append(f"{stat.size_diff / n:8.1f} B {stat.count_diff / n:5.2f} blocks  {where}")
    return "\n".join(lines)


def broker_child(workdir: str, pipe: Connection, top: int, frames: int) -> None:
    """Child: the broker with tracemalloc; snapshots when the parent says so."""
    tracemalloc.start(frames)
    from mqttq.cli.serve import run_broker  # noqa: PLC0415 (after tracemalloc.start)
    from mqttq.config import load_settings  # noqa: PLC0415

    ready = Path(workdir) / "ready.json"

    def control() -> None:
        n = pipe.recv()
        gc.collect()
        before, types_before = tracemalloc.take_snapshot(), _types()
        pipe.send("ready")
        pipe.recv()
        gc.collect()
        after, types_after = tracemalloc.take_snapshot(), _types()
        lines = [_report(before, after, n, top, frames)]
        (c0, s0), (c1, s1) = types_before, types_after
        for name in sorted(c1, key=lambda t: s0[t] - s1[t]):
            # Lists: the snapshots' own bookkeeping shows up there, not the broker's.
            if (c1[name] - c0[name]) / n >= 0.5 and name != repr(list):
                lines.append(
                    f"type {name}: {(c1[name] - c0[name]) / n:.2f} per connection, "
                    f"{(s1[name] - s0[name]) / n:,.0f} B (getsizeof)"
                )
        pipe.send("\n".join(lines))

    threading.Thread(target=control, daemon=True).start()
    overrides = {"listener.host": HOST, "listener.port": 0, "storage.data_dir": workdir}
    run_broker(load_settings(None, {}, overrides), ready_file=ready, announce=False)


async def _measure(port: int, count: int, pipe: Connection) -> str:
    """Open `count` idle connections, have the child measure, close them; its report."""
    counters, clients = Counters(), []
    limit = asyncio.Semaphore(50)

    async def one(index: int) -> None:
        client = BenchClient(f"heap-{index}", 5, counters)
        async with limit:
            await client.connect(HOST, port, keep_alive=60, timeout=60)
        clients.append(client)

    await asyncio.gather(*(one(i) for i in range(count)))
    await asyncio.sleep(2)
    pipe.send("measure")
    report: str = await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
    for client in clients:
        client.abort()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--frames", type=int, default=1, help="frames per allocation site (> 1: by traceback)"
    )
    args = parser.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as workdir:
        parent, child = multiprocessing.Pipe()
        process = multiprocessing.Process(
            target=broker_child, args=(workdir, child, args.top, args.frames)
        )
        process.start()
        try:
            ready = Path(workdir) / "ready.json"
            for _ in range(600):
                if ready.exists() and ready.read_text():
                    break
                process.join(0.1)
            port = int(json.loads(ready.read_text())["mqtt_port"])
            parent.send(args.connections)
            parent.recv()
            print(asyncio.run(_measure(port, args.connections, parent)))
        finally:
            process.terminate()
            process.join(30)


if __name__ == "__main__":
    main()
