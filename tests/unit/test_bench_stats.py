"""Accounting of the bench tool from synthetic sequences: loss, duplicates, reordering,
latency percentiles, payload layout and the merge of worker results (no I/O)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttq.bench.options import BenchError, BenchOptions
from mqttq.bench.payload import HEADER_SIZE, PayloadBuilder, decode_header, unpack_header
from mqttq.bench.results import (
    PublisherResult,
    SubscriberResult,
    Timeline,
    WorkerResult,
    merge,
)
from mqttq.bench.scenarios import fan_out, p2p, shared
from mqttq.bench.stats import MAX_VALUE, GroupAccount, LatencyHistogram, SequenceTracker

# -- SequenceTracker ---------------------------------------------------------------------


def _track(sequence: list[int]) -> SequenceTracker:
    tracker = SequenceTracker()
    for s in sequence:
        tracker.record(s)
    return tracker


def test_in_order_delivery_is_clean() -> None:
    tracker = _track(list(range(100)))
    assert (tracker.unique, tracker.duplicates, tracker.out_of_order) == (100, 0, 0)
    assert tracker.lost(100) == 0
    assert tracker.gaps == []
    assert tracker.received_ranges() == [(0, 100)]


def test_duplicates_are_counted_once_each() -> None:
    tracker = _track([0, 1, 1, 2, 0, 3, 3, 3])
    assert (tracker.unique, tracker.duplicates, tracker.out_of_order) == (4, 4, 0)
    assert tracker.lost(4) == 0


def test_a_late_message_is_out_of_order_not_lost() -> None:
    tracker = _track([0, 2, 3, 1, 4])
    assert (tracker.unique, tracker.duplicates, tracker.out_of_order) == (5, 0, 1)
    assert tracker.lost(5) == 0
    assert tracker.gaps == []


def test_a_duplicate_of_a_late_message_is_a_duplicate() -> None:
    tracker = _track([0, 3, 1, 1, 2, 2])
    assert (tracker.unique, tracker.duplicates, tracker.out_of_order) == (4, 2, 2)


def test_missing_messages_in_the_middle_and_at_the_end_are_lost() -> None:
    tracker = _track([0, 1, 4, 5, 8])
    assert tracker.gaps == [(2, 4), (6, 8)]
    assert tracker.received_ranges() == [(0, 2), (4, 6), (8, 9)]
    # 10 were published: 2, 3, 6, 7 missing in the middle, 9 at the end.
    assert tracker.lost(10) == 5
    assert (tracker.duplicates, tracker.out_of_order) == (0, 0)


def test_filling_the_middle_of_a_gap_splits_it() -> None:
    tracker = _track([0, 10, 5])
    assert tracker.gaps == [(1, 5), (6, 10)]
    assert tracker.out_of_order == 1
    tracker.record(1)
    tracker.record(9)
    assert tracker.gaps == [(2, 5), (6, 9)]
    assert tracker.lost(11) == 6


def test_nothing_received_is_all_lost() -> None:
    assert SequenceTracker().lost(7) == 7


@given(
    st.lists(st.integers(min_value=0, max_value=60), max_size=200),
)
def test_tracker_matches_a_set_based_reference(arrivals: list[int]) -> None:
    tracker = _track(arrivals)
    seen: set[int] = set()
    duplicates = out_of_order = 0
    highest = -1
    for s in arrivals:
        if s in seen:
            duplicates += 1
            continue
        if s < highest:
            out_of_order += 1
        seen.add(s)
        highest = max(highest, s)
    assert tracker.unique == len(seen)
    assert tracker.duplicates == duplicates
    assert tracker.out_of_order == out_of_order
    assert tracker.lost(61) == 61 - len(seen)
    covered = {s for start, end in tracker.received_ranges() for s in range(start, end)}
    assert covered == seen


@given(st.integers(min_value=1, max_value=300), st.randoms(use_true_random=False))
def test_shuffled_complete_delivery_loses_nothing(n: int, rnd: random.Random) -> None:
    arrivals = list(range(n))
    rnd.shuffle(arrivals)
    tracker = _track(arrivals)
    assert tracker.unique == n
    assert tracker.lost(n) == 0
    assert tracker.duplicates == 0
    assert tracker.gaps == []


# -- GroupAccount (shared subscriptions) ----------------------------------------------------


def test_group_members_splitting_the_stream_is_clean() -> None:
    account = GroupAccount([_track([0, 2, 4]), _track([1, 3]), _track([5])])
    assert (account.unique, account.duplicates, account.out_of_order) == (6, 0, 0)


def test_a_message_delivered_to_two_members_is_a_duplicate() -> None:
    account = GroupAccount([_track([0, 1, 2]), _track([2, 3])])
    assert (account.unique, account.duplicates) == (4, 1)


def test_group_keeps_member_duplicates_and_reordering() -> None:
    account = GroupAccount([_track([0, 0, 2, 1]), _track([])])
    assert (account.unique, account.duplicates, account.out_of_order) == (3, 1, 1)


# -- LatencyHistogram --------------------------------------------------------------------


def test_empty_histogram_reports_zeros() -> None:
    summary = LatencyHistogram().summary_ms()
    assert summary["count"] == 0
    assert summary["p99"] == summary["max"] == 0


def test_small_values_are_exact() -> None:
    h = LatencyHistogram()
    for v in range(1, 101):
        h.record(v)
    assert (h.min, h.max, h.count) == (1, 100, 100)
    assert h.percentile(50) == 50
    assert h.percentile(99) == 99
    assert h.percentile(100) == 100
    assert h.mean == pytest.approx(50.5)


@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=300))
def test_percentiles_are_within_one_percent(values: list[int]) -> None:
    h = LatencyHistogram()
    for v in values:
        h.record(v)
    ordered = sorted(values)
    for p in (50.0, 95.0, 99.0, 100.0):
        rank = max(1, -(-len(ordered) * int(p) // 100))
        exact = ordered[rank - 1]
        assert exact <= h.percentile(p) <= exact * 1.008 + 1
    assert (h.min, h.max) == (ordered[0], ordered[-1])


def test_merge_equals_recording_everything_in_one() -> None:
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for v in range(0, 5000, 7):
        a.record(v)
        both.record(v)
    for v in range(3, 90000, 13):
        b.record(v)
        both.record(v)
    a.merge(b)
    assert a.summary_ms() == both.summary_ms()


@given(
    st.lists(st.integers(min_value=-5, max_value=MAX_VALUE + 5), max_size=200),
    st.lists(st.integers(min_value=0, max_value=10**7), max_size=200),
)
def test_histograms_round_trip_through_json_and_merge_as_recorded(
    first: list[int], second: list[int]
) -> None:
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for h, values in ((a, first), (b, second)):
        for v in values:
            h.record(v)
            both.record(v)
    data = json.loads(json.dumps(a.to_json()))
    copy = LatencyHistogram.from_json(data)
    assert copy.to_json() == a.to_json()
    assert copy.summary_ms() == a.summary_ms()
    copy.merge(LatencyHistogram.from_json(b.to_json()))
    assert copy.to_json() == both.to_json()
    assert [copy.percentile(p) for p in (50, 99, 99.9, 100)] == [
        both.percentile(p) for p in (50, 99, 99.9, 100)
    ]


def test_histogram_json_that_does_not_add_up_is_refused() -> None:
    h = LatencyHistogram()
    for v in (10, 300, 300, 70_000):
        h.record(v)
    data = h.to_json()
    assert data["buckets"] == [[10, 1], [300, 2], [69632, 1]]
    with pytest.raises(ValueError, match="hold 4 samples, count says 5"):
        LatencyHistogram.from_json({**data, "count": 5})
    with pytest.raises(ValueError, match="bad histogram bucket"):
        LatencyHistogram.from_json({**data, "buckets": [[10, 0]], "count": 0})


def test_negative_values_count_as_zero_and_are_flagged() -> None:
    h = LatencyHistogram()
    h.record(-5)
    h.record(10)
    assert (h.negative, h.min, h.count) == (1, 0, 2)


# -- payload ---------------------------------------------------------------------------


def test_payload_has_the_requested_size_and_round_trips() -> None:
    builder = PayloadBuilder(publisher=7, size=62)
    payload = builder.build(41, 1_700_000_000_123_456_789, warmup=True)
    assert len(payload) == 62
    header = decode_header(payload)
    assert header is not None
    assert (header.publisher, header.sequence, header.sent_ns, header.warmup) == (
        7,
        41,
        1_700_000_000_123_456_789,
        True,
    )
    assert unpack_header(payload) == (1, 7, 41, 1_700_000_000_123_456_789)


def test_minimum_payload_is_the_header() -> None:
    assert len(PayloadBuilder(0, HEADER_SIZE).build(0, 0)) == HEADER_SIZE
    with pytest.raises(ValueError, match="at least 19"):
        PayloadBuilder(0, HEADER_SIZE - 1)


def test_foreign_payloads_are_not_decoded() -> None:
    assert decode_header(b"hello") is None
    assert unpack_header(b"x" * 40) is None


# -- options -----------------------------------------------------------------------------


def test_options_validation_names_the_option() -> None:
    with pytest.raises(BenchError, match="--payload"):
        BenchOptions(payload=3).validate()
    with pytest.raises(BenchError, match="--duration or --count"):
        BenchOptions(duration=None, count=None).validate()


def test_default_window_respects_311_qos2_limits() -> None:
    assert BenchOptions(protocol=5, qos=2).window() == 100
    assert BenchOptions(protocol=4, qos=2).window() == 20
    assert BenchOptions(protocol=4, qos=2, inflight=7).window() == 7


def test_worker_count_grows_with_clients() -> None:
    assert BenchOptions().worker_count(10) == 1
    assert BenchOptions(workers=3).worker_count(10) == 3
    assert BenchOptions(workers=8).worker_count(2) == 2
    assert BenchOptions().worker_count(1000) >= 1


# -- merge of worker results ---------------------------------------------------------------


def _publisher(index: int, n: int) -> PublisherResult:
    return PublisherResult(index, published=n, published_measured=n, acked=n)


def _subscriber(index: int, received: dict[int, list[int]]) -> SubscriberResult:
    return SubscriberResult(index, trackers={p: _track(s) for p, s in received.items()})


def test_merge_p2p_counts_loss_duplicates_and_reordering_per_pair() -> None:
    plan = p2p("t", 2, run_id="abc")
    w0 = WorkerResult(
        0, publishers=[_publisher(0, 5)], subscribers=[_subscriber(0, {0: [0, 1, 2, 3, 4]})]
    )
    w1 = WorkerResult(
        1, publishers=[_publisher(1, 5)], subscribers=[_subscriber(1, {1: [0, 2, 1, 1]})]
    )
    result = merge(plan, BenchOptions(), [w0, w1], Timeline(drain_complete=False))
    m = result["messages"]
    assert (m["published"], m["expected"], m["received"]) == (10, 10, 8)
    assert (m["lost"], m["duplicates"], m["out_of_order"], m["foreign"]) == (2, 1, 1, 0)
    assert any("2 expected messages were not received" in w for w in result["warnings"])


def test_merge_fan_out_expects_every_message_at_every_subscriber() -> None:
    plan = fan_out("t", 1, 3, run_id="abc")
    subs = [_subscriber(i, {0: [0, 1, 2]}) for i in range(3)]
    subs[2] = _subscriber(2, {0: [0, 2]})
    w = WorkerResult(0, publishers=[_publisher(0, 3)], subscribers=subs)
    m = merge(plan, BenchOptions(), [w], Timeline(drain_complete=True))["messages"]
    assert (m["expected"], m["received"], m["lost"]) == (9, 8, 1)


def test_merge_shared_counts_cross_member_duplicates() -> None:
    plan = shared("t", 1, 2, run_id="abc")
    subs = [_subscriber(0, {0: [0, 1, 2]}), _subscriber(1, {0: [2, 3]})]
    w = WorkerResult(0, publishers=[_publisher(0, 5)], subscribers=subs)
    m = merge(plan, BenchOptions(), [w], Timeline(drain_complete=True))["messages"]
    assert (m["expected"], m["received"], m["lost"], m["duplicates"]) == (5, 4, 1, 1)


def test_merge_flags_messages_from_an_unexpected_publisher() -> None:
    plan = p2p("t", 2, run_id="abc")
    w = WorkerResult(
        0,
        publishers=[_publisher(0, 2), _publisher(1, 2)],
        subscribers=[_subscriber(0, {0: [0, 1], 1: [0]}), _subscriber(1, {1: [0, 1]})],
    )
    m = merge(plan, BenchOptions(), [w], Timeline(drain_complete=True))["messages"]
    assert (m["received"], m["lost"], m["foreign"]) == (4, 0, 1)


def test_merge_marks_a_busy_worker_as_saturated() -> None:
    plan = p2p("t", 1, run_id="abc")
    w = WorkerResult(0, cpu_s=9.5, wall_s=10.0)
    result = merge(plan, BenchOptions(), [w], Timeline())
    assert result["tool"]["saturated"] is True
    assert any("worker 0 used 95%" in w for w in result["warnings"])


def test_merge_flags_a_subscriber_that_only_heard_the_wrong_publisher() -> None:
    plan = p2p("t", 2, run_id="abc")
    w = WorkerResult(
        0,
        publishers=[_publisher(0, 2), _publisher(1, 2)],
        subscribers=[_subscriber(0, {1: [0, 1]}), _subscriber(1, {1: [0, 1]})],
    )
    m = merge(plan, BenchOptions(), [w], Timeline(drain_complete=True))["messages"]
    assert (m["received"], m["lost"], m["foreign"]) == (2, 2, 2)


def test_values_up_to_and_beyond_the_largest_are_recorded_clamped() -> None:
    """The top power of two has its buckets: a sample from a skewed clock (sent at 0 ns)
    is clamped to MAX_VALUE, not an IndexError."""
    histogram = LatencyHistogram()
    for value in (MAX_VALUE, MAX_VALUE + 1, 1 << 39, 10**18):
        histogram.record(value)
    assert histogram.count == 4
    assert histogram.min == 1 << 39
    assert histogram.max == MAX_VALUE
    assert histogram.percentile(100) == MAX_VALUE
    assert 1 << 39 <= histogram.percentile(1) <= (1 << 39) * (1 + 1 / 128)
