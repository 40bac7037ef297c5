"""An integration's log on disk (`IntegrationLog`, `LogBacklog`): records framed so that a
torn tail is cut cleanly, segments rolled and deleted, a restart resuming at the committed
position, memory bounded while the worker is behind, and the backlog bounded on disk."""

from __future__ import annotations

import asyncio
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.codec.properties import Properties
from mqttq.errors import ConfigError
from mqttq.integrations.append_log import IntegrationLog
from mqttq.integrations.log_backlog import LogBacklog
from mqttq.integrations.log_records import decode_body, decode_plain, encode_record, scan
from mqttq.integrations.payload_filter import PayloadFilter
from mqttq.integrations.record import Delivery, delivery_of
from mqttq.integrations.spec import DeliverySettings, IntegrationSpec, parse_integration
from mqttq.model import Message


def spec(payload_filter: PayloadFilter | None = None) -> IntegrationSpec:
    delivery = DeliverySettings(batch_size=10, linger_ms=0, max_in_flight=10)
    return IntegrationSpec(
        "hook", "http", "default", ("t/#",), None, payload_filter, True, delivery
    )


def message(n: int, publisher: str = "dev-1", size: int = 0) -> Message:
    payload = f"m{n}".encode() + b"x" * size
    return Message(f"t/{n}", payload, 1, False, created_at=time.time(), publisher_id=publisher)


def opened(directory: Path, **options: int) -> IntegrationLog:
    log = IntegrationLog(directory, "default", **options)
    log.open()
    return log


async def append(log: IntegrationLog, messages: Sequence[Message]) -> None:
    """Append `messages` in one loop iteration and wait until they are durable."""
    await asyncio.gather(*[log.append(m) for m in messages])


async def drain(backlog: LogBacklog, count: int, *, settle: bool = True) -> list[Delivery]:
    out: list[Delivery] = []
    while len(out) < count:
        batch = await asyncio.wait_for(backlog.take(10, 0), 10)
        if settle:
            await backlog.settle(batch)
        out.extend(batch)
    return out


def payloads(deliveries: Sequence[Delivery]) -> list[bytes]:
    return [d.payload for d in deliveries]


# --- framing -----------------------------------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)
"""MQTT strings: no control characters (U+0000 is refused) nor surrogates."""
messages = st.builds(
    lambda topic, payload, qos, retain, publisher, content_type, users: Message(
        topic or "t",
        payload,
        qos,
        retain,
        Properties(content_type=content_type, user_properties=users),
        1_700_000_000.5,
        None,
        publisher,
    ),
    texts,
    st.binary(max_size=200),
    st.integers(0, 2),
    st.booleans(),
    texts,
    st.none() | texts,
    st.lists(st.tuples(texts, texts), max_size=3),
)


@settings(max_examples=50)
@given(st.lists(messages, min_size=1, max_size=5), st.text(min_size=1, max_size=10))
def test_records_round_trip(items: list[Message], tenant: str) -> None:
    data = b"".join(encode_record(tenant, m) for m in items)
    records, end = scan(data, 100)
    assert end == 100 + len(data)
    assert len(records) == len(items)
    for (_, _, body), original in zip(records, items, strict=True):
        got_tenant, got = decode_body(body)
        assert got_tenant == tenant
        assert (got.topic, got.payload, got.qos, got.retain) == (
            original.topic,
            original.payload,
            original.qos,
            original.retain,
        )
        assert got.publisher_id == original.publisher_id
        assert got.properties.content_type == original.properties.content_type
        assert list(got.properties.user_properties) == list(original.properties.user_properties)


@settings(max_examples=50)
@given(st.lists(messages, min_size=1, max_size=4), st.data())
def test_any_truncation_keeps_exactly_the_whole_records(
    items: list[Message], data: st.DataObject
) -> None:
    frames = [encode_record("default", m) for m in items]
    whole = b"".join(frames)
    cut = data.draw(st.integers(0, len(whole)))
    records, end = scan(whole[:cut])
    ends = []
    at = 0
    for frame in frames:
        at += len(frame)
        ends.append(at)
    kept = [e for e in ends if e <= cut]
    assert [r[1] for r in records] == kept
    assert end == (kept[-1] if kept else 0)


