"""`mqttq lake expire --older-than 90d`: delete whole partitions past the retention.

A partition goes when its whole day (or hour) ended more than `--older-than` ago: under the
lake lock, its folder is renamed into `DIR/_trash/` (readers see it gone at once, never
half-deleted), then the trash older than TRASH_KEEP is emptied. Tenant folders left empty
are removed. The stream only writes partitions of recent times, so it is never in the way.

A Delta lake (`--format delta`) is expired on Spark by `expire_delta`: a Delta DELETE of the
same partitions (a metadata-only commit: whole partitions), then VACUUM with Delta's default
retention (7 days), so a reader of an older version is never left without its files.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from mqttq.lake.layout import MESSAGES, QUARANTINE, LakeError, read_lake_info
from mqttq.lake.partitions import empty_trash, now_utc, partitions, to_trash
from mqttq.lake.sink import lake_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["expire_delta", "expire_lake"]


def expire_lake(lake: Path, older_than: float, *, dry_run: bool = False) -> list[str]:
    """Delete (or with `dry_run` only list) the partitions of `lake` that ended more than
    `older_than` seconds ago; returns their paths relative to `lake`."""
    info = read_lake_info(lake)
    if info is None:
        raise LakeError(f"{lake} is not a lake (no _lake.json); check --lake")
    if info.format == "delta":
        raise LakeError(
            f"{lake} is a Delta lake: its partitions go by a Delta DELETE (expire_delta, on "
            "Spark), not by moving folders"
        )
    cutoff = now_utc() - timedelta(seconds=older_than)
    removed: list[str] = []
    for table in (lake / MESSAGES, lake / QUARANTINE):
        for partition in list(partitions(table)):
            if partition.end > cutoff:
                continue
            removed.append(str(partition.path.relative_to(lake)))
            if dry_run:
                continue
            with lake_lock(lake):
                to_trash(lake, partition.path)
            parent = partition.path.parent
            while parent != table and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    if not dry_run:
        empty_trash(lake)
    return removed


def expire_delta(
    spark: SparkSession, lake: Path, older_than: float, *, now: datetime | None = None
) -> int:
    """Delete from the Delta tables of `lake` the rows of every partition that ended more
    than `older_than` seconds before `now` (default: the current time), then VACUUM them
    (default retention). Returns the rows deleted."""
    from mqttq.lake.query import DELTA_LOG  # noqa: PLC0415

    info = read_lake_info(lake)
    if info is None or info.format != "delta":
        raise LakeError(f"{lake} is not a Delta lake (see _lake.json); check --lake")
    cutoff = (now or now_utc()) - timedelta(seconds=older_than)
    # A partition ended by the cutoff iff it starts before the cutoff's day (or hour).
    day = cutoff.strftime("%Y-%m-%d")
    ended = f"date < '{day}'"
    deleted = 0
    for table in (lake / MESSAGES, lake / QUARANTINE):
        if not (table / DELTA_LOG).is_dir():
            continue
        where = ended
        if info.hourly and table.name == MESSAGES:
            where = f"({ended} or (date = '{day}' and hour < {cutoff.hour}))"
        path = str(table).replace("`", "``")
        expired = spark.read.format("delta").load(str(table)).where(where).count()
        if not expired:
            continue  # no commit, no VACUUM for nothing
        deleted += expired
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {where}")
        spark.sql(f"VACUUM delta.`{path}`")
    return deleted
