"""`IntegrationLog`: an integration's backlog in embedded mode, an append-only log on disk.

The broker appends each message routed to the integration (`append`, from routing: no
per-message I/O); the messages appended in one loop iteration are written with one
`write()` and made durable with one `fsync` on a worker thread (group commit: while one
runs, the next iteration's writes gather for the next). The future `append` returns settles
once that fsync returned, and the publisher's PUBACK waits for it, as it waits for a
persistent session's queue entry: the same durability as the SQLite store
(synchronous=FULL: on disk when acknowledged, so it survives `kill -9` and a power loss).

Layout under the integration's directory (`DATA/integrations/<name>/`):

- segments `<20-digit base position>.seg`, each holding framed records (`log_records`);
  a position is a byte offset across the whole log. A segment is rolled once it passes
  `segment_bytes`, and deleted once the consumer committed past its end.
- `position`: the consumer's committed position, written after the sink accepted a batch
  into the older of two slots (each 8 bytes and their CRC-32, written in place with one
  `pwrite`: a write cut short spoils only its slot, and the other still holds the commit
  before it; no rename, which cost a twentieth of the broker's core at 80,000 messages a
  second). At open, delivery resumes at the newer whole slot: what was sent after it is
  sent again (at least once; at most one batch, two if that slot was torn).

At open a torn record at the end of the last segment (a write cut by `kill -9`) is cut off.
What the consumer has not committed is bounded by `max_bytes`: a message that would pass it
is not written and counted in `dropped` (never silently).

The newest durable records stay in memory (`recent`, up to `memory_bytes`) so that a worker
that keeps up takes them without reading the file; one that fell behind reads the file (and
while it is further behind than memory holds, memory keeps nothing for it).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import os
import shutil
import struct
import zlib
from collections import deque
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from mqttq.errors import StorageError
from mqttq.integrations.log_records import (
    HEADER_SIZE,
    PIECES,
    RecordWriter,
    decode_body,
    record_size,
    scan,
)
from mqttq.model import Message

__all__ = ["IntegrationLog", "LogRecord"]

log = logging.getLogger(__name__)

SEGMENT_SUFFIX: Final = ".seg"
POSITION_FILE: Final = "position"
_POSITION: Final = struct.Struct(">QI")
READ_BYTES: Final = 1 << 20
"""At most this much is read from a segment at a time."""
SYNC_SPACING: Final = 0.002
"""At most one fsync starts in this many seconds: under load the writes of the iterations
in between share it. An fsync costs this machine about 0.1 ms of CPU (and 0.8 ms of wall
time) however little it syncs; back to back, at 80,000 messages a second, they took a
tenth of the broker's core. A PUBACK waits up to this much longer; a message alone waits
for nothing (the spacing counts from the last fsync's start)."""
RECORD_MEMORY: Final = 400
"""What a record held in memory costs beyond its encoded size (its Message, Properties,
topic and tuple), counted against `memory_bytes`."""

LogRecord = tuple[int, int, Message]
"""A record as the consumer sees it: (start, end, message); `start` is its position."""


class IntegrationLog:
    """One integration's log (see the module docstring). `open()` before use; one consumer."""

    def __init__(
        self,
        directory: Path,
        tenant: str,
        *,
        segment_bytes: int = 64 << 20,
        max_bytes: int = 1 << 30,
        memory_bytes: int = 16 << 20,
        sync_spacing: float = SYNC_SPACING,
    ) -> None:
        self.directory = directory
        self.tenant = tenant
        """The tenant written into each record (the integration's)."""
        self._writer = RecordWriter(tenant)
        self.segment_bytes = segment_bytes
        self.max_bytes = max_bytes
        self.memory_bytes = memory_bytes
        self.committed = 0
        """The consumer's committed position: everything before it was delivered."""
        self.end = 0
        """Where the next record is written."""
        self.durable = 0
        """Everything before this position is written and synced: the consumer may read it."""
        self.records = 0
        """Records durable and not committed (the lag)."""
        self.dropped = 0
        """Messages not written because the backlog was full, found unreadable, or expired
        before their turn (counted by the consumer)."""
        self.recent: deque[LogRecord] = deque()
        """The newest durable records, oldest first, contiguous (`memory_bytes` at most)."""
        self._recent_bytes = 0
        """The records in `recent`: their encoded size plus `RECORD_MEMORY` each."""
        self._reader_at = 0
        """Where the consumer last took from (`forget_recent`)."""
        self._unsynced_bytes = 0
        self._position_path = str(directory / POSITION_FILE)
        self._position_fd = -1
        self._position_slot = 0
        """The slot the next commit writes: the older one."""
        self.grown = asyncio.Event()
        """Set when records became durable (the consumer clears it before it waits)."""
        self._bases: list[int] = []
        self._fd = -1
        self._segment_size = 0
        self._pending: list[Message] = []
        self._written: asyncio.Future[None] | None = None
        self._synced: list[asyncio.Future[None]] = []
        """Futures of writes made while an fsync ran: settled by the next one."""
        self._unsynced: list[LogRecord] = []
        self._rolled: list[int] = []
        """File descriptors of segments rolled since the last fsync (synced, then closed)."""
        self._syncing = False
        self.sync_spacing = sync_spacing
        """Seconds from one fsync's start to the next's, at least (`SYNC_SPACING`)."""
        self._sync_started = -1.0
        self._sync_timer: asyncio.TimerHandle | None = None
        self._held = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ open, close

    def open(self) -> None:
        """Read the position and the segments: cut a torn tail, count the backlog, delete
        segments wholly consumed."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.committed = self._read_position()
        self._bases = sorted(
            int(p.name[: -len(SEGMENT_SUFFIX)])
            for p in self.directory.iterdir()
            if p.name.endswith(SEGMENT_SUFFIX) and p.name[: -len(SEGMENT_SUFFIX)].isdigit()
        )
        if not self._bases:
            self._bases = [self.committed]
            self._segment_path(self.committed).touch()
        last = self._bases[-1]
        path = self._segment_path(last)
        _, whole_end = scan(path.read_bytes(), last)
        if whole_end - last < path.stat().st_size:
            log.warning(
                "integration log %s: cut a torn record at %d (a write cut short)",
                self.directory,
                whole_end,
            )
            os.truncate(path, whole_end - last)
        self.end = self.durable = whole_end
        if not self._bases[0] <= self.committed <= self.end:
            log.warning(
                "integration log %s: committed position %d outside the log [%d, %d]",
                self.directory,
                self.committed,
                self._bases[0],
                self.end,
            )
            self.committed = min(max(self.committed, self._bases[0]), self.end)
        self.records = self._count(self.committed)
        self._delete_consumed()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._segment_size = whole_end - last

    def _count(self, start: int) -> int:
        count = 0
        position = start
        while position < self.end:
            records, position = self.read(position, READ_BYTES, decode=False)
            count += len(records)
        return count

    async def close(self) -> None:
        """Write and sync what was appended, then close the files."""
        if self._pending and not self._held:
            self._flush()
        while self._syncing or self._synced:  # what waits for its spacing syncs now
            if not self._syncing:
                self._sync()
            await asyncio.sleep(0.001)
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        for fd in (self._fd, self._position_fd, *self._rolled):
            if fd >= 0:
                os.close(fd)
        self._fd = self._position_fd = -1
        self._rolled = []

    async def destroy(self) -> None:
        """Close and delete the log and its directory (the integration was removed)."""
        await self.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ appending

    def append(self, message: Message) -> asyncio.Future[None]:
        """Append `message` with this loop iteration's other messages; the future settles
        once they are durable (fails with the error when the write failed)."""
        self._pending.append(message)
        written = self._written
        if written is None:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            written = self._written = loop.create_future()
            if not self._held:
                loop.call_soon(self._flush)
        return written

    def hold(self) -> None:
        """Keep appended messages in memory, unwritten, until `put_first` (an upgrade)."""
        self._held = True

    async def put_first(self, messages: Sequence[Message]) -> None:
        """Write `messages` before those held since `hold()`, end the hold, and return once
        they are durable."""
        self._held = False
        self._pending[0:0] = messages
        if not self._pending:
            return
        written = self._written
        if written is None:
            written = self._written = asyncio.get_running_loop().create_future()
        self._flush()
        await written

    def _flush(self) -> None:
        """One write of the pending messages; their future settles after the next fsync."""
        future, self._written = self._written, None
        pending, self._pending = self._pending, []
        if future is None:
            return
        frames: list[bytes] = []
        records = self._unsynced
        taken = len(records)
        start = position = self.end
        room = self.committed + self.max_bytes
        writer = self._writer
        if writer.tenant != self.tenant:  # the integration was moved to another tenant
            writer = self._writer = RecordWriter(self.tenant)
        for message in pending:
            end = position + writer.append(frames, message)
            if end > room:
                del frames[-PIECES:]
                self.dropped += 1
                continue
            records.append((position, end, message))
            position = end
        written = len(records) - taken
        if written:
            if self._segment_size >= self.segment_bytes:
                self._roll()
            try:
                _write_all(self._fd, b"".join(frames))
            except OSError as exc:
                # Cut what part was written: the next write starts on a record boundary.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._segment_size)
                del records[taken:]
                future.set_exception(StorageError(f"integration log write failed: {exc}"))
                return
            self._segment_size += position - self.end
            self.end = position
        self._unsynced_bytes += position - start + RECORD_MEMORY * written
        self._synced.append(future)
        if not self._syncing:
            self._sync_soon()

    def _sync_soon(self) -> None:
        """Sync now, or at `sync_spacing` after the last fsync started (once)."""
        if self._sync_timer is not None:
            return
        loop = self._loop or asyncio.get_running_loop()
        due = self._sync_started + self.sync_spacing
        if loop.time() >= due:
            self._sync()
        else:
            self._sync_timer = loop.call_at(due, self._sync_due)

    def _sync_due(self) -> None:
        self._sync_timer = None
        if not self._syncing and self._synced:
            self._sync()

    def _roll(self) -> None:
        base = self.end
        path = self._segment_path(base)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._rolled.append(self._fd)
        self._fd = fd
        self._bases.append(base)
        self._segment_size = 0

    def _sync(self) -> None:
        futures, self._synced = self._synced, []
        records, self._unsynced = self._unsynced, []
        size, self._unsynced_bytes = self._unsynced_bytes, 0
        rolled, self._rolled = self._rolled, []
        loop = self._loop or asyncio.get_running_loop()
        self._syncing = True
        self._sync_started = loop.time()
        job = loop.run_in_executor(
            None, _sync_files, self._fd, rolled, str(self.directory) if rolled else None
        )
        job.add_done_callback(partial(self._on_synced, futures, records, size, self.end))

    def _on_synced(
        self,
        futures: list[asyncio.Future[None]],
        records: list[LogRecord],
        size: int,
        end: int,
        job: asyncio.Future[Any],
    ) -> None:
        self._syncing = False
        error = job.exception() if not job.cancelled() else None
        if error is not None:
            failure = StorageError(f"integration log fsync failed: {error}")
            for future in futures:
                if not future.done():
                    future.set_exception(failure)
        else:
            for future in futures:
                if not future.done():
                    future.set_result(None)
        # Written either way: the consumer delivers them (a failed fsync's publisher was
        # told 0x80 and may send again: at least once).
        self.durable = end
        self.records += len(records)
        recent = self.recent
        behind = end - max(self._reader_at, self.committed) + RECORD_MEMORY * self.records
        if behind > self.memory_bytes:
            # The consumer is further behind than memory holds: it reads these from the
            # file, as the records before them, and memory would only hold each a while for
            # nothing (half a million messages behind under a steady load). Kept again once
            # it comes near (it crosses from the file into memory then).
            recent.clear()
            self._recent_bytes = 0
        else:
            recent.extend(records)
            size += self._recent_bytes
            while size > self.memory_bytes and recent:
                start, stop, _ = recent.popleft()
                size -= stop - start + RECORD_MEMORY
            self._recent_bytes = size
        self.grown.set()
        if self._synced:
            self._sync_soon()

    # ------------------------------------------------------------------ consuming

    def forget_recent(self, position: int) -> None:
        """The consumer took everything before `position`: memory need not hold it."""
        self._reader_at = position
        recent = self.recent
        size = self._recent_bytes
        while recent and recent[0][0] < position:
            start, stop, _ = recent.popleft()
            size -= stop - start + RECORD_MEMORY
        self._recent_bytes = size

    def take_recent(self, wanted: int) -> list[LogRecord]:
        """Up to `wanted` of the oldest records memory holds, taken out of it."""
        recent = self.recent
        out: list[LogRecord] = []
        size = self._recent_bytes
        while recent and len(out) < wanted:
            record = recent.popleft()
            size -= record[1] - record[0] + RECORD_MEMORY
            out.append(record)
        self._recent_bytes = size
        return out

    def read(
        self, position: int, limit: int, *, most: int = -1, decode: bool = True
    ) -> tuple[list[LogRecord], int]:
        """The durable records from `position` (a record boundary), about `limit` bytes of
        them and at least one (at most `most` when it is not negative: only those are
        decoded), and the position after them. A damaged record skips the rest of its
        segment (counted in `dropped`)."""
        found, after = self.read_bodies(position, limit, most=most)
        out: list[LogRecord] = []
        for start, end, body in found:
            if decode:
                try:
                    _, message = decode_body(body)
                except StorageError as exc:
                    log.warning("integration log %s: record at %d: %s", self.directory, start, exc)
                    self.dropped += 1
                    continue
                out.append((start, end, message))
            else:
                out.append((start, end, _NOTHING))
        return out, after

    def read_bodies(
        self, position: int, limit: int, *, most: int = -1
    ) -> tuple[list[tuple[int, int, bytes]], int]:
        """`read`'s records as `(start, end, body)`, their bodies not decoded (a reader that
        decodes them itself: `log_records.decode_plain`)."""
        durable = self.durable
        if position >= durable:
            return [], position
        index = bisect.bisect_right(self._bases, position) - 1
        if index < 0:  # before the oldest segment (deleted): resume at it
            self.dropped += 1
            return [], self._bases[0]
        base = self._bases[index]
        segment_end = self._bases[index + 1] if index + 1 < len(self._bases) else durable
        stop = min(segment_end, durable)
        if position >= stop:
            return [], stop
        path = self._segment_path(base)
        data = _read_at(path, position - base, min(stop - position, max(limit, HEADER_SIZE)))
        found, after = scan(data, position, most)
        if not found:
            need = record_size(data)
            if need is not None and len(data) < need <= stop - position:
                # The first record is longer than `limit`: read it whole.
                data = _read_at(path, position - base, need)
                found, after = scan(data, position, most)
        if not found:
            # Not a whole record where one must start: damaged. Skip the segment.
            log.warning(
                "integration log %s: unreadable record at %d; skipping to %d",
                self.directory,
                position,
                stop,
            )
            self.dropped += 1
            self.records = max(0, self.records - 1)
            return [], stop
        return found, after

    def commit(self, position: int, records: int) -> None:
        """The consumer delivered everything before `position` (`records` records): store
        the position (one write into the older of the position file's two slots) and
        delete the segments wholly before it."""
        if position <= self.committed:
            return
        self.committed = position
        self.records = max(0, self.records - records)
        if self._position_fd < 0:
            self._position_fd = os.open(
                self._position_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
        slot = self._position_slot
        self._position_slot = 1 - slot
        os.pwrite(self._position_fd, _position_record(position), slot * _POSITION.size)
        self._delete_consumed()

    def _delete_consumed(self) -> None:
        bases = self._bases
        while len(bases) > 1 and bases[1] <= self.committed:
            with contextlib.suppress(FileNotFoundError):
                self._segment_path(bases[0]).unlink()
            del bases[0]

    def segments(self) -> list[int]:
        """The base positions of the segments on disk, oldest first."""
        return list(self._bases)

    def _segment_path(self, base: int) -> Path:
        return self.directory / f"{base:020d}{SEGMENT_SUFFIX}"

    def _read_position(self) -> int:
        """The newest whole slot of the position file (0 without one); the next commit
        writes the other slot."""
        path = self.directory / POSITION_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return 0
        slots: list[tuple[int, int]] = []
        for slot in range(min(2, len(raw) // _POSITION.size)):
            position, crc = _POSITION.unpack_from(raw, slot * _POSITION.size)
            if zlib.crc32(struct.pack(">Q", position)) == crc:
                slots.append((position, slot))
        if not slots:
            log.warning("integration log %s: position file unreadable; starting over", path)
            return 0
        position, slot = max(slots)
        self._position_slot = 1 - slot
        return position


_NOTHING: Final = Message("", b"")
"""The message of a record counted, not decoded."""


def _position_record(position: int) -> bytes:
    return _POSITION.pack(position, zlib.crc32(struct.pack(">Q", position)))


def _read_at(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as file:
        file.seek(offset)
        return file.read(size)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _sync_files(fd: int, rolled: list[int], directory: str | None) -> None:
    """fsync the current segment and those rolled since the last sync (then closed), and
    the directory when segments were created (their names are durable too)."""
    for old in rolled:
        try:
            os.fsync(old)
        finally:
            os.close(old)
    os.fdatasync(fd)
    if directory is not None:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
