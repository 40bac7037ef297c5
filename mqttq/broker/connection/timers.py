"""TimerWheel: the keep-alive and connect-timeout deadlines of every connection on one
event-loop timer.

A timer handle per connection costs about 600 bytes (the handle, its callback and libuv's
timer) and a heap operation each time it is re-armed. Deadlines here are rounded up to a
slot of `resolution` seconds and kept in one set per slot; one loop timer fires at the
earliest slot that has members. A connection is filed under the deadline it had when it
was scheduled: when that slot fires, it checks its current deadline (which moves forward
with every packet received) and files itself again if that is still ahead. So an active
connection costs one re-filing per keep-alive period, not one per packet.

The slots are a ring of `RING` entries (`RING` x `resolution` = 64 s ahead): what a
member keeps to cancel with is its slot's index in the ring, an int below 256 that
CPython shares (an absolute slot number would be an int object of its own per
connection). A deadline further ahead is filed in the ring's last slot and files itself
again from there, as a moved deadline does.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from typing import Protocol

__all__ = ["TimerWheel", "WheelMember"]

logger = logging.getLogger("mqttq.broker")


class WheelMember(Protocol):
    """What the wheel calls when a member's slot is due."""

    def on_timer(self) -> None: ...


RING = 256
"""Slots in the ring; their indexes are small ints CPython keeps one copy of."""


class TimerWheel:
    """Many deadlines, one loop timer; each fires within `resolution` s after it is due."""

    __slots__ = ("_armed", "_handle", "_heap", "_loop", "_resolution", "_ring", "_ring_slot")

    def __init__(self, loop: asyncio.AbstractEventLoop, resolution: float = 0.25) -> None:
        self._loop = loop
        self._resolution = resolution
        self._ring: list[set[WheelMember] | None] = [None] * RING
        """Members by ring index; the entry at `i` holds absolute slot `_ring_slot[i]`."""
        self._ring_slot = [0] * RING
        self._heap: list[int] = []
        """Absolute slot numbers with members (one emptied by `cancel` may linger until
        popped)."""
        self._handle: asyncio.TimerHandle | None = None
        self._armed = 0
        """Slot the loop timer is set for (valid while `_handle` is set)."""

    def __len__(self) -> int:
        return sum(len(members) for members in self._ring if members)

    def schedule(self, member: WheelMember, deadline: float) -> int:
        """Call `member.on_timer()` once `deadline` (loop time) has passed, or earlier
        for a deadline more than the ring ahead; returns the index to give to `cancel`."""
        now = math.floor(self._loop.time() / self._resolution)
        slot = min(max(math.ceil(deadline / self._resolution), now), now + RING - 1)
        index = slot % RING
        members = self._ring[index]
        if members is None:
            members = self._ring[index] = set()
            self._ring_slot[index] = slot
            heapq.heappush(self._heap, slot)
        else:
            # Taken by this slot, or by one a ring earlier that is overdue (the loop timer
            # is late): joining that one fires early, and the member files itself again.
            slot = self._ring_slot[index]
        members.add(member)
        if self._handle is None or slot < self._armed:
            self._arm(slot)
        return index

    def cancel(self, member: WheelMember, index: int) -> None:
        """Forget `member` filed under `index` (a no-op when it already fired)."""
        members = self._ring[index]
        if members is not None:
            members.discard(member)
            if not members:
                self._ring[index] = None

    def close(self) -> None:
        """Drop every deadline and the loop timer."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._ring = [None] * RING
        self._heap.clear()

    def _arm(self, slot: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed = slot
        self._handle = self._loop.call_at(slot * self._resolution, self._fire)

    def _live(self, slot: int) -> bool:
        """True when `slot` (from the heap) still has members in the ring."""
        index = slot % RING
        return self._ring[index] is not None and self._ring_slot[index] == slot

    def _fire(self) -> None:
        self._handle = None
        due = math.floor(self._loop.time() / self._resolution)
        heap = self._heap
        ring = self._ring
        # A member's deadline has passed when its slot is due; one whose deadline moved
        # files itself again in a later slot, so this loop always ends.
        while heap and heap[0] <= due:
            slot = heapq.heappop(heap)
            if not self._live(slot):
                continue  # emptied by cancel
            index = slot % RING
            members = ring[index]
            ring[index] = None
            for member in members or ():
                try:
                    member.on_timer()
                except Exception:
                    logger.exception("timer of %r failed", member)
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)  # emptied by cancel
        if heap and (self._handle is None or heap[0] < self._armed):
            self._arm(heap[0])
