"""Writing lake rows with pyarrow (no Spark): the embedded `lake` sink, tests, benchmarks.

`write_rows` splits an Arrow table of message rows (the layout's schema, partition columns
included) by partition and writes one Parquet file per partition, atomically: the file is
written under a hidden name (`.<name>.tmp`, ignored by every Parquet reader) in its
partition folder, flushed to disk, then renamed to its final name. A reader sees a whole
file or none. Partition folder names are escaped as Spark escapes them (`%2F` for `/`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["escape_partition_value", "partition_folder", "write_file", "write_rows"]

_ESCAPED: Final = frozenset("\"#%'*/:=?\\\x7f{[]^")


def escape_partition_value(value: str) -> str:
    """`value` as a Hive partition folder names it (Spark's escaping: `%XX`)."""
    return (
        "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)
        or "__HIVE_DEFAULT_PARTITION__"
    )


def partition_folder(tenant: str, date: str, hour: int | None = None) -> Path:
    """`tenant=<tenant>/date=<date>[/hour=<hour>]`, relative to `DIR/messages`."""
    folder = Path(f"tenant={escape_partition_value(tenant)}") / f"date={date}"
    return folder if hour is None else folder / f"hour={hour}"


def write_file(table: pa.Table, path: Path, *, compression: str = "snappy") -> int:
    """Write `table` (columns only, no partition columns) as Parquet at `path` atomically
    and durably; returns the file's size in bytes."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        pq.write_table(table, handle, compression=compression)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return path.stat().st_size


def write_rows(messages: Path, rows: pa.Table, name: str, *, hourly: bool = False) -> list[Path]:
    """Write `rows` (the layout's message schema, partition columns included) under
    `messages` (`DIR/messages`), one file `<name>` per partition; the files written."""
    import pyarrow.compute as pc  # noqa: PLC0415

    keys = ["tenant", "date", "hour"] if hourly else ["tenant", "date"]
    written = []
    groups = rows.group_by(keys, use_threads=False).aggregate([]).to_pylist()
    for group in sorted(groups, key=lambda g: tuple(str(g[k]) for k in keys)):
        mask = None
        for key in keys:
            equal = pc.equal(rows[key], group[key])
            mask = equal if mask is None else pc.and_(mask, equal)
        part = rows.filter(mask).drop_columns(keys)
        folder = partition_folder(group["tenant"], group["date"], group.get("hour"))
        path = messages / folder / name
        write_file(part, path)
        written.append(path)
    return written
