"""The partition folders of a lake table and when each one closes.

A partition `tenant=T/date=D[/hour=H]` (messages) or `date=D` (quarantine) is closed once
its whole day, or hour, lies before the current one in UTC: the stream no longer adds to it
except for records that reached the log late (those land as new files and are kept).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from mqttq.lake.layout import TRASH

__all__ = ["Partition", "empty_trash", "partitions", "to_trash"]

TRASH_KEEP: Final = 600.0
"""Seconds what compact or expire swapped out stays in `DIR/_trash` (readers that listed
those files before the swap can still finish)."""


class Partition:
    """One leaf partition folder: its path relative to the table, its time span."""

    def __init__(self, table: Path, relative: Path) -> None:
        self.table = table
        self.relative = relative
        values = dict(part.split("=", 1) for part in relative.parts if "=" in part)
        day = datetime.strptime(values["date"], "%Y-%m-%d").replace(tzinfo=UTC)
        if "hour" in values:
            self.start = day + timedelta(hours=int(values["hour"]))
            self.end = self.start + timedelta(hours=1)
        else:
            self.start, self.end = day, day + timedelta(days=1)

    @property
    def path(self) -> Path:
        """The folder."""
        return self.table / self.relative

    def files(self) -> list[Path]:
        """Its visible Parquet files, by name (= batch order)."""
        return sorted(
            p for p in self.path.iterdir() if p.suffix == ".parquet" and p.name[0] not in "._"
        )

    def closed(self, now: datetime) -> bool:
        """True once `now` is past its day (or hour)."""
        return self.end <= now


def partitions(table: Path) -> Iterator[Partition]:
    """Every leaf partition (a folder with a `date=` level and no sub-partition) of `table`."""
    if not table.is_dir():
        return
    for folder, dirs, _files in os.walk(table):
        dirs[:] = sorted(d for d in dirs if d[0] not in "._" and "=" in d)
        relative = Path(folder).relative_to(table)
        if not dirs and any(part.startswith("date=") for part in relative.parts):
            try:
                yield Partition(table, relative)
            except (ValueError, KeyError):
                continue  # a folder mqttq did not write: left alone


def to_trash(lake: Path, path: Path) -> Path:
    """Move `path` (inside `lake`) under `DIR/_trash/<now>/` keeping its relative path;
    one rename, so readers see it gone at once."""
    target = lake / TRASH / f"{time.time():.6f}" / path.relative_to(lake)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def empty_trash(lake: Path, keep: float = TRASH_KEEP) -> None:
    """Delete what went to the trash more than `keep` seconds ago."""
    trash = lake / TRASH
    if not trash.is_dir():
        return
    cutoff = time.time() - keep
    for entry in trash.iterdir():
        try:
            stamp = float(entry.name)
        except ValueError:
            continue
        if stamp < cutoff:
            shutil.rmtree(entry, ignore_errors=True)


def now_utc() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)