@settings(max_examples=50)
@given(st.lists(messages, min_size=1, max_size=5), st.text(min_size=1, max_size=10))
def test_a_plain_record_read_from_its_bytes_is_what_decode_body_reads(
    items: list[Message], tenant: str
) -> None:
    records, _ = scan(b"".join(encode_record(tenant, m) for m in items))
    for (_, _, body), original in zip(records, items, strict=True):
        _, got = decode_body(body)
        plain = decode_plain(body)
        if not original.properties.empty_for_publish():
            assert plain is None  # read by decode_body
            continue
        assert plain == (
            got.topic,
            got.payload,
            got.qos,
            got.retain,
            got.created_at,
            None,
            got.publisher_id,
        )


def test_a_record_with_an_expiry_is_not_plain() -> None:
    now = time.time()
    expiring = Message("t/e", b"e", 1, False, created_at=now, expires_at=now + 60)
    ((_, _, body),), _ = scan(encode_record("default", expiring))
    plain = decode_plain(body)
    assert plain is not None and plain[5] == now + 60  # the backlog reads it whole


@settings(max_examples=25, deadline=None)
@given(st.lists(messages, min_size=1, max_size=6), st.sampled_from(["memory", "file"]))
def test_the_backlog_makes_the_deliveries_delivery_of_makes(
    items: list[Message], where: str
) -> None:
    async def scenario(directory: Path) -> None:
        log = opened(directory, memory_bytes=(1 << 20) if where == "memory" else 0)
        await append(log, items)
        starts = [start for start, _, _ in log.read(0, 1 << 20)[0]]
        assert len(log.recent) == (len(items) if where == "memory" else 0)
        backlog = LogBacklog(log, spec())
        got = await drain(backlog, len(items))
        now = time.time()
        assert got == [
            delivery_of(m, "default", start, now) for m, start in zip(items, starts, strict=True)
        ]
        await log.close()

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(scenario(Path(directory)))


def test_a_damaged_record_ends_the_scan() -> None:
    first, second = encode_record("default", message(1)), encode_record("default", message(2))
    damaged = bytearray(first + second)
    damaged[len(first) + 12] ^= 0xFF  # a byte of the second record's body
    records, end = scan(bytes(damaged))
    assert [r[1] for r in records] == [len(first)]
    assert end == len(first)


# --- the log -----------------------------------------------------------------------------


def test_a_torn_tail_after_kill_9_is_cut_at_the_last_whole_record(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path)
        await append(log, [message(n) for n in range(5)])
        await log.close()
        segment = next(tmp_path.glob("*.seg"))
        whole = segment.stat().st_size
        with segment.open("ab") as file:  # a write cut short: half a record
            file.write(encode_record("default", message(5))[:9])
        log = opened(tmp_path)
        assert segment.stat().st_size == whole
        assert log.records == 5
        await append(log, [message(6)])  # written after the cut, readable
        got = await drain(LogBacklog(log, spec()), 6)
        assert payloads(got) == [f"m{n}".encode() for n in (0, 1, 2, 3, 4, 6)]
        await log.close()

    asyncio.run(scenario())


def test_segments_roll_at_their_size_and_go_once_consumed(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path, segment_bytes=500)
        for n in range(10):  # ten writes of ~230 bytes: a new segment every third
            await append(log, [message(n, size=200)])
        assert len(log.segments()) >= 3
        assert len(list(tmp_path.glob("*.seg"))) == len(log.segments())
        backlog = LogBacklog(log, spec())
        got = await drain(backlog, 10)
        assert payloads(got) == [message(n, size=200).payload for n in range(10)]
        assert len(log.segments()) == 1  # only the one still written to stays
        assert len(list(tmp_path.glob("*.seg"))) == 1
        assert backlog.lag() == 0
        await log.close()

    asyncio.run(scenario())


