"""`mqttq report` on Spark: each report's run time on a generated TBMQ 1.x source and on
the Redis it migrates to, and the migration-plan's memory estimate against Redis's own.

Not a test. A private PostgreSQL and redis-server (the tests' launchers) are started; the
source gets `--rows` rows over `--clients` clients with skewed queue sizes (client i gets
a share proportional to 1 / (i + 1) ** `--skew`, at least one row, so a few clients hold
queues over the migration's 10,000 limit and most hold a few dozen rows), 64-byte payloads,
every 10th row with the MQTT 5 columns, one row in 50 older than the default TTL (expired),
one in 100 a PUBREL, and every 50th client's serials past 65535 (its packet ids wrapped).

Then, for each `--master`, as processes of their own (the way an operator runs them, so
the wall time includes starting Python, the JVM and the Spark session):
1. `mqttq report migration-plan --pg URL --json`;
2. (once) `mqttq migrate pg-to-redis` (the local engine) into the empty Redis, and the
   Redis memory it took (INFO used_memory after minus before) against the plan's estimate;
3. `mqttq report sessions --redis URL --json`;
4. `mqttq report migration-check --pg URL --redis URL --json`.
The time to start a bare session on the master is measured too, to tell start-up from work.
Results are printed as a markdown table with the commands.

    python benchmarks/distributed/reports_spark.py [--rows 1000000] [--clients 10000] [--skew 0.9]
        [--master local[2]] [--master local-cluster[2,1,1024]]
        [--readme DIR]   # also keep the small demo outputs (tables, chart) under DIR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root, for `benchmarks` and `tests`
from mqttq.migrate import init_source  # noqa: E402
from tests.postgres_fixtures import PostgresServer  # noqa: E402 (the tests' launchers)
from tests.services import RedisServer  # noqa: E402

DAY_MS = 86_400_000
USER_PROPERTIES = '{"props":[{"k":"site","v":"kyiv"},{"k":"unit","v":"C"}]}'
COLUMNS = (
    "client_id, serial_number, topic, time, packet_id, packet_type, qos, payload, "
    "user_properties, retain, msg_expiry_interval, payload_format_indicator, content_type, "
    "response_topic, correlation_data"
)


def skewed_counts(rows: int, clients: int, skew: float) -> list[int]:
    """Rows per client: shares 1 / (i + 1) ** skew of `rows`, at least 1, summing to `rows`."""
    weights = [1 / (i + 1) ** skew for i in range(clients)]
    total = sum(weights)
    counts = [max(1, int(rows * w / total)) for w in weights]
    counts[-1] += rows - sum(counts)  # the rounding, on the smallest client
    if counts[-1] < 1:
        raise SystemExit("too few rows for that many clients")
    return counts


def generate(url: str, rows: int, clients: int, skew: float) -> float:
    """The source tables filled with COPY; the seconds it took."""
    import asyncio  # noqa: PLC0415

    asyncio.run(init_source(url))
    started = time.monotonic()
    now = int(time.time() * 1000)
    body = os.urandom(64)
    counts = skewed_counts(rows, clients, skew)
    n = 0
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        with cursor.copy(f"COPY device_publish_msg ({COLUMNS}) FROM STDIN") as copy:
            for c, count in enumerate(counts):
                client_id = f"dev-{c:06d}"
                topic = f"devices/{c}/up"
                first = 65_000 if c % 50 == 7 else 1
                for serial in range(first, first + count):
                    n += 1
                    mqtt5 = n % 10 == 0
                    copy.write_row(
                        (
                            client_id, serial, topic,
                            now - 8 * DAY_MS if n % 50 == 3 else now - (count - serial) * 1000,
                            (serial - 1) % 65535 + 1,
                            "PUBREL" if n % 100 == 5 else "PUBLISH",
                            2 if n % 100 == 5 else 1, body,
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
            for c, count in enumerate(counts):
                last = (65_000 if c % 50 == 7 else 1) + count - 1
                copy.write_row((f"dev-{c:06d}", now, last, (last - 1) % 65535 + 1))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE device_publish_msg")
        conn.execute("VACUUM ANALYZE device_session_ctx")
    return time.monotonic() - started


def timed(command: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Run `command`; (wall seconds, stdout). Exits with its stderr when it fails."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.monotonic() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return wall, done.stdout


def session_start_s(master: str) -> float:
    code = (
        "from mqttq.spark.session import SparkOptions, build_session\n"
        f"build_session(SparkOptions(master={master!r})).stop()\n"
    )
    return timed([sys.executable, "-c", code])[0]


def mqttq(*args: str) -> list[str]:
    return [sys.executable, "-m", "mqttq", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--skew", type=float, default=0.9)
    parser.add_argument("--master", action="append", dest="masters")
    parser.add_argument("--readme", type=Path, help="keep table outputs and a chart here")
    args = parser.parse_args()
    masters = args.masters or ["local[2]"]

    pg = PostgresServer()
    pg.start()
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"mqttq-reports-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    target = RedisServer(workdir / "redis")
    target.start()
    results: list[dict[str, Any]] = []
    try:
        url = pg.create_database()
        load_s = generate(url, args.rows, args.clients, args.skew)
        print(f"source: {args.rows:,} rows, {args.clients:,} clients in {load_s:.1f} s",
              file=sys.stderr)  # fmt: skip
        client = redis.Redis.from_url(target.url)
        memory_before = int(client.info("memory")["used_memory"])
        migrate_s, migrated = timed(
            mqttq("migrate", "pg-to-redis", "--pg", url, "--redis", target.url, "--json"),
            ok=(0, 1),
        )
        memory = int(client.info("memory")["used_memory"]) - memory_before
        written = json.loads(migrated)["messages"]["migrated"]
        for master in masters:
            row: dict[str, Any] = {"master": master, "start_s": session_start_s(master)}
            spark = ["--master", master]
            row["plan_s"], plan = timed(
                mqttq("report", "migration-plan", "--pg", url, "--json", *spark)
            )
            row["estimate"] = json.loads(plan)["summary"]["redis_estimate_bytes"]
            row["sessions_s"], _ = timed(
                mqttq("report", "sessions", "--redis", target.url, "--json", *spark)
            )
            row["check_s"], check = timed(
                mqttq("report", "migration-check", "--pg", url, "--redis", target.url,
                      "--json", *spark), ok=(0, 1),
            )  # fmt: skip
            row["different"] = json.loads(check)["summary"]["clients_different"]
            results.append(row)
            print(row, file=sys.stderr, flush=True)
        if args.readme is not None:
            readme_outputs(args.readme, url, target.url)
    finally:
        target.stop()
        pg.stop()
    print(
        f"Source: {args.rows:,} rows over {args.clients:,} clients (skew {args.skew}), loaded "
        f"in {load_s:.1f} s. `mqttq migrate pg-to-redis` (local engine): {migrate_s:.1f} s, "
        f"{written:,} entries written, Redis used_memory +{memory / 2**20:,.1f} MiB.\n"
    )
    print("| master | session start s | migration-plan s | sessions s | migration-check s "
          "| plan's Redis estimate | measured | estimate / measured |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['master']} | {r['start_s']:.1f} | {r['plan_s']:.1f} | {r['sessions_s']:.1f} "
            f"| {r['check_s']:.1f} | {r['estimate'] / 2**20:,.1f} MiB "
            f"| {memory / 2**20:,.1f} MiB | {r['estimate'] / memory:.2f} |"
        )


def readme_outputs(directory: Path, url: str, redis_url: str) -> None:
    """The three reports as a terminal shows them (120 columns), and the sessions chart."""
    directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "COLUMNS": "120"}
    runs = {
        "migration-plan": ["migration-plan", "--pg", url, "--top", "5",
                           "--chart", str(directory / "migration-plan.png")],
        "sessions": ["sessions", "--redis", redis_url, "--top", "5",
                     "--chart", str(directory / "sessions-backlog.png")],
        "migration-check": ["migration-check", "--pg", url, "--redis", redis_url],
    }  # fmt: skip
    for name, args in runs.items():
        done = subprocess.run(
            mqttq("report", *args, "--master", "local[2]"),
            capture_output=True, text=True, check=False, cwd=ROOT, env=env,
        )  # fmt: skip
        text = done.stdout + done.stderr + f"(exit status {done.returncode})\n"
        (directory / f"{name}.txt").write_text(text)


if __name__ == "__main__":
    main()
