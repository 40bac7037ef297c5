"""TokenBucket with a fake clock (plain floats): admit, wait, refuse, refund, live changes."""

from __future__ import annotations

import math

import pytest

from mqttq.limits.bucket import TokenBucket


def take(bucket: TokenBucket, now: float, n: int, max_wait: float = 100.0) -> list[float | None]:
    return [bucket.reserve(now, max_wait) for _ in range(n)]


def test_starts_full_then_waiters_queue_in_order() -> None:
    bucket = TokenBucket(2.0, 3.0, now=0.0)
    assert take(bucket, 0.0, 6) == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5]


def test_refill_over_time_is_capped_at_capacity() -> None:
    bucket = TokenBucket(1.0, 2.0, now=0.0)
    assert take(bucket, 0.0, 2) == [0.0, 0.0]
    # 100 s later the bucket holds 2 tokens, not 100.
    assert take(bucket, 100.0, 3) == [0.0, 0.0, 1.0]


def test_partial_refill_shortens_the_wait() -> None:
    bucket = TokenBucket(4.0, 1.0, now=10.0)
    assert bucket.reserve(10.0, 1.0) == 0.0
    assert bucket.reserve(10.125, 1.0) == 0.125
    assert bucket.reserve(10.5, 1.0) == 0.0


def test_refusal_takes_nothing() -> None:
    bucket = TokenBucket(1.0, 1.0, now=0.0)
    assert bucket.reserve(0.0, 0.5) == 0.0
    for _ in range(5):
        assert bucket.reserve(0.0, 0.5) is None
    assert bucket.delay(0.0) == 1.0
    assert bucket.reserve(0.0, 1.0) == 1.0
    assert bucket.delay(0.0) == 2.0


def test_zero_max_wait_admits_only_immediate_tokens() -> None:
    bucket = TokenBucket(10.0, 2.0, now=0.0)
    assert take(bucket, 0.0, 3, max_wait=0.0) == [0.0, 0.0, None]


def test_capacity_is_at_least_one_token_when_rate_is_positive() -> None:
    bucket = TokenBucket(5.0, 0.0, now=0.0)
    assert bucket.capacity == 1.0
    assert take(bucket, 0.0, 2) == [0.0, 0.2]
    fractional = TokenBucket(1.0, 0.25, now=0.0)
    assert fractional.capacity == 1.0
    assert fractional.burst == 0.25


def test_rate_zero_burst_zero_refuses_everything() -> None:
    bucket = TokenBucket(0.0, 0.0, now=0.0)
    assert take(bucket, 0.0, 3, max_wait=math.inf) == [None, None, None]
    assert bucket.reserve(1e9, math.inf) is None
    assert bucket.delay(0.0) == math.inf


def test_rate_zero_with_burst_admits_the_burst_once() -> None:
    bucket = TokenBucket(0.0, 2.0, now=0.0)
    assert take(bucket, 0.0, 3) == [0.0, 0.0, None]
    assert bucket.reserve(1e6, math.inf) is None
    assert bucket.delay(1e6) == math.inf


def test_delay_reports_the_wait_without_taking() -> None:
    bucket = TokenBucket(2.0, 1.0, now=0.0)
    assert bucket.delay(0.0) == 0.0
    assert bucket.delay(0.0) == 0.0
    assert bucket.reserve(0.0, 0.0) == 0.0
    assert bucket.delay(0.0) == 0.5
    assert bucket.delay(0.25) == 0.25
    assert bucket.delay(0.5) == 0.0
    assert bucket.reserve(0.25, 1.0) == 0.25


def test_level_reports_tokens_and_debt() -> None:
    bucket = TokenBucket(1.0, 2.0, now=0.0)
    assert bucket.level(0.0) == 2.0
    take(bucket, 0.0, 4)
    assert bucket.level(0.0) == -2.0
    assert bucket.level(1.5) == -0.5
    assert bucket.level(50.0) == 2.0


