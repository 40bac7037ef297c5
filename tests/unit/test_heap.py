"""`mqttq serve` and the bench workers settle the heap once started (`mqttq.heap`)."""

from __future__ import annotations

import gc

from mqttq.heap import GC_YOUNG_THRESHOLD, settle_heap, settled_heap


def test_settling_freezes_what_was_loaded_and_collects_the_young_less_often() -> None:
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        loaded: list[list[int]] = [[1], [2]]  # stands for what start() loaded
        assert any(o is loaded for o in gc.get_objects())
        settle_heap()
        # Frozen: in no generation the collector walks.
        assert not any(o is loaded for o in gc.get_objects())
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *threshold[1:])
        # What comes after stays collectable: a cycle made now is found.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_settled_block_leaves_the_collector_as_it_found_it() -> None:
    """The load tool's worker settles the heap for its run, in the caller's process when
    it is the only worker: afterwards nothing stays frozen and the threshold is back."""
    threshold = gc.get_threshold()
    loaded: list[list[int]] = [[1], [2]]
    with settled_heap():
        assert not any(o is loaded for o in gc.get_objects())
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
    assert any(o is loaded for o in gc.get_objects())
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == threshold
