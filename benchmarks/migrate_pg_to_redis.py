"""`mqttq migrate pg-to-redis` on a generated TBMQ 1.x table, against Redis's own ceiling.

Not a test. A private PostgreSQL (the tests' launcher: Debian's server, initdb in a temp dir)
gets `--rows` rows across `--clients` clients in TBMQ 1.x's tables, loaded with COPY
(every `--mqtt5-every`-th row carries the MQTT 5 columns). Then, `--runs` times, back to
back, on a fresh redis-server each time (the tests' launcher: `--save "" --appendonly yes`,
everything else Redis's defaults, so appendfsync everysec and automatic AOF rewrites at
+100% / 64 MB; the same for both measurements):

1. the ceiling: `redis-benchmark` pipelined `SET` (`-t set`) and `ZADD key score member`
   (random scores and members below 10,000: one sorted set the size of a full queue at the
   default limit), each at `-P 16` and `-P 64`. Every migrated row costs one SET and one
   ZADD member, so the ceiling in rows/s is 1 / (1/SET rate + 1/ZADD rate), with the best
   SET and the best ZADD rate of the two depths (the stronger ceiling);
2. the migration, as its own process (`python -m mqttq.cli.migrate pg-to-redis --json`), so
   its wall time (start-up included) and peak RSS (wait4's ru_maxrss) are its own.

Both sides are pinned the same way for both measurements: Redis (every thread, and the
AOF-rewrite children it forks, which inherit the mask) to `--redis-cpu`; the load side
(redis-benchmark for the ceiling; the migrate process and PostgreSQL's postmaster, its
processes and the backends it forks for the migration) and this driver to `--load-cpu`. The
1-minute load average is printed before each measurement: the machine may be shared.

The target is half the ceiling; the share of each run and their median are printed as
markdown tables, with the commands. For context only (never part of the ceiling or the
share): with `--context`, each run also measures at -P 64 the SET a migration has to issue,
a new key per request with a value of the migrated JSON's size and an absolute expiry.

    python benchmarks/migrate_pg_to_redis.py [--rows 1000000] [--clients 10000]
        [--payload 64] [--batch-size 10000] [--mqtt5-every 10] [--runs 3]
        [--redis-cpu 0] [--load-cpu 1] [--context]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

from mqttq.migrate import init_source
from mqttq.migrate.plan import Planner

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.postgres_fixtures import PostgresServer  # noqa: E402 (the tests' launchers)
from tests.services import HOST, RedisServer  # noqa: E402

REDIS_BENCHMARK = "/usr/bin/redis-benchmark"
TASKSET = "/usr/bin/taskset"
USER_PROPERTIES = '{"props":[{"k":"site","v":"kyiv"},{"k":"unit","v":"C"}]}'
DEPTHS = (16, 64)
REDIS_SETTINGS = (
    "appendonly",
    "appendfsync",
    "save",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "aof-use-rdb-preamble",
)
TICK = os.sysconf("SC_CLK_TCK")


def generate(url: str, rows: int, clients: int, payload: int, mqtt5_every: int) -> float:
    """TBMQ 1.x's tables filled with COPY; the seconds it took."""
    asyncio.run(init_source(url))
    started = time.monotonic()
    per_client, extra = divmod(rows, clients)
    now = int(time.time() * 1000)
    body = os.urandom(payload)
    columns = (
        "client_id, serial_number, topic, time, packet_id, packet_type, qos, payload, "
        "user_properties, retain, msg_expiry_interval, payload_format_indicator, content_type, "
        "response_topic, correlation_data"
    )
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        with cursor.copy(f"COPY device_publish_msg ({columns}) FROM STDIN") as copy:
            n = 0
            for c in range(clients):
                client_id = f"dev-{c:06d}"
                topic = f"devices/{c}/cmd"
                for s in range(1, per_client + (1 if c < extra else 0) + 1):
                    n += 1
                    mqtt5 = n % mqtt5_every == 0
                    copy.write_row(
                        (
                            client_id, s, topic, now, (s - 1) % 65535 + 1, "PUBLISH", 1, body,
                            USER_PROPERTIES if mqtt5 else None, False,
                            86400 if mqtt5 else None, 1 if mqtt5 else None,
                            "application/octet-stream" if mqtt5 else None,
                            f"devices/{c}/reply" if mqtt5 else None,
                            b"corr" if mqtt5 else None,
                        )
                    )  # fmt: skip
        with cursor.copy(
            "COPY device_session_ctx (client_id, last_updated_time, last_serial_number, "
            "last_packet_id) FROM STDIN"
        ) as copy:
            for c in range(clients):
                count = per_client + (1 if c < extra else 0)
                copy.write_row((f"dev-{c:06d}", now, count, (count - 1) % 65535 + 1))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE device_publish_msg")
        conn.execute("VACUUM ANALYZE device_session_ctx")
    return time.monotonic() - started