def test_refund_gives_back_the_token() -> None:
    bucket = TokenBucket(1.0, 1.0, now=0.0)
    assert bucket.reserve(0.0, 5.0) == 0.0
    assert bucket.reserve(0.0, 5.0) == 1.0
    bucket.refund(0.0)
    assert bucket.delay(0.0) == 1.0
    bucket.refund(0.0)
    assert bucket.delay(0.0) == 0.0
    assert bucket.reserve(0.0, 0.0) == 0.0


def test_refund_never_raises_the_level_above_capacity() -> None:
    bucket = TokenBucket(1.0, 2.0, now=0.0)
    assert bucket.reserve(0.0, 0.0) == 0.0
    bucket.refund(5.0)
    bucket.refund(5.0)
    assert bucket.level(5.0) == 2.0
    assert take(bucket, 5.0, 3) == [0.0, 0.0, 1.0]


def test_lowered_rate_applies_at_once_and_caps_the_level() -> None:
    bucket = TokenBucket(10.0, 10.0, now=0.0)
    bucket.set_rate(1.0, 1.0, now=0.0)
    assert (bucket.rate, bucket.burst, bucket.capacity) == (1.0, 1.0, 1.0)
    assert take(bucket, 0.0, 3, max_wait=1.0) == [0.0, 1.0, None]


def test_raised_rate_lets_waiting_traffic_through_sooner() -> None:
    bucket = TokenBucket(1.0, 1.0, now=0.0)
    assert take(bucket, 0.0, 3) == [0.0, 1.0, 2.0]
    # The debt of two tokens is kept; it is now repaid at 4 tokens/s.
    bucket.set_rate(4.0, 1.0, now=0.0)
    assert bucket.reserve(0.0, 10.0) == 0.75


def test_tokens_gained_before_a_change_count_at_the_old_rate() -> None:
    bucket = TokenBucket(1.0, 10.0, now=0.0)
    take(bucket, 0.0, 10)
    bucket.set_rate(100.0, 10.0, now=2.0)  # same capacity: only the rate changes
    assert take(bucket, 2.0, 3) == [0.0, 0.0, 0.01]


def test_a_larger_capacity_adds_its_extra_tokens_at_once() -> None:
    bucket = TokenBucket(1.0, 1.0, now=0.0)
    assert take(bucket, 0.0, 2) == [0.0, 1.0]  # empty, one request waiting
    bucket.set_rate(100.0, 100.0, now=0.0)
    # 99 extra tokens: the waiting request's debt is covered, 98 remain.
    assert bucket.level(0.0) == 98.0
    assert take(bucket, 0.0, 98) == [0.0] * 98
    assert bucket.reserve(0.0, 0.0) is None


def test_set_rate_to_zero_refuses_then_raising_it_again_admits() -> None:
    bucket = TokenBucket(1.0, 1.0, now=0.0)
    bucket.set_rate(0.0, 0.0, now=0.0)
    assert bucket.reserve(0.0, math.inf) is None
    bucket.set_rate(2.0, 2.0, now=1.0)
    # The raised capacity's tokens are there at once.
    assert take(bucket, 1.0, 3) == [0.0, 0.0, 0.5]


def test_time_going_backwards_creates_no_token() -> None:
    bucket = TokenBucket(1.0, 1.0, now=10.0)
    assert bucket.reserve(10.0, 5.0) == 0.0
    assert bucket.level(9.0) == 0.0
    # Counted as no time passed: the wait is measured from 10.0, not from 9.5.
    assert bucket.reserve(9.5, 5.0) == 1.0
    assert bucket.delay(9.0) == 2.0
    assert bucket.reserve(12.0, 0.0) == 0.0


@pytest.mark.parametrize(
    ("rate", "burst"), [(-1.0, 1.0), (1.0, -0.5), (math.nan, 1.0), (1.0, math.inf)]
)
def test_invalid_rate_or_burst_is_refused(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match="must be a finite number"):
        TokenBucket(rate, burst, now=0.0)
    bucket = TokenBucket(1.0, 1.0, now=0.0)
    with pytest.raises(ValueError, match="must be a finite number"):
        bucket.set_rate(rate, burst, now=0.0)
    assert (bucket.rate, bucket.burst) == (1.0, 1.0)
