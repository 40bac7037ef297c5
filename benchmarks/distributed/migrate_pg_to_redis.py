"""`mqttq migrate pg-to-redis` on a generated TBMQ 1.x table, against Redis's own ceiling.

Not a test. A private PostgreSQL (the tests' launcher: Debian's server, initdb in a temp dir)
gets `--rows` rows across `--clients` clients in TBMQ 1.x's tables, loaded with COPY
(every `--mqtt5-every`-th row carries the MQTT 5 columns). Then, `--runs` times, back to
back, on a fresh redis-server each time (the tests' launcher: `--save "" --appendonly yes`,
everything else Redis's defaults, so appendfsync everysec and automatic AOF rewrites at
+100% / 64 MB; the same for both measurements):

1. the ceiling: `redis-benchmark` pipelined `SET` and `ZADD`, each at `-P 16` and `-P 64`,
   each on a fresh server. Every migrated row costs one SET and one ZADD member, so a
   ceiling in rows/s is 1 / (1/SET rate + 1/ZADD rate), with the best SET and the best ZADD
   rate of the two depths. Two ceilings are measured:
   - matched (the physical limit, what the target is judged against): the writes a
     migration cannot do without, and nothing else: a SET of a new key per request
     (`-r 1000000000`: the keyspace grows to a million keys, as it does in a migration)
     with a value of the migrated JSON's size and an absolute expiry (`PXAT`), and a ZADD
     into 10,000 sorted sets (`-r 10000` on key, score and member: about 100 members each
     after a million requests, the generated queues' size);
   - single-key (for comparison with earlier runs): redis-benchmark's default `-t set`,
     which overwrites one key with a 3-byte value and so never grows the keyspace, sets no
     expiry and gives its AOF rewrites almost nothing to copy, and a ZADD into one set of
     up to 10,000 members. No client writing a migration's keys can come near it:
     redis-benchmark itself, doing exactly the matched writes, reaches about half of it;
2. the migration, as its own process (`python -m mqttq.cli.migrate pg-to-redis --json`), so
   its wall time (start-up included) and peak RSS (wait4's ru_maxrss) are its own.

Both sides are pinned the same way for every measurement: Redis (every thread, and the
AOF-rewrite children it forks, which inherit the mask) to `--redis-cpu`; the load side
(redis-benchmark for the ceilings; the migrate process and PostgreSQL's postmaster, its
processes and the backends it forks for the migration) and this driver to `--load-cpu`. The
1-minute load average is printed before each measurement: the machine may be shared.

The target is half the matched ceiling; the share of each run against both ceilings and
their medians are printed as markdown tables, with the commands.

    python benchmarks/distributed/migrate_pg_to_redis.py [--rows 1000000] [--clients 10000]
        [--payload 64] [--batch-size 10000] [--mqtt5-every 10] [--runs 3]
        [--redis-cpu 0] [--load-cpu 1]
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root, for `benchmarks` and `tests`
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


def redis_rate(redis_cpu: int, load_cpu: int, command: list[str]) -> float:
    """Requests per second reported by redis-benchmark --csv (run on `load_cpu`) against a
    fresh server (on `redis_cpu`)."""
    with PinnedRedis(redis_cpu) as target:
        pinned = [TASKSET, "-c", str(load_cpu), REDIS_BENCHMARK]
        done = subprocess.run(
            [*pinned, "-h", HOST, "-p", str(target.server.port), "-q", "--csv", *command],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
    rows = list(csv.reader(io.StringIO(done.stdout)))
    return float(rows[-1][1])


def pipelined(depth: int, keyspace: int) -> list[str]:
    return ["-P", str(depth), "-n", "1000000", "-r", str(keyspace)]


def matched_set(depth: int, value_size: int) -> list[str]:
    """A SET of a new key, `value_size` bytes, absolute expiry in 7 days: a migrated
    message's write."""
    expires_at = int(time.time() * 1000) + 7 * 86_400_000
    value = "x" * value_size
    return [
        *pipelined(depth, 1_000_000_000),
        "SET",
        "key:__rand_int__",
        value,
        "PXAT",
        str(expires_at),
    ]