def test_a_restart_resumes_at_the_committed_position(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path)
        await append(log, [message(n) for n in range(30)])
        backlog = LogBacklog(log, spec())
        await drain(backlog, 10)  # settled
        await drain(backlog, 10, settle=False)  # taken, not settled: sent again
        await log.close()
        log = opened(tmp_path)
        assert log.records == 20
        backlog = LogBacklog(log, spec())
        assert backlog.lag() == 20
        got = await drain(backlog, 20)
        assert payloads(got) == [f"m{n}".encode() for n in range(10, 30)]
        assert backlog.lag() == 0
        await log.close()

    asyncio.run(scenario())


def test_a_torn_position_slot_falls_back_to_the_commit_before(tmp_path: Path) -> None:
    """The position file holds the last two commits in two slots: the newer one cut short
    (its CRC spoiled) leaves the older, and delivery resumes there (one more batch sent
    again, never a message skipped); a one-slot file (a build before the slots) reads."""

    async def scenario() -> None:
        log = opened(tmp_path)
        await append(log, [message(n) for n in range(30)])
        backlog = LogBacklog(log, spec())
        await drain(backlog, 10)
        first = log.committed
        await drain(backlog, 10)
        second = log.committed
        await log.close()
        path = tmp_path / "position"
        raw = bytearray(path.read_bytes())
        assert len(raw) == 24
        newer = 1 if int.from_bytes(raw[12:20], "big") == second else 0
        assert int.from_bytes(raw[12 * (1 - newer) : 12 * (1 - newer) + 8], "big") == first
        raw[12 * newer + 3] ^= 0xFF  # a write cut short in the newer slot
        path.write_bytes(bytes(raw))
        log = opened(tmp_path)
        assert log.committed == first
        got = await drain(LogBacklog(log, spec()), 20)
        assert payloads(got) == [f"m{n}".encode() for n in range(10, 30)]
        await log.close()
        one_slot = first.to_bytes(8, "big") + zlib.crc32(first.to_bytes(8, "big")).to_bytes(
            4, "big"
        )
        path.write_bytes(one_slot)  # as a build before the slots wrote it
        log = opened(tmp_path)
        assert log.committed == first
        log.commit(second, 10)  # into the other slot: the first stays whole
        await log.close()
        assert opened(tmp_path).committed == second
        assert path.read_bytes()[:12] == one_slot

    asyncio.run(scenario())


def test_a_worker_behind_memory_reads_the_file_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path, memory_bytes=1000)  # about 40 small records
        for start in range(0, 500, 50):
            await append(log, [message(n) for n in range(start, start + 50)])
        assert sum(e - s for s, e, _ in log.recent) <= 1000
        got = await drain(LogBacklog(log, spec()), 500)
        assert payloads(got) == [f"m{n}".encode() for n in range(500)]
        await log.close()

    asyncio.run(scenario())


