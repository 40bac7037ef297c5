"""Publishing one micro-batch into the lake, exactly once across restarts.

Structured Streaming writes a batch's Kafka offsets to its checkpoint's offset log before
the batch runs, and marks it committed only after the sink returns: a driver killed in
between runs the SAME batch (same id, same offsets, so the same rows) again at restart.
The sink makes that rerun harmless:

1. Spark writes the batch's Parquet under `DIR/_staging/<batch>/` (cleared first): nothing
   a reader lists (`_` names are hidden from every Parquet reader).
2. Under the lake lock, each staged file is renamed into its partition as
   `part-<batch:012d>-<n:05d>.parquet`, after deleting any `part-<batch>-*` an earlier,
   interrupted attempt of the same batch left there. A reader may miss a batch for that
   instant, never sees one twice; renames within one filesystem are atomic.

The lock (`DIR/_lake.lock`, flock) is what `compact` and `expire` take around their swaps,
so a batch never lands in a partition folder being swapped away.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ["LOCK_FILE", "STAGING", "batch_prefix", "lake_lock", "publish_staged"]

STAGING: Final = "_staging"
LOCK_FILE: Final = "_lake.lock"


def batch_prefix(batch_id: int) -> str:
    """The name every file of batch `batch_id` starts with in a partition."""
    return f"part-{batch_id:012d}-"


@contextmanager
def lake_lock(lake: Path) -> Iterator[None]:
    """Hold the lake's exclusive lock (a flock on `DIR/_lake.lock`; local filesystems)."""
    lake.mkdir(parents=True, exist_ok=True)
    fd = os.open(lake / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def staged_partitions(staged: Path) -> Iterator[tuple[Path, list[Path]]]:
    """(partition folder relative to `staged`, its Parquet files sorted) for every folder
    under `staged` holding Parquet files."""
    if not staged.is_dir():
        return
    for folder, _dirs, files in sorted(os.walk(staged)):
        parquet = sorted(name for name in files if name.endswith(".parquet"))
        if parquet and not any(
            part.startswith(("_", ".")) for part in Path(folder).relative_to(staged).parts
        ):
            yield Path(folder).relative_to(staged), [Path(folder) / name for name in parquet]


def publish_staged(staged: Path, table: Path, batch_id: int) -> int:
    """Move the files Spark staged for `batch_id` under `staged` into `table`'s partitions
    (call under `lake_lock`); returns the number of files published. Idempotent for a
    rerun of the same batch (see the module docstring)."""
    prefix = batch_prefix(batch_id)
    moved = 0
    for relative, files in staged_partitions(staged):
        target = table / relative
        target.mkdir(parents=True, exist_ok=True)
        for old in target.glob(f"{prefix}*"):
            old.unlink()
        for index, source in enumerate(files):
            os.replace(source, target / f"{prefix}{index:05d}.parquet")
            moved += 1
    return moved


def clear(path: Path) -> None:
    """Remove `path` (a staging folder) if it exists."""
    shutil.rmtree(path, ignore_errors=True)
