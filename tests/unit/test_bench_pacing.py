"""The bench's paced publishers wait for their slots on the loop's timers and do not spin:
on uvloop a sleep of less than half a millisecond wakes on the same clock tick."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttq.bench.runner import TIMER_TICK, delay_until

uvloop = pytest.importorskip("uvloop")


@given(
    due=st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
    ahead=st.floats(min_value=-10.0, max_value=10.0, allow_nan=False),
)
def test_delay_is_zero_or_at_least_half_a_tick(due: float, ahead: float) -> None:
    now = due - ahead
    delay = delay_until(due, now)
    if delay:
        assert delay >= TIMER_TICK / 2
        assert delay == due - now
    else:
        assert due - now < TIMER_TICK / 2


def test_a_slot_a_hair_past_the_clock_is_due_now() -> None:
    # `start + interval * k` in floating point lands a hair past a millisecond of the loop's
    # clock: that slot is due, not a sleep of 1e-15 s.
    now = 12.3
    assert delay_until(now + 1e-12, now) == 0.0
    assert delay_until(now + 0.0004, now) == 0.0
    assert delay_until(now + 0.002, now) == pytest.approx(0.002)


def test_paced_slots_wake_the_loop_about_once_each() -> None:
    """Twenty slots a millisecond apart, each a hair past a clock tick, as a publisher's
    schedule is: the loop wakes a few times per slot, where a sleep of the remaining hair
    woke it hundreds of times (until the millisecond ticked)."""

    async def pace() -> int:
        loop = asyncio.get_running_loop()
        start = loop.time()
        wakes = 0
        for k in range(1, 21):
            due = start + 0.001 * k + 1e-12
            while delay := delay_until(due, loop.time()):
                await asyncio.sleep(delay)
                wakes += 1
        return wakes

    loop = uvloop.new_event_loop()
    try:
        wakes = loop.run_until_complete(pace())
    finally:
        loop.close()
    assert wakes <= 3 * 20
