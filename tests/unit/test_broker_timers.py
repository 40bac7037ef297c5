"""TimerWheel: deadlines of many connections on one loop timer (a fake clock, no I/O)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from mqttq.broker.connection.timers import RING, TimerWheel


class FakeLoop:
    """time() and call_at() on a clock the test moves; `advance` runs what is due."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[FakeHandle] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> FakeHandle:
        handle = FakeHandle(when, callback)
        self.timers.append(handle)
        return handle

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while due := [t for t in self.timers if not t.cancelled and t.when <= self.now]:
            for handle in due:
                self.timers.remove(handle)
                handle.callback()
        self.timers = [t for t in self.timers if not t.cancelled]


class FakeHandle:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Member:
    """A connection whose deadline may move, as a keep-alive deadline does."""

    def __init__(self, wheel: TimerWheel, deadline: float) -> None:
        self.wheel = wheel
        self.deadline = deadline
        self.fired: list[float] = []
        self.slot = wheel.schedule(self, deadline)

    def on_timer(self) -> None:
        loop = cast(Any, self.wheel)._loop
        if loop.time() < self.deadline:  # moved forward: file again
            self.slot = self.wheel.schedule(self, self.deadline)
        else:
            self.fired.append(loop.time())


def _wheel(loop: FakeLoop) -> TimerWheel:
    return TimerWheel(cast(asyncio.AbstractEventLoop, loop), resolution=0.25)


def test_members_fire_once_due_not_before() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    early, late = Member(wheel, 101.0), Member(wheel, 105.1)
    loop.advance(0.9)
    assert early.fired == [] and late.fired == []
    loop.advance(0.1)
    assert early.fired == [101.0]
    assert late.fired == []
    loop.advance(4.5)
    assert late.fired == [105.5]  # within one resolution step after its deadline
    assert len(wheel) == 0 and loop.timers == []


def test_one_loop_timer_for_many_members() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    members = [Member(wheel, 110.0 + i % 7) for i in range(1000)]
    assert len([t for t in loop.timers if not t.cancelled]) == 1
    loop.advance(20)
    assert all(len(m.fired) == 1 for m in members)


def test_a_moved_deadline_fires_at_the_new_time() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    member = Member(wheel, 102.0)
    loop.advance(1.0)
    member.deadline = 104.0  # a packet arrived: the keep alive restarts
    loop.advance(1.5)
    assert member.fired == []
    loop.advance(1.5)
    assert member.fired == [104.0]


def test_cancelled_members_never_fire() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    gone, kept = Member(wheel, 101.0), Member(wheel, 101.0)
    wheel.cancel(gone, gone.slot)
    loop.advance(2)
    assert gone.fired == []
    assert kept.fired == [102.0]


def test_an_earlier_deadline_rearms_the_loop_timer() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    late = Member(wheel, 110.0)
    soon = Member(wheel, 100.5)
    loop.advance(0.5)
    assert soon.fired == [100.5]
    assert late.fired == []


def test_close_drops_everything() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    member = Member(wheel, 101.0)
    wheel.close()
    loop.advance(5)
    assert member.fired == []
    assert len(wheel) == 0


def _step(loop: FakeLoop, seconds: float) -> None:
    """Advance in steps of one slot, as a real clock would."""
    for _ in range(round(seconds / 0.25)):
        loop.advance(0.25)


def test_a_deadline_beyond_the_ring_fires_on_time_after_filing_again() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    due = 100.0 + 3 * RING * 0.25 + 0.1  # three rings ahead
    far = Member(wheel, due)
    near = Member(wheel, 101.0)
    assert 0 <= far.slot < RING and 0 <= near.slot < RING
    _step(loop, 3 * RING * 0.25)
    assert far.fired == [] and near.fired == [101.0]
    _step(loop, 0.5)
    assert far.fired == [due + 0.15]  # the end of its slot
    assert len(wheel) == 0 and loop.timers == []


def test_a_cancelled_slot_index_serves_a_later_slot() -> None:
    loop = FakeLoop()
    wheel = _wheel(loop)
    gone = Member(wheel, 101.0)
    wheel.cancel(gone, gone.slot)
    _step(loop, 1.25)
    later = Member(wheel, 101.0 + RING * 0.25)  # the index `gone` had, a ring later
    assert later.slot == gone.slot
    _step(loop, RING * 0.25)
    assert gone.fired == [] and later.fired == [101.0 + RING * 0.25]
