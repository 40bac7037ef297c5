"""Integrations without a broker: backlogs, dead letters and republished messages kept in
memory (the `memory` storage adapter's counterpart; for tests and for tools that run
integrations on their own). Nothing here survives the process."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected
from mqttq.integrations.spec import IntegrationSpec


class MemoryBacklog:
    """A Backlog in memory: what `take` handed out stays (counted in `lag`) until
    `settle`; `settled` keeps every delivery settled, in order."""

    def __init__(self, deliveries: Sequence[Delivery] = ()) -> None:
        self.waiting: deque[Delivery] = deque(deliveries)
        self.taken: list[Delivery] = []
        self.settled: list[Delivery] = []
        self._arrived = asyncio.Event()

    def add(self, delivery: Delivery) -> None:
        self.waiting.append(delivery)
        self._arrived.set()

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        while not self.waiting:
            self._arrived.clear()
            await self._arrived.wait()
        if len(self.waiting) < max_items and linger > 0:
            await asyncio.sleep(linger)
        batch = [self.waiting.popleft() for _ in range(min(max_items, len(self.waiting)))]
        self.taken.extend(batch)
        return batch

    async def settle(self, batch: Sequence[Delivery]) -> None:
        if list(batch) != self.taken[: len(batch)]:
            raise ValueError("settle takes the oldest batch taken")
        del self.taken[: len(batch)]
        self.settled.extend(batch)

    def lag(self) -> int:
        return len(self.waiting) + len(self.taken)

    def dropped(self) -> int:
        return 0  # nothing expires or overflows here


class MemoryDeadLetters:
    """Dead letters in a list: (integration, rejected) in the order they came."""

    def __init__(self) -> None:
        self.letters: list[tuple[str, Rejected]] = []

    async def put(self, integration: str, rejected: Sequence[Rejected]) -> None:
        self.letters.extend((integration, item) for item in rejected)


class MemoryRuntime:
    """An IntegrationRuntime without a broker: one MemoryBacklog per attached integration
    (kept across detach unless forgotten, as a broker keeps a stored backlog), and a list
    of republished deliveries."""

    def __init__(self) -> None:
        self.dead_letters = MemoryDeadLetters()
        self.backlogs: dict[str, MemoryBacklog] = {}
        self.attached: set[str] = set()
        self.republished: list[Delivery] = []

    async def attach(self, spec: IntegrationSpec) -> MemoryBacklog:
        self.attached.add(spec.name)
        return self.backlogs.setdefault(spec.name, MemoryBacklog())

    async def detach(self, spec: IntegrationSpec, *, forget: bool) -> None:
        """Stop feeding; what the worker took and did not settle goes back to the front
        (a broker sends a persistent session's unacknowledged messages again)."""
        self.attached.discard(spec.name)
        backlog = self.backlogs.get(spec.name)
        if forget:
            self.backlogs.pop(spec.name, None)
        elif backlog is not None:
            backlog.waiting.extendleft(reversed(backlog.taken))
            backlog.taken.clear()

    async def republish(self, delivery: Delivery) -> None:
        self.republished.append(delivery)
