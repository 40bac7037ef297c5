"""TimerWheel: the keep-alive and connect-timeout deadlines of every connection on one
event-loop timer.

A timer handle per connection costs about 600 bytes (the handle, its callback and libuv's
timer) and a heap operation each time it is re-armed. Deadlines here are rounded up to a
slot of `resolution` seconds and kept in one set per slot; one loop timer fires at the
earliest slot that has members. A connection is filed under the deadline it had when it
was scheduled: when that slot fires, it checks its current deadline (which moves forward
with every packet received) and files itself again if that is still ahead. So an active
connection costs one re-filing per keep-alive period, not one per packet.
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


class TimerWheel:
    """Many deadlines, one loop timer; each fires within `resolution` s after it is due."""

    __slots__ = ("_armed", "_handle", "_heap", "_loop", "_resolution", "_slots")

    def __init__(self, loop: asyncio.AbstractEventLoop, resolution: float = 0.25) -> None:
        self._loop = loop
        self._resolution = resolution
        self._slots: dict[int, set[WheelMember]] = {}
        self._heap: list[int] = []
        """Slot numbers with members (a slot emptied by `cancel` may linger until popped)."""
        self._handle: asyncio.TimerHandle | None = None
        self._armed = 0
        """Slot the loop timer is set for (valid while `_handle` is set)."""

    def __len__(self) -> int:
        return sum(len(members) for members in self._slots.values())

    def schedule(self, member: WheelMember, deadline: float) -> int:
        """Call `member.on_timer()` once `deadline` (loop time) has passed; returns the slot
        to give to `cancel`."""
        slot = math.ceil(deadline / self._resolution)
        members = self._slots.get(slot)
        if members is None:
            members = self._slots[slot] = set()
            heapq.heappush(self._heap, slot)
        members.add(member)
        if self._handle is None or slot < self._armed:
            self._arm(slot)
        return slot

    def cancel(self, member: WheelMember, slot: int) -> None:
        """Forget `member` in `slot` (a no-op when it already fired)."""
        members = self._slots.get(slot)
        if members is not None:
            members.discard(member)
            if not members:
                del self._slots[slot]

    def close(self) -> None:
        """Drop every deadline and the loop timer."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._slots.clear()
        self._heap.clear()

    def _arm(self, slot: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed = slot
        self._handle = self._loop.call_at(slot * self._resolution, self._fire)

    def _fire(self) -> None:
        self._handle = None
        due = math.floor(self._loop.time() / self._resolution)
        heap = self._heap
        slots = self._slots
        # A member's deadline has passed when its slot is due; one whose deadline moved
        # files itself again in a later slot, so this loop always ends.
        while heap and heap[0] <= due:
            members = slots.pop(heapq.heappop(heap), None)
            for member in members or ():
                try:
                    member.on_timer()
                except Exception:
                    logger.exception("timer of %r failed", member)
        while heap and heap[0] not in slots:
            heapq.heappop(heap)  # emptied by cancel
        if heap and (self._handle is None or heap[0] < self._armed):
            self._arm(heap[0])
