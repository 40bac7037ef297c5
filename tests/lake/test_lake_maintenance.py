"""`mqttq lake compact` and `mqttq lake expire` (issue 36) on a lake written with pyarrow in
the layout `lake run` writes: compaction keeps every row once and leaves open partitions
alone, a file the stream adds during a compaction is kept; expiry drops whole partitions
past the retention and only those."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from mqttq.lake.compact import compact_lake, compact_partition
from mqttq.lake.expire import expire_lake
from mqttq.lake.layout import (
    LakeError,
    LakeInfo,
    arrow_message_schema,
    arrow_quarantine_schema,
    write_lake_info,
)
from mqttq.lake.partitions import Partition

TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
OLD = "2020-01-01"


def _file_schema() -> pa.Schema:
    schema = arrow_message_schema()
    return pa.schema([f for f in schema if f.name not in ("tenant", "date")])


def _write_batch(folder: Path, batch: int, offsets: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    schema = _file_schema()
    created = datetime(2020, 1, 1, tzinfo=UTC)
    rows = [
        {
            "topic": "t/x",
            "topic_levels": ["t", "x"],
            "client_id": "c",
            "qos": 1,
            "retain": False,
            "created_at": created,
            "expires_at": None,
            "content_type": None,
            "response_topic": None,
            "correlation_data": None,
            "payload_format": None,
            "user_properties": [],
            "payload": b"p",
            "payload_text": "p",
            "kafka_partition": 0,
            "kafka_offset": offset,
        }
        for offset in offsets
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema), folder / f"part-{batch:012d}-00000.parquet")


def _make_lake(root: Path) -> Path:
    lake = root / "lake"
    write_lake_info(lake, LakeInfo())
    for batch in range(3):
        _write_batch(
            lake / "messages" / "tenant=a" / f"date={OLD}",
            batch,
            range(batch * 10, batch * 10 + 10),
        )
    for batch in range(3, 5):
        _write_batch(
            lake / "messages" / "tenant=a" / f"date={TODAY}",
            batch,
            range(batch * 10, batch * 10 + 10),
        )
    quarantine = lake / "quarantine" / f"date={OLD}"
    quarantine.mkdir(parents=True)
    schema = pa.schema([f for f in arrow_quarantine_schema() if f.name != "date"])
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "reason": "no mqttq header",
                    "kafka_topic": "x",
                    "kafka_partition": 0,
                    "kafka_offset": 1,
                    "kafka_timestamp": None,
                    "key": None,
                    "value": b"v",
                    "headers": [],
                }
            ],
            schema,
        ),
        quarantine / "part-000000000001-00000.parquet",
    )
    return lake


def _lake(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqttq", "lake", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _offsets(folder: Path) -> list[int]:
    return sorted(ds.dataset(folder, format="parquet").to_table()["kafka_offset"].to_pylist())


def test_compact_merges_closed_partitions_and_keeps_every_row_once(tmp_path: Path) -> None:
    lake = _make_lake(tmp_path)
    done = _lake("compact", "--lake", str(lake), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "event": "compacted",
        "partitions": 1,
        "files_before": 3,
        "files_after": 1,
    }
    old = lake / "messages" / "tenant=a" / f"date={OLD}"
    assert [p.name for p in old.iterdir()] == ["part-compact-00000.parquet"]
    assert _offsets(old) == list(range(30))
    today = lake / "messages" / "tenant=a" / f"date={TODAY}"
    assert len(list(today.iterdir())) == 2  # open: left as the stream wrote it
    everything = ds.dataset(lake / "messages", format="parquet", partitioning="hive").to_table()
    assert sorted(everything["kafka_offset"].to_pylist()) == list(range(50))


def test_a_file_the_stream_adds_during_compaction_is_kept(tmp_path: Path) -> None:
    """The merge reads the files it listed; one published after that (a late record) is
    moved into the new folder under the lock, not lost and not merged twice."""
    lake = _make_lake(tmp_path)
    partition = Partition(lake / "messages", Path("tenant=a") / f"date={OLD}")
    listed = partition.files()
    _write_batch(partition.path, 9, range(100, 105))  # arrives after the listing
    files = compact_partition(lake, partition, listed, target_rows=1000)
    assert files == 2
    assert _offsets(partition.path) == [*range(30), *range(100, 105)]


def test_expire_drops_partitions_past_the_retention(tmp_path: Path) -> None:
    lake = _make_lake(tmp_path)
    listed = _lake("expire", "--lake", str(lake), "--older-than", "90d", "--dry-run", "--json")
    assert listed.returncode == 0, listed.stderr
    expected = sorted([f"messages/tenant=a/date={OLD}", f"quarantine/date={OLD}"])
    assert sorted(json.loads(listed.stdout)["partitions"]) == expected
    assert (lake / "messages" / "tenant=a" / f"date={OLD}").is_dir()

    done = _lake("expire", "--lake", str(lake), "--older-than", "90d", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["partitions"]) == expected
    assert not (lake / "messages" / "tenant=a" / f"date={OLD}").exists()
    assert not (lake / "quarantine" / f"date={OLD}").exists()
    assert _offsets(lake / "messages") == list(range(30, 50))


def test_expire_keeps_a_day_not_wholly_past(tmp_path: Path) -> None:
    lake = _make_lake(tmp_path)
    days = (datetime.now(UTC) - datetime(2020, 1, 1, tzinfo=UTC)).days
    done = _lake("expire", "--lake", str(lake), "--older-than", f"{days + 1}d", "--json")
    assert json.loads(done.stdout)["partitions"] == []
    assert _offsets(lake / "messages") == list(range(50))


def test_bad_durations_and_missing_lakes_are_one_line(tmp_path: Path) -> None:
    bad = _lake("expire", "--lake", str(tmp_path), "--older-than", "ninety")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("mqttq: error: bad --older-than 'ninety'")
    missing = _lake("compact", "--lake", str(tmp_path / "nowhere"))
    assert missing.returncode == 1
    assert "is not a lake (no _lake.json)" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_compact_and_expire_leave_a_delta_lake_to_delta(tmp_path: Path) -> None:
    """Moving a Delta table's files behind its log would corrupt it: the file-moving
    compact and expire refuse a Delta lake in one line (`mqttq lake compact|expire` hand
    a Delta lake to Delta's own OPTIMIZE, DELETE and VACUUM instead: tests/lake/delta_run)."""
    lake = tmp_path / "d"
    write_lake_info(lake, LakeInfo(format="delta"))
    for attempt in (
        lambda: compact_lake(lake),
        lambda: expire_lake(lake, 90 * 86_400),
    ):
        with pytest.raises(LakeError) as refused:
            attempt()
        assert str(refused.value).startswith(f"{lake} is a Delta lake: ")


def test_run_refuses_a_lake_of_other_settings(tmp_path: Path) -> None:
    lake = _make_lake(tmp_path)
    hourly = _lake("run", "--lake", str(lake), "--bootstrap-servers", "127.0.0.1:1", "--hourly")
    assert hourly.returncode == 2
    assert "was created with partitioning ['tenant', 'date']" in hourly.stderr
    nokafka = _lake("run", "--lake", str(tmp_path / "n"))
    assert nokafka.returncode == 2
    assert "no Kafka to read" in nokafka.stderr


def test_files_of_a_batch_not_yet_committed_are_not_merged(tmp_path: Path) -> None:
    """A crashed batch's files stay files of their own: its rerun replaces them by name,
    which a merged file would not allow (its rows would then be there twice)."""
    lake = _make_lake(tmp_path)
    commits = lake / "_checkpoints" / "messages" / "commits"
    commits.mkdir(parents=True)
    (commits / "0").write_text("v1\n")
    (commits / "1").write_text("v1\n")  # batch 2 ran, was published, not committed
    done = _lake("compact", "--lake", str(lake), "--json")
    assert done.returncode == 0, done.stderr
    old = lake / "messages" / "tenant=a" / f"date={OLD}"
    assert sorted(p.name for p in old.iterdir()) == [
        "part-000000000002-00000.parquet",
        "part-compact-00000.parquet",
    ]
    assert _offsets(old) == list(range(30))


def test_run_says_when_kafka_does_not_answer(tmp_path: Path) -> None:
    """Spark's Kafka source would retry without end: run asks Kafka first, one line, exit 1."""
    done = _lake("run", "--lake", str(tmp_path / "l"), "--bootstrap-servers", "127.0.0.1:1")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mqttq: error: Kafka at 127.0.0.1:1 did not answer in 10 s (")
    assert last.endswith("check --bootstrap-servers or [kafka] bootstrap_servers")
