"""The embedded `lake` sink on its own (no broker): durable appends, rolls by rows, a
delivery made again written once, and what a crash left rolled at the next open; read back
with pyarrow (no mqttq reader)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery
from mqttq.integrations.sinks.lake import LakeSink, LakeSinkSettings
from mqttq.lake.layout import read_lake_info

T0_MS = 1_794_306_000_000  # 2026-11-10T10:20:00Z


def delivery(seq: int, client: str = "dev-1", payload: bytes | None = None) -> Delivery:
    return Delivery(
        topic=f"sensors/{client}/t",
        payload=payload if payload is not None else f"m{seq}".encode(),
        qos=1,
        client_id=client,
        tenant="acme",
        timestamp_ms=T0_MS + seq * 1000,
        user_properties=(("k", "v"), ("k", "w")),
        content_type="text/plain",
        message_expiry_interval=60 if seq == 1 else None,
        seq=seq,
    )


def parquet_files(lake: Path) -> list[Path]:
    return sorted(p for p in (lake / "messages").rglob("*.parquet") if not p.name.startswith("."))


def read_rows(lake: Path) -> list[dict[str, object]]:
    dataset = ds.dataset(str(lake / "messages"), format="parquet", partitioning="hive")
    return sorted(dataset.to_table().to_pylist(), key=lambda r: r["kafka_offset"])  # type: ignore[arg-type, return-value]


def test_rolls_by_rows_dedupes_and_recovers_after_a_crash(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    settings = LakeSinkSettings(path=str(lake), roll_seconds=3600, roll_rows=5)

    async def first_life() -> LakeSink:
        sink = LakeSink(settings, "archive")
        await sink.open()
        assert await sink.send([delivery(1), delivery(2), delivery(3)]) == []
        assert parquet_files(lake) == []  # 3 rows < roll_rows: durable in the segment only
        await sink.send([delivery(3), delivery(4), delivery(5)])  # 3 again: written once
        assert len(parquet_files(lake)) == 1
        await sink.send([delivery(6, "dev-2", b"\xff\x00"), delivery(7)])
        assert sink._timer is not None
        sink._timer.cancel()  # the "crash": no close, the segment stays as it is
        return sink

    crashed = asyncio.run(first_life())
    assert crashed._executor is not None
    crashed._executor.shutdown(wait=True)
    assert crashed._segment is not None
    crashed._segment._file.close()  # the process is gone: so is its file handle
    (segment,) = (lake / "_embedded" / "archive").glob("segment-*.arrows")
    with segment.open("ab") as handle:
        handle.write(b"\xff\xff\xff\xff\x10\x00")  # a batch cut short by the crash

    async def second_life() -> None:
        sink = LakeSink(settings, "archive")
        await sink.open()  # rolls what the crash left
        await sink.send([delivery(7)])  # made again after the crash: already written
        await sink.close()

    asyncio.run(second_life())
    info = read_lake_info(lake)
    assert info is not None
    assert info.partitioning == ("tenant", "date")
    assert not list((lake / "_embedded" / "archive").glob("segment-*"))
    rows = read_rows(lake)
    assert [r["payload"] for r in rows] == [b"m1", b"m2", b"m3", b"m4", b"m5", b"\xff\x00", b"m7"]
    assert {r["kafka_partition"] for r in rows} == {-1}
    offsets = [r["kafka_offset"] for r in rows]
    assert offsets == sorted(set(offsets))
    first = rows[0]
    assert first["tenant"] == "acme"
    assert first["date"] == "2026-11-10"
    assert first["topic"] == "sensors/dev-1/t"
    assert first["topic_levels"] == ["sensors", "dev-1", "t"]
    assert first["client_id"] == "dev-1"
    assert first["user_properties"] == [{"key": "k", "value": "v"}, {"key": "k", "value": "w"}]
    assert first["content_type"] == "text/plain"
    assert first["payload_text"] == "m1"
    assert first["created_at"].timestamp() == (T0_MS + 1000) / 1000  # type: ignore[attr-defined]
    assert (first["expires_at"] - first["created_at"]).total_seconds() == 60  # type: ignore[operator]
    assert rows[5]["payload_text"] is None
    assert "_seq" not in rows[0]


def test_hourly_lake_and_bad_settings(tmp_path: Path) -> None:
    lake = tmp_path / "hourly"

    async def life() -> None:
        sink = LakeSink(LakeSinkSettings(path=str(lake), hourly=True), "h")
        await sink.send([delivery(1)])
        await sink.close()

    asyncio.run(life())
    (path,) = parquet_files(lake)
    assert path.relative_to(lake / "messages").parts[:3] == (
        "tenant=acme",
        "date=2026-11-10",
        "hour=10",
    )
    with pytest.raises(ConfigError, match="path"):
        LakeSinkSettings.from_table({}, "integration[x]")
    with pytest.raises(ConfigError, match="roll_seconds"):
        LakeSinkSettings.from_table({"path": "x", "roll_seconds": 0}, "integration[x]")
