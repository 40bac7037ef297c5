"""`mqttq lake replay`: archived messages published again into a broker (back-fills, tests).

Extract with pyarrow alone (no Spark), in bounded memory: the rows kept are those created
in the window ([since, until)), of the tenant when one is given, whose topic the filter
matches (as an RE2 pattern pushed down to the scan, `filter_regex`); `Selection.count()`
counts them without loading them (the progress bar's total). They are read piece by piece
(`Selection.pieces()`): one `date` partition at a time (one `hour` in an hourly lake), in
time order, all tenants together; a partition holding more than `piece_rows` rows is cut by
creation time into halves until each part fits. Each piece is sorted by the replay order:
client id, then Kafka partition and offset (the embedded sink's partition -1 and sequence
serve the same way), then creation time.

A Delta lake (`_lake.json` says `"format": "delta"`) is read from its table's current
snapshot (`_delta_dataset`, through the `deltalake` package, imported only then): files
that OPTIMIZE or DELETE replaced and VACUUM has not removed yet are never read.

The order holds across pieces: `created_at` is the partition key and the broker stamps it
when the message arrives, so the offsets of one publisher grow with it, and a publisher's
messages of one piece (a day, an hour, a time slice) all precede those of the next. (A
publisher whose messages of one day sit in two Kafka partitions gets them partition by
partition inside the piece, as the log's per-partition order allows.)

Each row becomes one QoS 1 PUBLISH on `prefix + topic` with its payload and MQTT 5.0
properties (content type, response topic, correlation data, payload format, user properties
in order and with duplicates, and the message expiry interval it was sent with); the retain
flag only with `keep_retain`. At most `max_in_flight` PUBLISHes wait for their PUBACK: the
next one waits for the oldest. `publish` returns once every PUBACK came. Memory: one piece
(at most about `piece_rows` rows of the columns read) plus the in-flight window.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from mqttq.lake.layout import MESSAGES, LakeError, read_lake_info
from mqttq.lake.window import Window

if TYPE_CHECKING:
    import pyarrow as pa

    from mqttq.codec import Properties, ReasonCode

__all__ = [
    "MAX_IN_FLIGHT",
    "PIECE_ROWS",
    "Piece",
    "ReplayOptions",
    "ReplayResult",
    "ReplayRow",
    "Selection",
    "filter_regex",
    "publish",
]

_T = TypeVar("_T")

PIECE_ROWS: Final = 250_000
"""Rows read at once, about (a piece spanning `MIN_SPAN` is read whatever it holds)."""
MIN_SPAN: Final = timedelta(milliseconds=1)
"""A piece this short in time is not cut further."""
MAX_IN_FLIGHT: Final = 1_000
"""PUBLISHes waiting for their PUBACK, at most (lowered to the broker's Receive Maximum)."""

COLUMNS = (
    "client_id",
    "topic",
    "qos",
    "retain",
    "created_at",
    "expires_at",
    "content_type",
    "response_topic",
    "correlation_data",
    "payload_format",
    "user_properties",
    "payload",
    "kafka_partition",
    "kafka_offset",
)
ORDER: Final = [
    ("client_id", "ascending"),
    ("kafka_partition", "ascending"),
    ("kafka_offset", "ascending"),
    ("created_at", "ascending"),
]
"""The replay order inside a piece."""


@dataclass(frozen=True)
class ReplayRow:
    """One archived message to publish again."""

    client_id: str
    topic: str
    payload: bytes
    retain: bool
    content_type: str | None
    response_topic: str | None
    correlation_data: bytes | None
    payload_format: int | None
    user_properties: tuple[tuple[str, str], ...]
    message_expiry_interval: int | None


@dataclass(frozen=True)
class ReplayOptions:
    """Where to publish and how fast (`rate` messages per second, 0: as fast as the
    broker acknowledges)."""

    host: str
    port: int
    prefix: str = ""
    rate: float = 0.0
    username: str | None = None
    password: str | None = None
    keep_retain: bool = False
    client_id: str = ""
    max_in_flight: int = MAX_IN_FLIGHT


@dataclass
class ReplayResult:
    """What a replay did."""

    selected: int = 0
    published: int = 0
    refused: int = 0
    seconds: float = 0.0
    peak_in_flight: int = 0
    """The most PUBLISHes that waited for their PUBACK at once (never above
    `ReplayOptions.max_in_flight`)."""

    def to_json(self) -> dict[str, Any]:
        rate = self.published / self.seconds if self.seconds > 0 else 0.0
        return {
            "selected": self.selected,
            "published": self.published,
            "refused": self.refused,
            "seconds": round(self.seconds, 3),
            "rate": round(rate, 1),
            "peak_in_flight": self.peak_in_flight,
        }


def _dataset(lake: Path) -> Any:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415

    info = read_lake_info(lake)
    fields = [("tenant", pa.string()), ("date", pa.string())]
    if info is not None and info.hourly:
        fields.append(("hour", pa.int32()))
    table = lake / MESSAGES
    if not table.is_dir():
        raise LakeError(f"no lake at {lake}: {table} is missing; give the lake's --lake DIR")
    if info is not None and info.format == "delta":
        return _delta_dataset(table, hourly=info.hourly)
    return ds.dataset(
        str(table),
        format="parquet",
        partitioning=ds.partitioning(pa.schema(fields), flavor="hive"),
        ignore_prefixes=[".", "_"],
    )


DELTA_LOG: Final = "_delta_log"
"""(`mqttq.lake.query.DELTA_LOG`, not imported: that module is the Spark side.)"""


def _delta_dataset(table: Path, *, hourly: bool) -> Any:
    """The files of the Delta table `table`'s current snapshot as a pyarrow dataset, each
    with its partition values from the log (never its statistics: Delta truncates timestamp
    maxima to milliseconds, which would drop rows of the window's edges). Files that
    OPTIMIZE or DELETE replaced stay on disk until VACUUM: they are not in the snapshot, so
    their rows are never replayed twice, nor the deleted ones at all. Raises `LakeError` for
    a table whose snapshot pyarrow cannot read as is (deletion vectors present, column
    mapping), or when the `deltalake` package (delta-rs) is missing."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415
    import pyarrow.fs as pafs  # noqa: PLC0415

    from mqttq.lake.layout import arrow_message_schema  # noqa: PLC0415

    try:
        from deltalake import DeltaTable  # noqa: PLC0415
        from deltalake.exceptions import DeltaError  # noqa: PLC0415
    except ImportError:
        raise LakeError(
            f"{table.parent} is a Delta lake and replaying it needs the deltalake package "
            "(delta-rs), which is not installed; install it: pip install 'deltalake>=1.6'"
        ) from None
    parquet = ds.ParquetFileFormat()
    local = pafs.LocalFileSystem()
    if not (table / DELTA_LOG).is_dir():  # no commit yet: no message yet
        return ds.FileSystemDataset([], arrow_message_schema(hourly), parquet, local)
    try:
        delta = DeltaTable(str(table))
        features = set(delta.protocol().reader_features or ())
        if "columnMapping" in features:
            raise LakeError(
                f"the Delta table {table} uses column mapping, which replay cannot read "
                "(its files' column names are not the table's); read it with mqttq lake query"
            )
        if "deletionVectors" in features:
            marked = sum(batch.num_rows for batch in delta.deletion_vectors())
            if marked:
                path = str(table).replace("`", "``")
                raise LakeError(
                    f"the Delta table {table} has deletion vectors ({marked} files), which "
                    "replay cannot apply; rewrite those files first (on Spark: REORG TABLE "
                    f"delta.`{path}` APPLY (PURGE)), then replay again"
                )
        schema = pa.schema(delta.schema().to_arrow())
        actions = pa.table(delta.get_add_actions(flatten=True))
    except DeltaError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LakeError(
            f"cannot read the Delta table {table}: {first}; check that mqttq lake run wrote it"
        ) from None
    columns = [name for name in actions.column_names if name.startswith("partition.")]
    fragments = []
    for action in actions.select(["path", *columns]).to_pylist():
        condition = ds.scalar(True)
        for column in columns:
            name, value = column.removeprefix("partition."), action[column]
            condition = condition & (
                ds.field(name).is_null()
                if value is None
                else ds.field(name) == pa.scalar(value, schema.field(name).type)
            )
        fragments.append(
            parquet.make_fragment(
                _delta_file(table, action["path"]), filesystem=local, partition_expression=condition
            )
        )
    return ds.FileSystemDataset(fragments, schema, parquet, local)


def _delta_file(table: Path, path: str) -> str:
    """The local file of an add action's `path` (a URI reference: relative to the table,
    percent-encoded; or an absolute `file:` URI)."""
    from urllib.parse import unquote, urlsplit  # noqa: PLC0415

    if "://" not in path and not path.startswith("file:"):
        return str(table / unquote(path))
    parts = urlsplit(path)
    if parts.scheme != "file":
        raise LakeError(
            f"the Delta table {table} has a file outside this machine ({parts.scheme}:); "
            "replay reads local lakes only"
        )
    return unquote(parts.path)


_REGEX_SPECIAL: Final = frozenset("\\.^$|?*+()[]{}")


def _literal(level: str) -> str:
    return "".join(f"\\{c}" if c in _REGEX_SPECIAL else c for c in level)


def filter_regex(topic_filter: str) -> str:
    """An RE2 pattern (pyarrow's) matching exactly the topic names `topic_filter` matches,
    as `mqttq.routing.topics.filter_matches` says: `+` one level, `#` the parent and any
    children [MQTT-4.7.1-2], no `$` topic for a filter starting with a wildcard
    [MQTT-4.7.2-1]."""
    levels = topic_filter.split("/")
    parts: list[str] = []
    for index, level in enumerate(levels):
        if level == "#":
            if index == 0:
                return "(?s)^([^$].*)?$"
            return "(?s)^" + "/".join(parts) + "(/.*)?$"
        if level == "+":
            parts.append("([^/$][^/]*)?" if index == 0 else "[^/]*")
        else:
            parts.append(_literal(level))
    return "(?s)^" + "/".join(parts) + "$"


@dataclass(frozen=True)
class Piece:
    """One read of a replay: the rows of one partition (`date`, and `hour` in an hourly
    lake) created in [start, end)."""

    date: str
    hour: int | None
    start: datetime
    end: datetime

    def span(self) -> tuple[datetime, datetime]:
        """[start, end) clipped to the partition's own day (or hour): where a split goes."""
        day = datetime.strptime(self.date, "%Y-%m-%d").replace(tzinfo=UTC)
        if self.hour is None:
            first, last = day, day + timedelta(days=1)
        else:
            first = day + timedelta(hours=self.hour)
            last = first + timedelta(hours=1)
        return max(self.start, first), min(self.end, last)

    def halves(self) -> tuple[Piece, Piece] | None:
        """The piece cut in two at the middle of its span; None when the span is already
        at most `MIN_SPAN` long."""
        low, high = self.span()
        if high - low <= MIN_SPAN:
            return None
        middle = low + (high - low) // 2
        return replace(self, end=middle), replace(self, start=middle)


class Selection:
    """The rows a replay publishes: those of `lake` created in `window`, whose topic
    `topic_filter` matches (and of `tenant`, when given).

    `count()` counts them without loading them. `pieces()` gives them as tables of at most
    about `piece_rows` rows each, in replay order (see the module docstring): partition by
    partition in time order, a partition with more rows than `piece_rows` cut by creation
    time into halves until each part fits (or spans at most `MIN_SPAN`). Each piece is read
    only when the one before was taken.
    """

    def __init__(
        self,
        lake: Path,
        window: Window,
        topic_filter: str,
        *,
        tenant: str | None = None,
        piece_rows: int = PIECE_ROWS,
    ) -> None:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.dataset as ds  # noqa: PLC0415

        self.window = window
        self.piece_rows = piece_rows
        self._dataset = _dataset(lake)
        first, last = window.dates(window.since)
        condition = (ds.field("date") >= first) & (ds.field("date") <= last)
        if tenant is not None:
            condition = condition & (ds.field("tenant") == tenant)
        if topic_filter != "#":
            regex = filter_regex(topic_filter)
            condition = condition & pc.match_substring_regex(ds.field("topic"), pattern=regex)
        else:
            condition = condition & ~pc.starts_with(ds.field("topic"), pattern="$")
        self._condition = condition
        self._timestamp = pa.timestamp("us", tz="UTC")

    def _filter(self, start: datetime, end: datetime) -> Any:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.dataset as ds  # noqa: PLC0415

        return (
            self._condition
            & (ds.field("created_at") >= pa.scalar(start, self._timestamp))
            & (ds.field("created_at") < pa.scalar(end, self._timestamp))
        )

    def _piece_filter(self, piece: Piece) -> Any:
        import pyarrow.dataset as ds  # noqa: PLC0415

        condition = self._filter(piece.start, piece.end) & (ds.field("date") == piece.date)
        if piece.hour is not None:
            condition = condition & (ds.field("hour") == piece.hour)
        return condition

    def count(self) -> int:
        """How many rows the replay publishes (reads the filtered columns, not the rows)."""
        return int(self._dataset.count_rows(filter=self._filter(*self._bounds())))

    def _bounds(self) -> tuple[datetime, datetime]:
        return self.window.since, self.window.until

    def partitions(self) -> list[Piece]:
        """One piece per partition (`date`, `hour`) holding files of the window, in time
        order (all tenants' folders of a partition together)."""
        import pyarrow.dataset as ds  # noqa: PLC0415

        keys: set[tuple[str, int | None]] = set()
        for fragment in self._dataset.get_fragments(filter=self._condition):
            values = ds.get_partition_keys(fragment.partition_expression)
            keys.add((str(values["date"]), values.get("hour")))
        since, until = self._bounds()
        found = [
            Piece(date, hour, since, until)
            for date, hour in sorted(keys, key=lambda k: (k[0], -1 if k[1] is None else k[1]))
        ]
        # The hours of the first and last days that lie outside the window hold none of its
        # rows (created_at is the partition key): not even counted.
        return [piece for piece in found if piece.span()[0] < piece.span()[1]]

    def pieces(self) -> Iterator[pa.Table]:
        """The rows, piece by piece (see the class docstring); empty pieces are skipped."""
        for partition in self.partitions():
            yield from self._read(partition)

    def _read(self, piece: Piece) -> Iterator[pa.Table]:
        condition = self._piece_filter(piece)
        rows = self._scan(piece, lambda: int(self._dataset.count_rows(filter=condition)))
        if rows == 0:
            return
        halves = piece.halves() if rows > self.piece_rows else None
        if halves is not None:
            for half in halves:
                yield from self._read(half)
            return
        table = self._scan(
            piece, lambda: self._dataset.to_table(columns=list(COLUMNS), filter=condition)
        )
        yield table.sort_by(ORDER)

    @staticmethod
    def _scan(piece: Piece, scan: Callable[[], _T]) -> _T:
        try:
            return scan()
        except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
            where = f"date={piece.date}" + (f"/hour={piece.hour}" if piece.hour is not None else "")
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            # Nothing of this piece was published yet: replaying from its start misses and
            # doubles nothing.
            resume = f"{piece.span()[0]:%Y-%m-%dT%H:%M:%S.%fZ}"
            raise LakeError(
                f"cannot read the lake's partition {where}: {first}; did compact or expire "
                f"change it meanwhile? replay again with --since {resume}"
            ) from None


def replay_rows(table: pa.Table) -> Iterator[ReplayRow]:
    """`table`'s rows as `ReplayRow`s, batch by batch."""
    for batch in table.to_batches(max_chunksize=10_000):
        for row in batch.to_pylist():
            created, expires = row["created_at"], row["expires_at"]
            interval = None
            if expires is not None and created is not None:
                interval = max(1, round((expires - created).total_seconds()))
            yield ReplayRow(
                client_id=row["client_id"],
                topic=row["topic"],
                payload=row["payload"] or b"",
                retain=bool(row["retain"]),
                content_type=row["content_type"],
                response_topic=row["response_topic"],
                correlation_data=row["correlation_data"],
                payload_format=row["payload_format"],
                user_properties=tuple((p["key"], p["value"]) for p in row["user_properties"] or ()),
                message_expiry_interval=interval,
            )


def properties(row: ReplayRow) -> Properties:
    """The MQTT 5.0 properties `row` was published with."""
    from mqttq.codec import Properties  # noqa: PLC0415

    return Properties(
        payload_format_indicator=row.payload_format,
        message_expiry_interval=row.message_expiry_interval,
        content_type=row.content_type,
        response_topic=row.response_topic,
        correlation_data=row.correlation_data,
        user_properties=list(row.user_properties),
    )


async def publish(
    pieces: Iterable[pa.Table],
    options: ReplayOptions,
    *,
    selected: int,
    progress: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Publish the rows of `pieces` (QoS 1, in order; each piece read off the event loop
    when the one before was sent), at most `options.max_in_flight` unacknowledged, and wait
    for every PUBACK. `selected` is the count the result reports; `progress` is called as
    PUBACKs come. Raises `LakeError` (one line) when the broker cannot be reached, the
    connection ends, or a piece cannot be read."""
    from mqttq.integrations.bridge.client import ClientError, ClientOptions, MqttClient  # noqa: PLC0415

    result = ReplayResult(selected=selected)
    client = MqttClient(
        ClientOptions(
            host=options.host,
            port=options.port,
            client_id=options.client_id or f"mqttq-replay-{time.monotonic_ns() % 1_000_000}",
            username=options.username,
            password=options.password,
            session_expiry_interval=0,
            max_inflight=options.max_in_flight,
        )
    )
    waiting: deque[asyncio.Future[ReasonCode]] = deque()

    async def settle_oldest() -> None:
        (code,) = await client.wait_acks([waiting.popleft()])
        if code >= 0x80:
            result.refused += 1
        else:
            result.published += 1
        if progress is not None:
            progress(1)

    started = time.monotonic()
    index = 0
    source = iter(pieces)
    try:
        await client.connect()
        while (table := await asyncio.to_thread(next, source, None)) is not None:
            for row in replay_rows(table):
                if options.rate > 0:
                    ahead = started + index / options.rate - time.monotonic()
                    if ahead > 0:
                        await asyncio.sleep(ahead)
                while waiting and (waiting[0].done() or len(waiting) >= options.max_in_flight):
                    await settle_oldest()
                future = await client.publish(
                    options.prefix + row.topic,
                    row.payload,
                    qos=1,
                    retain=row.retain and options.keep_retain,
                    properties=properties(row),
                )
                assert future is not None
                waiting.append(future)
                result.peak_in_flight = max(result.peak_in_flight, client.inflight)
                index += 1
            del table
        while waiting:
            await settle_oldest()
    except ClientError as exc:
        raise LakeError(f"replay to {options.host}:{options.port} failed: {exc}") from None
    finally:
        await client.close()
    result.seconds = time.monotonic() - started
    return result
