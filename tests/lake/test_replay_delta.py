"""`mqttq lake replay` of a Delta lake (`--format delta`) reads the table's current snapshot:
after OPTIMIZE (compact) and DELETE (expire) the files they replaced stay on disk until
VACUUM, and a real subscriber still gets each current row once, in each publisher's order,
and none of the deleted ones. The tables are written by delta-rs (`deltalake`), no JVM;
without the `deltalake` package the replay of a Delta lake is one line, exit 1."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mqttq.lake.layout import (
    MESSAGES,
    PARTITIONS_DAILY,
    PARTITIONS_HOURLY,
    LakeInfo,
    arrow_message_schema,
    write_lake_info,
)
from mqttq.lake.replay import Selection
from mqttq.lake.window import parse_window
from tests.conftest import BrokerUnderTest
from tests.lake.lake_rows import Row, arrow_rows
from tests.lake.test_replay_lake import received_by_topic, replay, replayed, subscribed
from tests.lake.test_replay_pieces import fleet
from tests.services import free_port

WINDOW = ("2026-11-10T00:00:00Z", "2026-11-12T00:00:00Z")


def write_delta_lake(
    lake: Path, rows: list[Row], appends: int, configuration: dict[str, str | None] | None = None
) -> DeltaTable:
    """A daily Delta lake holding `rows`, written in `appends` commits (each of its own
    files in every partition), as `mqttq lake run --format delta` lays it out."""
    write_lake_info(lake, LakeInfo(PARTITIONS_DAILY, "delta"))
    table = str(lake / MESSAGES)
    for index in range(appends):
        write_deltalake(
            table,
            arrow_rows(rows[index::appends]),
            mode="append",
            partition_by=list(PARTITIONS_DAILY),
            configuration=configuration,
        )
    return DeltaTable(table)


def parquet_files(lake: Path) -> int:
    return sum(1 for _ in (lake / MESSAGES).rglob("*.parquet"))


def compacted_and_deleted(lake: Path) -> DeltaTable:
    """Two days of two publishers (96 rows) in 4 appends, then OPTIMIZE, then a DELETE of
    every fifth offset, none vacuumed: the replaced files are still on disk."""
    table = write_delta_lake(lake, fleet(days=2, per_hour=1), appends=4)
    assert table.optimize.compact()["numFilesRemoved"] == 8  # 4 appends x 2 days
    assert table.delete("kafka_offset % 5 = 0")["num_deleted_rows"] == 20  # 0, 5, ..., 45 x 2
    assert parquet_files(lake) > len(DeltaTable(str(lake / MESSAGES)).file_uris())
    return table


KEPT = [step for step in range(48) if step % 5]


def test_replay_of_a_delta_lake_sends_the_current_snapshot_once_in_order(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    compacted_and_deleted(lake)
    subscriber = subscribed(broker, "replay/#")
    summary = replayed(
        lake, broker, *WINDOW, "--prefix", "replay/", "--max-in-flight", "3", "--piece-rows", "10"
    )
    assert (summary["selected"], summary["published"], summary["refused"]) == (76, 76, 0)
    assert received_by_topic(subscriber, 76) == {
        "replay/sensors/a/t": [f"a{step}".encode() for step in KEPT],
        "replay/sensors/b/t": [f"b{step}".encode() for step in KEPT],
    }
    subscriber.disconnect()


def test_a_delta_partition_deleted_as_expire_does_is_not_replayed(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    # expire_delta's DELETE of whole partitions: the files stay until VACUUM.
    lake = tmp_path / "lake"
    table = write_delta_lake(lake, fleet(days=2, per_hour=1), appends=2)
    table.delete("date < '2026-11-11'")
    assert (lake / MESSAGES / "tenant=acme" / "date=2026-11-10").is_dir()
    subscriber = subscribed(broker, "sensors/#")
    summary = replayed(lake, broker, *WINDOW, "--filter", "sensors/a/#")
    assert (summary["selected"], summary["published"]) == (24, 24)
    assert received_by_topic(subscriber, 24) == {
        "sensors/a/t": [f"a{step}".encode() for step in range(24, 48)]
    }
    subscriber.disconnect()


def test_an_hourly_delta_lake_is_read_hour_by_hour_without_the_deleted_hours(
    tmp_path: Path,
) -> None:
    # As expire_delta deletes an hourly lake's ended hours: `hour` is an int partition.
    lake = tmp_path / "lake"
    rows = fleet(days=1, per_hour=2)
    daily = arrow_rows(rows)
    hours = pa.array([row.created_at.hour for row in rows], pa.int32())
    table = daily.add_column(2, "hour", hours).cast(arrow_message_schema(hourly=True))
    write_lake_info(lake, LakeInfo(PARTITIONS_HOURLY, "delta"))
    for half in (table.slice(0, 48), table.slice(48)):
        write_deltalake(
            str(lake / MESSAGES), half, mode="append", partition_by=list(PARTITIONS_HOURLY)
        )
    DeltaTable(str(lake / MESSAGES)).delete("date = '2026-11-10' and hour < 20")
    selection = Selection(lake, parse_window(*WINDOW), "sensors/a/#", piece_rows=100)
    assert [(piece.date, piece.hour) for piece in selection.partitions()] == [
        ("2026-11-10", hour) for hour in range(20, 24)
    ]
    assert selection.count() == 8
    pieces = list(selection.pieces())
    assert [piece.num_rows for piece in pieces] == [2, 2, 2, 2]
    assert [p for piece in pieces for p in piece["payload"].to_pylist()] == [
        f"a{step}".encode() for step in range(40, 48)
    ]


def allowing_deletion_vectors(lake: Path, appends: int) -> None:
    """A one-day Delta lake (48 rows) whose table has `delta.enableDeletionVectors`."""
    dv = {"delta.enableDeletionVectors": "true"}
    write_delta_lake(lake, fleet(days=1, per_hour=1), appends, configuration=dv)


def test_selection_of_a_delta_lake_with_deletion_vectors_enabled_but_none_written(
    tmp_path: Path,
) -> None:
    # A table that allows deletion vectors (protocol 3/7) is read while no file carries one.
    lake = tmp_path / "lake"
    allowing_deletion_vectors(lake, appends=2)
    assert "deletionVectors" in (DeltaTable(str(lake / MESSAGES)).protocol().reader_features or [])
    selection = Selection(lake, parse_window(*WINDOW), "#", piece_rows=10)
    assert selection.count() == 48
    pieces = list(selection.pieces())
    assert sum(piece.num_rows for piece in pieces) == 48
    payloads = [p for piece in pieces for p in piece["payload"].to_pylist() if p[:1] == b"a"]
    assert payloads == [f"a{step}".encode() for step in range(24)]


Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """ZeroMQ's Base85 (Delta's encoding of an inline deletion vector); len(data) % 4 == 0."""
    text: list[str] = []
    for (word,) in struct.iter_unpack(">I", data):
        text.extend(Z85[word // 85**power % 85] for power in range(4, -1, -1))
    return "".join(text)


def deletion_vector(rows: list[int]) -> bytes:
    """Delta's serialized deletion vector of `rows` (< 65536): the magic number, then a
    64-bit Roaring bitmap in the portable format (one 32-bit bitmap, one array container)."""
    values = sorted(rows)
    header = struct.pack(
        "<IIHHI", 12346, 1, 0, len(values) - 1, 16
    )  # cookie, 1, key, card-1, offset
    bitmap = header + struct.pack(f"<{len(values)}H", *values)
    return struct.pack("<iQI", 1681511377, 1, 0) + bitmap


def delete_with_a_deletion_vector(table: Path, rows: list[int]) -> None:
    """Commit what Spark's DELETE writes on a table with deletion vectors enabled: the first
    file again, with an inline deletion vector marking `rows` deleted (delta-rs writes none)."""
    log = table / "_delta_log"
    commits = sorted(log.glob("*.json"))
    actions = [json.loads(line) for line in commits[0].read_text().splitlines()]
    add = next(action["add"] for action in actions if "add" in action)
    blob = deletion_vector(rows)
    remove = {
        "path": add["path"],
        "deletionTimestamp": int(time.time() * 1000),
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add["partitionValues"],
        "size": add["size"],
    }
    vector = {
        "storageType": "i",
        "pathOrInlineDv": z85(blob),
        "sizeInBytes": len(blob),
        "cardinality": len(rows),
    }
    marked = dict(add, deletionVector=vector)
    (log / f"{len(commits):020d}.json").write_text(
        json.dumps({"remove": remove}) + "\n" + json.dumps({"add": marked}) + "\n"
    )


def test_a_delta_lake_with_deletion_vectors_is_refused_in_one_line(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    allowing_deletion_vectors(lake, appends=1)
    table = lake / MESSAGES
    delete_with_a_deletion_vector(table, [0, 2])
    # delta-rs itself sees the two rows gone: the vector is what Spark would have written.
    assert DeltaTable(str(table)).scan().read_all().num_rows == 46
    refused = replay(lake, free_port(), "--json")
    assert refused.exit_code == 1
    (line,) = refused.stderr.strip().splitlines()
    assert line == (
        f"mqttq: error: the Delta table {table} has deletion vectors (1 files), which replay "
        f"cannot apply; rewrite those files first (on Spark: REORG TABLE delta.`{table}` "
        "APPLY (PURGE)), then replay again"
    )


def test_an_empty_delta_lake_replays_nothing(broker: BrokerUnderTest, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake_info(lake, LakeInfo(PARTITIONS_DAILY, "delta"))
    (lake / MESSAGES).mkdir()  # the stream has not committed yet
    summary = replayed(lake, broker, *WINDOW)
    assert (summary["selected"], summary["published"]) == (0, 0)


DRIVER = """
import sys
sys.modules["deltalake"] = None  # as if the package were not installed
from mqttq.cli import main
sys.argv = ["mqttq", "lake", "replay", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_replay_without_the_deltalake_package(tmp_path: Path, fmt: str) -> None:
    lake = tmp_path / "lake"
    write_delta_lake(lake, fleet(days=1, per_hour=1), appends=1)
    write_lake_info(lake, LakeInfo(PARTITIONS_DAILY, fmt))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "--lake", str(lake), "--since", WINDOW[0],
         "--until", WINDOW[1], "--port", str(free_port()), "--json"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("mqttq: error:")]
    if fmt == "delta":
        assert line == (
            f"mqttq: error: {lake} is a Delta lake and replaying it needs the deltalake "
            "package (delta-rs), which is not installed; install it: pip install 'deltalake>=1.6'"
        )
    else:
        # A Parquet lake never needs it: the replay gets as far as the broker.
        assert line.startswith("mqttq: error: replay to 127.0.0.1:")
