"""`mqttq lake compact`: merge the small files of closed partitions, safe while `run` writes.

Each micro-batch adds a few files to each partition it touches; after a day at a 30 s
trigger a partition holds thousands. For every closed partition (`mqttq.lake.partitions`)
with more than one file, compact:

1. streams its files (pyarrow, batch by batch; bounded memory) into a hidden sibling
   folder `.<name>.compact-<pid>` (readers ignore `.` names), rows in file order;
2. under the lake lock (the one the stream's commits take): moves into the new folder any
   file the stream added since step 1 (a late record), then swaps the folders with two
   renames: the old one to `DIR/_trash/`, the new one into its place.

Files of a batch the stream's checkpoint has not marked committed are never merged: the
rerun of that batch after a crash deletes and replaces them by name (mqttq.lake.sink), so
they are carried over as files of their own.

A reader lists either the old files or the new ones, never both: no row is seen twice.
Between the two renames (microseconds) the partition is absent; a reader that listed the
old files before the swap still finds them under `_trash` for TRASH_KEEP seconds — it
reads them at their old path only on filesystems where an open file survives the rename
(local, HDFS); Spark's `spark.sql.files.ignoreMissingFiles` covers the rest.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqttq.lake.layout import CHECKPOINTS, MESSAGES, QUARANTINE, LakeError, read_lake_info
from mqttq.lake.partitions import Partition, empty_trash, now_utc, partitions, to_trash
from mqttq.lake.sink import lake_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["compact_lake", "compact_partition", "last_committed_batch", "settled"]

_BATCH_FILE: Final = re.compile(r"^part-(\d{12})-\d{5}\.parquet$")


def compact_lake(lake: Path, *, target_rows: int = 5_000_000) -> dict[str, Any]:
    """Compact every closed partition of `lake`'s messages and quarantine holding more than
    one file; returns `partitions`, `files_before`, `files_after`."""
    info = read_lake_info(lake)
    if info is None:
        raise LakeError(f"{lake} is not a lake (no _lake.json); check --lake")
    if info.format == "delta":
        raise LakeError(
            f"{lake} is a Delta lake: its files are Delta's to merge (OPTIMIZE through "
            "compact_delta, on Spark), not mqttq's"
        )
    now = now_utc()
    committed = last_committed_batch(lake)
    done = {"partitions": 0, "files_before": 0, "files_after": 0}
    for table in (lake / MESSAGES, lake / QUARANTINE):
        for partition in list(partitions(table)):
            files = [path for path in partition.files() if settled(path, committed)]
            if not partition.closed(now) or len(files) <= 1:
                continue
            after = compact_partition(lake, partition, files, target_rows=target_rows)
            done["partitions"] += 1
            done["files_before"] += len(files)
            done["files_after"] += after
    empty_trash(lake)
    return done


def compact_delta(spark: SparkSession, lake: Path) -> dict[str, int]:
    """`OPTIMIZE` the Delta tables of `lake` (messages, quarantine): one Delta commit each,
    safe while the stream appends (Delta's compaction does not conflict with blind
    appends; readers of an older version keep its files until VACUUM). Returns the files
    removed and added."""
    from mqttq.lake.query import DELTA_LOG  # noqa: PLC0415

    removed = added = 0
    for table in (lake / MESSAGES, lake / QUARANTINE):
        if not (table / DELTA_LOG).is_dir():
            continue
        path = str(table).replace("`", "``")
        for row in spark.sql(f"OPTIMIZE delta.`{path}`").collect():
            metrics = row["metrics"]
            removed += int(metrics["numFilesRemoved"])
            added += int(metrics["numFilesAdded"])
    return {"files_removed": removed, "files_added": added}


def last_committed_batch(lake: Path) -> int | None:
    """The last batch the stream's checkpoint marks committed; None without a checkpoint."""
    commits = lake / CHECKPOINTS / MESSAGES / "commits"
    if not commits.is_dir():
        return None
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    return max(ids, default=-1)


def settled(path: Path, committed: int | None) -> bool:
    """False for a file of a stream batch not committed yet: its rerun after a crash
    replaces it (mqttq.lake.sink), so it must stay a file of its own until then."""
    match = _BATCH_FILE.match(path.name)
    return match is None or committed is None or int(match.group(1)) <= committed


def compact_partition(
    lake: Path, partition: Partition, files: list[Path], *, target_rows: int
) -> int:
    """Rewrite `files` of `partition` as few files and swap them in (module docstring);
    returns the number of files the partition holds afterwards."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    folder = partition.path
    fresh = folder.with_name(f".{folder.name}.compact-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    schema = pa.unify_schemas([pq.read_schema(path) for path in files])
    dataset = ds.dataset([str(p) for p in files], schema=schema, format="parquet")
    written = 0
    writer: pq.ParquetWriter | None = None
    rows_in_file = 0
    try:
        for batch in dataset.to_batches():
            if writer is None or rows_in_file >= target_rows:
                if writer is not None:
                    writer.close()
                writer = pq.ParquetWriter(
                    fresh / f"part-compact-{written:05d}.parquet", schema, compression="snappy"
                )
                written += 1
                rows_in_file = 0
            writer.write_batch(batch)
            rows_in_file += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    with lake_lock(lake):
        merged = {p.name for p in files}
        late = [p for p in partition.files() if p.name not in merged]
        for path in late:
            os.replace(path, fresh / path.name)
        to_trash(lake, folder)
        os.replace(fresh, folder)
    return written + len(late)
