"""The pieces `mqttq lake replay` reads (pure pyarrow, no broker): partition by partition in
time order, a big partition cut by time, each piece in replay order; together exactly the
rows of the window and the filter, each once; the topic filter pushed down as a pattern
matches what the broker's matcher matches."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from mqttq.lake.arrow_files import write_rows
from mqttq.lake.layout import (
    PARTITIONS_HOURLY,
    LakeError,
    LakeInfo,
    arrow_message_schema,
    write_lake_info,
)
from mqttq.lake.replay import Selection, filter_regex
from mqttq.lake.window import Window
from mqttq.routing.topics import filter_matches
from tests.lake.lake_rows import Row, arrow_rows, at, write_lake

T0 = at("2026-11-10T00:00:00")


def fleet(days: int = 3, per_hour: int = 2) -> list[Row]:
    """Two publishers interleaving in time over `days` days (a on partition 0, b on 1,
    offsets growing with time), each hour of each day `per_hour` messages each."""
    rows = []
    for step in range(days * 24 * per_hour):
        moment = T0 + timedelta(minutes=step * 60 // per_hour)
        rows.append(Row("acme", "a", "sensors/a/t", moment, f"a{step}".encode(), offset=step))
        rows.append(
            Row(
                "acme",
                "b",
                "sensors/b/t",
                moment + timedelta(seconds=1),
                f"b{step}".encode(),
                partition=1,
                offset=step,
            )
        )
    return rows


def write_hourly(lake: Path, rows: list[Row]) -> None:
    """An hourly lake holding `rows`."""
    daily = arrow_rows(rows)
    hours = pa.array([r.created_at.hour for r in rows], pa.int32())
    table = daily.add_column(2, "hour", hours).cast(arrow_message_schema(hourly=True))
    write_lake_info(lake, LakeInfo(PARTITIONS_HOURLY))
    write_rows(lake / "messages", table, "part-0.parquet", hourly=True)


def keys(table: pa.Table) -> list[tuple[str, int, int]]:
    return list(
        zip(
            table["client_id"].to_pylist(),
            table["kafka_partition"].to_pylist(),
            table["kafka_offset"].to_pylist(),
            strict=True,
        )
    )


def published_by(pieces: list[pa.Table], client: str) -> list[bytes]:
    """The payloads of `client`, piece after piece."""
    return [
        payload
        for piece in pieces
        for payload, sender in zip(
            piece["payload"].to_pylist(), piece["client_id"].to_pylist(), strict=True
        )
        if sender == client
    ]


def assert_in_replay_order(pieces: list[pa.Table], expected: int) -> None:
    """Each piece sorted by (client, partition, offset); every publisher's offsets growing
    across pieces; `expected` rows in all, none twice."""
    seen: list[tuple[str, int, int]] = []
    for piece in pieces:
        rows = keys(piece)
        assert rows == sorted(rows)
        seen.extend(rows)
    assert len(seen) == len(set(seen)) == expected
    for client in {c for c, _, _ in seen}:
        offsets = [(p, o) for c, p, o in seen if c == client]
        assert offsets == sorted(offsets)


def test_a_daily_lake_is_read_day_by_day_in_order(tmp_path: Path) -> None:
    write_lake(tmp_path, fleet())
    window = Window(T0, T0 + timedelta(days=3))
    selection = Selection(tmp_path, window, "sensors/#")
    assert [p.date for p in selection.partitions()] == ["2026-11-10", "2026-11-11", "2026-11-12"]
    pieces = list(selection.pieces())
    assert [p.num_rows for p in pieces] == [96, 96, 96]
    assert selection.count() == 288
    assert_in_replay_order(pieces, 288)
    # Inside a day: publisher a first (client id order), then b.
    assert pieces[0]["payload"].to_pylist()[:2] == [b"a0", b"a1"]
    assert pieces[0]["payload"].to_pylist()[48] == b"b0"


def test_a_big_partition_is_cut_by_time_and_the_order_holds(tmp_path: Path) -> None:
    write_lake(tmp_path, fleet())
    window = Window(T0 + timedelta(hours=5), T0 + timedelta(days=2, hours=7))
    whole = list(Selection(tmp_path, window, "#").pieces())
    cut = list(Selection(tmp_path, window, "#", piece_rows=10).pieces())
    assert len(whole) == 3
    assert len(cut) > 3
    assert all(0 < p.num_rows <= 10 for p in cut)
    total = sum(p.num_rows for p in whole)
    assert total == 4 * (19 + 24 + 7) == Selection(tmp_path, window, "#").count()
    assert_in_replay_order(cut, total)
    # The same rows, each publisher's in the same order, whether cut or not.
    for client in ("a", "b"):
        assert published_by(cut, client) == published_by(whole, client)


def test_a_burst_shorter_than_the_smallest_cut_is_read_whole(tmp_path: Path) -> None:
    burst = [Row("acme", "a", "t", T0, f"{i}".encode(), offset=i) for i in range(7)]
    write_lake(tmp_path, burst)
    pieces = list(
        Selection(tmp_path, Window(T0, T0 + timedelta(hours=1)), "#", piece_rows=2).pieces()
    )
    assert [p["kafka_offset"].to_pylist() for p in pieces] == [list(range(7))]


def test_an_hourly_lake_is_read_hour_by_hour(tmp_path: Path) -> None:
    rows = fleet(days=2, per_hour=1)
    write_hourly(tmp_path, rows)
    window = Window(T0 + timedelta(hours=22), T0 + timedelta(days=1, hours=2))
    selection = Selection(tmp_path, window, "sensors/+/t")
    assert [(p.date, p.hour) for p in selection.partitions()] == [
        ("2026-11-10", 22),
        ("2026-11-10", 23),
        ("2026-11-11", 0),
        ("2026-11-11", 1),
    ]
    pieces = list(selection.pieces())
    assert [p["payload"].to_pylist() for p in pieces] == [
        [b"a22", b"b22"],
        [b"a23", b"b23"],
        [b"a24", b"b24"],
        [b"a25", b"b25"],
    ]
    assert selection.count() == 8


def test_the_window_tenant_and_filter_leave_the_rest_out(tmp_path: Path) -> None:
    rows = [
        Row("acme", "a", "sensors/a/t", T0, b"in", offset=1),
        Row("acme", "a", "sensors/a/t", T0 - timedelta(microseconds=1), b"before", offset=0),
        Row("acme", "a", "sensors/a/t", T0 + timedelta(days=1), b"at until", offset=2),
        Row("beta", "c", "sensors/c/t", T0 + timedelta(hours=1), b"other tenant"),
        Row("acme", "d", "other/d", T0 + timedelta(hours=2), b"other topic"),
        Row("acme", "e", "$SYS/sensors", T0 + timedelta(hours=3), b"dollar"),
    ]
    write_lake(tmp_path, rows)
    window = Window(T0, T0 + timedelta(days=1))

    def payloads(topic_filter: str, tenant: str | None = None) -> list[bytes]:
        selection = Selection(tmp_path, window, topic_filter, tenant=tenant)
        found = [p for t in selection.pieces() for p in t["payload"].to_pylist()]
        assert selection.count() == len(found)
        return found

    assert payloads("sensors/#", "acme") == [b"in"]
    assert payloads("sensors/#") == [b"in", b"other tenant"]
    assert payloads("#") == [b"in", b"other tenant", b"other topic"]
    assert payloads("$SYS/#") == [b"dollar"]


def test_a_partition_gone_before_its_turn_is_one_line_saying_where_to_resume(
    tmp_path: Path,
) -> None:
    write_lake(tmp_path, fleet(days=2))
    pieces = Selection(tmp_path, Window(T0, T0 + timedelta(days=2)), "#").pieces()
    assert next(pieces)["payload"].to_pylist()[0] == b"a0"
    # As `lake compact` swaps a partition's files out while the replay runs.
    for path in (tmp_path / "messages" / "tenant=acme" / "date=2026-11-11").iterdir():
        path.rename(tmp_path / path.name)
    with pytest.raises(LakeError) as raised:
        next(pieces)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("cannot read the lake's partition date=2026-11-11: ")
    assert message.endswith("replay again with --since 2026-11-11T00:00:00.000000Z")


TOPICS = [
    "a", "a/b", "a/b/c", "a/", "/a", "/", "a//b", "$SYS/a", "$SYS", "a/$x", "a.b/c",
    "(x)/[y]", "x+y/z", "x*y", "a\\b/c", "é/ü", "a/b\nc", "sport", "sport/tennis/player1",
]  # fmt: skip
FILTERS = [
    "#", "+", "a", "a/#", "a/+", "+/+", "+/b", "/+", "+/#", "a/+/c", "$SYS/#", "$SYS/+",
    "a.b/+", "(x)/[y]", "x*y", "a\\b/#", "é/+", "sport/#", "sport/+/player1", "+/$x",
]  # fmt: skip


@pytest.mark.parametrize("topic_filter", FILTERS)
def test_the_filter_pattern_matches_as_the_broker_does(topic_filter: str) -> None:
    import pyarrow.compute as pc  # noqa: PLC0415

    matched = pc.match_substring_regex(pa.array(TOPICS), pattern=filter_regex(topic_filter))
    expected = [filter_matches(topic_filter, topic) for topic in TOPICS]
    assert matched.to_pylist() == expected