def test_a_worker_far_behind_gets_nothing_in_memory_and_crosses_into_it_once_near(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        # Each record counts about 430 bytes against memory: 30,000 hold about 70.
        log = opened(tmp_path, memory_bytes=30_000)
        await append(log, [message(n) for n in range(100)])
        assert len(log.recent) == 0  # further behind than memory holds: kept in the file only
        backlog = LogBacklog(log, spec())
        batch = await asyncio.wait_for(backlog.take(60, 0), 10)
        await backlog.settle(batch)
        await append(log, [message(n) for n in range(100, 110)])  # 50 behind now: near
        assert [m.payload for _, _, m in log.recent] == [f"m{n}".encode() for n in range(100, 110)]
        batch = await asyncio.wait_for(backlog.take(50, 0), 10)
        # The file's 40, then memory's 10, in one batch (not the file's part alone).
        assert payloads(batch) == [f"m{n}".encode() for n in range(60, 110)]
        assert len(log.recent) == 0
        await backlog.settle(batch)
        assert backlog.lag() == 0
        await log.close()

    asyncio.run(scenario())


def test_the_backlog_on_disk_is_bounded_and_what_passes_it_is_counted(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path, max_bytes=2000)
        await append(log, [message(n, size=100) for n in range(40)])  # ~130 bytes each
        backlog = LogBacklog(log, spec())
        kept = log.records
        assert 10 <= kept < 40
        assert backlog.dropped() == 40 - kept
        assert log.end - log.committed <= 2000
        got = await drain(backlog, kept)
        assert payloads(got) == [message(n, size=100).payload for n in range(kept)]
        await append(log, [message(99)])  # room again once delivered
        assert payloads(await drain(backlog, 1)) == [b"m99"]
        await log.close()

    asyncio.run(scenario())


def test_records_the_payload_filter_refuses_are_committed_past(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path)
        refuse_odd = PayloadFilter.parse("$.keep == true")
        items = [
            Message("t/a", b'{"keep": %s}' % (b"true" if n % 2 == 0 else b"false"), 1)
            for n in range(10)
        ]
        await append(log, items)
        backlog = LogBacklog(log, spec(refuse_odd))
        got = await drain(backlog, 5)
        assert len(got) == 5
        assert backlog.skipped == 5
        assert backlog.lag() == 0
        await log.close()
        assert opened(tmp_path).records == 0

    asyncio.run(scenario())


def test_a_message_expired_before_its_turn_is_counted_not_delivered(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = opened(tmp_path)
        now = time.time()
        expired = Message("t/old", b"old", 1, False, created_at=now - 10, expires_at=now - 1)
        await append(log, [expired, message(1)])
        backlog = LogBacklog(log, spec())
        assert payloads(await drain(backlog, 1)) == [b"m1"]
        assert backlog.dropped() == 1
        assert backlog.lag() == 0
        await log.close()

    asyncio.run(scenario())


def test_max_backlog_mb_is_a_delivery_setting_checked_by_key() -> None:
    table = {"name": "hook", "type": "http", "filters": ["t/#"], "url": "http://h/"}
    assert parse_integration(table, "integration").delivery.max_backlog_mb == 1024
    spec = parse_integration({**table, "max_backlog_mb": 5}, "integration")
    assert spec.delivery.max_backlog_mb == 5
    assert spec.public()["max_backlog_mb"] == 5
    with pytest.raises(ConfigError) as bad:
        parse_integration({**table, "max_backlog_mb": 0}, "integration")
    assert bad.value.key == "integration.max_backlog_mb"


def test_fsyncs_are_spaced_and_the_writes_between_share_one(tmp_path: Path) -> None:
    """The first append syncs at once; one made within `sync_spacing` of that fsync's
    start waits for the spacing (on the loop's clock, here a manual one), and the appends
    of later iterations join it; `close` syncs what still waits."""
    from tests.harness import ManualClockLoop  # noqa: PLC0415 (a test helper)

    loop = ManualClockLoop()

    async def scenario() -> None:
        log = opened(tmp_path)
        log.sync_spacing = 60.0
        await log.append(message(1))  # nothing synced before: at once
        second = log.append(message(2))
        await _turns_until(lambda: log.end > log.durable)  # written, waiting for its fsync
        written = log.end
        third = log.append(message(3))
        await _turns_until(lambda: log.end > written)
        await asyncio.sleep(0.05)  # time enough for an fsync, had one started
        assert not second.done()
        assert not third.done()
        assert log.durable < log.end
        loop.skew += 60.0  # the spacing passed: one fsync for both
        await asyncio.wait_for(asyncio.gather(second, third), 30)
        assert log.durable == log.end
        fourth = log.append(message(4))
        await _turns_until(lambda: log.end > log.durable)
        assert not fourth.done()
        await log.close()  # syncs it without waiting for the spacing
        assert fourth.done()
        assert log.durable == log.end
        reopened = opened(tmp_path)
        records, _ = reopened.read(0, 1 << 20)
        assert [m.payload for _, _, m in records] == [message(n).payload for n in (1, 2, 3, 4)]

    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()


async def _turns_until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")
