"""`mqttq report traffic --lake` over 10 million archived messages, local[2] (a benchmark,
not a test; issue 36: target <= 60 s).

1. **generate** (skipped when the lake is there): a daily lake of `--rows` messages written
   with pyarrow alone, in the layout (`mqttq.lake.layout`): 3 tenants, 10,000 publishers,
   topics `sensors/<client>/temp`, 62-byte JSON-like payloads, QoS 0/1 mixed, over two days
   (the report's window and the one before it, so the silent devices are computed too),
   files of `--file-rows` rows. Vectorised (numpy buffers into Arrow arrays), no per-row
   Python.
2. **report**: `python -m mqttq report traffic --lake DIR --since D1 --until D2 --master
   local[2] --json` as a subprocess; the wall time (Spark's start included) and the
   messages it counted. `--window all` (default): both days, every message in the window;
   `--window last-day`: the second day, the first one scanned as the previous window
   (silent devices).

    python benchmarks/lake/report.py [--rows 10000000] [--lake /tmp/mqttq-lake-10m]
        [--window all|last-day] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

import numpy as np
import pyarrow as pa

from mqttq.lake.arrow_files import partition_folder, write_file
from mqttq.lake.layout import LakeInfo, arrow_message_schema, write_lake_info

TENANTS = ("acme", "globex", "initech")
CLIENTS = 10_000
DAY0 = datetime(2026, 11, 9, tzinfo=UTC)
"""The day before the window; the window is DAY0 + 1 day."""
TEMPLATE = b'{"temperature": 00.00, "unit": "C", "seq": 0000000000, "ok": 1}'[:62]


def _payloads(rng: np.random.Generator, n: int) -> pa.Array:
    block = np.tile(np.frombuffer(TEMPLATE, np.uint8), (n, 1))
    digits = rng.integers(0, 10, size=(n, 4), dtype=np.uint8) + ord("0")
    block[:, 16:18] = digits[:, :2]
    block[:, 19:21] = digits[:, 2:]
    offsets = np.arange(0, (n + 1) * 62, 62, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(block.tobytes())]
    )


def _chunk(rng: np.random.Generator, n: int, day: datetime, first_offset: int) -> pa.Table:
    schema = arrow_message_schema()
    clients = rng.integers(0, CLIENTS, size=n)
    names = pa.array([f"dev-{i:05d}" for i in range(CLIENTS)], pa.string())
    topics = pa.array([f"sensors/dev-{i:05d}/temp" for i in range(CLIENTS)], pa.string())
    levels = pa.array([["sensors", f"dev-{i:05d}", "temp"] for i in range(CLIENTS)])
    index = pa.array(clients)
    start_us = int(day.timestamp()) * 1_000_000
    created = np.sort(rng.integers(start_us, start_us + 86_400_000_000, size=n))
    payload = _payloads(rng, n)
    empty_props = pa.ListArray.from_arrays(
        pa.array(np.zeros(n + 1, np.int32)),
        pa.array([], schema.field("user_properties").type.value_type),
    )
    columns = {
        "topic": topics.take(index),
        "topic_levels": levels.take(index),
        "client_id": names.take(index),
        "qos": pa.array(rng.integers(0, 2, size=n, dtype=np.int32)),
        "retain": pa.array(np.zeros(n, bool)),
        "created_at": pa.array(created, pa.timestamp("us", tz="UTC")),
        "expires_at": pa.nulls(n, pa.timestamp("us", tz="UTC")),
        "content_type": pa.nulls(n, pa.string()),
        "response_topic": pa.nulls(n, pa.string()),
        "correlation_data": pa.nulls(n, pa.binary()),
        "payload_format": pa.nulls(n, pa.int32()),
        "user_properties": empty_props,
        "payload": payload,
        "payload_text": payload.cast(pa.string()),
        "kafka_partition": pa.array(clients % 12, pa.int32()),
        "kafka_offset": pa.array(np.arange(first_offset, first_offset + n, dtype=np.int64)),
    }
    file_schema = pa.schema([f for f in schema if f.name not in ("tenant", "date")])
    return pa.table(columns, schema=file_schema)


def generate(lake: Path, rows: int, file_rows: int) -> float:
    """Write the lake; returns the seconds it took."""
    started = time.monotonic()
    rng = np.random.default_rng(36)
    write_lake_info(lake, LakeInfo())
    partitions = [(t, DAY0 + timedelta(days=d)) for d in (0, 1) for t in TENANTS]
    per_partition = rows // len(partitions)
    offset = 0
    for number, (tenant, day) in enumerate(partitions):
        count = per_partition + (rows % len(partitions) if number == 0 else 0)
        done = 0
        while done < count:
            n = min(file_rows, count - done)
            table = _chunk(rng, n, day, offset)
            folder = lake / "messages" / partition_folder(tenant, day.strftime("%Y-%m-%d"))
            write_file(table, folder / f"part-bench-{offset:012d}.parquet")
            done += n
            offset += n
    return time.monotonic() - started


def run_report(lake: Path, master: str, window: str) -> tuple[float, dict[str, Any]]:
    first = 0 if window == "all" else 1
    argv = [
        sys.executable, "-m", "mqttq", "report", "traffic", "--lake", str(lake),
        "--since", (DAY0 + timedelta(days=first)).strftime("%Y-%m-%d"),
        "--until", (DAY0 + timedelta(days=2)).strftime("%Y-%m-%d"),
        "--master", master, "--json",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"report traffic failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--file-rows", type=int, default=1_000_000)
    parser.add_argument("--lake", type=Path, default=Path("/tmp/mqttq-lake-10m"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--window", choices=("all", "last-day"), default="all")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    generated = None
    if not (args.lake / "messages").is_dir():
        generated = generate(args.lake, args.rows, args.file_rows)
    seconds, report = run_report(args.lake, args.master, args.window)
    summary = report["summary"]
    result = {
        "generate_seconds": round(generated, 1) if generated is not None else None,
        "window": args.window,
        "window_messages": summary["messages"],
        "report_seconds": round(seconds, 1),
        "silent_devices": summary["silent_devices"],
        "master": args.master,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
