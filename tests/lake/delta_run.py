"""`python -m tests.lake.delta_run LAKE BOOTSTRAP TOPIC`: a Delta lake through the command
line: `mqttq lake run --format delta --available-now` twice (the second finds nothing new),
`mqttq lake compact` (OPTIMIZE), `mqttq lake query` and `mqttq report traffic --lake` over
the compacted table, and `mqttq lake expire --older-than 90d` (DELETE + VACUUM, nothing of
today goes); then the lake read back through `mqttq.lake.query` and expired as if
a year later (the one step the command line cannot reach: its clock). Prints one JSON line
of what it found at each step.

The commands run in this one process, one after the other (each starts and stops its Spark
session in the same driver JVM, so Delta's jar is on its classpath from the first): a
process of its own, because another test's in-process session in the same pytest worker
would be reused without that jar.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

from mqttq.cli import app
from mqttq.lake.expire import expire_delta
from mqttq.lake.partitions import now_utc
from mqttq.lake.query import read_messages, read_quarantine
from mqttq.lake.stream import lake_packages, stream_conf
from mqttq.spark.session import SparkOptions, build_session


def mqttq(*args: str) -> str:
    """`mqttq ARGS --json` in this process: what it printed; fails on a non-zero exit."""
    out = io.StringIO()
    command = typer.main.get_command(app)
    with contextlib.redirect_stdout(out):
        code = command.main([*args, "--json"], prog_name="mqttq", standalone_mode=False)
    assert code in (None, 0), f"mqttq {' '.join(args)} exited {code}: {out.getvalue()}"
    return out.getvalue()


def lake(*args: str) -> list[dict[str, Any]]:
    """`mqttq lake ARGS --json`: its JSON lines."""
    printed = mqttq("lake", *args).splitlines()
    return [json.loads(line) for line in printed if line.startswith("{")]


def main(lake_dir: Path, bootstrap: str, topic: str) -> None:
    run = ["run", "--lake", str(lake_dir), "--bootstrap-servers", bootstrap, "--topic", topic]
    run += ["--format", "delta", "--available-now", "--master", "local[2]"]
    runs = [lake(*run)[-1], lake(*run)[-1]]
    compacted = lake("compact", "--lake", str(lake_dir))[-1]
    # After OPTIMIZE the replaced files are still on disk (until VACUUM): a reader that took
    # the Parquet files rather than the Delta log would count every message twice.
    sql = "SELECT count(*) AS n, count(DISTINCT kafka_partition, kafka_offset) AS o FROM messages"
    queried = json.loads(mqttq("lake", "query", "--lake", str(lake_dir), sql))
    traffic = json.loads(mqttq("report", "traffic", "--lake", str(lake_dir)))["summary"]
    expired_now = lake("expire", "--lake", str(lake_dir), "--older-than", "90d")[-1]
    spark = build_session(
        SparkOptions(
            master="local[2]",
            conf=stream_conf("delta"),
            packages=lake_packages("delta"),
            app_name="mqttq-delta-test",
        )
    )
    try:
        messages = read_messages(spark, lake_dir)
        quarantine = read_quarantine(spark, lake_dir)
        found: dict[str, object] = {
            "runs": [{"messages": r["messages"], "quarantined": r["quarantined"]} for r in runs],
            "stopped_events": [r["event"] for r in runs],
            "offsets": [
                [r[0], r[1]] for r in messages.select("kafka_partition", "kafka_offset").collect()
            ],
            "columns": messages.columns,
            "quarantine": []
            if quarantine is None
            else [
                [r[0], r[1], r[2]]
                for r in quarantine.select("kafka_partition", "kafka_offset", "reason").collect()
            ],
            "compact": {k: compacted[k] for k in ("files_removed", "files_added")},
            "compact_format": compacted.get("format"),
            "expired_now": expired_now["rows"],
            "query_after_compact": queried,
            "traffic_after_compact": traffic["messages"],
        }
        found["rows_after_compact"] = len(found["offsets"])  # type: ignore[arg-type]
        later = now_utc() + timedelta(days=366)
        found["expired_a_year_later"] = expire_delta(spark, lake_dir, 90 * 86_400, now=later)
        found["rows_after_expire"] = read_messages(spark, lake_dir).count()
    finally:
        spark.stop()
    print(json.dumps(found))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
