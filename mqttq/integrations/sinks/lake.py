"""The `lake` sink: embedded mode's data lake (issue 36), the layout `mqttq lake run` writes
from the Kafka log (mqttq/lake/layout.py), written by the broker itself with pyarrow.

Durable first, then batched into files of a reasonable size:

1. `send` appends the batch's rows to the open segment, an Arrow IPC stream under
   `DIR/_embedded/<name>/segment-<n>.arrows`, and returns only once that append is on disk
   (flush + fsync): what the sink acknowledged survives a crash.
2. The segment rolls (into Parquet, one file per partition, `part-emb-<name>-<n>.parquet`)
   when it holds `roll_rows` rows or `roll_bytes` payload bytes, when its first row is
   `roll_seconds` old (a timer checks every second), and at `close`. Each Parquet file is
   written under a hidden name and renamed (mqttq.lake.arrow_files), under the lake's lock
   (compact and expire take it too); the segment is deleted after the renames.
3. `open` rolls what a crash left: the segments' whole batches (a batch cut short by the
   crash was never acknowledged and is dropped). Rolling again the same segment writes the
   same file names, so a crash between the renames and the deletion is harmless.

A delivery made again (`Delivery.seq`) is written once when its first copy is in the open
segment, the one before it, or a segment a crash left (segments keep each row's seq in a
`_seq` column, dropped from the Parquet files); beyond that the sink is at least once, as
every sink is.

Rows get `kafka_partition` -1 and `kafka_offset` from a per-lake sequence: blocks of
`SEQUENCE_BLOCK` reserved in `DIR/_embedded/sequence.json` under the lake lock, so two
sinks writing one lake never share an offset. All file work runs on one thread of the sink
(`asyncio` never waits on the disk).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected, SinkUnavailable

if TYPE_CHECKING:
    import pyarrow as pa

    from mqttq.lake.layout import LakeInfo

__all__ = ["LakeSink", "LakeSinkSettings"]

SEQUENCE_BLOCK: Final = 100_000
SEQUENCE_FILE: Final = "sequence.json"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class LakeSinkSettings:
    """The `lake` sink's own keys of an `[[integration]]` table, checked."""

    KEYS: ClassVar[frozenset[str]] = frozenset(
        {"path", "hourly", "roll_seconds", "roll_rows", "roll_bytes"}
    )

    path: str
    hourly: bool = False
    """Partitions down to the hour (when the lake is created; an existing lake keeps its own)."""
    roll_seconds: int = 60
    roll_rows: int = 100_000
    roll_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> LakeSinkSettings:
        """Read and check the lake keys of `table`; ConfigError names `<where>.<key>`."""
        path = table.get("path")
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{where}.path", "the lake directory is required (a string)")
        hourly = table.get("hourly", False)
        if not isinstance(hourly, bool):
            raise ConfigError(f"{where}.hourly", f"must be true or false, got {hourly!r}")
        return cls(
            path=path,
            hourly=hourly,
            roll_seconds=_int(table, "roll_seconds", where, 60, (1, 86_400)),
            roll_rows=_int(table, "roll_rows", where, 100_000, (1, 100_000_000)),
            roll_bytes=_int(table, "roll_bytes", where, 64 * 1024 * 1024, (1024, 2**40)),
        )

    def public(self) -> dict[str, Any]:
        """The settings as the admin API shows them."""
        return {
            "path": self.path,
            "hourly": self.hourly,
            "roll_seconds": self.roll_seconds,
            "roll_rows": self.roll_rows,
            "roll_bytes": self.roll_bytes,
        }


def _int(
    table: Mapping[str, Any], key: str, where: str, default: int, bounds: tuple[int, int]
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key}", f"must be an integer, got {value!r}")
    low, high = bounds
    if not low <= value <= high:
        raise ConfigError(f"{where}.{key}", f"must be between {low} and {high}, got {value}")
    return value


def _micros(timestamp_ms: int) -> int:
    return timestamp_ms * 1000