def matched_zadd(depth: int) -> list[str]:
    """A ZADD into one of 10,000 sorted sets of about 100 members: a migrated queue's."""
    return [*pipelined(depth, 10_000), "ZADD", "q:__rand_int__", "__rand_int__", "m:__rand_int__"]


def single_key_set(depth: int) -> list[str]:
    return ["-P", str(depth), "-n", "1000000", "-t", "set"]


def single_key_zadd(depth: int) -> list[str]:
    return [*pipelined(depth, 10_000), "ZADD", "bench:z", "__rand_int__", "m:__rand_int__"]


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
    """One kind of ceiling: SET and ZADD req/s per pipeline depth."""

    set_rps: dict[int, float]
    zadd_rps: dict[int, float]

    @property
    def rows_per_s(self) -> float:
        return 1 / (1 / max(self.set_rps.values()) + 1 / max(self.zadd_rps.values()))


@dataclass
class Ceilings:
    load: str
    matched: Ceiling
    single_key: Ceiling


def measure_ceilings(redis_cpu: int, load_cpu: int, value_size: int) -> Ceilings:
    load = load_average()
    kinds: list[Ceiling] = []
    for make_set, make_zadd in (
        (lambda depth: matched_set(depth, value_size), matched_zadd),
        (single_key_set, single_key_zadd),
    ):
        set_rps = {d: redis_rate(redis_cpu, load_cpu, make_set(d)) for d in DEPTHS}
        zadd_rps = {d: redis_rate(redis_cpu, load_cpu, make_zadd(d)) for d in DEPTHS}
        kinds.append(Ceiling(set_rps, zadd_rps))
    return Ceilings(load, *kinds)


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
    args = parser.parse_args()
    if args.redis_cpu == args.load_cpu:
        raise SystemExit("--redis-cpu and --load-cpu must differ")
    os.sched_setaffinity(0, {args.load_cpu})  # this driver, and the COPY load

    pg = PostgresServer()
    pg.start()
    runs: list[tuple[Ceilings, Migration]] = []
    try:
        postmaster = postmaster_pid(pg)
        pin_tree(postmaster, args.load_cpu)
        url = pg.create_database()
        load_s = generate(url, args.rows, args.clients, args.payload, args.mqtt5_every)
        value_size = json_size(args.payload)
        for run in range(1, args.runs + 1):
            ceilings = measure_ceilings(args.redis_cpu, args.load_cpu, value_size)
            migration = measure_migration(
                url, postmaster, args.batch_size, args.redis_cpu, args.load_cpu
            )
            runs.append((ceilings, migration))
            rate = migration.rows_per_s
            print(
                f"run {run}: migration {rate:,.0f} rows/s; matched ceiling "
                f"{ceilings.matched.rows_per_s:,.0f} ({rate / ceilings.matched.rows_per_s:.0%}),"
                f" single-key ceiling {ceilings.single_key.rows_per_s:,.0f} "
                f"({rate / ceilings.single_key.rows_per_s:.0%})",
                file=sys.stderr,
                flush=True,
            )
    finally:
        pg.stop()
    report(args, load_s, value_size, runs)


def rates(values: dict[int, float]) -> str:
    return " / ".join(f"{values[d]:,.0f}" for d in DEPTHS)


