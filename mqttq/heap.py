"""The cyclic garbage collector's settings for a long-running process on the message path:
the broker (`mqttq serve`) and the load tool's workers (`mqttq bench`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["GC_YOUNG_THRESHOLD", "settle_heap", "settled_heap"]

GC_YOUNG_THRESHOLD: Final = 100_000
"""Allocations between collections of the youngest generation (CPython's default: 700)."""


def settle_heap() -> None:
    """Once started: what was loaded so far (modules, stored sessions, connected clients)
    leaves the cyclic collector's view, and the youngest generation is collected every
    100,000 allocations instead of 700. The message path makes no reference cycles (its
    objects go by reference counting), yet under the defaults the collector took 97 ms of
    the broker over four 100 x 100 backlog drains, one full collection stalling it for
    65 ms; after 10,000, 12 ms (docs/benchmarks.md, issue 14 section 9). 100,000 since
    integrations: messages waiting for an integration log's fsync and its sink's answer
    live across many collections at 10,000 (each young collection walked them all: 2.2 ms
    each, and 20 ms each of the middle one), so the collector took about 1.7 us of the
    broker's CPU per message of `throughput.py overhead` (9.0 against 7.2 us a message).
    The load tool's workers, whose core is the drain's other bound, settle for the run once
    their clients are connected (`settled_heap`; section 11)."""
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


@contextmanager
def settled_heap() -> Iterator[None]:
    """`settle_heap` for the block, then the collector as it was: for work that may run
    inside a process that goes on after it (the load tool's worker runs in the caller's
    process when it is the only one)."""
    threshold = gc.get_threshold()
    settle_heap()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