def pin_tree(pid: int, cpu: int) -> int:
    """Pin `pid`, its threads and its child processes to `cpu` (as `taskset -a -p`); how
    many threads were pinned. Processes forked later inherit the mask; one that exits
    meanwhile is skipped."""
    pinned = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return 0
    for task in tasks:
        try:
            os.sched_setaffinity(int(task.name), {cpu})
            children = (task / "children").read_text().split()
        except (ProcessLookupError, FileNotFoundError):
            continue
        pinned += 1
        for child in children:
            pinned += pin_tree(int(child), cpu)
    return pinned


def process_cpu(pid: int) -> float:
    """CPU seconds of `pid` and of its children that have been waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / TICK


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


class PinnedRedis:
    """A fresh redis-server (the tests' launcher) pinned to one CPU; removed on exit."""

    def __init__(self, cpu: int) -> None:
        self.server = RedisServer(Path(tempfile.mkdtemp(prefix="mqttq-bench-redis-")))
        self.cpu = cpu

    def __enter__(self) -> PinnedRedis:
        self.server.start()
        assert self.server.process is not None
        pin_tree(self.server.process.pid, self.cpu)
        self.client = redis.Redis(host=HOST, port=self.server.port)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.close()
        self.server.stop()
        shutil.rmtree(self.server.workdir, ignore_errors=True)

    def settings(self) -> dict[str, str]:
        found = {}
        for name in REDIS_SETTINGS:
            value = self.client.config_get(name).get(name, "")
            found[name] = value.decode() if isinstance(value, bytes) else str(value)
        return found

    def cpu_seconds(self) -> tuple[float, float]:
        """Its own CPU seconds, and its children's (AOF rewrites)."""
        cpu = self.client.info("cpu")
        return (
            float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            float(cpu["used_cpu_user_children"]) + float(cpu["used_cpu_sys_children"]),
        )


def redis_rate(port: int, load_cpu: int, command: list[str]) -> float:
    """Requests per second reported by redis-benchmark --csv (run on `load_cpu`)."""
    pinned = [TASKSET, "-c", str(load_cpu), REDIS_BENCHMARK]
    done = subprocess.run(
        [*pinned, "-h", HOST, "-p", str(port), "-q", "--csv", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rows = list(csv.reader(io.StringIO(done.stdout)))
    return float(rows[-1][1])


def set_command(depth: int) -> list[str]:
    return ["-P", str(depth), "-n", "1000000", "-t", "set"]


def zadd_command(depth: int) -> list[str]:
    command = ["-P", str(depth), "-n", "1000000", "-r", "10000"]
    return [*command, "ZADD", "bench:z", "__rand_int__", "m:__rand_int__"]


def context_set_command(value_size: int) -> list[str]:
    """A SET of a new key, `value_size` bytes, absolute expiry in 7 days (like a migrated
    message; not the ceiling)."""
    expires_at = int(time.time() * 1000) + 7 * 86_400_000
    command = ["-P", "64", "-n", "1000000", "-r", "1000000000", "SET", "key:__rand_int__"]
    return [*command, "x" * value_size, "PXAT", str(expires_at)]


def json_size(payload: int) -> int:
    """The length of the JSON a generated row without MQTT 5 columns becomes."""
    planner = Planner(10, 3600)
    now = int(time.time() * 1000)
    first: tuple[object, ...] = ("dev-000000", 1, "devices/0/cmd", now, 1, "PUBLISH", 1)
    row = (*first, bytes(payload), None, False, None, None, None, None, None)
    rows = planner.rows_of(row)
    rows.kept.append(row)
    rows.total = 1
    return len(planner.plan(rows).texts[0])


@dataclass
class Ceiling:
    load: str
    set_rps: dict[int, float]
    zadd_rps: dict[int, float]
    aof_rewrites: int
    context_set_rps: float | None = None

    @property
    def rows_per_s(self) -> float:
        return 1 / (1 / max(self.set_rps.values()) + 1 / max(self.zadd_rps.values()))


def measure_ceiling(redis_cpu: int, load_cpu: int, context_value: int | None) -> Ceiling:
    with PinnedRedis(redis_cpu) as target:
        load = load_average()
        set_rps, zadd_rps = {}, {}
        for depth in DEPTHS:
            set_rps[depth] = redis_rate(target.server.port, load_cpu, set_command(depth))
            target.client.flushall()
            zadd_rps[depth] = redis_rate(target.server.port, load_cpu, zadd_command(depth))
            target.client.flushall()
        rewrites = int(target.client.info("persistence").get("aof_rewrites", 0))
    ceiling = Ceiling(load, set_rps, zadd_rps, rewrites)
    if context_value is not None:
        with PinnedRedis(redis_cpu) as target:  # a fresh one: it must grow like a migration
            command = context_set_command(context_value)
            ceiling.context_set_rps = redis_rate(target.server.port, load_cpu, command)
    return ceiling


@dataclass
class Migration:
    load: str
    wall_s: float
    rows: int
    migrated: int
    own_rate: float
    peak_rss_mib: float
    migrate_cpu_s: float
    postgres_cpu_s: float
    redis_cpu_s: float
    redis_children_cpu_s: float
    aof_rewrites: int
    keys: int
    used_memory_mib: float
    settings: dict[str, str]

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s


def migrate_command(url: str, redis_url: str, batch_size: int, load_cpu: int) -> list[str]:
    command = [TASKSET, "-c", str(load_cpu), sys.executable, "-m", "mqttq.cli.migrate"]
    command += ["pg-to-redis", "--pg", url, "--redis", redis_url]
    return [*command, "--batch-size", str(batch_size), "--json"]


def measure_migration(
    url: str, postmaster: int, batch_size: int, redis_cpu: int, load_cpu: int
) -> Migration:
    with PinnedRedis(redis_cpu) as target:
        settings = target.settings()
        load = load_average()
        cpu_before = target.cpu_seconds()
        postgres_before = process_cpu(postmaster)
        started = time.monotonic()
        command = migrate_command(url, target.server.url, batch_size, load_cpu)
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, cwd=ROOT)
            assert process.stdout is not None
            out = process.stdout.read()
            _pid, status, usage = os.wait4(process.pid, 0)
            wall = time.monotonic() - started
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode != 0:
                errors.seek(0)
                message = errors.read().decode(errors="replace")
                raise SystemExit(f"migration failed ({process.returncode}):\n{message}")
        time.sleep(0.2)  # the backend's exit reaches the postmaster's children times
        redis_main, redis_children = (
            a - b for a, b in zip(target.cpu_seconds(), cpu_before, strict=True)
        )
        report = json.loads(out)
        info = target.client.info("persistence")
        return Migration(
            load=load,
            wall_s=wall,
            rows=report["rows_read"],
            migrated=report["messages"]["migrated"],
            own_rate=report["rows_per_s"],
            peak_rss_mib=usage.ru_maxrss / 1024,
            migrate_cpu_s=usage.ru_utime + usage.ru_stime,
            postgres_cpu_s=process_cpu(postmaster) - postgres_before,
            redis_cpu_s=redis_main,
            redis_children_cpu_s=redis_children,
            aof_rewrites=int(info.get("aof_rewrites", 0)),
            keys=int(target.client.dbsize()),
            used_memory_mib=int(target.client.info("memory")["used_memory"]) / 2**20,
            settings=settings,
        )


def postmaster_pid(pg: PostgresServer) -> int:
    return int((pg.data_dir / "postmaster.pid").read_text().split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=64, help="payload bytes per row")
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--mqtt5-every", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--redis-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    parser.add_argument(
        "--context",
        action="store_true",
        help="also measure (for context, not the ceiling) a migration-like SET at -P 64",
    )
    args = parser.parse_args()
    if args.redis_cpu == args.load_cpu:
        raise SystemExit("--redis-cpu and --load-cpu must differ")
    os.sched_setaffinity(0, {args.load_cpu})  # this driver, and the COPY load

    pg = PostgresServer()
    pg.start()
    runs: list[tuple[Ceiling, Migration]] = []
    try:
        postmaster = postmaster_pid(pg)
        pin_tree(postmaster, args.load_cpu)
        url = pg.create_database()
        load_s = generate(url, args.rows, args.clients, args.payload, args.mqtt5_every)
        context_value = json_size(args.payload) if args.context else None
        for run in range(1, args.runs + 1):
            ceiling = measure_ceiling(args.redis_cpu, args.load_cpu, context_value)
            migration = measure_migration(
                url, postmaster, args.batch_size, args.redis_cpu, args.load_cpu
            )
            runs.append((ceiling, migration))
            print(
                f"run {run}: ceiling {ceiling.rows_per_s:,.0f} rows/s, migration "
                f"{migration.rows_per_s:,.0f} rows/s "
                f"({migration.rows_per_s / ceiling.rows_per_s:.0%})",
                file=sys.stderr,
                flush=True,
            )
    finally:
        pg.stop()
    report(args, load_s, runs)


def report(args: argparse.Namespace, load_s: float, runs: list[tuple[Ceiling, Migration]]) -> None:
    r, load = args.redis_cpu, args.load_cpu
    print(f"\n`{' '.join(sys.argv)}`\n")
    print(
        f"{args.rows:,} rows across {args.clients:,} clients, {args.payload}-byte payloads, "
        f"every {args.mqtt5_every}th row with MQTT 5 columns; COPY load {load_s:.1f} s.\n"
    )
    migrate = "taskset -c {load} python -m mqttq.cli.migrate pg-to-redis --pg URL --redis URL"
    print(f"- migration: `{migrate.format(load=load)} --batch-size {args.batch_size} --json`")
    for depth in DEPTHS:
        print(
            f"- ceiling: `taskset -c {load} redis-benchmark -q {' '.join(set_command(depth))}` "
            f"and `taskset -c {load} redis-benchmark -q {' '.join(zadd_command(depth))}`"
        )
    print(
        f"- pinning: redis-server (all threads; AOF-rewrite children inherit) on CPU {r}; "
        f"redis-benchmark, the migrate process, PostgreSQL and the driver on CPU {load}"
    )
    settings = runs[0][1].settings
    print("- Redis (both measurements): " + ", ".join(f"{k} {v!r}" for k, v in settings.items()))
    print()
    print(
        "| run | load avg before ceiling / migration | SET req/s -P 16 / -P 64 "
        "| ZADD req/s -P 16 / -P 64 | ceiling rows/s | migration rows/s (wall) | share "
        "| peak RSS |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    shares = []
    for n, (ceiling, migration) in enumerate(runs, 1):
        share = migration.rows_per_s / ceiling.rows_per_s
        shares.append(share)
        sets = " / ".join(f"{ceiling.set_rps[d]:,.0f}" for d in DEPTHS)
        zadds = " / ".join(f"{ceiling.zadd_rps[d]:,.0f}" for d in DEPTHS)
        print(
            f"| {n} | {ceiling.load} / {migration.load} | {sets} | {zadds} "
            f"| {ceiling.rows_per_s:,.0f} | {migration.rows_per_s:,.0f} | {share:.0%} "
            f"| {migration.peak_rss_mib:,.0f} MiB |"
        )
    median = statistics.median(shares)
    verdict = "met" if median >= 0.5 else "not met"
    print(f"\nMedian share of the ceiling: {median:.0%} (target 50%: {verdict}).\n")
    contexts = [c.context_set_rps for c, _m in runs if c.context_set_rps is not None]
    if contexts:
        size = json_size(args.payload)
        print(
            f"Context, not the ceiling: `taskset -c {load} redis-benchmark -q -P 64 -n 1000000 "
            f"-r 1000000000 SET key:__rand_int__ <{size} bytes> PXAT <in 7 days>` on a fresh "
            "server: " + " / ".join(f"{rate:,.0f}" for rate in contexts) + " req/s.\n"
        )
    print(
        "| run | rows migrated | wall s | own rows/s | CPU µs/row: migrate / PostgreSQL / "
        "Redis main / Redis AOF-rewrite children | AOF rewrites (ceiling / migration) "
        "| Redis keys, memory |"
    )
    print("|---|---:|---:|---:|---|---|---|")
    for n, (ceiling, m) in enumerate(runs, 1):
        per_row = [m.migrate_cpu_s, m.postgres_cpu_s, m.redis_cpu_s, m.redis_children_cpu_s]
        cpu = " / ".join(f"{1e6 * value / m.rows:.1f}" for value in per_row)
        print(
            f"| {n} | {m.migrated:,} | {m.wall_s:.1f} | {m.own_rate:,.0f} | {cpu} "
            f"| {ceiling.aof_rewrites} / {m.aof_rewrites} "
            f"| {m.keys:,}, {m.used_memory_mib:,.0f} MiB |"
        )


if __name__ == "__main__":
    main()
