"""`python -m tests.lake.delta_run LAKE BOOTSTRAP TOPIC`: the lake stream into a Delta lake
(`--format delta`) with `--available-now`, run twice (the second finds nothing new), then
the lake read back through `mqttq.lake.query`, compacted (OPTIMIZE) and expired (as if a
year later, DELETE + VACUUM); prints one JSON line of what it found at each step.

A process of its own: the Delta jar must be on the driver's classpath from the start, and
another test's in-process session in the same worker would be reused without it."""

from __future__ import annotations

import json
import sys
import threading
from datetime import timedelta
from pathlib import Path

from mqttq.lake.compact import compact_delta
from mqttq.lake.expire import expire_delta
from mqttq.lake.partitions import now_utc
from mqttq.lake.query import read_messages, read_quarantine
from mqttq.lake.stream import RunOptions, lake_packages, open_lake, run_stream, stream_conf
from mqttq.spark.session import SparkOptions, build_session


def main(lake: Path, bootstrap: str, topic: str) -> None:
    info = open_lake(lake, hourly=False, fmt="delta")
    spark = build_session(
        SparkOptions(
            master="local[2]",
            conf=stream_conf("delta"),
            packages=lake_packages("delta"),
            app_name="mqttq-delta-test",
        )
    )
    try:
        options = RunOptions(lake, bootstrap, topic, available_now=True, format="delta")
        totals = [run_stream(spark, options, info, lambda _e: None, threading.Event())]
        totals.append(run_stream(spark, options, info, lambda _e: None, threading.Event()))
        messages = read_messages(spark, lake).select("kafka_partition", "kafka_offset", "topic")
        quarantine = read_quarantine(spark, lake)
        found: dict[str, object] = {
            "runs": [{"messages": t.messages, "quarantined": t.quarantined} for t in totals],
            "offsets": [[r[0], r[1]] for r in messages.collect()],
            "columns": read_messages(spark, lake).columns,
            "quarantine": []
            if quarantine is None
            else [
                [r[0], r[1], r[2]]
                for r in quarantine.select("kafka_partition", "kafka_offset", "reason").collect()
            ],
        }
        found["compact"] = compact_delta(spark, lake)
        found["rows_after_compact"] = read_messages(spark, lake).count()
        found["expired_now"] = expire_delta(spark, lake, 90 * 86_400)
        later = now_utc() + timedelta(days=366)
        found["expired_a_year_later"] = expire_delta(spark, lake, 90 * 86_400, now=later)
        found["rows_after_expire"] = read_messages(spark, lake).count()
    finally:
        spark.stop()
    print(json.dumps(found))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
