"""`mqttq migrate pg-to-redis --engine spark` next to `--engine local`, on one host.

Not a test. A private PostgreSQL (the tests' launcher) gets `--rows` rows across
`--clients` clients in TBMQ 1.x's tables (benchmarks/distributed/migrate_pg_to_redis.py's generator:
COPY, every 10th row with the MQTT 5 columns). Then each engine runs `--runs` times, as
its own process (`python -m mqttq.cli.migrate pg-to-redis --json`), into a fresh
redis-server each time:

- `local`: the in-process engine;
- `spark local[2]`: the Spark engine, executors as threads of the driver JVM;
- `spark local-cluster[2,1,1024]`: the Spark engine with two executor JVMs (1 core, 1 GiB).

Measured per run: wall time (Spark's start included), the job's own time and rate (the
report's `elapsed_s`: connect, read, plan, write; the JVM start excluded), and peak
memory: the largest sum, over 0.2 s samples, of the RSS of every process of the run's
tree (the Python driver, its JVM, executor JVMs, Python workers), and the CPU time of that
tree (the last sample of each process's own time: Spark's start included, the last 0.2 s
of a process missed; PostgreSQL and Redis not),
and PostgreSQL's CPU time (its postmaster's children: the backends that served the run).
Nothing is pinned: Spark needs both cores; the machine may be shared, so the load average
is printed. CPU per row is the figure to scale from on a shared machine: wall times move
with the other load, CPU per row hardly does.

    python benchmarks/distributed/migrate_spark.py [--rows 1000000] [--clients 10000] [--runs 1]
        [--engines local,local[2],local-cluster[2,1,1024]] [--partitions N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root, for `benchmarks` and `tests`
from benchmarks.distributed.migrate_pg_to_redis import (  # noqa: E402 (its generator, probes)
    generate,
    postmaster_pid,
    process_cpu,
)
from tests.postgres_fixtures import PostgresServer  # noqa: E402 (the tests' launchers)
from tests.services import RedisServer  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


TICK = os.sysconf("SC_CLK_TCK")


def tree_usage(root: int) -> dict[int, tuple[int, float]]:
    """Per process of `root`'s tree (from /proc): (RSS bytes, CPU seconds so far)."""
    children: dict[int, list[int]] = {}
    usage: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        pid = int(entry.name)
        children.setdefault(int(stat[1]), []).append(pid)
        usage[pid] = (int(statm[1]) * PAGE, (int(stat[11]) + int(stat[12])) / TICK)
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in usage:
            found[pid] = usage[pid]
        todo.extend(children.get(pid, []))
    return found


@dataclass
class Run:
    engine: str
    wall_s: float
    job_s: float
    rows: int
    migrated: int
    peak_mib: float
    cpu_s: float
    postgres_cpu_s: float
    load: str

    @property
    def job_rate(self) -> float:
        return self.rows / self.job_s

    @property
    def wall_rate(self) -> float:
        return self.rows / self.wall_s


def command(engine: str, pg_url: str, redis_url: str, partitions: int | None) -> list[str]:
    base = [sys.executable, "-m", "mqttq.cli.migrate", "pg-to-redis", "--pg", pg_url]
    base += ["--redis", redis_url, "--json"]
    if engine == "local":
        return base
    base += ["--engine", "spark", "--master", engine]
    if partitions is not None:
        base += ["--partitions", str(partitions)]
    return base


def measure(
    engine: str, pg_url: str, postmaster: int, partitions: int | None, workdir: Path
) -> Run:
    server = RedisServer(Path(tempfile.mkdtemp(prefix="redis-", dir=workdir)))
    server.start()
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        started = time.monotonic()
        postgres_before = process_cpu(postmaster)
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(
                command(engine, pg_url, server.url, partitions),
                stdout=subprocess.PIPE,
                stderr=errors,
                cwd=ROOT,
            )
            peak = 0
            cpu: dict[int, float] = {}
            done = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not done.wait(0.2):
                    usage = tree_usage(process.pid)
                    peak = max(peak, sum(rss for rss, _ in usage.values()))
                    for pid, (_, seconds) in usage.items():
                        cpu[pid] = max(cpu.get(pid, 0.0), seconds)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            assert process.stdout is not None
            out = process.stdout.read()
            process.wait()
            time.sleep(0.2)  # the backends' exit reaches the postmaster's children times
            postgres_cpu = process_cpu(postmaster) - postgres_before
            done.set()
            sampler.join()
            wall = time.monotonic() - started
            if process.returncode != 0:
                errors.seek(0)
                raise SystemExit(f"{engine} failed: {errors.read().decode(errors='replace')}")
        report = json.loads(out)
        return Run(
            engine=engine,
            wall_s=wall,
            job_s=report["elapsed_s"],
            rows=report["rows_read"],
            migrated=report["messages"]["migrated"],
            peak_mib=peak / 2**20,
            cpu_s=sum(cpu.values()),
            postgres_cpu_s=postgres_cpu,
            load=load,
        )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--engines", default="local,local[2],local-cluster[2,1,1024]")
    parser.add_argument("--partitions", type=int, default=None)
    args = parser.parse_args()
    engines = args.engines.replace("],", "];").replace("local,", "local;").split(";")
    workdir = Path(tempfile.mkdtemp(prefix="mqttq-bench-spark-"))
    pg = PostgresServer()
    pg.start()
    try:
        url = pg.create_database()
        load_s = generate(url, args.rows, args.clients, 64, 10)
        print(f"source: {args.rows:,} rows, {args.clients:,} clients (COPY {load_s:.1f} s)")
        print(
            "\n| engine | wall s | job s | rows/s (job) | rows/s (wall) | peak RSS MiB "
            "| CPU µs/row: migration / PostgreSQL | load |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for _ in range(args.runs):
            for engine in engines:
                run = measure(engine, url, postmaster_pid(pg), args.partitions, workdir)
                assert run.migrated == args.rows, run
                print(
                    f"| {run.engine} | {run.wall_s:.1f} | {run.job_s:.1f} | "
                    f"{run.job_rate:,.0f} | {run.wall_rate:,.0f} | {run.peak_mib:,.0f} | "
                    f"{run.cpu_s / run.rows * 1e6:.1f} / {run.postgres_cpu_s / run.rows * 1e6:.1f} "
                    f"| {run.load} |",
                    flush=True,
                )
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
