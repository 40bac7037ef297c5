"""CountLimit: refuse exactly at the limit, release, force, live limit changes."""

from __future__ import annotations

import pytest

from mqttq.limits.counter import CountLimit


def test_admits_exactly_limit_then_refuses() -> None:
    limit = CountLimit(3)
    assert [limit.try_acquire() for _ in range(4)] == [True, True, True, False]
    assert (limit.count, limit.limit) == (3, 3)


def test_release_frees_one_slot() -> None:
    limit = CountLimit(2)
    limit.try_acquire()
    limit.try_acquire()
    limit.release()
    assert limit.count == 1
    assert limit.try_acquire() is True
    assert limit.try_acquire() is False


def test_release_never_goes_below_zero() -> None:
    limit = CountLimit(1)
    limit.release()
    assert limit.count == 0
    assert [limit.try_acquire(), limit.try_acquire()] == [True, False]


def test_zero_limit_refuses_every_acquire() -> None:
    limit = CountLimit(0)
    assert limit.try_acquire() is False
    assert limit.count == 0


def test_force_acquire_counts_past_the_limit() -> None:
    limit = CountLimit(1)
    limit.force_acquire()
    limit.force_acquire()
    assert limit.count == 2
    assert limit.try_acquire() is False
    limit.release()
    assert limit.try_acquire() is False
    limit.release()
    assert limit.try_acquire() is True


def test_lowered_limit_keeps_holders_and_refuses_new_ones() -> None:
    limit = CountLimit(5)
    for _ in range(4):
        limit.try_acquire()
    limit.set_limit(2)
    assert limit.count == 4
    assert limit.try_acquire() is False
    limit.release()
    limit.release()
    assert limit.try_acquire() is False
    limit.release()
    assert limit.try_acquire() is True


def test_raised_limit_admits_at_once() -> None:
    limit = CountLimit(1)
    limit.try_acquire()
    limit.set_limit(2)
    assert limit.try_acquire() is True
    assert limit.try_acquire() is False


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_invalid_limit_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="limit must be an integer"):
        CountLimit(bad)  # type: ignore[arg-type]
    limit = CountLimit(3)
    with pytest.raises(ValueError, match="limit must be an integer"):
        limit.set_limit(bad)  # type: ignore[arg-type]
    assert limit.limit == 3