def rows_of(batch: Sequence[Delivery], first_offset: int, hourly: bool) -> pa.Table:
    """`batch` as lake rows (the layout's schema, partition columns included)."""
    import pyarrow as pa  # noqa: PLC0415

    from mqttq.lake.layout import arrow_message_schema  # noqa: PLC0415

    created = [_EPOCH + timedelta(milliseconds=d.timestamp_ms) for d in batch]
    columns: dict[str, list[Any]] = {
        "tenant": [d.tenant for d in batch],
        "date": [c.strftime("%Y-%m-%d") for c in created],
    }
    if hourly:
        columns["hour"] = [c.hour for c in created]
    columns.update(
        {
            "topic": [d.topic for d in batch],
            "topic_levels": [d.topic.split("/") for d in batch],
            "client_id": [d.client_id for d in batch],
            "qos": [d.qos for d in batch],
            "retain": [d.retain for d in batch],
            "created_at": created,
            "expires_at": [
                c + timedelta(seconds=d.message_expiry_interval)
                if d.message_expiry_interval is not None
                else None
                for c, d in zip(created, batch, strict=True)
            ],
            "content_type": [d.content_type for d in batch],
            "response_topic": [d.response_topic for d in batch],
            "correlation_data": [d.correlation_data for d in batch],
            "payload_format": [None] * len(batch),
            "user_properties": [
                [{"key": k, "value": v} for k, v in d.user_properties] for d in batch
            ],
            "payload": [d.payload for d in batch],
            "payload_text": [d.payload_text() for d in batch],
            "kafka_partition": [-1] * len(batch),
            "kafka_offset": list(range(first_offset, first_offset + len(batch))),
        }
    )
    columns["_seq"] = [d.seq for d in batch]
    schema = arrow_message_schema(hourly).append(pa.field("_seq", pa.int64(), False))
    return pa.Table.from_pydict(columns, schema=schema)