def report(
    args: argparse.Namespace,
    load_s: float,
    value_size: int,
    runs: list[tuple[Ceilings, Migration]],
) -> None:
    r, load = args.redis_cpu, args.load_cpu
    bench = f"taskset -c {load} redis-benchmark -q"
    print(f"\n`{' '.join(sys.argv)}`\n")
    print(
        f"{args.rows:,} rows across {args.clients:,} clients, {args.payload}-byte payloads "
        f"({value_size}-byte JSON), every {args.mqtt5_every}th row with MQTT 5 columns; "
        f"COPY load {load_s:.1f} s.\n"
    )
    migrate = "taskset -c {load} python -m mqttq.cli.migrate pg-to-redis --pg URL --redis URL"
    print(f"- migration: `{migrate.format(load=load)} --batch-size {args.batch_size} --json`")
    value = f"<{value_size} bytes> PXAT <in 7 days>"
    matched_set_shown = " ".join(matched_set(64, 1)[:-3]) + f" {value}"
    print(
        f"- matched ceiling: `{bench} {matched_set_shown}` and "
        f"`{bench} {' '.join(matched_zadd(64))}`"
    )
    print(
        f"- single-key ceiling: `{bench} {' '.join(single_key_set(64))}` and "
        f"`{bench} {' '.join(single_key_zadd(64))}`"
    )
    print("- each at -P 16 and -P 64 (shown: 64), each on a fresh redis-server")
    print(
        f"- pinning: redis-server (all threads; AOF-rewrite children inherit) on CPU {r}; "
        f"redis-benchmark, the migrate process, PostgreSQL and the driver on CPU {load}"
    )
    settings = runs[0][1].settings
    print("- Redis (every measurement): " + ", ".join(f"{k} {v!r}" for k, v in settings.items()))
    print()
    print(
        "| run | load avg before ceilings / migration | matched SET / ZADD req/s (-P 16 / -P 64) "
        "| matched ceiling rows/s | single-key SET / ZADD req/s (-P 16 / -P 64) "
        "| single-key ceiling rows/s | migration rows/s (wall) | share matched / single-key "
        "| peak RSS |"
    )
    print("|---|---|---|---:|---|---:|---:|---|---:|")
    matched_shares, single_shares = [], []
    for n, (c, migration) in enumerate(runs, 1):
        matched = migration.rows_per_s / c.matched.rows_per_s
        single = migration.rows_per_s / c.single_key.rows_per_s
        matched_shares.append(matched)
        single_shares.append(single)
        print(
            f"| {n} | {c.load} / {migration.load} "
            f"| {rates(c.matched.set_rps)} ; {rates(c.matched.zadd_rps)} "
            f"| {c.matched.rows_per_s:,.0f} "
            f"| {rates(c.single_key.set_rps)} ; {rates(c.single_key.zadd_rps)} "
            f"| {c.single_key.rows_per_s:,.0f} | {migration.rows_per_s:,.0f} "
            f"| {matched:.0%} / {single:.0%} | {migration.peak_rss_mib:,.0f} MiB |"
        )
    median = statistics.median(matched_shares)
    verdict = "met" if median >= 0.5 else "not met"
    print(
        f"\nMedian share of the matched ceiling: {median:.0%} (target 50%: {verdict}); of the "
        f"single-key ceiling: {statistics.median(single_shares):.0%}.\n"
    )
    print(
        "| run | rows migrated | wall s | own rows/s | CPU µs/row: migrate / PostgreSQL / "
        "Redis main / Redis AOF-rewrite children | AOF rewrites | Redis keys, memory |"
    )
    print("|---|---:|---:|---:|---|---:|---|")
    for n, (_c, m) in enumerate(runs, 1):
        per_row = [m.migrate_cpu_s, m.postgres_cpu_s, m.redis_cpu_s, m.redis_children_cpu_s]
        cpu = " / ".join(f"{1e6 * value / m.rows:.1f}" for value in per_row)
        print(
            f"| {n} | {m.migrated:,} | {m.wall_s:.1f} | {m.own_rate:,.0f} | {cpu} "
            f"| {m.aof_rewrites} | {m.keys:,}, {m.used_memory_mib:,.0f} MiB |"
        )


if __name__ == "__main__":
    main()
