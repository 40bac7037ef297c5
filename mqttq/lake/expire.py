"""`mqttq lake expire --older-than 90d`: delete whole partitions past the retention.

A partition goes when its whole day (or hour) ended more than `--older-than` ago: under the
lake lock, its folder is renamed into `DIR/_trash/` (readers see it gone at once, never
half-deleted), then the trash older than TRASH_KEEP is emptied. Tenant folders left empty
are removed. The stream only writes partitions of recent times, so it is never in the way.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from mqttq.lake.layout import MESSAGES, QUARANTINE, LakeError, read_lake_info
from mqttq.lake.partitions import empty_trash, now_utc, partitions, to_trash
from mqttq.lake.sink import lake_lock

__all__ = ["expire_lake"]


def expire_lake(lake: Path, older_than: float, *, dry_run: bool = False) -> list[str]:
    """Delete (or with `dry_run` only list) the partitions of `lake` that ended more than
    `older_than` seconds ago; returns their paths relative to `lake`."""
    if read_lake_info(lake) is None:
        raise LakeError(f"{lake} is not a lake (no _lake.json); check --lake")
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
