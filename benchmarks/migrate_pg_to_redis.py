"""`mqttq migrate pg-to-redis` on a generated TBMQ 1.x table, against Redis's own ceiling.

Not a test. A private PostgreSQL (the tests' launcher: Debian's server, initdb in a temp dir)
gets `--rows` rows across `--clients` clients in TBMQ 1.x's tables, loaded with COPY
(every `--mqtt5-every`-th row carries the MQTT 5 columns); a private redis-server (the tests'
launcher, AOF on) receives them. The migration runs as its own process
(`python -m mqttq.cli.migrate pg-to-redis --json`), so its wall time and peak RSS
(wait4's ru_maxrss) are its own.

The physical limit is measured on the same Redis first: `redis-benchmark -P 16 -t set` and a
pipelined `ZADD key score member` (random scores and members below 10,000: one sorted set
that grows to the size of a full queue at the default limit); every migrated row costs one
SET and one ZADD, so the ceiling in rows/s is 1 / (1/SET rate + 1/ZADD rate). The target is
half of it. Printed as a markdown table with the commands.

    python benchmarks/migrate_pg_to_redis.py [--rows 1000000] [--clients 10000]
        [--payload 64] [--batch-size 5000] [--mqtt5-every 10]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from mqttq.migrate import init_source

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.postgres_fixtures import PostgresServer  # noqa: E402 (the tests' launchers)
from tests.services import HOST, RedisServer  # noqa: E402

REDIS_BENCHMARK = "/usr/bin/redis-benchmark"
USER_PROPERTIES = '{"props":[{"k":"site","v":"kyiv"},{"k":"unit","v":"C"}]}'


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


def redis_rate(port: int, *command: str) -> float:
    """Requests per second reported by redis-benchmark --csv."""
    done = subprocess.run(
        [REDIS_BENCHMARK, "-h", HOST, "-p", str(port), "-q", "--csv", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rows = list(csv.reader(io.StringIO(done.stdout)))
    return float(rows[-1][1])


def redis_cpu(client: redis.Redis) -> tuple[float, float]:
    """Redis's CPU seconds so far: its own, and its children's (AOF rewrites)."""
    cpu = client.info("cpu")
    return (
        float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        float(cpu["used_cpu_user_children"]) + float(cpu["used_cpu_sys_children"]),
    )


def run_migration(command: list[str]) -> tuple[float, Any, dict[str, Any]]:
    """Wall seconds, resource usage (wait4) and JSON report of the migration process."""
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert process.stdout is not None and process.stderr is not None
    out = process.stdout.read()
    err = process.stderr.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"migration failed ({process.returncode}):\n{err.decode()}")
    return wall, usage, json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=64, help="payload bytes per row")
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--mqtt5-every", type=int, default=10)
    args = parser.parse_args()

    pg = PostgresServer()
    server = RedisServer(Path(tempfile.mkdtemp(prefix="mqttq-bench-redis-")))
    pg.start()
    server.start()
    try:
        url = pg.create_database()
        load_s = generate(url, args.rows, args.clients, args.payload, args.mqtt5_every)
        set_command = ["-P", "16", "-n", "1000000", "-t", "set"]
        zadd_command = ["-P", "16", "-n", "1000000", "-r", "10000"]
        zadd_command += ["ZADD", "bench:z", "__rand_int__", "m:__rand_int__"]
        set_rps = redis_rate(server.port, *set_command)
        zadd_rps = redis_rate(server.port, *zadd_command)
        ceiling = 1 / (1 / set_rps + 1 / zadd_rps)
        redis.Redis(host=HOST, port=server.port).flushall()

        command = [sys.executable, "-m", "mqttq.cli.migrate", "pg-to-redis", "--pg", url]
        command += ["--redis", server.url, "--batch-size", str(args.batch_size), "--json"]
        client = redis.Redis(host=HOST, port=server.port)
        cpu_before = redis_cpu(client)
        wall, usage, report = run_migration(command)
        redis_main, redis_children = (
            a - b for a, b in zip(redis_cpu(client), cpu_before, strict=True)
        )
        aof_rewrites = int(client.info("persistence").get("aof_rewrites", 0))
        migrated = report["messages"]["migrated"]
        keys = client.dbsize()
        used_memory = int(client.info("memory")["used_memory"])
    finally:
        server.stop()
        pg.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)

    rate = report["rows_read"] / wall
    print(f"\n`{' '.join(sys.argv)}`\n")
    migrate = "python -m mqttq.cli.migrate pg-to-redis --pg URL --redis URL --json"
    print(f"migration: `{migrate} --batch-size {args.batch_size}`")
    set_text, zadd_text = " ".join(set_command), " ".join(zadd_command)
    print(f"ceiling: `redis-benchmark -q {set_text}` and `redis-benchmark -q {zadd_text}`\n")
    print("| measure | value |")
    print("|---|---|")
    rows = [
        ("rows / clients / payload", f"{args.rows:,} / {args.clients:,} / {args.payload} B"),
        ("load with COPY", f"{load_s:.1f} s"),
        ("rows migrated", f"{migrated:,} ({keys:,} Redis keys, {used_memory / 2**20:,.0f} MiB)"),
        ("migration wall time (process)", f"{wall:.1f} s"),
        ("migration rows/s (wall, incl. start-up)", f"{rate:,.0f}"),
        ("migration rows/s (its own report)", f"{report['rows_per_s']:,.0f}"),
        ("peak RSS of the migrate process", f"{usage.ru_maxrss / 1024:,.0f} MiB"),
        ("CPU: migrate process", f"{usage.ru_utime + usage.ru_stime:.1f} s"),
        ("CPU: Redis (main thread / forks)", f"{redis_main:.1f} s / {redis_children:.1f} s"),
        ("AOF rewrites during the run", str(aof_rewrites)),
        ("redis-benchmark SET -P 16", f"{set_rps:,.0f} req/s"),
        ("redis-benchmark ZADD -P 16", f"{zadd_rps:,.0f} req/s"),
        ("Redis ceiling (1 SET + 1 ZADD per row)", f"{ceiling:,.0f} rows/s"),
        ("target (half the ceiling)", f"{ceiling / 2:,.0f} rows/s"),
        ("migration / ceiling", f"{rate / ceiling:.0%}"),
    ]
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