class _Segment:
    """The open segment: an Arrow IPC stream appended batch by batch, each append synced."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        import pyarrow as pa  # noqa: PLC0415

        self.path = path
        self.rows = 0
        self.bytes = 0
        self.started = time.monotonic()
        self._file = open(path, "wb")  # noqa: SIM115 (closed by close())
        self._writer = pa.ipc.new_stream(self._file, schema)

    def append(self, table: pa.Table, payload_bytes: int) -> None:
        self._writer.write_table(table)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.rows += table.num_rows
        self.bytes += payload_bytes

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
        self._file.close()


def read_segment(path: Path) -> pa.Table | None:
    """The whole batches of a segment (a batch cut short by a crash is left out)."""
    import pyarrow as pa  # noqa: PLC0415

    batches = []
    schema = None
    try:
        with pa.ipc.open_stream(pa.OSFile(str(path), "rb")) as reader:
            schema = reader.schema
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except (pa.ArrowInvalid, OSError):
        pass  # truncated: what was read before is whole
    if schema is None:
        return None
    return pa.Table.from_batches(batches, schema=schema)


class LakeSink:
    """Writes deliveries into a lake directory (see the module docstring)."""

    def __init__(self, settings: LakeSinkSettings, name: str, *, where: str = "") -> None:
        self.settings = settings
        self.name = name
        self.where = where or f"integration[{name}]"
        self.lake = Path(settings.path)
        self.state = self.lake / "_embedded" / name
        self._executor: ThreadPoolExecutor | None = None
        self._info: LakeInfo | None = None
        self._segment: _Segment | None = None
        self._next_segment = 0
        self._next_offset = 0
        self._offset_end = 0
        self._timer: asyncio.Task[None] | None = None
        self._files = 0
        self._rows = 0
        self._seen: set[int] = set()
        """Seqs in the open segment; `_seen_before`: in the one before it."""
        self._seen_before: set[int] = set()

    def statistics(self) -> dict[str, int]:
        """`files` written, `rows` written into them, `pending` rows in the open segment."""
        pending = self._segment.rows if self._segment is not None else 0
        return {"files": self._files, "rows": self._rows, "pending": pending}

    async def _run(self, function: Any, *args: Any) -> Any:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"lake-{self.name}")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)
        except OSError as exc:
            raise SinkUnavailable(f"{self.lake}: {exc.strerror or exc}") from None

    async def open(self) -> None:
        """Create the lake (or check the one there), roll what a crash left, start the
        roll timer. A directory that cannot be written is `SinkUnavailable`."""
        if self._info is None:
            await self._run(self._open_files)
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(self._roll_on_time())

    def _open_files(self) -> None:
        from mqttq.lake.layout import (  # noqa: PLC0415
            PARTITIONS_DAILY,
            PARTITIONS_HOURLY,
            LakeError,
            LakeInfo,
            read_lake_info,
            write_lake_info,
        )

        try:
            info = read_lake_info(self.lake)
        except LakeError as exc:
            raise SinkUnavailable(str(exc)) from None
        if info is None:
            wanted = PARTITIONS_HOURLY if self.settings.hourly else PARTITIONS_DAILY
            info = LakeInfo(partitioning=wanted)
            write_lake_info(self.lake, info)
        if info.format != "parquet":
            raise SinkUnavailable(
                f"{self.lake} is a {info.format} lake: the lake sink writes parquet"
            )
        self.state.mkdir(parents=True, exist_ok=True)
        self._info = info
        leftovers = sorted(self.state.glob("segment-*.arrows"))
        for path in leftovers:
            table = read_segment(path)
            if table is not None and "_seq" in table.column_names:
                self._seen_before.update(table["_seq"].to_pylist())
            self._publish(path)
        numbers = [int(p.stem.split("-")[1]) for p in leftovers]
        self._next_segment = max(numbers, default=self._read_last_segment()) + 1

    def _read_last_segment(self) -> int:
        try:
            return int(json.loads((self.state / "state.json").read_text())["last_segment"])
        except (OSError, ValueError, KeyError):
            return -1

    def _reserve_offsets(self, count: int) -> None:
        from mqttq.lake.sink import lake_lock  # noqa: PLC0415

        if self._next_offset + count <= self._offset_end:
            return
        block = max(SEQUENCE_BLOCK, count)
        path = self.lake / "_embedded" / SEQUENCE_FILE
        with lake_lock(self.lake):
            try:
                start = int(json.loads(path.read_text())["next"])
            except (OSError, ValueError, KeyError):
                start = 0
            _write_json(path, {"next": start + block})
        self._next_offset, self._offset_end = start, start + block

    def _append(self, batch: Sequence[Delivery]) -> None:
        info = self._info
        assert info is not None
        seen, before = self._seen, self._seen_before
        batch = [d for d in batch if not d.seq or (d.seq not in seen and d.seq not in before)]
        if not batch:
            return
        seen.update(d.seq for d in batch if d.seq)
        self._reserve_offsets(len(batch))
        table = rows_of(batch, self._next_offset, info.hourly)
        self._next_offset += len(batch)
        if self._segment is None:
            number = self._next_segment
            self._next_segment += 1
            _write_json(self.state / "state.json", {"last_segment": number})
            self._segment = _Segment(self.state / f"segment-{number:012d}.arrows", table.schema)
        self._segment.append(table, sum(len(d.payload) for d in batch))
        settings = self.settings
        if self._segment.rows >= settings.roll_rows or self._segment.bytes >= settings.roll_bytes:
            self._roll()

    def _roll(self) -> None:
        segment, self._segment = self._segment, None
        if segment is None:
            return
        self._seen_before, self._seen = self._seen, set()
        segment.close()
        self._publish(segment.path)

    def _roll_if_old(self) -> None:
        segment = self._segment
        if segment is not None and time.monotonic() - segment.started >= self.settings.roll_seconds:
            self._roll()

    def _publish(self, path: Path) -> None:
        from mqttq.lake.arrow_files import write_rows  # noqa: PLC0415
        from mqttq.lake.layout import MESSAGES  # noqa: PLC0415
        from mqttq.lake.sink import lake_lock  # noqa: PLC0415

        info = self._info
        assert info is not None
        table = read_segment(path)
        if table is not None and "_seq" in table.column_names:
            table = table.drop_columns(["_seq"])
        if table is not None and table.num_rows:
            name = f"part-emb-{self.name}-{path.stem.split('-')[1]}.parquet"
            with lake_lock(self.lake):
                written = write_rows(self.lake / MESSAGES, table, name, hourly=info.hourly)
            self._files += len(written)
            self._rows += table.num_rows
        path.unlink()

    async def _roll_on_time(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, float(self.settings.roll_seconds)))
            with contextlib.suppress(SinkUnavailable):
                await self._run(self._roll_if_old)

    async def send(self, batch: Sequence[Delivery]) -> Sequence[Rejected]:
        """Append `batch` to the open segment, durably; nothing is ever refused."""
        await self.open()
        if batch:
            await self._run(self._append, list(batch))
        return []

    async def probe(self, sample: Delivery) -> str:
        """Check that the lake can be written (the sample is not written)."""
        await self.open()
        probe = self.state / ".probe"
        await self._run(probe.write_bytes, sample.payload)
        await self._run(probe.unlink)
        return f"{self.lake} is writable ({self._files} files written by this sink)"

    async def close(self) -> None:
        """Roll the open segment into the lake and stop; idempotent."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        if self._executor is not None:
            with contextlib.suppress(SinkUnavailable):
                await self._run(self._roll)
            self._executor.shutdown(wait=True)
            self._executor = None


def _write_json(path: Path, document: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
