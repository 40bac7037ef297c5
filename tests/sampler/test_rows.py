"""The sampler's rows from counters, and the history endpoint's columns (no I/O)."""

from __future__ import annotations

import pytest

from mqttq.admin.dashboard.history import cluster_columns, node_columns
from mqttq.broker.sampler import Counters, Sampler, sample_row


def counters(at: float, **changes: object) -> Counters:
    base: dict[str, object] = {
        "at": at,
        "connections": 3,
        "messages_in": 100,
        "messages_out": 200,
        "drops": {"queue": 0, "publish_rate": 0, "topics": 0},
        "backlog": 7,
        "inbox": 1,
    }
    base.update(changes)
    return Counters(**base)  # type: ignore[arg-type]


def test_first_row_has_no_rates_then_rates_per_second() -> None:
    first = sample_row(None, counters(100.0), 100.0)
    assert first["messages_in"] is None and first["messages_out"] is None
    assert first["dropped"] is None
    assert first["connections"] == 3 and first["backlog"] == 7 and first["inbox"] == 1
    assert first["kafka_produce_ms"] is None and first["kafka_lag"] is None
    later = counters(
        105.0,
        messages_in=150,
        messages_out=300,
        drops={"queue": 10, "publish_rate": 5, "topics": 0},
    )
    row = sample_row(counters(100.0), later, 105.0)
    assert row["t"] == 105.0
    assert row["messages_in"] == 10.0 and row["messages_out"] == 20.0
    assert row["dropped_by_reason"] == {"queue": 2.0, "publish_rate": 1.0, "topics": 0.0}
    assert row["dropped"] == 3.0


def test_kafka_produce_mean_and_lag() -> None:
    before = counters(0.0, produce=(1.0, 100), lag=5)
    after = counters(5.0, produce=(1.5, 150), lag=9)
    row = sample_row(before, after, 5.0)
    assert row["kafka_produce_ms"] == 10.0  # 0.5 s over 50 produces
    assert row["kafka_lag"] == 9
    idle = sample_row(after, counters(10.0, produce=(1.5, 150), lag=0), 10.0)
    assert idle["kafka_produce_ms"] is None and idle["kafka_lag"] == 0


def test_counters_that_went_back_give_no_rate() -> None:
    row = sample_row(counters(0.0, messages_in=500), counters(5.0, messages_in=10), 5.0)
    assert row["messages_in"] is None


def test_the_ring_keeps_an_hour_and_one_row_per_step() -> None:
    now = [1000.0]
    taken = [0]

    def read(at: float) -> Counters:
        taken[0] += 1
        return counters(at, messages_in=taken[0] * 5)

    sampler = Sampler(read, node_id="n1", interval=5.0, clock=lambda: now[0])
    for _ in range(800):
        sampler.sample_now()
        now[0] += 5.0
    assert len(sampler.rows) == 721  # 3600 s / 5 s, and the step now
    assert sampler.rows[0]["t"] == now[0] - 5.0 - 720 * 5.0
    sampler.sample_now()
    sampler.sample_now()  # twice in one step: one row, the newer
    assert [row["t"] for row in list(sampler.rows)[-2:]] == [now[0] - 5.0, now[0]]
    assert [row["t"] for row in sampler.local(10)] == [now[0] - 10.0, now[0] - 5.0, now[0]]
    assert sampler.statistics()["samples"] == 802


def test_an_early_wake_up_keeps_its_own_step_and_a_repeated_step_its_baseline() -> None:
    # A steady 300 msg/s. The ticker wakes a hair before the step (the wall clock and
    # the loop's clock disagree): the row is the step it woke for, at the real rate,
    # never a rate measured over a few ms that reads 0.
    now = [1000.0]

    def read(at: float) -> Counters:
        return counters(at, messages_in=round(at * 300))

    sampler = Sampler(read, node_id="n1", interval=1.0, clock=lambda: now[0])
    sampler.sample_now(1000.0)
    for step in (1001.0, 1002.0, 1003.0):
        now[0] = step - 0.0004
        sampler.sample_now(step)
    assert [row["t"] for row in sampler.rows] == [1000.0, 1001.0, 1002.0, 1003.0]
    rates = [row["messages_in"] for row in list(sampler.rows)[1:]]
    assert rates == [pytest.approx(300.0, rel=0.01)] * 3
    # The same step again, 2 ms later: one row for it, measured from the step before.
    now[0] += 0.002
    again = sampler.sample_now(1003.0)
    assert [row["t"] for row in sampler.rows][-2:] == [1002.0, 1003.0]
    assert again["messages_in"] == pytest.approx(300.0, rel=0.01)


def test_node_columns_have_one_value_per_step() -> None:
    rows = [
        sample_row(None, counters(10.0), 10.0),
        sample_row(counters(10.0), counters(15.0, messages_in=125), 15.0),
    ]
    columns = node_columns(rows)
    assert columns["t"] == [10.0, 15.0]
    assert columns["messages_in"] == [None, 5.0]
    assert columns["connections"] == [3, 3]
    assert columns["kafka_produce_ms"] is None and columns["kafka_lag"] is None
    assert columns["dropped_by_reason"] == {
        "publish_rate": [None, 0.0],
        "queue": [None, 0.0],
        "topics": [None, 0.0],
    }
    assert node_columns([]) == {
        "t": [],
        "connections": [],
        "messages_in": [],
        "messages_out": [],
        "dropped": [],
        "backlog": [],
        "inbox": [],
        "kafka_produce_ms": None,
        "kafka_lag": None,
        "dropped_by_reason": {},
    }


def test_cluster_sums_per_step_and_takes_the_largest_produce_time() -> None:
    a = [
        {"t": 10.0, "connections": 2, "messages_in": 4.0, "kafka_produce_ms": 3.0,
         "kafka_lag": 1, "dropped_by_reason": {"queue": 1.0}},
        {"t": 15.0, "connections": 2, "messages_in": 6.0, "kafka_produce_ms": None,
         "kafka_lag": 2, "dropped_by_reason": {"queue": 0.0}},
    ]  # fmt: skip
    b = [
        {"t": 15.0, "connections": 5, "messages_in": 1.5, "kafka_produce_ms": 8.0,
         "kafka_lag": 4, "dropped_by_reason": {"publish_rate": 2.0}},
        {"t": 20.0, "connections": 5, "messages_in": None, "kafka_produce_ms": 1.0,
         "kafka_lag": 0, "dropped_by_reason": {}},
    ]  # fmt: skip
    cluster = cluster_columns({"a": a, "b": b}, 5.0)
    assert cluster["t"] == [10.0, 15.0, 20.0]
    assert cluster["connections"] == [2, 7, 5]
    assert cluster["messages_in"] == [4.0, 7.5, None]
    assert cluster["kafka_produce_ms"] == [3.0, 8.0, 1.0]
    assert cluster["kafka_lag"] == [1, 6, 0]
    assert cluster["dropped_by_reason"] == {
        "publish_rate": [None, 2.0, None],
        "queue": [1.0, 0.0, None],
    }
